"""ShareConsumerConfig: the share consumer's settings, with Kafka's names (KIP-932).

Built like every other role's config (:class:`sdk.net.config.CommonConfig`): keyword
arguments with underscores, ``config={"share.acknowledgement.mode": "explicit"}`` with
Kafka's dotted names, or a mapping as the first argument. Offsets, assignment strategy and
session timeouts belong to the *group* in a share group (group configs such as
``share.auto.offset.reset`` and ``share.record.lock.duration.ms``, set with the admin
client), so the classic consumer's settings for them are refused with that hint.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, model_validator

from sdk.errors import ConfigError
from sdk.net.config import CommonConfig, NonNegativeInt, PositiveInt
from sdk.net.serde import Deserializer, deserializer_named

__all__ = ["ShareConsumerConfig"]

# Classic-consumer settings that mean nothing to a share consumer, with what to use instead.
_GROUP_SIDE = {
    "auto_offset_reset": "the group config share.auto.offset.reset (admin client, "
                         "ConfigResource(GROUP, group id))",
    "enable_auto_commit": "share.acknowledgement.mode (implicit acknowledges at the next poll)",
    "auto_commit_interval_ms": "share.acknowledgement.mode",
    "session_timeout_ms": "the group config share.session.timeout.ms",
    "heartbeat_interval_ms": "the group config share.heartbeat.interval.ms",
    "partition_assignment_strategy": "nothing: the broker assigns share-group partitions",
    "group_instance_id": "nothing: share groups have no static members",
    "isolation_level": "the group config share.isolation.level",
    "group_protocol": "nothing: a share consumer always speaks the share protocol",
}


def _to_deserializer(value: Any) -> Any:
    if isinstance(value, str):
        return deserializer_named(value)
    if value is not None and not callable(value):
        raise ValueError("a deserializer must be a callable taking bytes (or None)")
    return value


def _to_mode(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


class ShareConsumerConfig(CommonConfig):
    """Validated share-consumer settings (plus the connection settings of CommonConfig)."""

    group_id: str
    client_rack: str = ""
    share_acknowledgement_mode: Annotated[
        Literal["implicit", "explicit"], BeforeValidator(_to_mode)] = "implicit"
    # KIP-1206: batch_optimized may hand out whole batches past max.poll.records.
    share_acquire_mode: Annotated[
        Literal["batch_optimized", "record_limit"], BeforeValidator(_to_mode)
    ] = "batch_optimized"
    default_api_timeout_ms: PositiveInt = 60_000
    fetch_min_bytes: NonNegativeInt = 1
    fetch_max_wait_ms: NonNegativeInt = 500
    fetch_max_bytes: PositiveInt = 52_428_800
    max_partition_fetch_bytes: PositiveInt = 1_048_576
    max_poll_records: PositiveInt = 500
    check_crcs: bool = True
    key_deserializer: Annotated[Deserializer | None, BeforeValidator(_to_deserializer)] = None
    value_deserializer: Annotated[Deserializer | None, BeforeValidator(_to_deserializer)] = None

    _role: ClassVar[str] = "C"

    @model_validator(mode="before")
    @classmethod
    def _refuse_classic(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, instead in _GROUP_SIDE.items():
                if name in data:
                    raise ConfigError(f"not a share-consumer setting: use {instead}",
                                      key=name.replace("_", "."), value=data[name])
        return data

    @model_validator(mode="after")
    def _checks(self) -> ShareConsumerConfig:
        if not self.group_id.strip():
            raise ConfigError("a share consumer needs a group", key="group.id",
                              value=self.group_id, allowed="a non-empty string")
        return self

    @classmethod
    def default_client_id(cls) -> str:
        return "kafka-sdk-share-consumer-" + super().default_client_id().rsplit("-", 1)[-1]

    @classmethod
    def _resolve(cls, key: str, value: Any, ignored: dict[str, str]) -> tuple[str, Any] | None:
        name = key.strip().replace(".", "_").replace("-", "_")
        if name in _GROUP_SIDE:  # refused with the hint, not as an unknown name
            return name, value
        return super()._resolve(key, value, ignored)
