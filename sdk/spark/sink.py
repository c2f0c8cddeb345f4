"""Writing DataFrames to Kafka: the batch and streaming writers.

Each Spark task opens its own SDK producer on the executor, sends its rows, flushes, and only
then returns its commit message, so a task that reports success has every record
acknowledged by the brokers. A failed delivery fails the task; Spark retries it, which makes
the sink at-least-once, as Spark's own Kafka sink is. With the option ``exactlyOnce=true``
(streaming writes and ``foreach_batch_sink(..., exactly_once=True)``) each task writes its
rows in a Kafka transaction keyed by the query, the micro-batch and the task partition, so
a replayed micro-batch leaves no duplicate for ``read_committed`` readers; see
:mod:`sdk.spark.exactly_once` for the guarantee, what it relies on and its cost.

The writers travel to the executors pickled, so they hold only validated plain data
(:class:`SinkOptions`, :class:`SinkColumns`); the producer is created inside ``write``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from sdk.errors import ConfigError
from sdk.spark.errors import DeliveryFailedError
from sdk.spark.options import SinkOptions
from sdk.spark.schema import (
    OutgoingRecord,
    SinkColumns,
    bulk_items,
    outgoing_record_from_row,
    outgoing_records,
)

if TYPE_CHECKING:
    from pyspark.sql import Row

try:  # PySpark >= 4.1 hands streaming writers Arrow batches too
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamWriterBase

    _STREAM_ARROW = True
except ImportError:  # pragma: no cover - PySpark 4.0
    # mypy reads the installed PySpark: with 4.1+ this rebinds the name to a base class of
    # what the first import bound (unused-ignore: with 4.0 there is no conflict).
    from pyspark.sql.datasource import (  # type: ignore[assignment, unused-ignore]
        DataSourceStreamWriter as _StreamWriterBase,
    )

    _STREAM_ARROW = False

FLUSH_TIMEOUT_S = 300.0  # generous: a task only ends when its records are acknowledged


@dataclass(frozen=True)
class SinkCommitMessage(WriterCommitMessage):
    """What a task reports: how many records it wrote."""

    records: int


class _DeliveryErrors:
    """Keeps the first delivery error reported by the producer's callbacks."""

    def __init__(self) -> None:
        self.first: BaseException | None = None
        self.count = 0

    def __call__(self, error: BaseException | None, _meta: object) -> None:
        if error is not None:
            self.count += 1
            if self.first is None:
                self.first = error


# A chunk of records to send: ``(topic, items)`` for ``send_many``, or record objects.
Chunk = tuple[str, list[object]] | list[OutgoingRecord]


def send_records(options: SinkOptions, chunks: Iterable[Chunk]) -> int:
    """Send every record with one producer, flush, and raise the first delivery error.
    Returns how many records were sent."""
    from sdk.producer import Producer  # here: planning-only processes never need it

    errors = _DeliveryErrors()
    bulk_futures = []
    sent = 0
    with Producer(options.producer_config) as producer:
        for chunk in chunks:
            if isinstance(chunk, tuple):
                topic, items = chunk
                bulk_futures.append(producer.send_many(topic, items))
                sent += len(items)
                continue
            for r in chunk:
                producer.send(r.topic, r.value, key=r.key, headers=r.headers,
                              partition=r.partition, on_delivery=errors)
            sent += len(chunk)
        producer.flush(timeout=FLUSH_TIMEOUT_S)
    for bulk in bulk_futures:
        failed = bulk.errors(timeout=0)
        if failed:
            errors.count += len(failed)
            errors.first = errors.first or failed[0][1]
    if errors.first is not None:
        raise DeliveryFailedError(
            f"{errors.count} of {sent} records were not delivered; first error: "
            f"{type(errors.first).__name__}: {errors.first}"
        ) from errors.first
    return sent


def _record_tuples(chunks: Iterable[Chunk]) -> Iterator[tuple[
        str, bytes | None, bytes | None, list[tuple[str, bytes | None]] | None, int | None]]:
    """Every record of ``chunks`` as (topic, key, value, headers, partition)."""
    for chunk in chunks:
        if isinstance(chunk, tuple):
            topic, items = chunk
            for item in items:
                key, value = item if isinstance(item, tuple) else (None, item)
                yield topic, key, value, None, None
        else:
            for r in chunk:
                yield r.topic, r.key, r.value, r.headers, r.partition


def write_chunks(options: SinkOptions, chunks: Iterable[Chunk]) -> int:
    """``send_records``, or with ``exactlyOnce`` the transactional write of
    :mod:`sdk.spark.exactly_once`."""
    if not options.exactly_once:
        return send_records(options, chunks)
    from sdk.spark.exactly_once import task_identity, write_exactly_once

    return write_exactly_once(options, task_identity(options), _record_tuples(chunks))


def _arrow_chunks(batches: Iterator[pa.RecordBatch], columns: SinkColumns,
                  default_topic: str | None) -> Iterator[Chunk]:
    for batch in batches:
        bulk = bulk_items(batch, columns, default_topic)
        yield bulk if bulk is not None else list(outgoing_records(batch, columns,
                                                                  default_topic))


def _row_chunks(rows: Iterator[Row], columns: SinkColumns, default_topic: str | None,
                chunk: int = 10_000) -> Iterator[Chunk]:
    """Rows (PySpark 4.0's streaming writer hands rows, not Arrow) into record chunks."""
    records: list[OutgoingRecord] = []
    for row in rows:
        records.append(outgoing_record_from_row(row, columns, default_topic))
        if len(records) >= chunk:
            yield records
            records = []
    if records:
        yield records


class KafkaBatchWriter(DataSourceArrowWriter):
    """``df.write.format("kafka_sdk")``: one producer per task."""

    def __init__(self, options: SinkOptions, columns: SinkColumns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return SinkCommitMessage(write_chunks(
            self.options, _arrow_chunks(iterator, self.columns, self.options.topic)))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to do: every task's records were acknowledged before it committed."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Records the finished tasks sent stay in Kafka (the sink is at-least-once)."""


class KafkaStreamWriter(_StreamWriterBase):
    """``df.writeStream.format("kafka_sdk")``: one producer per task and micro-batch."""

    def __init__(self, options: SinkOptions, columns: SinkColumns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[Any]) -> SinkCommitMessage:
        if _STREAM_ARROW:
            chunks = _arrow_chunks(iterator, self.columns, self.options.topic)
        else:  # pragma: no cover - PySpark 4.0
            chunks = _row_chunks(iterator, self.columns, self.options.topic)
        return SinkCommitMessage(write_chunks(self.options, chunks))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: the records were acknowledged before the tasks committed."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records the finished tasks sent stay in Kafka (the sink is at-least-once)."""


def check_overwrite(overwrite: bool) -> None:
    if overwrite:
        raise ConfigError("Kafka topics can only be appended to; use mode('append')",
                          key="mode", value="overwrite", allowed=["append"])
