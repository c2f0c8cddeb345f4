"""Look up the generated message classes by API key; modules load on first use."""

from __future__ import annotations

import importlib
from functools import cache
from types import ModuleType

from sdk.errors import UnsupportedVersionError
from sdk.protocol.message import Message
from sdk.protocol.messages import API_TABLE, ApiKey

__all__ = ["API_TABLE", "ApiKey", "api_module", "request_class", "request_header_version",
           "response_class", "response_header_version"]

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7


def _entry(api_key: int) -> tuple[str, str, str, int, int, int, int]:
    try:
        return API_TABLE[api_key]
    except KeyError:
        raise UnsupportedVersionError(f"unknown API key {api_key}") from None


@cache
def api_module(api_key: int) -> ModuleType:
    return importlib.import_module(f"sdk.protocol.messages.{_entry(api_key)[0]}")


@cache
def request_class(api_key: int) -> type[Message]:
    cls: type[Message] = getattr(api_module(api_key), _entry(api_key)[1])
    return cls


@cache
def response_class(api_key: int) -> type[Message]:
    cls: type[Message] = getattr(api_module(api_key), _entry(api_key)[2])
    return cls


def is_flexible(api_key: int, version: int) -> bool:
    first = _entry(api_key)[6]
    return 0 <= first <= version


def request_header_version(api_key: int, version: int) -> int:
    """Header v2 for flexible versions, v1 otherwise (v0 only for ControlledShutdown v0)."""
    if api_key == CONTROLLED_SHUTDOWN_KEY and version == 0:
        return 0
    return 2 if is_flexible(api_key, version) else 1


def response_header_version(api_key: int, version: int) -> int:
    """Header v1 for flexible versions; ApiVersions always answers with v0 (KIP-511)."""
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if is_flexible(api_key, version) else 0
