"""The ``kafka_sdk`` format's options: Spark's Kafka connector names, checked up front.

Spark hands a data source its options with lower-cased keys, so every lookup here is by the
lower-cased name; errors quote the documented spelling. Options prefixed ``kafka.`` go to the
SDK client with the prefix removed (``kafka.linger.ms`` -> ``linger.ms``), except the few
Spark forbids because the source or sink owns that behaviour. A misspelt option is an error
rather than silently ignored, since a typo in ``startingOffsets`` would quietly read the wrong
data.

Plain data, no pyspark: the parsed objects travel to the executors inside the pickled
reader and writer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from sdk.errors import ConfigError
from sdk.spark.offsets import (
    EARLIEST,
    LATEST,
    Earliest,
    GlobalTimestamp,
    Latest,
    OffsetSpec,
    PartitionTimestamps,
    SpecificOffsets,
    parse_assignment,
    parse_partition_values,
)
from sdk.types import TopicPartition

KAFKA_PREFIX = "kafka."

# Kafka client settings the connector owns; the value says why, and what to use instead.
FORBIDDEN_KAFKA_OPTIONS: dict[str, str] = {
    "group.id": "the source reads planned offset ranges and never joins a consumer group "
    "(Spark's checkpoint keeps the position)",
    "auto.offset.reset": "set the source option 'startingOffsets' to 'earliest' or 'latest' "
    "instead",
    "key.deserializer": "keys are always read as bytes; use DataFrame operations "
    "(e.g. CAST(key AS STRING)) to decode them",
    "value.deserializer": "values are always read as bytes; use DataFrame operations "
    "(e.g. CAST(value AS STRING)) to decode them",
    "key.serializer": "keys are always written as bytes; cast the 'key' column to STRING or "
    "BINARY before writing",
    "value.serializer": "values are always written as bytes; cast the 'value' column to "
    "STRING or BINARY before writing",
    "enable.auto.commit": "the source never commits offsets to Kafka; Spark's checkpoint "
    "tracks what was read",
    "interceptor.classes": "records pass straight between Spark and the SDK client; "
    "interceptors are not supported",
    "transactional.id": "set the sink option 'exactlyOnce' to 'true' instead: the sink "
    "derives a transactional id per query and task partition",
}

# Source options: lower-cased key -> documented spelling.
_SOURCE_OPTIONS = [
    "assign", "subscribe", "subscribePattern",
    "startingOffsets", "endingOffsets",
    "startingTimestamp", "endingTimestamp",
    "startingOffsetsByTimestamp", "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "includeHeaders", "failOnDataLoss",
    "minPartitions", "maxRecordsPerPartition",
    "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay",
    "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries", "fetchOffset.retryIntervalMs",
    "groupIdPrefix",  # accepted for compatibility: no group is ever joined
]
_SINK_OPTIONS = ["topic", "exactlyOnce", "exactlyOnce.queryId", "exactlyOnce.batchId"]
# Keys Spark itself may add to a sink's options.
_SPARK_ADDED_OPTIONS = ["path", "checkpointLocation"]

_ENDING_OPTIONS = ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")


@dataclass(frozen=True)
class TopicSelection:
    """Which partitions to read: exactly one of an assignment, topic names or a pattern."""

    assigned: tuple[TopicPartition, ...] = ()
    topics: tuple[str, ...] = ()
    pattern: str | None = None

    def wants(self, topic: str) -> bool:
        """Whether partitions of ``topic`` belong to the selection (for discovery)."""
        if self.assigned:
            return any(tp.topic == topic for tp in self.assigned)
        if self.pattern is not None:
            # Kafka matches the whole topic name against the Java regex.
            return re.fullmatch(self.pattern, topic) is not None
        return topic in self.topics

    def describe(self) -> str:
        if self.assigned:
            return "assign " + ", ".join(str(tp) for tp in self.assigned)
        if self.pattern is not None:
            return f"subscribePattern {self.pattern!r}"
        return "subscribe " + ", ".join(self.topics)


@dataclass(frozen=True)
class SourceOptions:
    """Everything the reader needs, validated. ``ending`` is None for streaming reads."""

    selection: TopicSelection
    consumer_config: dict[str, str]
    starting: OffsetSpec
    ending: OffsetSpec | None
    starting_timestamp_strategy: Literal["error", "latest"] = "error"
    include_headers: bool = False
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    poll_timeout_ms: int = 120_000
    fetch_offset_retries: int = 3
    fetch_offset_retry_interval_ms: int = 1000


@dataclass(frozen=True)
class SinkOptions:
    """Everything a writer needs: the default topic (``topic`` option) and producer config."""

    producer_config: dict[str, str] = field(default_factory=dict)
    topic: str | None = None
    exactly_once: bool = False  # each task's rows in a transaction (sdk.spark.exactly_once)
    query_id: str | None = None  # set by foreach_batch_sink; else Spark's local property
    batch_id: int | None = None


# ------------------------------------------------------------------------------ parsing


def _lowered(options: Mapping[str, str]) -> dict[str, str]:
    return {str(key).lower(): str(value) for key, value in options.items()}


def kafka_client_config(options: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options without the prefix; forbidden keys and a missing
    ``kafka.bootstrap.servers`` are :class:`ConfigError`."""
    config: dict[str, str] = {}
    for key, value in _lowered(options).items():
        bare = key[len(KAFKA_PREFIX):] if key.startswith(KAFKA_PREFIX) else key
        if bare in FORBIDDEN_KAFKA_OPTIONS:
            raise ConfigError(
                f"Kafka option '{bare}' is not supported: {FORBIDDEN_KAFKA_OPTIONS[bare]}",
                key=key,
            )
        if key.startswith(KAFKA_PREFIX):
            config[bare] = value
    if not config.get("bootstrap.servers", "").strip():
        raise ConfigError(
            "option 'kafka.bootstrap.servers' must be given (host:port[,host:port...])",
            key="kafka.bootstrap.servers",
        )
    return config


def _reject_unknown(lowered: Mapping[str, str], known: list[str]) -> None:
    names = {name.lower(): name for name in [*known, *_SPARK_ADDED_OPTIONS]}
    for key in lowered:
        if key.startswith(KAFKA_PREFIX) or key in names or key in FORBIDDEN_KAFKA_OPTIONS:
            continue
        raise ConfigError(
            f"unknown option {key!r} for the kafka_sdk format "
            "(Kafka client settings take the 'kafka.' prefix)",
            key=key,
            allowed=sorted(known),
        )


def parse_bool(lowered: Mapping[str, str], name: str, default: bool) -> bool:
    text = lowered.get(name.lower())
    if text is None:
        return default
    if text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    raise ConfigError("must be true or false", key=name, value=text)


def _parse_int(lowered: Mapping[str, str], name: str, minimum: int) -> int | None:
    text = lowered.get(name.lower())
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError as exc:
        raise ConfigError("must be an integer", key=name, value=text, cause=exc) from exc
    if value < minimum:
        raise ConfigError(f"must be >= {minimum}", key=name, value=value)
    return value


_DURATION = re.compile(r"\s*(\d+)\s*(ms|s|m|min|h|d)?\s*", re.IGNORECASE)
_UNIT_MS = {None: 1, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
            "d": 86_400_000}


def parse_duration_ms(text: str, name: str) -> int:
    """Spark's time strings: ``500`` (ms), ``500ms``, ``30s``, ``15m``, ``2h``, ``1d``."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ConfigError("must be a duration such as 500ms, 30s, 15m or 2h", key=name,
                          value=text)
    unit = match.group(2).lower() if match.group(2) else None
    return int(match.group(1)) * _UNIT_MS[unit]


def _parse_selection(lowered: Mapping[str, str]) -> TopicSelection:
    given = [name for name in ("assign", "subscribe", "subscribePattern")
             if name.lower() in lowered]
    if len(given) != 1:
        raise ConfigError(
            "exactly one of 'assign', 'subscribe' or 'subscribePattern' must be given"
            + (f" (got {', '.join(given)})" if given else ""),
            key="subscribe",
        )
    kind = given[0]
    text = lowered[kind.lower()]
    if kind == "assign":
        return TopicSelection(assigned=parse_assignment(text, "assign"))
    if kind == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
        if not topics:
            raise ConfigError("must name at least one topic (comma separated)",
                              key="subscribe", value=text)
        return TopicSelection(topics=topics)
    if not text.strip():
        raise ConfigError("must be a non-empty regular expression", key="subscribePattern")
    try:
        re.compile(text)
    except re.error as exc:
        raise ConfigError(f"is not a valid regular expression ({exc})", key="subscribePattern",
                          value=text, cause=exc) from exc
    return TopicSelection(pattern=text)


def _parse_offset_spec(
    lowered: Mapping[str, str], which: Literal["starting", "ending"]
) -> OffsetSpec | None:
    """The one spec for ``which``, by Spark's precedence: the global timestamp, then the
    per-partition timestamps, then the offsets option. None when none is given."""
    timestamp = _parse_int(lowered, f"{which}Timestamp", minimum=0)
    if timestamp is not None:
        return GlobalTimestamp(timestamp)
    by_time_name = f"{which}OffsetsByTimestamp"
    by_time = lowered.get(by_time_name.lower())
    if by_time is not None:
        values = parse_partition_values(by_time, by_time_name)
        for tp, ts in values.items():
            if ts < 0:
                raise ConfigError(f"the timestamp for {tp} must be >= 0", key=by_time_name,
                                  value=ts)
        return PartitionTimestamps(values)
    offsets_name = f"{which}Offsets"
    text = lowered.get(offsets_name.lower())
    if text is None:
        return None
    word = text.strip().lower()
    if word == "earliest":
        return Earliest()
    if word == "latest":
        return Latest()
    offsets = parse_partition_values(text, offsets_name)
    for tp, offset in offsets.items():
        if offset < EARLIEST:
            raise ConfigError(
                f"the offset for {tp} must be >= 0, or -2 (earliest) / -1 (latest)",
                key=offsets_name,
                value=offset,
            )
    return SpecificOffsets(offsets)


def _check_batch_bounds(starting: OffsetSpec, ending: OffsetSpec) -> None:
    # As Spark's connector: a batch query must start somewhere fixed and end somewhere reachable.
    if isinstance(starting, Latest):
        raise ConfigError("can't be 'latest' for batch queries", key="startingOffsets")
    if isinstance(starting, SpecificOffsets):
        for tp, offset in starting.offsets.items():
            if offset == LATEST:
                raise ConfigError(f"the starting offset for {tp} can't be latest (-1) "
                                  "for batch queries", key="startingOffsets")
    if isinstance(ending, Earliest):
        raise ConfigError("can't be 'earliest' for batch queries", key="endingOffsets")
    if isinstance(ending, SpecificOffsets):
        for tp, offset in ending.offsets.items():
            if offset == EARLIEST:
                raise ConfigError(f"the ending offset for {tp} can't be earliest (-2) "
                                  "for batch queries", key="endingOffsets")


def parse_source_options(options: Mapping[str, str], *, streaming: bool | None) -> SourceOptions:
    """Validate the read options; defaults follow Spark's connector (batch reads earliest to
    latest, streaming reads start at latest). ``streaming=None`` checks what does not depend
    on the kind of query (Spark asks for the schema before it says which kind it is)."""
    lowered = _lowered(options)
    _reject_unknown(lowered, _SOURCE_OPTIONS)
    consumer_config = kafka_client_config(lowered)
    selection = _parse_selection(lowered)

    starting = _parse_offset_spec(lowered, "starting")
    ending = _parse_offset_spec(lowered, "ending")
    if streaming:
        given = [name for name in _ENDING_OPTIONS if name in lowered]
        if given:
            raise ConfigError("ending offsets are not valid in streaming queries", key=given[0])
        starting = starting or Latest()
    elif streaming is not None:
        starting = starting or Earliest()
        ending = ending or Latest()
        _check_batch_bounds(starting, ending)

    strategy = lowered.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise ConfigError("must be 'error' or 'latest'",
                          key="startingOffsetsByTimestampStrategy", value=strategy,
                          allowed=["error", "latest"])

    delay_text = lowered.get("maxtriggerdelay")
    poll_timeout = _parse_int(lowered, "kafkaConsumer.pollTimeoutMs", minimum=1)
    retries = _parse_int(lowered, "fetchOffset.numRetries", minimum=0)
    retry_interval = _parse_int(lowered, "fetchOffset.retryIntervalMs", minimum=0)
    return SourceOptions(
        selection=selection,
        consumer_config=consumer_config,
        starting=starting or Earliest(),
        ending=ending,
        starting_timestamp_strategy="latest" if strategy == "latest" else "error",
        include_headers=parse_bool(lowered, "includeHeaders", False),
        fail_on_data_loss=parse_bool(lowered, "failOnDataLoss", True),
        min_partitions=_parse_int(lowered, "minPartitions", minimum=1),
        max_records_per_partition=_parse_int(lowered, "maxRecordsPerPartition", minimum=1),
        max_offsets_per_trigger=_parse_int(lowered, "maxOffsetsPerTrigger", minimum=1),
        min_offsets_per_trigger=_parse_int(lowered, "minOffsetsPerTrigger", minimum=1),
        max_trigger_delay_ms=(parse_duration_ms(delay_text, "maxTriggerDelay")
                              if delay_text is not None else 15 * 60 * 1000),
        poll_timeout_ms=poll_timeout if poll_timeout is not None else 120_000,
        fetch_offset_retries=retries if retries is not None else 3,
        fetch_offset_retry_interval_ms=retry_interval if retry_interval is not None else 1000,
    )


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate the write options: the producer's ``kafka.*`` config and the default topic."""
    lowered = _lowered(options)
    _reject_unknown(lowered, _SINK_OPTIONS)
    producer_config = kafka_client_config(lowered)
    topic = lowered.get("topic")
    if topic is not None and not topic.strip():
        raise ConfigError("must be a non-empty topic name", key="topic", value=topic)
    exactly_once = parse_bool(lowered, "exactlyOnce", False)
    batch_text = lowered.get("exactlyonce.batchid")
    try:
        batch_id = None if batch_text is None else int(batch_text)
    except ValueError:
        raise ConfigError("must be an integer", key="exactlyOnce.batchId",
                          value=batch_text) from None
    return SinkOptions(producer_config=producer_config, topic=topic, exactly_once=exactly_once,
                       query_id=lowered.get("exactlyonce.queryid"), batch_id=batch_id)
