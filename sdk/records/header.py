"""RecordBatch v2 header layout, and in-place patching of stored batches.

The broker stores batches as producers send them and only rewrites header fields: the base
offset and partition leader epoch (both before the CRC-covered region, so the CRC stays
valid) and, for LogAppendTime topics, the timestamp type bit and max timestamp (inside the
CRC region, so the CRC is recomputed).
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable
from typing import Any

from sdk.records.errors import CorruptRecordError, MalformedDataError

__all__ = [
    "ATTRIBUTES_OFFSET",
    "BASE_TIMESTAMP_OFFSET",
    "BATCH_HEADER",
    "COMPRESSION_MASK",
    "CONTROL_MASK",
    "CRC_OFFSET",
    "DELETE_HORIZON_MASK",
    "HEADER_UP_TO_MAGIC",
    "LAST_OFFSET_DELTA_OFFSET",
    "LOG_OVERHEAD",
    "MAGIC_OFFSET",
    "MAX_TIMESTAMP_OFFSET",
    "PARTITION_LEADER_EPOCH_OFFSET",
    "PRODUCER_ID_OFFSET",
    "RECORD_BATCH_OVERHEAD",
    "TIMESTAMP_TYPE_MASK",
    "TRANSACTIONAL_MASK",
    "TimestampType",
    "batch_crc",
    "patch_batch",
    "patch_producer_state",
]

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
RECORD_BATCH_OVERHEAD = BATCH_HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted by batchLength
HEADER_UP_TO_MAGIC = 17  # enough to read the length and the magic byte of any format

PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
_PRODUCER_STATE = struct.Struct(">qhi")


class TimestampType(enum.IntEnum):
    NO_TIMESTAMP_TYPE = -1  # magic 0 messages carry no timestamp
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


def _load_crc32c(data: Any) -> int:
    # The crc32c package's import costs ~15 ms (it reads its version with importlib.metadata):
    # it loads at the first checksum, then `crc32c` is the extension's function itself.
    global crc32c
    from crc32c import crc32c as extension

    crc32c = extension
    return extension(data)


crc32c: Callable[[Any], int] = _load_crc32c
"""CRC-32C (Castagnoli); modules call it as ``header.crc32c`` so they get the loaded one."""


def batch_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """CRC-32C of a v2 batch's checked region: attributes to the end of the batch."""
    return crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])


def _checked_size(buf: bytearray, pos: int) -> int:
    if pos < 0 or len(buf) - pos < RECORD_BATCH_OVERHEAD:
        raise MalformedDataError(f"no complete v2 batch header at offset {pos}")
    magic = buf[pos + MAGIC_OFFSET]
    if magic != 2:
        raise MalformedDataError(f"batch at offset {pos} has magic {magic}; only v2 can be patched")
    size = LOG_OVERHEAD + _INT32.unpack_from(buf, pos + 8)[0]
    if size < RECORD_BATCH_OVERHEAD or pos + size > len(buf):
        raise MalformedDataError(f"batch at offset {pos} declares {size} bytes; buffer has fewer")
    return size


def patch_batch(
    buf: bytearray,
    pos: int = 0,
    *,
    base_offset: int | None = None,
    partition_leader_epoch: int | None = None,
    log_append_time_ms: int | None = None,
) -> None:
    """Rewrite header fields of the v2 batch at ``buf[pos:]`` in place.

    ``base_offset`` and ``partition_leader_epoch`` sit before the CRC-covered region, so
    setting them costs two writes. ``log_append_time_ms`` marks the batch LogAppendTime and
    sets its max timestamp; that changes checked bytes, so the CRC is verified first (a
    corrupt batch raises ``CorruptRecordError`` rather than being blessed with a fresh CRC)
    and then recomputed, only when something actually changed.
    """
    size = _checked_size(buf, pos)
    if base_offset is not None:
        _INT64.pack_into(buf, pos, base_offset)
    if partition_leader_epoch is not None:
        _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)
    if log_append_time_ms is None:
        return
    (attributes,) = _INT16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    (max_ts,) = _INT64.unpack_from(buf, pos + MAX_TIMESTAMP_OFFSET)
    new_attributes = attributes | TIMESTAMP_TYPE_MASK
    if new_attributes == attributes and max_ts == log_append_time_ms:
        return
    _verify_crc(buf, pos, size)
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, new_attributes)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, log_append_time_ms)
    _UINT32.pack_into(buf, pos + CRC_OFFSET, batch_crc(buf, pos, size))


def patch_producer_state(
    buf: bytearray,
    pos: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
) -> None:
    """Rewrite producer id, epoch and base sequence of a built batch (e.g. after an epoch
    bump resequences in-flight batches), verifying and then recomputing the CRC."""
    size = _checked_size(buf, pos)
    _verify_crc(buf, pos, size)
    _PRODUCER_STATE.pack_into(
        buf, pos + PRODUCER_ID_OFFSET, producer_id, producer_epoch, base_sequence
    )
    _UINT32.pack_into(buf, pos + CRC_OFFSET, batch_crc(buf, pos, size))


def _verify_crc(buf: bytearray, pos: int, size: int) -> None:
    (stored,) = _UINT32.unpack_from(buf, pos + CRC_OFFSET)
    actual = batch_crc(buf, pos, size)
    if stored != actual:
        raise CorruptRecordError(
            f"batch at offset {pos}: stored CRC {stored:#010x} != computed {actual:#010x}"
        )
