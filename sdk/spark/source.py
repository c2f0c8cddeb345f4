"""The ``kafka_sdk`` data source: batch and streaming reads, and the writers' entry points.

Spark runs the planning methods (``partitions``, ``initialOffset``, ``latestOffset`` ...) in
a Python process beside the driver and ``read`` in the executors' Python workers, with the
reader pickled in between. So readers hold only validated options; SDK clients are opened
inside the methods (the streaming reader keeps one consumer for its planning calls, which
all run in one long-lived process, and drops it when pickled).

Streaming offsets are Spark's Kafka JSON, ``{"topic": {"0": 23}}``: the checkpoint holds
exactly which offsets each micro-batch covered, and the ranges of a batch are a pure
function of its (start, end) pair, so a restarted query replays or resumes a batch with no
record lost or read twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

from sdk.errors import ConfigError
from sdk.spark.kafka_io import ClusterLookup, read_range
from sdk.spark.offsets import PartitionOffsets, offsets_from_json, offsets_to_json
from sdk.spark.options import SourceOptions, parse_bool, parse_sink_options, parse_source_options
from sdk.spark.planning import (
    OffsetRange,
    check_batch_ranges,
    limit_offsets,
    report_data_loss,
    resolve_offsets,
    split_ranges,
    total_records,
)
from sdk.spark.schema import sink_columns, source_schema
from sdk.spark.sink import KafkaBatchWriter, KafkaStreamWriter, check_overwrite

try:  # PySpark >= 4.2: read limits (maxOffsetsPerTrigger as admission control) and AvailableNow
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        ReadMinRows,
        SupportsTriggerAvailableNow,
    )

    _STREAM_BASES: tuple[type, ...] = (DataSourceStreamReader, SupportsTriggerAvailableNow)
except ImportError:  # pragma: no cover - PySpark 4.0/4.1: latestOffset() without arguments
    ReadAllAvailable = ReadLimit = ReadMaxRows = ReadMinRows = None  # type: ignore[assignment, misc]
    _STREAM_BASES = (DataSourceStreamReader,)

log = logging.getLogger("sdk.spark")

FORMAT_NAME = "kafka_sdk"


class RangePartition(InputPartition):
    """One Spark task: an offset range of one topic partition."""

    def __init__(self, rng: OffsetRange) -> None:
        super().__init__(rng)
        self.range = rng

    def __repr__(self) -> str:
        r = self.range
        return f"RangePartition({r.topic}-{r.partition} [{r.start}, {r.end}))"


def _tasks(ranges: list[OffsetRange], options: SourceOptions) -> list[InputPartition]:
    pieces = split_ranges(ranges, min_partitions=options.min_partitions,
                          max_records_per_partition=options.max_records_per_partition)
    return [RangePartition(piece) for piece in pieces]


def _read(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    # Spark plans one placeholder partition when a batch query has nothing to read.
    if isinstance(partition, RangePartition):
        yield from read_range(options, partition.range)


# ------------------------------------------------------------------------------ batch read


class KafkaBatchReader(DataSourceReader):
    """``spark.read.format("kafka_sdk")``: ranges from the starting to the ending offsets."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        opts = self.options
        assert opts.ending is not None
        with ClusterLookup(opts) as lookup:
            wanted = lookup.partitions(opts.selection)
            start = resolve_offsets(opts.starting, wanted, lookup, is_start=True,
                                    strategy=opts.starting_timestamp_strategy)
            end = resolve_offsets(opts.ending, wanted, lookup, is_start=False)
            earliest = lookup.earliest(wanted)
            latest = lookup.latest(wanted)
        ranges = check_batch_ranges(start, end, earliest, latest,
                                    fail_on_data_loss=opts.fail_on_data_loss)
        return _tasks(ranges, opts)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)


# -------------------------------------------------------------------------- streaming read


class KafkaStreamReader(*_STREAM_BASES):  # type: ignore[misc]
    """``spark.readStream.format("kafka_sdk")``: micro-batches over Spark-JSON offsets."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._cluster: ClusterLookup | None = None
        self._last_end: PartitionOffsets | None = None  # for the argument-less latestOffset()
        self._available_now: PartitionOffsets | None = None
        self._last_batch_at = time.monotonic()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_cluster"] = None  # clients never travel to the executors
        return state

    def _lookup(self) -> ClusterLookup:
        if self._cluster is None:
            self._cluster = ClusterLookup(self.options)
        return self._cluster

    def initialOffset(self) -> dict[str, Any]:
        opts = self.options
        lookup = self._lookup()
        start = resolve_offsets(opts.starting, lookup.partitions(opts.selection), lookup,
                                is_start=True, strategy=opts.starting_timestamp_strategy)
        self._last_end = start
        return offsets_to_json(start)

    def getDefaultReadLimit(self) -> Any:
        opts = self.options
        if opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(opts.max_offsets_per_trigger)
        if opts.min_offsets_per_trigger is not None:
            return ReadMinRows(opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def _limits(self, limit: Any) -> tuple[int | None, int | None]:
        """(max rows, min rows) for this trigger. ``None`` (the argument-less API) means the
        options' own limits; ReadAllAvailable means none, as the engine asks."""
        opts = self.options
        if limit is None:
            return opts.max_offsets_per_trigger, opts.min_offsets_per_trigger
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            return limit.max_rows, opts.min_offsets_per_trigger
        if ReadMinRows is not None and isinstance(limit, ReadMinRows):
            return opts.max_offsets_per_trigger, limit.min_rows
        return None, None

    def latestOffset(self, start: dict[str, Any] | None = None,
                     limit: Any = None) -> dict[str, Any]:
        """The end of the next micro-batch: every partition's latest offset, or less under a
        read limit (shared by backlog). Works with both engine APIs: ``latestOffset(start,
        limit)`` (PySpark >= 4.2) and ``latestOffset()`` (older; the start is the end this
        reader last planned)."""
        opts = self.options
        lookup = self._lookup()
        known = offsets_from_json(start) if start is not None else self._last_end
        current = lookup.partitions(opts.selection)
        if known is None:  # argument-less API before any batch was planned: take all
            return offsets_to_json(lookup.latest(current))
        gone = set(known) - current
        if gone:
            report_data_loss(opts.fail_on_data_loss, log.warning,
                             f"partitions {sorted(map(str, gone))} were deleted")
        new = current - set(known)
        begin = {tp: off for tp, off in known.items() if tp in current}
        begin.update(lookup.earliest(new))  # new partitions are read from their start
        latest = lookup.latest(current)
        if self._available_now is not None:  # AvailableNow: nothing past the target
            target = self._available_now
            latest = {tp: max(begin[tp], min(off, target.get(tp, begin[tp])))
                      for tp, off in latest.items()}
        for tp in sorted(begin):
            if latest[tp] < begin[tp]:
                report_data_loss(opts.fail_on_data_loss, log.warning,
                                 f"{tp}: the log now ends at {latest[tp]}, before offset "
                                 f"{begin[tp]} already read (was the topic recreated?)")
        max_rows, min_rows = self._limits(limit)
        if (min_rows is not None and total_records(begin, latest) < min_rows
                and (time.monotonic() - self._last_batch_at) * 1000 < opts.max_trigger_delay_ms):
            return start if start is not None else offsets_to_json(known)
        end = limit_offsets(begin, latest, max_rows) if max_rows is not None else latest
        if end != known:
            self._last_batch_at = time.monotonic()
        if start is None:
            self._last_end = end
        return offsets_to_json(end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        lookup = self._lookup()
        return offsets_to_json(lookup.latest(lookup.partitions(self.options.selection)))

    def prepareForTriggerAvailableNow(self) -> None:
        lookup = self._lookup()
        self._available_now = lookup.latest(lookup.partitions(self.options.selection))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        opts = self.options
        first, last = offsets_from_json(start), offsets_from_json(end)
        new = set(last) - set(first)
        if new:
            first = {**first, **self._lookup().earliest(new)}
        ranges = []
        for tp in sorted(last):
            if last[tp] < first[tp]:
                report_data_loss(opts.fail_on_data_loss, log.warning,
                                 f"{tp}: offset went back from {first[tp]} to {last[tp]}")
                continue
            ranges.append(OffsetRange(tp.topic, tp.partition, first[tp], last[tp]))
        self._last_end = last
        return _tasks(ranges, opts)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to commit to Kafka: Spark's checkpoint is the record of progress."""
        self._last_end = offsets_from_json(end)

    def stop(self) -> None:
        if self._cluster is not None:
            cluster, self._cluster = self._cluster, None
            cluster.close()


# ----------------------------------------------------------------------------- data source


class KafkaSdkDataSource(DataSource):
    """The ``kafka_sdk`` format: Spark's Kafka connector schema and options on the SDK."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def _include_headers(self) -> bool:
        return parse_bool({k.lower(): v for k, v in self.options.items()}, "includeHeaders",
                          False)

    def schema(self) -> StructType:
        # Spark asks for the schema when a read is defined (load()), so the options are
        # checked there, as Spark's connector does; writes never call this.
        parse_source_options(self.options, streaming=None)
        return source_schema(self._include_headers())

    def _check_schema(self, schema: StructType) -> None:
        expected = source_schema(self._include_headers())
        if schema != expected:
            raise ConfigError("the kafka_sdk source has a fixed schema and cannot be given "
                              "another one", key="schema", value=schema.simpleString(),
                              allowed=expected.simpleString())

    def reader(self, schema: StructType) -> DataSourceReader:
        self._check_schema(schema)
        return KafkaBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        self._check_schema(schema)
        return KafkaStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        check_overwrite(overwrite)
        options = parse_sink_options(self.options)
        return KafkaBatchWriter(options, sink_columns(schema, options.topic))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = parse_sink_options(self.options)
        return KafkaStreamWriter(options, sink_columns(schema, options.topic))
