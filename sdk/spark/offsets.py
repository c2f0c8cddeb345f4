"""Where a read starts or ends, and Spark's JSON forms for offsets and partitions.

Spark's Kafka connector writes partition offsets as ``{"topic": {"0": 23, "1": -1}}``, where
-2 means "earliest" and -1 "latest", and per-partition timestamps in the same shape. The
streaming source keeps its checkpointed offsets in that JSON too, so a query's offset log
reads the same as one written by Spark's own ``kafka`` format.

Everything here is plain data (picklable, no pyspark, no network).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from sdk.errors import ConfigError
from sdk.types import TopicPartition

EARLIEST = -2  # Spark's (and ListOffsets') marker for "the log start offset"
LATEST = -1  # ... and for "the high watermark"

PartitionOffsets: TypeAlias = dict[TopicPartition, int]


@dataclass(frozen=True)
class Earliest:
    """Start (or end) at each partition's log start offset."""


@dataclass(frozen=True)
class Latest:
    """Start (or end) at each partition's end offset (the high watermark)."""


@dataclass(frozen=True)
class SpecificOffsets:
    """Explicit offsets per partition; EARLIEST/LATEST allowed as values."""

    offsets: Mapping[TopicPartition, int]


@dataclass(frozen=True)
class GlobalTimestamp:
    """The first offset whose timestamp is >= ``timestamp_ms``, in every partition."""

    timestamp_ms: int


@dataclass(frozen=True)
class PartitionTimestamps:
    """The first offset whose timestamp is >= the partition's own timestamp."""

    timestamps: Mapping[TopicPartition, int]


OffsetSpec: TypeAlias = Earliest | Latest | SpecificOffsets | GlobalTimestamp | PartitionTimestamps


# ------------------------------------------------------------------------------ JSON forms


def _load_json_object(text: str, option: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError("is not valid JSON", key=option, value=text, cause=exc) from exc
    if not isinstance(value, dict) or not value:
        raise ConfigError("must be a non-empty JSON object", key=option, value=text)
    return value


def _as_int(value: Any, option: str, where: str) -> int:
    # bool is an int in Python; JSON true/false is never an offset, a partition or a time.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where} must be an integer", key=option, value=value)
    return value


def parse_partition_values(text: str, option: str) -> dict[TopicPartition, int]:
    """``{"t": {"0": 23, "1": -1}}`` -> {TopicPartition("t", 0): 23, ...} (offsets or times)."""
    result: dict[TopicPartition, int] = {}
    for topic, per_partition in _load_json_object(text, option).items():
        if not isinstance(per_partition, dict) or not per_partition:
            raise ConfigError(
                f'topic {topic!r} must map to an object like {{"0": 23}}',
                key=option,
                value=per_partition,
            )
        for partition_text, value in per_partition.items():
            try:
                partition = int(partition_text)
            except ValueError as exc:
                raise ConfigError(
                    f"partition {partition_text!r} of topic {topic!r} is not a number",
                    key=option,
                    cause=exc,
                ) from exc
            if partition < 0:
                raise ConfigError(f"partition {partition} of topic {topic!r} is negative",
                                  key=option)
            result[TopicPartition(topic, partition)] = _as_int(
                value, option, f"the value for {topic}-{partition}"
            )
    return result


def parse_assignment(text: str, option: str = "assign") -> tuple[TopicPartition, ...]:
    """``{"topicA": [0, 1], "topicB": [2, 4]}`` -> sorted, de-duplicated partitions."""
    partitions: set[TopicPartition] = set()
    for topic, numbers in _load_json_object(text, option).items():
        if not isinstance(numbers, list) or not numbers:
            raise ConfigError(
                f"topic {topic!r} must map to a non-empty list of partition numbers",
                key=option,
                value=numbers,
            )
        for number in numbers:
            partition = _as_int(number, option, f"a partition of topic {topic!r}")
            if partition < 0:
                raise ConfigError(f"partition {partition} of topic {topic!r} is negative",
                                  key=option)
            partitions.add(TopicPartition(topic, partition))
    return tuple(sorted(partitions))


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's offset object, topics and partitions in a stable order (a dict for json.dumps)."""
    result: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        result.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return result


def offsets_from_json(value: Mapping[str, Any]) -> PartitionOffsets:
    """The inverse of :func:`offsets_to_json`, for offsets Spark hands back from a checkpoint."""
    result: PartitionOffsets = {}
    for topic, per_partition in value.items():
        if not isinstance(per_partition, Mapping):
            raise ConfigError(f"bad offset entry for topic {topic!r}", key="offset",
                              value=per_partition)
        for partition_text, offset in per_partition.items():
            result[TopicPartition(topic, int(partition_text))] = int(offset)
    return result


def describe_partitions(partitions: Iterable[TopicPartition]) -> str:
    """A short, sorted ``t-0, t-1`` list for error messages."""
    names = [str(tp) for tp in sorted(partitions)]
    if len(names) > 20:
        return ", ".join(names[:20]) + f", ... ({len(names)} in all)"
    return ", ".join(names)
