"""Kafka record batches: the v2 builder and reader, codecs, legacy message sets.

Write::

    b = RecordBatchBuilder("lz4", producer_id=7, producer_epoch=0, base_sequence=0)
    if b.has_room_for(key, value, headers, max_bytes=16384):
        b.append(None, timestamp_ms, key, value, headers)
    data = b.build()

Read::

    for batch in iter_batches(fetched_records):   # a trailing partial batch is ignored
        batch.validate_crc()
        for rec in batch:                          # Record(offset, timestamp, key, value, headers)
            ...
"""

from sdk.records.builder import Header, RecordBatchBuilder, build_control_batch, record_size
from sdk.records.compression import (
    Codec,
    Compression,
    compress,
    decompress,
    get_codec,
    register_codec,
)
from sdk.records.control import ControlRecord, ControlType, decode_control_record
from sdk.records.errors import CorruptRecordError, MalformedDataError, UnsupportedCompressionError
from sdk.records.header import (
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    TimestampType,
    batch_crc,
    patch_batch,
    patch_producer_state,
)
from sdk.records.legacy import LegacyBatch
from sdk.records.reader import Batch, RecordBatch, iter_batches, read_batches
from sdk.records.record import Record

__all__ = [
    "LOG_OVERHEAD",
    "RECORD_BATCH_OVERHEAD",
    "Batch",
    "Codec",
    "Compression",
    "ControlRecord",
    "ControlType",
    "CorruptRecordError",
    "Header",
    "LegacyBatch",
    "MalformedDataError",
    "Record",
    "RecordBatch",
    "RecordBatchBuilder",
    "TimestampType",
    "UnsupportedCompressionError",
    "batch_crc",
    "build_control_batch",
    "compress",
    "decode_control_record",
    "decompress",
    "get_codec",
    "iter_batches",
    "patch_batch",
    "patch_producer_state",
    "read_batches",
    "record_size",
    "register_codec",
]
