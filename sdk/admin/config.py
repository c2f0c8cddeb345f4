"""AdminConfig: the admin client's settings (the shared connection settings plus one timeout).

Built like every role config (see :mod:`sdk.net.config`): keyword arguments with underscores
and/or a ``config`` mapping with Kafka's dotted names; unknown keys and bad values raise
:class:`sdk.errors.ConfigError` naming the key.
"""

from __future__ import annotations

from typing import ClassVar

from sdk.net.config import CommonConfig, PositiveInt

__all__ = ["AdminConfig"]


class AdminConfig(CommonConfig):
    """Validated admin client settings."""

    default_api_timeout_ms: PositiveInt = 60_000
    """How long one admin call may take in all (retries included) when the call does not
    give ``timeout_ms`` itself."""

    _role: ClassVar[str] = "A"

    @classmethod
    def default_client_id(cls) -> str:
        return "kafka-sdk-admin-" + super().default_client_id().rsplit("-", 1)[-1]
