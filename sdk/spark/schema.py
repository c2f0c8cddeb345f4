"""The row shapes: Spark's Kafka schema for reads, and the columns a write accepts.

Reads hand Spark Arrow record batches built column by column, which costs far less per
record than Python tuples (Spark would otherwise convert every tuple field by field).
Writes get Arrow batches too, and turn each column into a Python list in one call.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from sdk.errors import ConfigError
from sdk.types import ConsumerRecord, Header

if TYPE_CHECKING:
    from pyspark.sql import Row

HEADER_TYPE = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
HEADERS_TYPE = ArrayType(HEADER_TYPE)

_BASE_FIELDS = [
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
]

_ARROW_HEADERS = pa.list_(pa.field("element", pa.struct([("key", pa.string()),
                                                          ("value", pa.binary())])))
_ARROW_BASE = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]


def source_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema, with the ``headers`` column when asked for."""
    fields = list(_BASE_FIELDS)
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def arrow_source_schema(include_headers: bool) -> pa.Schema:
    """The Arrow twin of :func:`source_schema` (what Spark expects batches to carry)."""
    fields = list(_ARROW_BASE)
    if include_headers:
        fields.append(pa.field("headers", _ARROW_HEADERS))
    return pa.schema(fields)


class RecordBatchBuilder:
    """Collects consumer records of one topic partition into Arrow record batches."""

    def __init__(self, topic: str, partition: int, include_headers: bool) -> None:
        self._topic = topic
        self._partition = partition
        self._include_headers = include_headers
        self._schema = arrow_source_schema(include_headers)
        self._clear()

    def _clear(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.timestamp_types: list[int] = []
        self.headers: list[list[tuple[str, bytes | None]]] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, record: ConsumerRecord) -> None:
        self.keys.append(record.key)  # bytes: the source's consumer has no deserializer
        self.values.append(record.value)
        self.offsets.append(record.offset)
        self.timestamps.append(record.timestamp * 1000)  # Kafka: ms; Spark: us
        self.timestamp_types.append(int(record.timestamp_type))
        if self._include_headers:
            self.headers.append(list(record.headers))

    def build(self) -> pa.RecordBatch:
        """The records added since the last build, as one batch; the builder starts empty."""
        count = len(self.offsets)
        columns = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.repeat(pa.scalar(self._topic, pa.string()), count),
            pa.repeat(pa.scalar(self._partition, pa.int32()), count),
            pa.array(self.offsets, pa.int64()),
            pa.array(self.timestamps, pa.timestamp("us", tz="UTC")),
            pa.array(self.timestamp_types, pa.int32()),
        ]
        if self._include_headers:
            columns.append(pa.array(self.headers, _ARROW_HEADERS))
        self._clear()
        return pa.RecordBatch.from_arrays(columns, schema=self._schema)


# ----------------------------------------------------------------------------------- writes


@dataclass(frozen=True)
class SinkColumns:
    """Where the write columns are (by name, as the input schema spells them), checked
    against Spark's Kafka sink rules when the writer is created."""

    value: str
    key: str | None = None
    topic: str | None = None
    partition: str | None = None
    headers: str | None = None


def _find(schema: StructType, name: str) -> StructField | None:
    # Spark resolves column names case-insensitively by default; so does its Kafka sink.
    for f in schema.fields:
        if f.name.lower() == name:
            return f
    return None


def _check_type(f: StructField | None, allowed: Sequence[DataType], what: str) -> str | None:
    if f is None:
        return None
    if not any(f.dataType == t for t in allowed):
        names = " or ".join(t.simpleString() for t in allowed)
        raise ConfigError(f"{what} attribute type must be {names}", key=f.name,
                          value=f.dataType.simpleString())
    return f.name


def sink_columns(schema: StructType, topic_option: str | None) -> SinkColumns:
    """The columns a write uses: ``value`` (required, string or binary), ``key`` (string or
    binary), ``topic`` (string; required unless the ``topic`` option is set, which wins),
    ``partition`` (int) and ``headers`` (array<struct<key string, value binary>>)."""
    value = _find(schema, "value")
    if value is None:
        raise ConfigError("required attribute 'value' not found in the data to write",
                          key="value")
    topic = _find(schema, "topic")
    if topic_option is None and topic is None:
        raise ConfigError(
            "topic option required when no 'topic' attribute is present in the data to write",
            key="topic",
        )
    return SinkColumns(
        value=_check_type(value, [StringType(), BinaryType()], "value") or "value",
        key=_check_type(_find(schema, "key"), [StringType(), BinaryType()], "key"),
        topic=None if topic_option is not None else _check_type(topic, [StringType()], "topic"),
        partition=_check_type(_find(schema, "partition"), [IntegerType()], "partition"),
        headers=_check_type(_find(schema, "headers"), [HEADERS_TYPE], "headers"),
    )


@dataclass(slots=True)
class OutgoingRecord:
    topic: str
    value: bytes | None
    key: bytes | None
    partition: int | None
    headers: list[Header] | None


def _as_bytes(data: str | bytes | None) -> bytes | None:
    return data.encode("utf-8") if isinstance(data, str) else data


def _column(batch: pa.RecordBatch, name: str | None) -> list[object] | None:
    return None if name is None else batch.column(name).to_pylist()


def _headers(value: object) -> list[Header] | None:
    if not value:
        return None
    headers: list[Header] = []
    for h in value:  # type: ignore[attr-defined]
        key, data = (h["key"], h["value"])
        if key is None:
            raise ConfigError("a header key is null; Kafka header keys must be strings",
                              key="headers")
        headers.append((key, data))
    return headers


def _record(value: object, key: object, topic: object, partition: object,
            headers: object) -> OutgoingRecord:
    if topic is None:
        raise ConfigError("null topic present in the data; use the topic option to set "
                          "a topic for every row", key="topic")
    return OutgoingRecord(topic=topic, value=_as_bytes(value), key=_as_bytes(key),  # type: ignore[arg-type]
                          partition=partition, headers=_headers(headers))  # type: ignore[arg-type]


def outgoing_records(batch: pa.RecordBatch, columns: SinkColumns,
                     default_topic: str | None) -> Iterator[OutgoingRecord]:
    """The records of one Arrow batch of the data to write."""
    count = batch.num_rows
    none = [None] * count
    values = _column(batch, columns.value) or none
    keys = _column(batch, columns.key) or none
    topics = _column(batch, columns.topic) or [default_topic] * count
    partitions = _column(batch, columns.partition) or none
    headers = _column(batch, columns.headers) or none
    for i in range(count):
        yield _record(values[i], keys[i], topics[i], partitions[i], headers[i])


def outgoing_record_from_row(row: Row, columns: SinkColumns,
                             default_topic: str | None) -> OutgoingRecord:
    """One Spark Row of the data to write as a record."""
    return _record(
        row[columns.value],
        row[columns.key] if columns.key else None,
        row[columns.topic] if columns.topic else default_topic,
        row[columns.partition] if columns.partition else None,
        row[columns.headers] if columns.headers else None,
    )


def _bytes_list(column: pa.Array) -> list[bytes | None]:
    # A string column becomes binary without copying; either way one call makes the list.
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    return column.to_pylist()


def _all_null_or_empty(column: pa.Array) -> bool:
    if column.null_count == len(column):
        return True
    if pa.types.is_list(column.type):
        longest = pc.max(pc.list_value_length(column)).as_py()
        return longest is None or longest == 0
    return False


def bulk_items(batch: pa.RecordBatch, columns: SinkColumns, default_topic: str | None
               ) -> tuple[str, list[object]] | None:
    """``(topic, items)`` for ``Producer.send_many`` when every row of the batch goes to one
    topic with no explicit partition and no headers (the common case, and far cheaper than a
    record object per row); None when the rows need the general path."""
    if batch.num_rows == 0:
        return None
    for name in (columns.partition, columns.headers):
        if name is not None and not _all_null_or_empty(batch.column(name)):
            return None
    topic = default_topic
    if columns.topic is not None:
        topics = batch.column(columns.topic)
        if topics.null_count:
            return None  # the general path reports the null topic
        distinct = pc.unique(topics)
        if len(distinct) != 1:
            return None
        topic = distinct[0].as_py()
    if topic is None:
        return None
    values = _bytes_list(batch.column(columns.value))
    if columns.key is None:
        return topic, values  # type: ignore[return-value]
    return topic, list(zip(_bytes_list(batch.column(columns.key)), values))
