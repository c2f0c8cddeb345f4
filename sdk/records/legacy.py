"""Reader for legacy message sets (magic 0 and 1), yielding the same ``Record`` shape as v2.

Each entry is ``offset int64, size int32, crc uint32, magic int8, attributes int8,
[timestamp int64 (magic 1)], key bytes, value bytes`` with IEEE CRC-32 over magic..end. A
compressed entry (a "wrapper") holds a whole inner message set, compressed, as its value.
Inner offsets are absolute for magic 0; for magic 1 they are relative (0..n-1) and the
wrapper carries the absolute offset of the last inner message.

A ``LegacyBatch`` is one top-level entry and offers the same attributes as ``RecordBatch``
(fields that magic 0/1 lack hold Kafka's "none" values: -1, False).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

from sdk.records.compression import Compression, decompress, fix_legacy_lz4_header
from sdk.records.control import ControlRecord
from sdk.records.errors import CorruptRecordError, MalformedDataError
from sdk.records.header import LOG_OVERHEAD, TimestampType
from sdk.records.record import Record

__all__ = ["MIN_MESSAGE_SIZE", "LegacyBatch"]

MIN_MESSAGE_SIZE = 14  # magic 0: crc, magic, attributes, key length, value length
_MIN_SIZE = {0: 14, 1: 22}
_ENTRY = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_MASK = 0x08
_NO_TIMESTAMP = -1


class _Message:
    """One parsed message: fixed fields plus the positions of its key and value."""

    __slots__ = ("attributes", "crc", "end", "key_pos", "magic", "offset", "timestamp", "value_pos")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int, limit: int) -> None:
        if limit - pos < LOG_OVERHEAD + MIN_MESSAGE_SIZE:
            raise MalformedDataError(f"message at offset {pos} is truncated")
        self.offset, length, self.crc, self.magic, self.attributes = _ENTRY.unpack_from(buf, pos)
        if self.magic not in _MIN_SIZE:
            raise MalformedDataError(f"message at offset {pos} has magic {self.magic}, not 0 or 1")
        if length < _MIN_SIZE[self.magic]:
            raise MalformedDataError(f"message at offset {pos} declares only {length} bytes")
        self.end = end = pos + LOG_OVERHEAD + length
        if end > limit:
            raise MalformedDataError(
                f"message at offset {pos} runs {end - limit} bytes past its set"
            )
        p = pos + 18
        if self.magic == 1:
            (self.timestamp,) = _INT64.unpack_from(buf, p)
            p += 8
        else:
            self.timestamp = _NO_TIMESTAMP
        self.key_pos = p
        p = _skip_bytes(buf, p, end, "key")
        self.value_pos = p
        if _skip_bytes(buf, p, end, "value") != end:
            raise MalformedDataError(f"message at offset {pos} has bytes after its value")

    def key(self, buf: bytes | bytearray | memoryview) -> bytes | None:
        return _read_bytes(buf, self.key_pos)

    def value(self, buf: bytes | bytearray | memoryview) -> bytes | None:
        return _read_bytes(buf, self.value_pos)


def _skip_bytes(buf: bytes | bytearray | memoryview, pos: int, end: int, what: str) -> int:
    if pos + 4 > end:
        raise MalformedDataError(f"message {what} length at offset {pos} is truncated")
    (n,) = _INT32.unpack_from(buf, pos)
    pos += 4
    if n < -1 or pos + max(n, 0) > end:
        raise MalformedDataError(f"message {what} length {n} at offset {pos - 4} is invalid")
    return pos + max(n, 0)


def _read_bytes(buf: bytes | bytearray | memoryview, pos: int) -> bytes | None:
    (n,) = _INT32.unpack_from(buf, pos)
    return None if n < 0 else bytes(buf[pos + 4 : pos + 4 + n])


def _iter_messages(buf: bytes, pos: int, end: int) -> Iterator[_Message]:
    while pos < end:
        msg = _Message(buf, pos, end)
        yield msg
        pos = msg.end


class LegacyBatch:
    """One top-level message of a magic 0/1 message set: a record, or a compressed wrapper."""

    __slots__ = ("_buf", "_msg", "_records", "position", "size")

    partition_leader_epoch = -1
    producer_id = -1
    producer_epoch = -1
    base_sequence = -1
    is_transactional = False
    is_control = False
    has_delete_horizon = False

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0) -> None:
        self._msg = _Message(buf, pos, len(buf))
        self._buf = buf
        self._records: list[Record] | None = None
        self.position = pos
        self.size = self._msg.end - pos

    # ------------------------------------------------------------------ header views

    @property
    def magic(self) -> int:
        return self._msg.magic

    @property
    def crc(self) -> int:
        return self._msg.crc

    @property
    def attributes(self) -> int:
        return self._msg.attributes

    @property
    def compression(self) -> int:
        return self._msg.attributes & _COMPRESSION_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        if self._msg.magic == 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        if self._msg.attributes & _TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def base_offset(self) -> int:
        if not self.compression:
            return self._msg.offset
        records = self.records()
        return records[0].offset if records else self._msg.offset

    @property
    def last_offset(self) -> int:
        return self._msg.offset

    @property
    def last_offset_delta(self) -> int:
        return self.last_offset - self.base_offset

    @property
    def next_offset(self) -> int:
        return self._msg.offset + 1

    @property
    def base_timestamp(self) -> int:
        return self._msg.timestamp

    @property
    def max_timestamp(self) -> int:
        return self._msg.timestamp

    @property
    def record_count(self) -> int:
        return len(self.records()) if self.compression else 1

    def to_bytes(self) -> bytes:
        return bytes(memoryview(self._buf)[self.position : self.position + self.size])

    # ------------------------------------------------------------------ checks

    def crc_matches(self) -> bool:
        data = memoryview(self._buf)[self.position + 16 : self.position + self.size]
        return zlib.crc32(data) == self._msg.crc

    def validate_crc(self) -> None:
        if not self.crc_matches():
            raise CorruptRecordError(
                f"magic {self.magic} message at offset {self._msg.offset}: CRC-32 mismatch"
            )

    # ------------------------------------------------------------------ records

    def records(self) -> list[Record]:
        if self._records is None:
            self._records = self._decode()
        return list(self._records)

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def control_record(self) -> ControlRecord:
        raise MalformedDataError("magic 0/1 message sets have no control records")

    def _decode(self) -> list[Record]:
        msg, buf = self._msg, self._buf
        codec = msg.attributes & _COMPRESSION_MASK
        if not codec:
            return [Record(msg.offset, msg.timestamp, msg.key(buf), msg.value(buf), [])]
        payload = msg.value(buf)
        if payload is None:
            raise MalformedDataError(f"compressed message at offset {msg.offset} has no value")
        if codec == Compression.LZ4 and msg.magic == 0:
            payload = fix_legacy_lz4_header(payload)
        inner = decompress(codec, payload)
        messages = list(_iter_messages(inner, 0, len(inner)))
        if not messages:
            raise MalformedDataError(f"compressed message at offset {msg.offset} is empty")
        shift = 0
        if msg.magic > 0:
            # Relative inner offsets: the wrapper holds the absolute offset of the last one. A
            # producer-side wrapper (offset 0, as not yet assigned) keeps them relative, as in
            # Java's reader.
            shift = max(msg.offset - messages[-1].offset, 0)
        log_append = msg.magic > 0 and msg.attributes & _TIMESTAMP_TYPE_MASK
        out: list[Record] = []
        for m in messages:
            if m.attributes & _COMPRESSION_MASK:
                raise MalformedDataError(f"message at offset {msg.offset} nests compression")
            ts = msg.timestamp if log_append else m.timestamp
            out.append(Record(m.offset + shift, ts, m.key(inner), m.value(inner), []))
        return out

    def __repr__(self) -> str:
        return (
            f"LegacyBatch(magic={self.magic}, offset={self._msg.offset}, size={self.size}, "
            f"compression={self.compression})"
        )
