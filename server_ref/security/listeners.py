"""Listeners as Kafka configures them: ``listeners``, ``listener.security.protocol.map``,
``advertised.listeners``, ``inter.broker.listener.name``, and the per-listener lookup of
other settings (``listener.name.<listener>.<config>`` over ``<config>``).

Kafka's rules kept here: a listener name is case-insensitive (upper-cased, and written in
lower case in prefixes); each name appears once; a name that is not itself a security
protocol needs an entry in the protocol map; port 0 binds a free port. Without
``listeners``, the broker has one PLAINTEXT listener on ``--host``/``--port``.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from sdk.errors import ConfigError

__all__ = ["PROTOCOLS", "ListenerAddress", "ListenerSetup", "is_security_config",
           "listener_value", "parse_listener_list", "resolve_listeners"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"
DEFAULT_IDLE_MS = 600_000  # Kafka's connections.max.idle.ms

_LISTENER = re.compile(r"([^:/]+)://\[?([0-9a-zA-Z\-%._:]*?)\]?:(-?[0-9]+)")
# Settings read by this package: kept as text by BrokerConfig (see is_security_config).
_SECURITY_NAMES = {"listeners", "advertised.listeners", "listener.security.protocol.map",
                   "inter.broker.listener.name", "security.inter.broker.protocol",
                   "connections.max.reauth.ms", "connections.max.idle.ms",
                   "connection.failed.authentication.delay.ms",
                   "principal.builder.class"}
_SECURITY_PREFIXES = ("listener.name.", "ssl.", "sasl.")


def is_security_config(name: str) -> bool:
    """Whether ``name`` is a listener, TLS or SASL setting this package reads."""
    return name in _SECURITY_NAMES or name.startswith(_SECURITY_PREFIXES)


@dataclass(frozen=True, slots=True)
class ListenerAddress:
    name: str  # upper case, as Kafka normalises it
    host: str  # "" binds every interface
    port: int


@dataclass(slots=True)
class ListenerSetup:
    """One listener ready to serve: where, which protocol, and its TLS / SASL settings."""

    name: str
    protocol: str
    host: str
    port: int
    advertised_host: str
    advertised_port: int | None  # None: the bound port
    ssl_context: ssl.SSLContext | None = None
    sasl: object | None = None  # server_ref.security.sasl.SaslSettings
    idle_ms: int = DEFAULT_IDLE_MS  # the authentication phase must end within this

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def parse_listener_list(key: str, text: str) -> list[ListenerAddress]:
    out: list[ListenerAddress] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        match = _LISTENER.fullmatch(item)
        if match is None:
            raise ConfigError(f"{key}: {item!r} is not a listener; expected NAME://HOST:PORT "
                              "(e.g. SASL_SSL://127.0.0.1:9093)", key=key, value=text)
        port = int(match.group(3))
        if not 0 <= port <= 65535:
            raise ConfigError(f"{key}: port {port} of {item!r} is outside 0..65535", key=key,
                              value=text)
        name = match.group(1).upper()
        if any(a.name == name for a in out):
            raise ConfigError(f"{key}: each listener must have a different name, {name} "
                              "appears twice", key=key, value=text)
        out.append(ListenerAddress(name, match.group(2), port))
    if not out:
        raise ConfigError(f"{key}: no listener given", key=key, value=text)
    return out


def _protocol_map(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not sep or protocol not in PROTOCOLS:
            raise ConfigError(f"listener.security.protocol.map: {item!r} must be "
                              f"LISTENER:PROTOCOL with a protocol among {', '.join(PROTOCOLS)}",
                              key="listener.security.protocol.map", value=text)
        out[name.strip().upper()] = protocol
    return out


def listener_value(settings: Mapping[str, str], listener: str, key: str,
                   mechanism: str | None = None) -> str | None:
    """A setting for one listener (and SASL mechanism): the most specific form given."""
    prefix = f"listener.name.{listener.lower()}."
    names = []
    if mechanism is not None:
        names.append(f"{prefix}{mechanism.lower()}.{key}")
    names += [prefix + key, key]
    for name in names:
        for candidate in (name, _upper_listener(name)):
            if candidate in settings:
                return settings[candidate]
    return None


def _upper_listener(name: str) -> str:
    # Kafka writes prefixes in lower case; accept the listener's own spelling as well.
    if not name.startswith("listener.name."):
        return name
    head, _, rest = name[len("listener.name."):].partition(".")
    return f"listener.name.{head.upper()}.{rest}"


def resolve_listeners(settings: Mapping[str, str], host: str, port: int,
                      advertised_host: str | None) -> list[ListenerSetup]:
    """Listeners from the settings (or one PLAINTEXT one on ``host``/``port``), checked
    against the protocol map, with their advertised addresses. TLS and SASL parts are added
    by ``server_ref.security.setup``."""
    text = settings.get("listeners")
    addresses = ([ListenerAddress("PLAINTEXT", host, port)] if text is None
                 else parse_listener_list("listeners", text))
    protocols = _protocol_map(settings.get("listener.security.protocol.map",
                                           DEFAULT_PROTOCOL_MAP))
    advertised: dict[str, ListenerAddress] = {}
    if "advertised.listeners" in settings:
        for entry in parse_listener_list("advertised.listeners",
                                         settings["advertised.listeners"]):
            if not any(a.name == entry.name for a in addresses):
                raise ConfigError(f"advertised.listeners: {entry.name} is not one of the "
                                  f"listeners ({', '.join(a.name for a in addresses)})",
                                  key="advertised.listeners",
                                  value=settings["advertised.listeners"])
            advertised[entry.name] = entry
    inter = settings.get("inter.broker.listener.name")
    if inter is not None and not any(a.name == inter.strip().upper() for a in addresses):
        raise ConfigError(f"inter.broker.listener.name must be a listener name: {inter} is "
                          "not among " + ", ".join(a.name for a in addresses),
                          key="inter.broker.listener.name", value=inter)
    ports = [a.port for a in addresses if a.port]
    if len(ports) != len(set(ports)):
        raise ConfigError("listeners: two listeners cannot share a port", key="listeners",
                          value=text)
    out = []
    for address in addresses:
        protocol = protocols.get(address.name)
        if protocol is None:
            raise ConfigError(f"listeners: no security protocol defined for listener "
                              f"{address.name} (add it to listener.security.protocol.map)",
                              key="listener.security.protocol.map", value=text)
        shown = advertised.get(address.name)
        bind_host = address.host
        default_host = advertised_host or (bind_host if bind_host not in ("", "0.0.0.0", "::")
                                           else host)
        out.append(ListenerSetup(
            name=address.name, protocol=protocol, host=bind_host, port=address.port,
            advertised_host=shown.host if shown is not None and shown.host else default_host,
            advertised_port=shown.port if shown is not None and shown.port else None))
    return out
