"""Settings of the group coordinator, under Kafka's property names and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from sdk.errors import ConfigError

INT32_MAX = (1 << 31) - 1

# Kafka property name -> GroupConfig field, and the factor turning the property into the field.
_PROPERTIES: dict[str, tuple[str, int]] = {
    "group.initial.rebalance.delay.ms": ("initial_rebalance_delay_ms", 1),
    "group.min.session.timeout.ms": ("min_session_timeout_ms", 1),
    "group.max.session.timeout.ms": ("max_session_timeout_ms", 1),
    "group.max.size": ("max_size", 1),
    "offsets.retention.minutes": ("offsets_retention_ms", 60_000),
    "offsets.retention.check.interval.ms": ("offsets_retention_check_interval_ms", 1),
    "offset.metadata.max.bytes": ("offset_metadata_max_bytes", 1),
    "group.consumer.session.timeout.ms": ("consumer_session_timeout_ms", 1),
    "group.consumer.heartbeat.interval.ms": ("consumer_heartbeat_interval_ms", 1),
    "group.consumer.max.size": ("consumer_max_size", 1),
}


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Coordinator settings; defaults are Kafka's.

    Tests usually want ``initial_rebalance_delay_ms`` near 0 and a small
    ``min_session_timeout_ms``; :meth:`from_properties` accepts Kafka's dotted names.
    """

    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = INT32_MAX
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    # KIP-848 consumer groups: the broker decides session and heartbeat timing.
    consumer_session_timeout_ms: int = 45_000
    consumer_heartbeat_interval_ms: int = 5_000
    consumer_max_size: int = INT32_MAX

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigError("must be an integer", key=f.name, value=value)
            if value < 0:
                raise ConfigError("must not be negative", key=f.name, value=value,
                                  allowed="an int >= 0")
        if self.max_size < 1:
            raise ConfigError("a group must admit at least one member", key="max_size",
                              value=self.max_size, allowed="an int >= 1")
        if self.offsets_retention_check_interval_ms < 1:
            raise ConfigError("must be positive", key="offsets_retention_check_interval_ms",
                              value=self.offsets_retention_check_interval_ms,
                              allowed="an int >= 1")
        if self.min_session_timeout_ms > self.max_session_timeout_ms:
            raise ConfigError(
                "group.min.session.timeout.ms is larger than group.max.session.timeout.ms",
                key="min_session_timeout_ms", value=self.min_session_timeout_ms,
                allowed=f"an int <= {self.max_session_timeout_ms}",
            )

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any], *, strict: bool = False) -> GroupConfig:
        """Read the group settings among Kafka-named broker properties (values int or text).

        Other keys are ignored, so a whole broker property map can be passed; with
        ``strict=True`` an unknown key is an error instead.
        """
        values: dict[str, int] = {}
        for name, raw in properties.items():
            target = _PROPERTIES.get(name)
            if target is None:
                if strict:
                    raise ConfigError("not a group coordinator setting", key=name,
                                      allowed=sorted(_PROPERTIES))
                continue
            try:
                number = int(raw)
            except (TypeError, ValueError):
                raise ConfigError("must be an integer", key=name, value=raw) from None
            field_name, factor = target
            values[field_name] = number * factor
        return cls(**values)
