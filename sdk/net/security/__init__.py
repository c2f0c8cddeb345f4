"""TLS and SASL for broker connections: what one client's settings turn into, once.

:class:`Security` is built from a :class:`sdk.net.config.CommonConfig` when a network client
is made (the TLS context loads its files then, and JAAS strings are read), and each
:class:`sdk.net.connection.BrokerConnection` uses it: TLS around the socket for ``SSL`` and
``SASL_SSL``, SASL after ApiVersions for ``SASL_PLAINTEXT`` and ``SASL_SSL``.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sdk.errors import ConfigError
from sdk.net.security.jaas import parse_jaas_config
from sdk.net.security.oauth import OAuthBearerToken, TokenSource
from sdk.net.security.sasl import MECHANISMS, SaslSettings, authenticate
from sdk.net.security.tls import build_ssl_context

if TYPE_CHECKING:
    from sdk.net.config import CommonConfig

__all__ = ["MECHANISMS", "OAuthBearerToken", "SaslSettings", "Security", "authenticate",
           "sasl_settings"]


@dataclass(frozen=True)
class Security:
    ssl_context: ssl.SSLContext | None = None
    sasl: SaslSettings | None = field(default=None)

    @classmethod
    def from_config(cls, cfg: CommonConfig) -> Security | None:
        """None for PLAINTEXT (the connection then does nothing more than before)."""
        protocol = cfg.security_protocol
        if protocol == "PLAINTEXT":
            return None
        context = build_ssl_context(cfg) if protocol in ("SSL", "SASL_SSL") else None
        sasl = sasl_settings(cfg) if protocol.startswith("SASL_") else None
        return cls(context, sasl)


def sasl_settings(cfg: CommonConfig) -> SaslSettings:
    """The mechanism and credentials: ``sasl_username``/``sasl_password``, or the JAAS
    string's options, or (OAUTHBEARER) the token provider or the unsecured login options."""
    login = (parse_jaas_config(cfg.sasl_jaas_config.get_secret_value())
             if cfg.sasl_jaas_config is not None else None)
    mechanism: str | None = cfg.sasl_mechanism
    if mechanism is None:
        if login is not None and len(login.mechanisms) == 1:
            mechanism = login.mechanisms[0]
        else:
            raise ConfigError(f"{cfg.security_protocol} needs a SASL mechanism",
                              key="sasl.mechanism", allowed=MECHANISMS)
    if login is not None and mechanism not in login.mechanisms:
        raise ConfigError(f"the login module {login.module.rsplit('.', 1)[-1]} does not "
                          f"serve sasl.mechanism={mechanism}", key="sasl.jaas.config")
    options = login.options if login is not None else {}
    if mechanism == "OAUTHBEARER":
        provider = cfg.sasl_oauth_token_provider
        if provider is None and login is None:
            raise ConfigError("OAUTHBEARER needs sasl_oauth_token_provider (a function "
                              "returning the token) or sasl.jaas.config with the "
                              "OAuthBearerLoginModule", key="sasl_oauth_token_provider")
        return SaslSettings(mechanism, tokens=TokenSource(provider, options))
    username = cfg.sasl_username or options.get("username", "")
    password = (cfg.sasl_password.get_secret_value() if cfg.sasl_password is not None
                else options.get("password", ""))
    if not username or not password:
        raise ConfigError(f"{mechanism} needs a user name and a password: sasl_username and "
                          "sasl_password (sasl.username / sasl.password), or sasl.jaas.config "
                          "with username=\"...\" password=\"...\"", key="sasl.username")
    return SaslSettings(mechanism, username, password)
