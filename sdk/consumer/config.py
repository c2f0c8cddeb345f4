"""ConsumerConfig: every consumer setting, named as Kafka names it, validated by pydantic.

Settings come as keyword arguments with underscores (``group_id="billing"``) or as a
``config={"group.id": "billing"}`` mapping with Kafka's dotted names, so a Java or librdkafka
properties file works as is (values may be strings: ``"enable.auto.commit": "false"``).
An unknown key or a bad value raises :class:`sdk.errors.ConfigError` naming the key, the
value and what is allowed. The connection settings (bootstrap servers, timeouts, backoffs)
and the building rules come from :class:`sdk.net.config.CommonConfig`.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, ValidationError, model_validator

from sdk.consumer.assignors import ASSIGNORS, JAVA_CLASS_NAMES, Assignor
from sdk.errors import ConfigError
from sdk.net.config import CommonConfig, NonNegativeInt, PositiveInt
from sdk.net.serde import Deserializer, deserializer_named

_RESET_ALIASES = {  # librdkafka spellings of auto.offset.reset
    "smallest": "earliest", "beginning": "earliest",
    "largest": "latest", "end": "latest",
    "error": "none",
}


def _to_deserializer(value: Any) -> Any:
    if isinstance(value, str):  # a Java class name or a short name (sdk.net.serde)
        return deserializer_named(value)
    if value is not None and not callable(value):
        raise ValueError("a deserializer must be a callable taking bytes (or None)")
    return value


def _to_strategies(value: Any) -> Any:
    items = value.split(",") if isinstance(value, str) else value
    if isinstance(items, Assignor):
        items = [items]
    if not isinstance(items, list | tuple) or not items:
        raise ValueError("need at least one assignor")
    out: list[str | Assignor] = []
    for item in items:
        if isinstance(item, Assignor):
            out.append(item)
            continue
        name = JAVA_CLASS_NAMES.get(str(item).strip(), str(item).strip())
        if name not in ASSIGNORS:
            raise ValueError(f"unknown assignor {item!r}")
        out.append(name)
    return tuple(out)


def _lower(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value  # Java: CLASSIC, CONSUMER


def _to_reset(value: Any) -> Any:
    return _RESET_ALIASES.get(value, value) if isinstance(value, str) else value


class ConsumerConfig(CommonConfig):
    """Validated consumer settings (plus the connection settings of CommonConfig).

    Build with :meth:`build` (``ConsumerConfig.build({"group.id": "g"}, bootstrap_servers=...)``).
    """

    # --- group membership ----------------------------------------------------------------
    group_id: str | None = None
    group_instance_id: str | None = None
    group_protocol: Annotated[
        Literal["classic", "consumer"], BeforeValidator(_lower)
    ] = "classic"
    group_remote_assignor: str | None = None  # KIP-848: the broker's assignor (uniform, range)
    session_timeout_ms: PositiveInt = 45_000
    heartbeat_interval_ms: PositiveInt = 3_000
    max_poll_interval_ms: PositiveInt = 300_000
    partition_assignment_strategy: Annotated[
        tuple[str | Assignor, ...], BeforeValidator(_to_strategies)
    ] = ("range", "cooperative-sticky")
    client_rack: str = ""

    # --- offsets and commits -------------------------------------------------------------
    auto_offset_reset: Annotated[
        Literal["earliest", "latest", "none"], BeforeValidator(_to_reset)
    ] = "latest"
    enable_auto_commit: bool = True
    auto_commit_interval_ms: NonNegativeInt = 5_000
    default_api_timeout_ms: PositiveInt = 60_000

    # --- fetching ------------------------------------------------------------------------
    fetch_min_bytes: NonNegativeInt = 1  # 0 as Kafka allows: answered at once (fetcher.py)
    fetch_max_wait_ms: NonNegativeInt = 500
    fetch_max_bytes: PositiveInt = 52_428_800
    max_partition_fetch_bytes: PositiveInt = 1_048_576
    max_poll_records: PositiveInt = 500
    isolation_level: Literal["read_uncommitted", "read_committed"] = "read_uncommitted"
    check_crcs: bool = True
    exclude_internal_topics: bool = True
    allow_auto_create_topics: bool = True
    key_deserializer: Annotated[Deserializer | None, BeforeValidator(_to_deserializer)] = None
    value_deserializer: Annotated[Deserializer | None, BeforeValidator(_to_deserializer)] = None

    @model_validator(mode="before")
    @classmethod
    def _derived_defaults(cls, data: Any) -> Any:
        # As in Java: without a group there is nothing to commit to, so auto-commit is off
        # unless the user asked for it explicitly (which the check below rejects).
        if isinstance(data, dict) and data.get("group_id") is None:
            data.setdefault("enable_auto_commit", False)
        return data

    @model_validator(mode="after")
    def _cross_checks(self) -> ConsumerConfig:
        if self.group_id is None and self.enable_auto_commit:
            raise ConfigError(
                "auto-commit needs a group", key="enable.auto.commit", value=True,
                allowed="false unless group.id is set",
            )
        if self.group_id is None and self.group_instance_id is not None:
            raise ConfigError(
                "static membership needs a group", key="group.instance.id",
                value=self.group_instance_id, allowed="unset unless group.id is set",
            )
        if self.group_id is not None and not self.group_id.strip():
            raise ConfigError("empty group id", key="group.id", value=self.group_id,
                              allowed="a non-empty string, or unset for no group")
        _check_group_protocol(self)
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConfigError(
                "heartbeats must come more often than the session times out",
                key="heartbeat.interval.ms", value=self.heartbeat_interval_ms,
                allowed=f"an int < session.timeout.ms ({self.session_timeout_ms})",
            )
        return self

    _role: ClassVar[str] = "C"

    @classmethod
    def default_client_id(cls) -> str:
        return "kafka-sdk-consumer-" + super().default_client_id().rsplit("-", 1)[-1]

    @classmethod
    def _config_error(
        cls, exc: ValidationError, merged: dict[str, Any], given_as: dict[str, str]
    ) -> ConfigError:
        error = super()._config_error(exc, merged, given_as)
        if error.allowed is None and error.key is not None:
            name = error.key.replace(".", "_").replace("-", "_")
            allowed = _ALLOWED.get(name)
            if allowed is not None:
                error.allowed = allowed if isinstance(allowed, str) else tuple(allowed)
        return error

    def assignors(self) -> list[Assignor]:
        """Fresh assignor objects in preference order (custom instances are used as given)."""
        return [ASSIGNORS[s]() if isinstance(s, str) else s for s in self.partition_assignment_strategy]


# Settings of the classic protocol the KIP-848 one replaces (Java refuses them too), and
# what decides the same thing there.
_NOT_WITH_CONSUMER_PROTOCOL = {
    "partition_assignment_strategy": (
        "partitions are assigned by the broker under group.protocol=consumer: choose its "
        "assignor with group.remote.assignor (uniform or range)"),
    "session_timeout_ms": (
        "the broker decides the session timeout under group.protocol=consumer: set "
        "group.consumer.session.timeout.ms on the broker, or the group config "
        "consumer.session.timeout.ms"),
    "heartbeat_interval_ms": (
        "the broker decides the heartbeat interval under group.protocol=consumer: set "
        "group.consumer.heartbeat.interval.ms on the broker, or the group config "
        "consumer.heartbeat.interval.ms"),
}


def _check_group_protocol(config: ConsumerConfig) -> None:
    """Java's rules: classic-only settings are refused under the consumer protocol, and the
    remote assignor under the classic one (explicitly given settings only)."""
    given = config.model_fields_set
    if config.group_protocol == "consumer":
        for name, instead in _NOT_WITH_CONSUMER_PROTOCOL.items():
            if name in given:
                raise ConfigError(f"not supported with group.protocol=consumer: {instead}",
                                  key=name.replace("_", "."), value=getattr(config, name),
                                  allowed="unset")
        if config.group_remote_assignor is not None and not config.group_remote_assignor.strip():
            raise ConfigError("empty assignor name", key="group.remote.assignor",
                              value=config.group_remote_assignor,
                              allowed="uniform, range, or unset for the broker's default")
    elif config.group_remote_assignor is not None:
        raise ConfigError(
            "group.remote.assignor is used only by group.protocol=consumer (KIP-848); the "
            "classic protocol assigns on the client: use partition.assignment.strategy, or "
            "set group.protocol=consumer", key="group.remote.assignor",
            value=config.group_remote_assignor, allowed="unset with group.protocol=classic")


_ALLOWED: dict[str, str | list[object]] = {
    "partition_assignment_strategy": [*ASSIGNORS, *JAVA_CLASS_NAMES, "an Assignor instance"],
    "key_deserializer": "a callable taking bytes or None, or a built-in deserializer's name",
    "value_deserializer": "a callable taking bytes or None, or a built-in deserializer's name",
    "group_id": "a non-empty string, or unset for no group",
    "group_instance_id": "a string (needs group.id)",
    "group_protocol": ["classic", "consumer"],
}
