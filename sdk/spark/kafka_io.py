"""The SDK side of the source: what the driver asks the cluster, and how a task reads a range.

Only public faces are used here (:class:`sdk.consumer.Consumer`, ``sdk.errors``,
``sdk.types``). Each Spark task opens its own consumer on the executor (never a consumer
group: it assigns its one partition and seeks), reads its offset range, and closes it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, TypeVar

import pyarrow as pa

from sdk.errors import ConfigError, KafkaTimeoutError, OffsetOutOfRangeError, RetriableError
from sdk.spark.errors import DataLossError
from sdk.spark.offsets import PartitionOffsets, describe_partitions
from sdk.spark.options import SourceOptions, TopicSelection
from sdk.spark.planning import OffsetRange, report_data_loss
from sdk.spark.schema import RecordBatchBuilder
from sdk.types import TopicPartition

if TYPE_CHECKING:
    from sdk.consumer import Consumer

log = logging.getLogger("sdk.spark")

T = TypeVar("T")

ROWS_PER_ARROW_BATCH = 10_000
MAX_RECORDS_PER_POLL = 10_000
POLL_WAIT_MS = 500

# Settings the source fixes on its consumers: no group, no commits, no topic creation, and
# an out-of-range position is an error (the source decides what data loss means).
_SOURCE_CONSUMER_SETTINGS = {
    "enable.auto.commit": "false",
    "auto.offset.reset": "none",
}


def consumer_config(options: SourceOptions) -> dict[str, str]:
    config = {"allow.auto.create.topics": "false", "max.poll.records": str(MAX_RECORDS_PER_POLL),
              "client.id": "kafka-sdk-spark"}
    config.update(options.consumer_config)
    config.update(_SOURCE_CONSUMER_SETTINGS)
    return config


# The SDK clients are imported where they are made: Spark starts short-lived Python
# processes just to unpickle and plan a data source, and they need none of the clients.


def open_consumer(options: SourceOptions) -> Consumer:
    from sdk.consumer import Consumer

    return Consumer(config=consumer_config(options))


def admin_config(options: SourceOptions) -> dict[str, str]:
    """The connection settings among the ``kafka.*`` options (an admin client rejects the
    consumer-only ones)."""
    from sdk.admin import AdminConfig
    from sdk.net.config_names import Alias, lookup

    shared = AdminConfig.model_fields

    def admin_takes(key: str) -> bool:
        if key.replace(".", "_") in shared:
            return True
        # Java's or librdkafka's name for an admin setting (ssl.truststore.location ...):
        # dropping it would leave the driver's admin client without its TLS/SASL settings.
        entry, _ = lookup(key, "A")
        return isinstance(entry, Alias) and entry.target.replace(".", "_") in shared

    return {k: v for k, v in options.consumer_config.items() if admin_takes(k)}


class ClusterLookup:
    """What the driver asks the cluster: partitions (through an admin client, whose topic
    listing is a fresh Metadata request) and offsets (through a consumer). An
    :class:`~sdk.spark.planning.OffsetLookup`; retriable errors are retried
    ``fetchOffset.numRetries`` times, ``fetchOffset.retryIntervalMs`` apart."""

    def __init__(self, options: SourceOptions) -> None:
        from sdk.admin import AdminClient

        self._consumer = open_consumer(options)
        try:
            self._admin = AdminClient(admin_config(options))
        except BaseException:
            self._consumer.close()
            raise
        self._retries = options.fetch_offset_retries
        self._interval_s = options.fetch_offset_retry_interval_ms / 1000

    def _retrying(self, what: Callable[[], T]) -> T:
        attempt = 0
        while True:
            try:
                return what()
            except RetriableError:
                if attempt >= self._retries:
                    raise
                attempt += 1
                time.sleep(self._interval_s)

    def earliest(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        wanted = list(partitions)
        return self._retrying(lambda: self._consumer.beginning_offsets(wanted)) if wanted else {}

    def latest(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        wanted = list(partitions)
        return self._retrying(lambda: self._consumer.end_offsets(wanted)) if wanted else {}

    def for_times(self, timestamps: Mapping[TopicPartition, int]
                  ) -> dict[TopicPartition, int | None]:
        found = self._retrying(lambda: self._consumer.offsets_for_times(dict(timestamps)))
        return {tp: (None if found.get(tp) is None else found[tp].offset)  # type: ignore[union-attr]
                for tp in timestamps}

    def partitions(self, selection: TopicSelection) -> set[TopicPartition]:
        """The partitions the selection names now (subscriptions: of the topics that exist)."""
        counts = {name: listing.partition_count
                  for name, listing in self._retrying(self._admin.list_topics).items()}
        if selection.assigned:
            absent = {tp for tp in selection.assigned
                      if tp.partition >= counts.get(tp.topic, 0)}
            if absent:
                raise ConfigError(f"assigned partitions do not exist: "
                                  f"{describe_partitions(absent)}", key="assign")
            return set(selection.assigned)
        return {TopicPartition(topic, n) for topic, count in counts.items()
                if selection.wants(topic) for n in range(count)}

    def close(self) -> None:
        try:
            self._admin.close()
        finally:
            self._consumer.close()

    def __enter__(self) -> ClusterLookup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------------- reading


def read_range(options: SourceOptions, rng: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The records of ``rng`` as Arrow batches, checked for data loss when the task starts
    (and when the log start moves past the position while reading)."""
    tp = rng.topic_partition
    builder = RecordBatchBuilder(rng.topic, rng.partition, options.include_headers)
    with open_consumer(options) as consumer:
        start, end = rng.start, rng.end
        earliest = consumer.beginning_offsets([tp])[tp]
        latest = consumer.end_offsets([tp])[tp]
        if start < earliest:
            report_data_loss(options.fail_on_data_loss, log.warning,
                             f"{tp}: offsets {start} to {min(end, earliest)} were deleted "
                             f"before they could be read (the log now starts at {earliest})")
            start = earliest
        if end > latest:
            report_data_loss(options.fail_on_data_loss, log.warning,
                             f"{tp}: the log now ends at {latest}, before the planned end "
                             f"{end} (was the topic recreated or truncated?)")
            end = latest
        if start >= end:
            return
        consumer.assign([tp])
        consumer.seek(tp, start)
        position = start
        idle_since = time.monotonic()
        while position < end:
            try:
                polled = consumer.poll(timeout_ms=POLL_WAIT_MS, max_records=MAX_RECORDS_PER_POLL)
            except OffsetOutOfRangeError:
                position = _skip_lost(consumer, options, tp, position)
                continue
            records = polled.get(tp, ())
            for record in records:
                if record.offset >= end:
                    break
                builder.add(record)
            if len(builder) >= ROWS_PER_ARROW_BATCH:
                yield builder.build()
            moved = consumer.position(tp)
            if moved > position:
                position = moved
                idle_since = time.monotonic()
            elif (time.monotonic() - idle_since) * 1000 > options.poll_timeout_ms:
                raise KafkaTimeoutError(
                    f"{tp}: no progress at offset {position} (reading up to {end}) for "
                    f"{options.poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs)")
    if len(builder):
        yield builder.build()


def _skip_lost(consumer: Consumer, options: SourceOptions, tp: TopicPartition,
               position: int) -> int:
    """The log start moved past our position while reading: fail, or go on from there."""
    earliest = consumer.beginning_offsets([tp])[tp]
    if earliest <= position:  # not a retention race: something else is wrong
        raise DataLossError.about(
            f"{tp}: the broker reported offset {position} out of range (log start {earliest})")
    report_data_loss(options.fail_on_data_loss, log.warning,
                     f"{tp}: offsets {position} to {earliest} were deleted while being read")
    consumer.seek(tp, earliest)
    return earliest
