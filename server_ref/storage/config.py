"""Per-topic log settings: Kafka's topic configs as attributes, validated on construction."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sdk.errors import ConfigError

__all__ = ["LogConfig"]

INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1

_POLICIES = ("delete", "compact", "compact,delete")
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


@dataclass
class LogConfig:
    """Settings of one partition log. Names follow Kafka's topic configs, dots as underscores."""

    segment_bytes: int = 1 << 30  # segment.bytes
    segment_ms: int = 7 * 24 * 3600 * 1000  # segment.ms
    retention_ms: int = 7 * 24 * 3600 * 1000  # retention.ms, -1 = unlimited
    retention_bytes: int = -1  # retention.bytes, -1 = unlimited
    cleanup_policy: str = "delete"  # cleanup.policy: "delete", "compact" or "compact,delete"
    delete_retention_ms: int = 24 * 3600 * 1000  # delete.retention.ms
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms
    index_interval_bytes: int = 4096  # index.interval.bytes
    segment_index_bytes: int = 10 * 1024 * 1024  # segment.index.bytes (rolls when full)
    flush_messages: int = INT64_MAX  # flush.messages; 1 = fsync before acknowledging
    message_timestamp_type: str = "CreateTime"  # message.timestamp.type
    max_message_bytes: int = 1048588  # max.message.bytes

    def __post_init__(self) -> None:
        # Kafka writes "delete,compact" too; keep one spelling so `"compact" in policy` is enough.
        policy = ",".join(sorted(p.strip() for p in str(self.cleanup_policy).split(",")))
        if policy not in _POLICIES:
            raise ConfigError(
                "unknown cleanup policy", key="cleanup.policy", value=self.cleanup_policy,
                allowed=_POLICIES,
            )
        self.cleanup_policy = policy
        if self.message_timestamp_type not in _TIMESTAMP_TYPES:
            raise ConfigError(
                "unknown timestamp type", key="message.timestamp.type",
                value=self.message_timestamp_type, allowed=_TIMESTAMP_TYPES,
            )
        # segment.bytes is bounded by int32 because index entries hold int32 positions.
        self._check_range("segment_bytes", 14, INT32_MAX)
        self._check_range("segment_ms", 1, INT64_MAX)
        self._check_range("retention_ms", -1, INT64_MAX)
        self._check_range("retention_bytes", -1, INT64_MAX)
        self._check_range("delete_retention_ms", 0, INT64_MAX)
        self._check_range("min_compaction_lag_ms", 0, INT64_MAX)
        self._check_range("index_interval_bytes", 0, INT32_MAX)
        self._check_range("segment_index_bytes", 4, INT32_MAX)
        self._check_range("flush_messages", 1, INT64_MAX)
        self._check_range("max_message_bytes", 0, INT32_MAX)

    def _check_range(self, name: str, low: int, high: int) -> None:
        value = getattr(self, name)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ConfigError(
                "out of range", key=name.replace("_", "."), value=value,
                allowed=f"an int in [{low}, {high}]",
            )

    # ------------------------------------------------------------------ policy views

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    # ------------------------------------------------------------------ Kafka names

    @classmethod
    def kafka_names(cls) -> tuple[str, ...]:
        """The dotted Kafka config names this class understands."""
        return tuple(f.name.replace("_", ".") for f in dataclasses.fields(cls))

    @classmethod
    def from_kafka(cls, configs: Mapping[str, Any], base: LogConfig | None = None) -> LogConfig:
        """Build from Kafka's dotted names (values may be strings, as in CreateTopics).

        Names this storage engine does not use are ignored (a broker accepts many topic
        configs); known names with bad values raise ``ConfigError``.
        """
        values = dataclasses.asdict(base) if base is not None else {}
        for dotted, raw in configs.items():
            name = dotted.replace(".", "_")
            if name not in _FIELD_TYPES or raw is None:
                continue
            if _FIELD_TYPES[name] is int:
                try:
                    values[name] = int(raw)
                except (TypeError, ValueError):
                    raise ConfigError(
                        "not an integer", key=dotted, value=raw, allowed="an integer"
                    ) from None
            else:
                values[name] = str(raw)
        return cls(**values)

    def to_kafka(self) -> dict[str, str]:
        """Kafka's dotted names with string values, as DescribeConfigs reports them."""
        return {
            f.name.replace("_", "."): str(getattr(self, f.name)) for f in dataclasses.fields(self)
        }


_FIELD_TYPES: dict[str, type] = {
    f.name: (int if f.type in ("int", int) else str) for f in dataclasses.fields(LogConfig)
}
