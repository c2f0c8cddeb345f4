"""Reading record batches: v2 batches here, legacy message sets in ``legacy``.

``iter_batches`` walks a buffer of concatenated batches (a Fetch response's records field, a
log segment) and stops silently at a trailing partial batch, as Kafka's consumers do: a
broker may cut the last batch at the fetch size limit. Constructing a ``RecordBatch`` only
unpacks its 61-byte header; records are decoded when asked for.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from sdk.records._varint import DEC1, LOW2, decode_varint
from sdk.records.compression import Compression, decompress
from sdk.records.control import ControlRecord, decode_control_record
from sdk.records.errors import CorruptRecordError, MalformedDataError
from sdk.records.header import (
    BATCH_HEADER,
    COMPRESSION_MASK,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    HEADER_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    TimestampType,
    batch_crc,
)
from sdk.records.legacy import MIN_MESSAGE_SIZE, LegacyBatch
from sdk.records.record import Record

__all__ = ["Batch", "RecordBatch", "iter_batches", "read_batches"]

Buffer = bytes | bytearray | memoryview

_INT32 = struct.Struct(">i")
_MIN_RECORD_SIZE = 7  # length, attributes, timestamp delta, offset delta, key, value, headers


class RecordBatch:
    """A v2 record batch inside a buffer: header fields as attributes, records on demand."""

    __slots__ = (
        "_buf",
        "attributes",
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "crc",
        "last_offset_delta",
        "magic",
        "max_timestamp",
        "partition_leader_epoch",
        "position",
        "producer_epoch",
        "producer_id",
        "record_count",
        "size",
    )

    def __init__(self, buf: Buffer, pos: int = 0) -> None:
        if pos < 0 or len(buf) - pos < RECORD_BATCH_OVERHEAD:
            raise MalformedDataError(
                f"v2 batch header at offset {pos} needs {RECORD_BATCH_OVERHEAD} bytes; "
                f"{max(len(buf) - pos, 0)} remain"
            )
        (
            self.base_offset,
            length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.record_count,
        ) = BATCH_HEADER.unpack_from(buf, pos)
        if self.magic != 2:
            raise MalformedDataError(f"batch at offset {pos} has magic {self.magic}, not 2")
        size = length + LOG_OVERHEAD
        if size < RECORD_BATCH_OVERHEAD or pos + size > len(buf):
            raise MalformedDataError(
                f"batch at offset {pos} declares {size} bytes; "
                f"{len(buf) - pos} remain and the header alone is {RECORD_BATCH_OVERHEAD}"
            )
        self._buf = buf
        self.position = pos
        self.size = size

    # ------------------------------------------------------------------ header views

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        """Set by compaction: ``base_timestamp`` then holds the delete horizon (KIP-534)."""
        return bool(self.attributes & DELETE_HORIZON_MASK)

    def to_bytes(self) -> bytes:
        return bytes(memoryview(self._buf)[self.position : self.position + self.size])

    # ------------------------------------------------------------------ checks

    def crc_matches(self) -> bool:
        return batch_crc(self._buf, self.position, self.size) == self.crc

    def validate_crc(self) -> None:
        """Raise ``CorruptRecordError`` when the stored CRC-32C does not match the bytes."""
        actual = batch_crc(self._buf, self.position, self.size)
        if actual != self.crc:
            raise CorruptRecordError(
                f"batch at offset {self.base_offset}: stored CRC {self.crc:#010x} != "
                f"computed {actual:#010x}"
            )

    # ------------------------------------------------------------------ records

    def record_bytes(self) -> tuple[bytes, int, int]:
        """``(data, start, end)``: the records section as ``bytes`` (decompressed if the
        batch is compressed; the original buffer when it already is ``bytes``), after
        checking that ``record_count`` can fit in it."""
        buf = self._buf
        start = self.position + RECORD_BATCH_OVERHEAD
        end = self.position + self.size
        codec = self.attributes & COMPRESSION_MASK
        if codec != Compression.NONE:
            data = decompress(codec, bytes(memoryview(buf)[start:end]))
            start, end = 0, len(data)
        elif type(buf) is bytes:
            data = buf
        else:
            data = bytes(memoryview(buf)[start:end])
            start, end = 0, len(data)
        count = self.record_count
        if count < 0 or count * _MIN_RECORD_SIZE > end - start:
            raise MalformedDataError(
                f"batch at offset {self.base_offset} claims {count} records in {end - start} bytes"
            )
        return data, start, end

    def records(self) -> list[Record]:
        """Decode every record. Offsets and timestamps are absolute."""
        data, start, end = self.record_bytes()
        out = _decode_records(data, start, end, self.record_count, self.base_offset,
                              self.base_timestamp)
        if self.attributes & TIMESTAMP_TYPE_MASK:
            # LogAppendTime: every record takes the time the broker stamped on the batch.
            ts = self.max_timestamp
            out = [r._replace(timestamp=ts) for r in out]
        return out

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def control_record(self) -> ControlRecord:
        """Decode this control batch's record (a transaction marker or a KRaft record)."""
        if not self.attributes & CONTROL_MASK:
            raise MalformedDataError(f"batch at offset {self.base_offset} is not a control batch")
        records = self.records()
        if not records:
            raise MalformedDataError(f"control batch at offset {self.base_offset} has no record")
        r = records[0]
        return decode_control_record(r.offset, r.timestamp, r.key, r.value)

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, records={self.record_count}, "
            f"size={self.size}, compression={self.compression}, "
            f"transactional={self.is_transactional}, control={self.is_control})"
        )


# Either kind of batch iter_batches yields; both offer the same header attributes and records().
Batch = RecordBatch | LegacyBatch


def decode_headers(buf: bytes, pos: int, end: int) -> tuple[list[tuple[str, bytes | None]], int]:
    n, pos = decode_varint(buf, pos, end)
    if n < 0 or n * 2 > end - pos:  # each header takes at least two length bytes
        raise MalformedDataError(f"record claims {n} headers in {end - pos} bytes")
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(n):
        kl, pos = decode_varint(buf, pos, end)
        if kl < 0 or pos + kl > end:
            raise MalformedDataError(f"header key length {kl} is negative or past the record")
        try:
            hkey = str(buf[pos : pos + kl], "utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedDataError(f"header key is not UTF-8: {exc}") from None
        pos += kl
        vl, pos = decode_varint(buf, pos, end)
        if vl < 0:
            if vl != -1:
                raise MalformedDataError(f"header value length {vl} is negative")
            headers.append((hkey, None))
        else:
            if pos + vl > end:
                raise MalformedDataError(f"header value of {vl} bytes runs past the record")
            headers.append((hkey, buf[pos : pos + vl]))
            pos += vl
    return headers, pos


def _decode_records(
    buf: bytes, pos: int, end: int, count: int, base_offset: int, base_ts: int
) -> list[Record]:
    """The hot loop. Varints of one and two bytes (lengths up to 8191, deltas up to 63 or
    8191) are decoded inline; longer ones take ``decode_varint``. Truncation shows up as an
    IndexError or as a record not ending where its length said, both turned into
    ``MalformedDataError``."""
    out: list[Record] = []
    append = out.append
    new = tuple.__new__
    rec_cls = Record
    dec1 = DEC1
    lo2 = LOW2
    slow = decode_varint
    rec_end = pos
    try:
        for _ in range(count):
            # record length
            b = buf[pos]
            if b < 128:
                ln = dec1[b]
                pos += 1
            else:
                ln = lo2[b]
                c = buf[pos + 1]
                if c < 128 and ln >= 0:
                    ln |= c << 6
                    pos += 2
                else:
                    ln, pos = slow(buf, pos, end)
            rec_end = pos + ln
            if ln < 6 or rec_end > end:
                raise MalformedDataError(
                    f"record length {ln} at offset {pos} is too short or runs past the batch"
                )
            # attributes (unused), then timestamp delta
            b = buf[pos + 1]
            if b < 128:
                td = dec1[b]
                pos += 2
            else:
                td, pos = slow(buf, pos + 1, rec_end)
            # offset delta
            b = buf[pos]
            if b < 128:
                od = dec1[b]
                pos += 1
            else:
                od = lo2[b]
                c = buf[pos + 1]
                if c < 128 and od >= 0:
                    od |= c << 6
                    pos += 2
                else:
                    od, pos = slow(buf, pos, rec_end)
            # key
            b = buf[pos]
            if b < 128:
                n = dec1[b]
                pos += 1
            else:
                n = lo2[b]
                c = buf[pos + 1]
                if c < 128 and n >= 0:
                    n |= c << 6
                    pos += 2
                else:
                    n, pos = slow(buf, pos, rec_end)
            if n >= 0:
                key: bytes | None = buf[pos : pos + n]
                pos += n
            elif n == -1:
                key = None
            else:
                raise MalformedDataError(f"key length {n} is negative")
            # value
            b = buf[pos]
            if b < 128:
                n = dec1[b]
                pos += 1
            else:
                n = lo2[b]
                c = buf[pos + 1]
                if c < 128 and n >= 0:
                    n |= c << 6
                    pos += 2
                else:
                    n, pos = slow(buf, pos, rec_end)
            if n >= 0:
                value: bytes | None = buf[pos : pos + n]
                pos += n
            elif n == -1:
                value = None
            else:
                raise MalformedDataError(f"value length {n} is negative")
            # headers
            if buf[pos] == 0:
                headers: list[tuple[str, bytes | None]] = []
                pos += 1
            else:
                headers, pos = decode_headers(buf, pos, rec_end)
            if pos != rec_end:
                raise MalformedDataError(
                    f"record ends at offset {pos}, but its length says {rec_end}"
                )
            append(new(rec_cls, (base_offset + od, base_ts + td, key, value, headers)))
    except IndexError:
        raise MalformedDataError(
            f"records end inside a record starting near offset {rec_end}"
        ) from None
    if pos != end:
        raise MalformedDataError(f"{end - pos} bytes follow the last of {count} records")
    return out


def _open_batch(data: Buffer, pos: int, magic: int) -> RecordBatch | LegacyBatch:
    if magic == 2:
        return RecordBatch(data, pos)
    if magic == 0 or magic == 1:
        return LegacyBatch(data, pos)
    raise MalformedDataError(f"batch at offset {pos} has unknown magic {magic}")


def iter_batches(data: Buffer, start: int = 0) -> Iterator[RecordBatch | LegacyBatch]:
    """Yield each complete batch in ``data``; a trailing partial batch is ignored."""
    pos = start
    n = len(data)
    while n - pos >= HEADER_UP_TO_MAGIC:
        (length,) = _INT32.unpack_from(data, pos + 8)
        if length < MIN_MESSAGE_SIZE:
            raise MalformedDataError(
                f"batch at offset {pos} declares {length} bytes, below any format's minimum"
            )
        size = length + LOG_OVERHEAD
        if pos + size > n:
            return  # partial batch at the end, cut by the fetch size limit
        yield _open_batch(data, pos, data[pos + MAGIC_OFFSET])
        pos += size


def read_batches(data: Buffer, start: int = 0) -> list[RecordBatch | LegacyBatch]:
    return list(iter_batches(data, start))
