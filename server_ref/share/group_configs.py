"""Group configs (the GROUP config resource, KIP-848/KIP-932), as Apache Kafka 4.3 has them.

Each group may override these; unset ones take the broker's value (the ``group.*`` broker
config named as the synonym) or Kafka's default. Validation is Kafka's: the type and lower
bound of each config, then the session timeouts, heartbeat intervals, lock duration,
delivery limit and lock count must lie within the broker's ``group.*.min.*`` /
``group.*.max.*`` bounds. On a single node overrides live in ``group_configs.json`` in the
data directory; in cluster mode, as in Kafka, in the metadata log: changes go through the
controller and every broker replays them (``server_ref/controller/group_configs.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sdk.errors import InvalidConfigError, InvalidRequestError
from server_ref.config import read_json, write_json_atomically

__all__ = ["GROUP_CONFIGS", "GroupConfigStore"]

FILE = "group_configs.json"
_DURATION = re.compile(r"by_duration:P(?:\d+D)?(?:T(?:\d+H)?(?:\d+M)?(?:\d+(?:\.\d+)?S)?)?")


@dataclass(frozen=True)
class GroupConfigDef:
    name: str
    kind: str  # INT, STRING, BOOLEAN
    default: Any
    at_least: int | None = None
    synonym: str | None = None  # the broker config giving the default
    bounds: tuple[str, str] | None = None  # broker configs: min and max allowed
    choices: tuple[str, ...] = ()


def _defs() -> dict[str, GroupConfigDef]:
    d = GroupConfigDef
    items = [
        d("consumer.session.timeout.ms", "INT", 45000, 1, "group.consumer.session.timeout.ms",
          ("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms")),
        d("consumer.heartbeat.interval.ms", "INT", 5000, 1,
          "group.consumer.heartbeat.interval.ms",
          ("group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms")),
        d("consumer.assignment.interval.ms", "INT", 1000, 0,
          "group.consumer.assignment.interval.ms",
          ("group.consumer.min.assignment.interval.ms", "group.consumer.max.assignment.interval.ms")),
        d("share.session.timeout.ms", "INT", 45000, 1, "group.share.session.timeout.ms",
          ("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms")),
        d("share.heartbeat.interval.ms", "INT", 5000, 1, "group.share.heartbeat.interval.ms",
          ("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms")),
        d("share.record.lock.duration.ms", "INT", 30000, 1000,
          "group.share.record.lock.duration.ms",
          ("group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms")),
        d("share.delivery.count.limit", "INT", 5, 2, "group.share.delivery.count.limit",
          ("group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit")),
        d("share.partition.max.record.locks", "INT", 2000, 100,
          "group.share.partition.max.record.locks",
          ("group.share.min.partition.max.record.locks",
           "group.share.max.partition.max.record.locks")),
        d("share.auto.offset.reset", "STRING", "latest", choices=("latest", "earliest")),
        d("share.isolation.level", "STRING", "read_uncommitted",
          choices=("read_committed", "read_uncommitted")),
        d("share.renew.acknowledge.enable", "BOOLEAN", True),
        d("share.assignment.interval.ms", "INT", 1000, 0, "group.share.assignment.interval.ms",
          ("group.share.min.assignment.interval.ms", "group.share.max.assignment.interval.ms")),
        d("streams.session.timeout.ms", "INT", 45000, 1, "group.streams.session.timeout.ms"),
        d("streams.heartbeat.interval.ms", "INT", 5000, 1, "group.streams.heartbeat.interval.ms"),
        d("streams.num.standby.replicas", "INT", 0, 0, "group.streams.num.standby.replicas"),
        d("streams.initial.rebalance.delay.ms", "INT", 3000, 0,
          "group.streams.initial.rebalance.delay.ms"),
        d("streams.assignment.interval.ms", "INT", 1000, 0,
          "group.streams.assignment.interval.ms"),
    ]
    return {i.name: i for i in items}


GROUP_CONFIGS = _defs()


class GroupConfigStore:
    """Every group's overrides, kept in ``data_dir`` (None: in memory only, as the
    controller's checks and cluster mode's replay use it)."""

    def __init__(self, data_dir: Path | None, broker_config: Any) -> None:
        self.path = None if data_dir is None else Path(data_dir) / FILE
        self.broker_config = broker_config
        self.overrides: dict[str, dict[str, Any]] = (
            read_json(self.path) or {}) if self.path is not None else {}

    def _save(self) -> None:
        if self.path is not None:
            write_json_atomically(self.path, self.overrides)

    def _broker(self, name: str) -> Any | None:
        try:
            return self.broker_config.get(name)
        except (KeyError, InvalidConfigError, ValueError):
            return None

    def default(self, name: str) -> tuple[Any, bool]:
        """(value, from the broker config?) of a config the group does not override."""
        spec = GROUP_CONFIGS[name]
        if spec.synonym is not None:
            value = self._broker(spec.synonym)
            if value is not None:
                return _parse(spec, value), value != spec.default
        return spec.default, False

    def broker_levels(self, name: str) -> list[tuple[Any, int]]:
        """(value, Kafka's ConfigSource id) of each broker level holding the config's broker
        synonym, the one in effect first, ending with Kafka's default; [] without one."""
        spec = GROUP_CONFIGS[name]
        levels = getattr(self.broker_config, "levels", None)
        if spec.synonym is None or levels is None:
            return []
        try:
            return [(_parse(spec, value), int(source)) for value, source in levels(spec.synonym)]
        except KeyError:  # a synonym this broker does not know (streams.*)
            return []

    def value(self, group_id: str, name: str) -> Any:
        """The value a group runs with: its override, kept within the broker's current
        bounds (Kafka's GroupConfig.evaluate: a broker restarted with narrower
        group.*.min/max.* caps what a group set earlier), else the broker's."""
        own = self.overrides.get(group_id, {})
        if name not in own:
            return self.default(name)[0]
        value = own[name]
        spec = GROUP_CONFIGS[name]
        if spec.bounds is not None and spec.kind == "INT":
            low, high = (self._broker(b) for b in spec.bounds)
            if low is not None and value < int(low):
                value = int(low)
            if high is not None and value > int(high):
                value = int(high)
        return value

    def parse(self, name: str, raw: str | None) -> Any:
        """A value as the group would hold it, validated as Kafka validates it."""
        spec = GROUP_CONFIGS.get(name)
        if spec is None:
            raise InvalidConfigError(f"Unknown group config name: {name}")
        if raw is None:
            raise InvalidRequestError(f"Null value not supported for : {name}")
        try:
            value = _parse(spec, raw)
        except ValueError:
            raise InvalidConfigError(
                f"Invalid value {raw} for configuration {name}: Not a number of type "
                f"{spec.kind}" if spec.kind == "INT" else
                f"Invalid value {raw} for configuration {name}") from None
        if spec.at_least is not None and value < spec.at_least:
            raise InvalidConfigError(f"Invalid value {raw} for configuration {name}: Value "
                                     f"must be at least {spec.at_least}")
        if spec.choices and value not in spec.choices and not (
                name == "share.auto.offset.reset" and _DURATION.fullmatch(str(value))):
            raise InvalidConfigError(f"Invalid value {raw} for configuration {name}: String "
                                     f"must be one of: {', '.join(spec.choices)}")
        if spec.bounds is not None:
            low, high = (self._broker(b) for b in spec.bounds)
            if low is not None and value < int(low):
                raise InvalidConfigError(f"{name} must be greater than or equal to "
                                         f"{spec.bounds[0]} ({low})")
            if high is not None and value > int(high):
                raise InvalidConfigError(f"{name} must be less than or equal to "
                                         f"{spec.bounds[1]} ({high})")
        return value

    def apply(self, group_id: str, changes: dict[str, Any | None]) -> None:
        """Set (a value) or remove (None) overrides, already validated; saved at once."""
        own = dict(self.overrides.get(group_id, {}))
        for name, value in changes.items():
            if value is None:
                own.pop(name, None)
            else:
                own[name] = value
        if own:
            self.overrides[group_id] = own
        else:
            self.overrides.pop(group_id, None)
        self._save()

    def forget(self, group_id: str) -> None:
        if self.overrides.pop(group_id, None) is not None:
            self._save()


def _parse(spec: GroupConfigDef, raw: Any) -> Any:
    if spec.kind == "INT":
        return int(str(raw).strip())
    if spec.kind == "BOOLEAN":
        text = str(raw).strip().lower()
        if text not in ("true", "false"):
            raise ValueError(raw)
        return text == "true"
    return str(raw).strip().lower() if spec.choices else str(raw)


# ---------------------------------------------------------------------------- the wire side

_SOURCE_GROUP, _SOURCE_STATIC, _SOURCE_DEFAULT = 8, 4, 5  # Kafka's ConfigSource ids
_TYPES = {"BOOLEAN": 1, "STRING": 2, "INT": 3}  # Kafka's ConfigType ids
SET, DELETE = 0, 1


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def describe_entries(store: GroupConfigStore, group_id: str, keys: list[str] | None,
                     entry_cls: Any, synonym_cls: Any, synonyms: bool) -> list[Any]:
    """DescribeConfigs of a GROUP resource: every group config (or those asked for)."""
    if not group_id:
        raise InvalidRequestError("Group name must not be empty")
    own = store.overrides.get(group_id, {})
    out = []
    for name in (keys if keys is not None else sorted(GROUP_CONFIGS)):
        spec = GROUP_CONFIGS.get(name)
        if spec is None:
            continue
        default, from_broker = store.default(name)
        # as Kafka shows it: an unset group config takes the source of the broker level in
        # effect (static, dynamic cluster default, dynamic for this broker); the synonyms
        # list every broker level down to Kafka's default
        levels = store.broker_levels(name)
        if name in own:
            value, source = own[name], _SOURCE_GROUP
        elif levels:
            value, source = levels[0]
        else:
            value, source = default, _SOURCE_STATIC if from_broker else _SOURCE_DEFAULT
        entry = entry_cls(name=name, value=_text(value), read_only=False, config_source=source,
                          is_sensitive=False, config_type=_TYPES[spec.kind])
        if synonyms:
            chain = []
            if name in own:
                chain.append(synonym_cls(name=name, value=_text(own[name]),
                                         source=_SOURCE_GROUP))
            if levels and spec.synonym:
                chain.extend(synonym_cls(name=spec.synonym, value=_text(level_value),
                                         source=level_source)
                             for level_value, level_source in levels)
            elif from_broker and spec.synonym:
                chain.append(synonym_cls(name=spec.synonym, value=_text(default),
                                         source=_SOURCE_STATIC))
            entry.synonyms = chain
        out.append(entry)
    return out


def alter_incrementally(store: GroupConfigStore, group_id: str, ops: list[Any],
                        validate_only: bool) -> None:
    """IncrementalAlterConfigs of a GROUP resource: SET and DELETE (no list configs)."""
    if not group_id:
        raise InvalidRequestError("Group name must not be empty")
    changes: dict[str, Any | None] = {}
    for op in ops:
        if op.config_operation == SET:
            changes[op.name] = store.parse(op.name, op.value)
        elif op.config_operation == DELETE:
            if op.name not in GROUP_CONFIGS:
                raise InvalidConfigError(f"Unknown group config name: {op.name}")
            changes[op.name] = None
        else:
            raise InvalidConfigError(
                f"Config value append/subtract is not allowed for config key: {op.name}")
    if not validate_only:
        store.apply(group_id, changes)
