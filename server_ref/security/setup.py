"""Everything a broker needs to open its listeners, read once at start from its settings."""

from __future__ import annotations

from collections.abc import Mapping

from sdk.errors import ConfigError
from server_ref.security.credentials import CredentialStore
from server_ref.security.listeners import (
    DEFAULT_IDLE_MS,
    ListenerSetup,
    listener_value,
    resolve_listeners,
)
from server_ref.security.sasl import sasl_settings
from server_ref.security.tls import server_context

__all__ = ["build_listeners"]


def build_listeners(settings: Mapping[str, str], host: str, port: int,
                    advertised_host: str | None, credentials: CredentialStore
                    ) -> list[ListenerSetup]:
    """The listeners with their TLS contexts and SASL settings; ConfigError when a setting
    is missing or wrong (the broker does not start, as Kafka would not)."""
    _refuse_unimplemented(settings)
    out = resolve_listeners(settings, host, port, advertised_host)
    for listener in out:
        idle = listener_value(settings, listener.name, "connections.max.idle.ms")
        try:
            listener.idle_ms = int(idle) if idle is not None else DEFAULT_IDLE_MS
        except ValueError:
            raise ConfigError(f"connections.max.idle.ms={idle} is not a number",
                              key="connections.max.idle.ms", value=idle) from None
        if listener.uses_tls:
            listener.ssl_context = server_context(settings, listener.name, listener.protocol)
        if listener.uses_sasl:
            listener.sasl = sasl_settings(settings, listener.name, credentials)
    return out


# Settings that change who a principal is: only Kafka's defaults are implemented, and a
# silently different principal would be worse than refusing to start.
_DEFAULTS_ONLY = {
    "principal.builder.class":
        "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
    "ssl.principal.mapping.rules": "DEFAULT",
    "sasl.kerberos.principal.to.local.rules": "DEFAULT",
}


def _refuse_unimplemented(settings: Mapping[str, str]) -> None:
    for key, default in _DEFAULTS_ONLY.items():
        value = settings.get(key)
        if value is not None and value.strip() != default:
            raise ConfigError(f"{key}: only Kafka's default ({default}) is implemented by "
                              "this broker", key=key, value=value)
