"""Connection settings every role shares, and the rules for turning user input into a config.

``CommonConfig`` holds what the network layer needs (where the brokers are, timeouts,
backoffs, metadata age). Role configs (producer, consumer, admin) subclass it and add their
own fields and cross-field rules; they are built with :meth:`CommonConfig.build`, which takes

* keyword arguments named like Kafka's properties with dots as underscores
  (``linger_ms=5``), and/or
* a ``config`` mapping with Kafka's dotted names (``{"linger.ms": 5}``), so a Java or
  librdkafka properties file works as is (values may be strings: ``"5"``, ``"true"``).

Every failure is a :class:`sdk.errors.ConfigError` naming the key, the value given and what
is allowed: unknown keys (with close matches), a key given twice with different values, a
value of the wrong type or range, and the cross-field rules a subclass checks.

Example for a role config::

    class ConsumerConfig(CommonConfig):
        group_id: str | None = None
        fetch_min_bytes: NonNegativeInt = 1

    cfg = ConsumerConfig.build({"fetch.min.bytes": "10"}, bootstrap_servers="h:9092")
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from sdk.errors import ConfigError

__all__ = [
    "CommonConfig",
    "NonNegativeInt",
    "PositiveInt",
    "parse_bootstrap_servers",
]

C = TypeVar("C", bound="CommonConfig")

_client_ids = itertools.count(1)


def _reject_bool(value: Any) -> Any:
    # pydantic's lax mode reads True as 1; a boolean where a number belongs is a mistake.
    if isinstance(value, bool):
        raise ValueError("a number is required, not a boolean")
    return value


NonNegativeInt = Annotated[int, BeforeValidator(_reject_bool), Field(ge=0)]
PositiveInt = Annotated[int, BeforeValidator(_reject_bool), Field(gt=0)]


def parse_bootstrap_servers(value: str | list[str] | tuple[str, ...]) -> list[tuple[str, int]]:
    """``"h1:9092,h2:9093"`` or ``["h1:9092", "[::1]:9092"]`` -> ``[(host, port), ...]``.

    A missing port means 9092. Raises ValueError naming the bad entry.
    """
    items = value.split(",") if isinstance(value, str) else list(value)
    out: list[tuple[str, int]] = []
    for raw in items:
        if not isinstance(raw, str):
            raise ValueError(f"each server must be a 'host:port' string, not {raw!r}")
        entry = raw.strip()
        if not entry:
            continue
        for prefix in ("PLAINTEXT://", "plaintext://", "tcp://"):
            entry = entry.removeprefix(prefix)
        host, port_text = entry, "9092"
        if entry.startswith("["):  # [ipv6]:port
            end = entry.find("]")
            if end < 0:
                raise ValueError(f"unclosed '[' in server {raw!r}")
            host, rest = entry[1:end], entry[end + 1 :]
            if rest:
                if not rest.startswith(":"):
                    raise ValueError(f"expected ':port' after ']' in {raw!r}")
                port_text = rest[1:]
        elif entry.count(":") == 1:
            host, port_text = entry.split(":")
        elif entry.count(":") > 1:
            raise ValueError(f"write IPv6 addresses as '[addr]:port', not {raw!r}")
        if not host:
            raise ValueError(f"server {raw!r} has no host")
        try:
            port = int(port_text)
        except ValueError:
            raise ValueError(f"server {raw!r} has a non-numeric port") from None
        if not 0 < port < 65536:
            raise ValueError(f"server {raw!r} has port {port} outside 1..65535")
        out.append((host, port))
    if not out:
        raise ValueError("at least one 'host:port' is required")
    return out


class CommonConfig(BaseModel):
    """Settings of the shared network layer. All durations are milliseconds, as in Kafka."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    bootstrap_servers: list[tuple[str, int]]
    """Brokers to ask for the cluster's metadata first: ``"host:port,host:port"`` or a list."""
    client_id: str = ""
    """Sent with every request; brokers log and quota by it. Empty: a generated name."""
    request_timeout_ms: PositiveInt = 30_000
    """How long to wait for a response before the connection is considered broken."""
    socket_connection_setup_timeout_ms: PositiveInt = 10_000
    """How long a TCP connect plus the ApiVersions handshake may take."""
    reconnect_backoff_ms: NonNegativeInt = 50
    """Wait after a failed connection attempt; doubles per failure (with jitter) ..."""
    reconnect_backoff_max_ms: NonNegativeInt = 1_000
    """... up to this much."""
    retry_backoff_ms: NonNegativeInt = 100
    """Wait before retrying a failed request; doubles per attempt (with jitter) ..."""
    retry_backoff_max_ms: NonNegativeInt = 1_000
    """... up to this much. Also the minimum gap between two metadata refreshes is retry_backoff_ms."""
    metadata_max_age_ms: NonNegativeInt = 300_000
    """Refresh cluster metadata at least this often, even without errors."""
    security_protocol: Literal["PLAINTEXT"] = "PLAINTEXT"
    """Only PLAINTEXT for now (TLS and SASL come later)."""

    # ------------------------------------------------------------------ field rules

    @field_validator("bootstrap_servers", mode="before")
    @classmethod
    def _parse_servers(cls, value: Any) -> list[tuple[str, int]]:
        if isinstance(value, list) and all(
            isinstance(v, tuple) and len(v) == 2 for v in value
        ):
            return value
        if not isinstance(value, (str, list, tuple)):
            raise ValueError("expected 'host:port,...' or a list of 'host:port' strings")
        return parse_bootstrap_servers(value)

    @field_validator("security_protocol", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    # ------------------------------------------------------------------ construction

    @classmethod
    def default_client_id(cls) -> str:
        """The client id used when none is given; subclasses name their role."""
        return f"kafka-sdk-{next(_client_ids)}"

    @classmethod
    def build(cls: type[C], config: Mapping[str, Any] | None = None, /, **kwargs: Any) -> C:
        """Validate keyword arguments and/or a dotted-name mapping into a config object."""
        merged: dict[str, Any] = {}
        given_as: dict[str, str] = {}
        known = set(cls.model_fields)
        sources: list[tuple[str, Mapping[str, Any]]] = []
        if config is not None:
            if not isinstance(config, Mapping):
                raise ConfigError("config must be a mapping of setting names to values",
                                  key="config", value=config)
            sources.append(("config", config))
        sources.append(("keyword", kwargs))
        for _source, mapping in sources:
            for raw_key, value in mapping.items():
                if not isinstance(raw_key, str):
                    raise ConfigError("setting names must be strings", key=repr(raw_key))
                name = raw_key.strip().replace(".", "_").replace("-", "_")
                if name not in known:
                    raise cls._unknown_key(raw_key, name)
                if name in merged and merged[name] != value:
                    raise ConfigError(
                        f"given twice with different values ({given_as[name]!r}={merged[name]!r})",
                        key=raw_key, value=value,
                    )
                merged[name] = value
                given_as[name] = raw_key
        try:
            obj = cls.model_validate(merged)
        except ValidationError as exc:
            raise cls._config_error(exc, merged, given_as) from None
        if not obj.client_id:
            obj.client_id = cls.default_client_id()
        return obj

    @classmethod
    def _unknown_key(cls, raw_key: str, name: str) -> ConfigError:
        names = sorted(cls.model_fields)
        if "." in raw_key:  # suggest in the form the user wrote: linger.msx -> linger.ms
            names = [n.replace("_", ".") for n in names]
            name = raw_key.strip().replace("-", ".")
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        return ConfigError(f"unknown setting for {cls.__name__}{hint}", key=raw_key,
                           allowed=names)

    @classmethod
    def _config_error(cls, exc: ValidationError, merged: dict[str, Any],
                      given_as: dict[str, str]) -> ConfigError:
        err = exc.errors()[0]
        name = str(err["loc"][0]) if err["loc"] else ""
        ctx = err.get("ctx") or {}
        original = ctx.get("error")
        if isinstance(original, ConfigError):  # raised by a model validator: already precise
            return original
        if err["type"] == "missing":
            return ConfigError("is required", key=name, allowed=_allowed_phrase(cls, name, err))
        return ConfigError(
            _describe(err),
            key=given_as.get(name, name),
            value=merged.get(name),
            allowed=_allowed_phrase(cls, name, err),
        )


def _describe(err: Any) -> str:
    msg = str(err.get("msg", "invalid value"))
    return msg.removeprefix("Value error, ")


def _allowed_phrase(cls: type[CommonConfig], name: str, err: Any) -> str | None:
    ctx = err.get("ctx") or {}
    kind = err.get("type", "")
    if kind == "literal_error":
        return str(ctx.get("expected"))
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        op = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<",
              "less_than_equal": "<="}[kind]
        bound = next(iter(ctx.values()))
        return f"a number {op} {bound}"
    field = cls.model_fields.get(name)
    if field is None:
        return None
    annotation = field.annotation
    if annotation is int:
        return "an integer"
    if annotation is bool:
        return "true or false"
    if annotation is str:
        return "a string"
    if name == "bootstrap_servers":
        return "'host:port[,host:port...]' or a list of 'host:port'"
    return None
