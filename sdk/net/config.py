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
import logging
import ssl
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
)

from sdk.errors import ConfigError, KafkaError
from sdk.net.config_names import VALUES, Alias, Entry, Ignored, Refused, lookup

__all__ = [
    "CommonConfig",
    "NonNegativeInt",
    "PositiveInt",
    "parse_bootstrap_servers",
]

C = TypeVar("C", bound="CommonConfig")

_client_ids = itertools.count(1)
log = logging.getLogger(__name__)


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
    _role: ClassVar[str] = ""
    """``P``, ``C`` or ``A``: the role whose entries of :mod:`sdk.net.config_names` apply."""

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
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    """``SSL`` and ``SASL_SSL`` wrap connections in TLS; ``SASL_*`` authenticate with
    ``sasl_mechanism`` after the ApiVersions handshake (:mod:`sdk.net.security`)."""
    ssl_context: ssl.SSLContext | None = None
    """A ready ``ssl.SSLContext``; when given, the other ``ssl_*`` settings are not used."""
    ssl_cafile: str | None = None
    """PEM file of the CA certificates to trust (Java ``ssl.truststore.location`` with
    ``ssl.truststore.type=PEM``, librdkafka ``ssl.ca.location``); default: the system's."""
    ssl_cadata: str | None = None
    """The trusted CA certificates as PEM text (Java ``ssl.truststore.certificates``)."""
    ssl_certfile: str | None = None
    """PEM file of the client's certificate chain for mutual TLS, which may hold the key too
    (Java ``ssl.keystore.location`` with ``ssl.keystore.type=PEM``, librdkafka
    ``ssl.certificate.location``)."""
    ssl_keyfile: str | None = None
    """PEM file of the client's private key (librdkafka ``ssl.key.location``)."""
    ssl_password: SecretStr | None = None
    """Password of the client's private key (``ssl.key.password``)."""
    ssl_keystore_key: SecretStr | None = None
    """The client's private key as PEM text (Java ``ssl.keystore.key``)."""
    ssl_keystore_certificate_chain: str | None = None
    """The client's certificate chain as PEM text (Java ``ssl.keystore.certificate.chain``)."""
    ssl_truststore_type: str = "PEM"
    """Only ``PEM``: JKS and PKCS12 stores are Java formats (convert them to PEM)."""
    ssl_keystore_type: str = "PEM"
    """Only ``PEM`` (see ``ssl_truststore_type``)."""
    ssl_endpoint_identification_algorithm: str = "https"
    """``https`` (default) checks that the broker's certificate names the host connected
    to; ``""`` (librdkafka: ``none``) does not, though the chain is still verified."""
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"] | None = None
    """The SASL mechanism; default: the one the ``sasl_jaas_config`` login module implies."""
    sasl_username: str | None = None
    """User name for PLAIN and SCRAM (librdkafka ``sasl.username``)."""
    sasl_password: SecretStr | None = None
    """Password for PLAIN and SCRAM (librdkafka ``sasl.password``)."""
    sasl_jaas_config: SecretStr | None = None
    """Java's JAAS string: ``org.apache.kafka.common.security.plain.PlainLoginModule
    required username="..." password="...";`` (or the Scram / OAuthBearer modules)."""
    sasl_oauth_token_provider: Callable[[], Any] | None = None
    """OAUTHBEARER tokens: a function or coroutine function returning an
    :class:`sdk.net.security.OAuthBearerToken`, ``(token, expires_at_ms[, extensions])`` or
    the token string. Called when a token is 80% through its life, for new connections and
    re-authentications (KIP-368)."""
    on_error: Callable[[KafkaError], object] | None = None
    """``on_error(exc)``: called with a typed KafkaError when the client meets a problem it
    keeps retrying in the background (a broker it cannot reach, a topic that does not
    exist, a partition without a leader), when the WARNING about it is logged: once per
    condition, again after 30 s while it lasts, and at once after it recovered and came
    back (:mod:`sdk.net.problems`). Runs on the client's event loop thread; must not block.
    librdkafka's ``error_cb`` is the same setting."""
    # Observability (sdk.metrics): metrics, periodic statistics, hooks, tracing, debug logs.
    metrics_enabled: bool = True
    """Keep the client's metrics (``metrics()``); False skips their bookkeeping."""
    metrics_sample_window_ms: PositiveInt = 30_000
    """Length of one sample window of the windowed averages, maxima and rates (Java)."""
    metrics_num_samples: Annotated[int, BeforeValidator(_reject_bool), Field(ge=1)] = 2
    """Sample windows kept: rates and averages cover the last ``num_samples`` windows."""
    statistics_interval_ms: NonNegativeInt = 0
    """Call ``on_statistics`` this often with a snapshot of ``metrics()``; 0: never
    (librdkafka's ``statistics.interval.ms``)."""
    on_statistics: Callable[[Mapping[Any, float]], object] | None = None
    """``on_statistics(metrics)``: the periodic snapshot (a mapping of
    :class:`sdk.metrics.MetricName` to value), on the client's event-loop thread."""
    hooks: Sequence[Any] = ()
    """Interceptor hooks: :class:`sdk.metrics.ClientHooks` instances, called in order."""
    tracing: bool = False
    """OpenTelemetry tracing (producer and consumer): a span per record sent, with W3C
    ``traceparent`` injected into its headers, and a span per record consumed that
    continues it. Needs the ``otel`` extra."""
    tracer_provider: Any = None
    """The OpenTelemetry tracer provider for ``tracing``; default: the global one."""
    debug: str = ""
    """Protocol debugging by subsystem, as librdkafka's ``debug``: a comma-separated list
    of contexts (``protocol``, ``broker``, ``metadata``, ``producer``, ``fetch``,
    ``consumer``, ``cgrp``, ``eos``, ``security``, ``admin``, ``all``), each setting its
    ``sdk.*`` loggers to DEBUG (:data:`sdk.metrics.DEBUG_CONTEXTS`)."""

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

    @field_validator("on_error")
    @classmethod
    def _check_callable(cls, value: Any) -> Any:
        if value is not None and not callable(value):
            raise ValueError("expected a callable taking the KafkaError")
        return value

    @field_validator("on_statistics")
    @classmethod
    def _check_statistics(cls, value: Any) -> Any:
        if value is not None and not callable(value):
            raise ValueError("expected a callable taking the mapping of metrics")
        return value

    @field_validator("hooks", mode="before")
    @classmethod
    def _check_hooks(cls, value: Any) -> Any:
        from sdk.metrics.hooks import HookSet  # the check names the missing methods

        hooks = [value] if not isinstance(value, (list, tuple)) else list(value)
        try:
            HookSet(hooks)
        except TypeError as exc:
            raise ValueError(str(exc)) from None
        return tuple(hooks)

    @field_validator("debug", mode="before")
    @classmethod
    def _check_debug(cls, value: Any) -> Any:
        from sdk.metrics.logs import parse_debug

        text = ",".join(value) if isinstance(value, (list, tuple)) else str(value or "")
        parse_debug(text)
        return text

    @field_validator("security_protocol", "sasl_mechanism", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = value.strip().upper()
            return value or None
        return value

    @field_validator("ssl_truststore_type", "ssl_keystore_type", mode="before")
    @classmethod
    def _pem_only(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().upper() not in ("PEM", ""):
            raise ValueError(f"{value.strip()} stores are not supported: convert the store to "
                             "PEM files (keytool -exportcert / openssl pkcs12) and set the "
                             "type to PEM")
        return "PEM"

    @field_validator("ssl_endpoint_identification_algorithm", mode="before")
    @classmethod
    def _endpoint_check(cls, value: Any) -> Any:
        text = "" if value is None else str(value).strip().lower()
        if text in ("", "none"):  # librdkafka spells "off" as none
            return ""
        if text != "https":
            raise ValueError("only 'https' (check the host name) or '' (do not)")
        return text

    @field_validator("sasl_oauth_token_provider")
    @classmethod
    def _check_provider(cls, value: Any) -> Any:
        if value is not None and not callable(value):
            raise ValueError("expected a function returning the token")
        return value

    # ------------------------------------------------------------------ construction

    @classmethod
    def default_client_id(cls) -> str:
        """The client id used when none is given; subclasses name their role."""
        return f"kafka-sdk-{next(_client_ids)}"

    @classmethod
    def build(cls: type[C], config: Mapping[str, Any] | None = None, /, **kwargs: Any) -> C:
        """Validate keyword arguments and/or a dotted-name mapping into a config object."""
        return cls._build([] if config is None else [config], kwargs)

    @classmethod
    def from_arguments(cls: type[C], positional: Sequence[Any], settings: Mapping[str, Any],
                       *, topics: bool = False) -> tuple[C, list[str]]:
        """A client constructor's arguments -> (config, topic names): the one way all read them.

        Settings come in three forms, alone or together: keyword arguments
        (``linger_ms=5``), ``config={"linger.ms": 5}`` (a ``"config"`` entry of
        ``settings``) and a mapping as a positional argument (``Producer({...})``, the
        confluent-kafka habit). With ``topics`` (the consumer) the other positional
        arguments are topic names, and a mapping among them must hold setting names.
        """
        rest = dict(settings)
        keyword_config = rest.pop("config", None)
        mappings: list[Mapping[str, Any]] = []
        names: list[str] = []
        for arg in positional:
            if isinstance(arg, Mapping):
                if topics and not cls._holds_settings(arg):
                    raise ConfigError(
                        f"a mapping among the topics holds no {cls._role_noun()} setting names; "
                        f"topics are names (str), settings are keyword arguments, "
                        f"config={{...}} or a mapping of Kafka's setting names",
                        key="topics", value=arg)
                mappings.append(arg)
            elif topics and isinstance(arg, str):
                names.append(arg)
            elif topics:
                raise TypeError(f"topics are names (str), not {arg!r}")
            elif arg is not None:
                hint = (f" (did you mean bootstrap_servers={arg!r}?)"
                        if isinstance(arg, str) and ":" in arg else "")
                raise ConfigError(
                    f"the {cls._role_noun()} takes its settings as keyword arguments, "
                    f"config={{...}} or a mapping as the first argument{hint}",
                    key="config", value=arg)
        if keyword_config is not None:
            mappings.append(keyword_config)
        return cls._build(mappings, rest), names

    @classmethod
    def _role_noun(cls) -> str:
        return _ROLE_NOUNS.get(cls._role, "client")

    @classmethod
    def _holds_settings(cls, mapping: Mapping[Any, Any]) -> bool:
        """True if every key is a string and at least one names a setting (ours or the
        table's), so a misplaced mapping is not silently read as settings."""
        keys = list(mapping)
        return all(isinstance(k, str) for k in keys) and any(
            _field_name(k) in cls.model_fields or _table_entry(k, cls._role)[0] is not None
            for k in keys)

    @classmethod
    def _build(cls: type[C], mappings: Sequence[Any], kwargs: Mapping[str, Any]) -> C:
        merged: dict[str, Any] = {}
        given_as: dict[str, str] = {}
        ignored: dict[str, str] = {}  # key as given -> why it has no effect (one warning)
        sources: list[Mapping[str, Any]] = []
        for mapping in mappings:
            if not isinstance(mapping, Mapping):
                raise ConfigError("config must be a mapping of setting names to values",
                                  key="config", value=mapping)
            sources.append(mapping)
        sources.append(kwargs)
        for mapping in sources:
            for raw_key, raw_value in mapping.items():
                if not isinstance(raw_key, str):
                    raise ConfigError("setting names must be strings", key=repr(raw_key))
                resolved = cls._resolve(raw_key.strip(), raw_value, ignored)
                if resolved is None:
                    continue
                name, value = resolved
                if name in merged and not _same_value(merged[name], value):
                    if name in _SECRETS:  # never repeat a credential in a message
                        raise ConfigError(f"given twice with different values: "
                                          f"{given_as[name]!r} and {raw_key!r}", key=raw_key)
                    raise ConfigError(
                        f"given twice with different values: {given_as[name]!r}="
                        f"{merged[name]!r} and {raw_key!r}={value!r}",
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
        if ignored:
            log.warning(
                "%s %s: %d setting(s) have no effect here and are ignored: %s",
                cls._role_noun(), obj.client_id, len(ignored),
                "; ".join(f"{key} ({why})" for key, why in ignored.items()))
        return obj

    @classmethod
    def _resolve(cls, key: str, value: Any, ignored: dict[str, str]) -> tuple[str, Any] | None:
        """``key`` as given -> (our field name, value), or None for a setting ignored here.

        Our own names (dotted or with underscores) first, then the alias table of
        :mod:`sdk.net.config_names`; anything else is refused."""
        name = _field_name(key)
        if name in cls.model_fields:
            return name, _spelled(VALUES.get(name.replace("_", ".")), key, value)
        entry, roles = _table_entry(key, cls._role)
        if isinstance(entry, Alias):
            target = _field_name(entry.target)
            if target in cls.model_fields:
                value = _spelled(entry.values, key, value)
                if entry.scale != 1:
                    value = _scaled(key, value, entry.scale)
                return target, value
        elif isinstance(entry, Ignored):
            text = _text(value)
            if text in entry.quiet:
                return None
            if entry.otherwise == "refuse":
                raise ConfigError(f"not supported: {entry.reason}", key=key, value=value,
                                  allowed=entry.quiet)
            ignored[key] = entry.reason
            return None
        elif isinstance(entry, Refused):
            raise ConfigError(f"not supported: {entry.reason}", key=key, value=value)
        raise cls._unknown_key(key, name, roles)

    @classmethod
    def _unknown_key(cls, raw_key: str, name: str, roles: str = "") -> ConfigError:
        names = sorted(cls.model_fields)
        if roles:  # in the alias table for another role: say whose setting it is
            whose = " or ".join(_ROLE_NOUNS[r] for r in roles)
            return ConfigError(f"unknown setting for {cls.__name__} (a {whose} setting)",
                               key=raw_key, allowed=names)
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
            given = given_as.get(_field_name(original.key or ""))
            if given is not None and _field_name(given) != _field_name(original.key or ""):
                original.key = given  # set through an alias: name the key the user wrote
            return original
        if err["type"] == "missing":
            return ConfigError("is required", key=name, allowed=_allowed_phrase(cls, name, err))
        if name in _SECRETS:
            return ConfigError(_describe(err), key=given_as.get(name, name), allowed="a string")
        return ConfigError(
            _describe(err),
            key=given_as.get(name, name),
            value=merged.get(name),
            allowed=_allowed_phrase(cls, name, err),
        )


_ROLE_NOUNS = {"P": "producer", "C": "consumer", "A": "admin client"}
# Settings holding credentials: error messages name them but never show their values.
_SECRETS = frozenset({"ssl_password", "ssl_keystore_key", "sasl_password", "sasl_jaas_config"})


def _field_name(key: str) -> str:
    return key.strip().replace(".", "_").replace("-", "_")


def _table_entry(key: str, role: str) -> tuple[Entry | None, str]:
    """The alias-table entry for ``key`` as given (``error_cb``, ``queue.buffering.max.ms``)
    or with underscores read as dots (``queue_buffering_max_ms``)."""
    entry, roles = lookup(key.strip(), role)
    if entry is None and not roles and "_" in key:
        entry, roles = lookup(key.strip().replace("_", "."), role)
    return entry, roles


def _text(value: Any) -> str:
    """A value as a properties file would spell it, lower-cased: True -> "true", None -> ""."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ",".join(_text(v) for v in value)
    return str(value).strip().lower()


def _same_value(a: Any, b: Any) -> bool:
    # "5" from a properties file and 5 from a keyword argument are the same setting.
    if a is b or a == b:
        return True
    simple = (str, int, float, bool)
    return isinstance(a, simple) and isinstance(b, simple) and _text(a) == _text(b)


def _spelled(values: Mapping[str, object] | None, key: str, value: Any) -> Any:
    """Another client's spelling of a value -> ours (``murmur2_random`` -> ``default``)."""
    if not values or not isinstance(value, (str, int)) or isinstance(value, bool):
        return value
    ours = values.get(_text(value), value)
    if isinstance(ours, Refused):
        raise ConfigError(f"not supported: {ours.reason}", key=key, value=value)
    return ours


def _scaled(key: str, value: Any, scale: int) -> int:
    """An integer in the alias's unit -> ours (librdkafka's kilobytes -> bytes)."""
    number: int | None = None
    if not isinstance(value, (bool, float)):
        try:
            number = int(str(value).strip())
        except ValueError:
            pass
    if number is None:
        raise ConfigError("an integer is required", key=key, value=value, allowed="an integer")
    return number * scale


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
