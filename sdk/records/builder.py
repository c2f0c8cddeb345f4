"""RecordBatch v2 builder: records are encoded into the batch buffer as they are appended.

The buffer starts with 61 placeholder bytes for the header; ``build()`` fills them in, so an
uncompressed batch is never copied record by record. With a codec, the records region is
compressed once at ``build()``, from a view of the buffer. A producer reuses the working
buffer of a built batch for a new one (``take_buffer``, ``buffer=``): the batch is its
first ``_size`` bytes, written over whatever the buffer held. Size checks for a producer
accumulator use the uncompressed size, an upper bound for any useful compression.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections.abc import Sequence

from sdk.records import _varint, fast_path, header
from sdk.records.compression import Compression, compress
from sdk.records.control import ControlType, encode_control_key, encode_marker_value
from sdk.records.header import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER,
    CONTROL_MASK,
    CRC_OFFSET,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    TimestampType,
)

__all__ = ["Header", "RecordBatchBuilder", "build_control_batch", "record_size"]

Header = tuple[str, bytes | None]

_INT32_MAX = (1 << 31) - 1
# Record bytes besides key, value and headers, at most: length 5, attributes 1, timestamp
# delta 10, offset delta 5, key and value lengths 5 each, header count 1.
_MAX_OVERHEAD = 32
_ZZ = _varint.ZZ
_SMALL = _varint.SMALL
_ATTR_TS = _varint.ATTR_TS
_TS_SMALL = _varint.TS_SMALL
_encode = _varint.encode_varint
# Bulk appends join their encoded records into the batch in pieces of about this size,
# and encode with slice assignments when at least _BULK_MIN records may fit (fewer do not
# repay the set-up).
_JOIN_BYTES = 32768
_BULK_MIN = 32
_vsize = _varint.varint_size
# The compiled append_values loop (sdk/records/_fast.c) when built and not turned off by
# KAFKA_SDK_PURE_PYTHON; same bytes as the pure loop (tests/unit/records/test_records_fast_path.py).
_fast_encode = fast_path.compiled_encode_values


def _value_record_shape(n: int, td: int, od: int) -> tuple[bytes, bytes, int, int]:
    """For ``append_values``: ``(lead, tail, record size, first wider offset delta)`` of
    keyless, header-less records of ``n`` value bytes at timestamp delta ``td`` from offset
    delta ``od`` on. The lead starts with the previous record's header count (0)."""
    width = len(_ZZ[od]) if od < _SMALL else len(_encode(od))
    head = _ATTR_TS[td] if 0 <= td < _TS_SMALL else b"\x00" + _encode(td)
    vpre = _ZZ[n] if n < _SMALL else _encode(n)
    # attributes + timestamp delta, offset delta, null key, value length, value, no headers
    body = len(head) + width + 1 + len(vpre) + n + 1
    lead = b"\x00" + (_ZZ[body] if body < _SMALL else _encode(body)) + head
    return lead, b"\x01" + vpre, len(lead) - 1 - len(head) + body, 1 << (7 * width - 1)


def _join_into(buf: bytearray, used: int, parts: list[bytes], cut: bool) -> int:
    """For ``append_values``: write ``parts`` at ``buf[used:]`` (the first without its
    first byte with ``cut``), empty the list, and return the new end."""
    if cut:
        parts[0] = parts[0][1:]
    joined = b"".join(parts)
    end = used + len(joined)
    buf[used:end] = joined
    parts.clear()
    return end


def _encode_headers(headers: Sequence[Header]) -> bytes:
    parts = [_encode(len(headers))]
    append = parts.append
    for hkey, hvalue in headers:
        kb = hkey.encode() if isinstance(hkey, str) else bytes(hkey)
        append(_encode(len(kb)))
        append(kb)
        if hvalue is None:
            append(b"\x01")  # zig-zag -1: null header value
        else:
            append(_encode(len(hvalue)))
            append(hvalue)
    return b"".join(parts)


def _headers_size(headers: Sequence[Header]) -> int:
    size = _vsize(len(headers))
    for hkey, hvalue in headers:
        n = len(hkey.encode()) if isinstance(hkey, str) else len(hkey)
        size += _vsize(n) + n
        size += 1 if hvalue is None else _vsize(len(hvalue)) + len(hvalue)
    return size


def record_size(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header] = (),
) -> int:
    """Exact encoded size of one record, its length prefix included."""
    body = 1 + _vsize(timestamp_delta) + _vsize(offset_delta)
    body += 1 if key is None else _vsize(len(key)) + len(key)
    body += 1 if value is None else _vsize(len(value)) + len(value)
    body += _headers_size(headers) if headers else 1
    return _vsize(body) + body


class RecordBatchBuilder:
    """Accumulates records into one v2 batch.

    ``append`` encodes each record straight into the buffer; ``build`` (alias ``close``)
    writes the header, compresses the records region and computes the CRC, once: later
    calls return the same bytes.
    """

    __slots__ = (
        "_base_offset",
        "_base_sequence",
        "_base_ts",
        "_buf",
        "_built",
        "_codec",
        "_count",
        "_is_control",
        "_is_transactional",
        "_level",
        "_max_ts",
        "_next_delta",
        "_partition_leader_epoch",
        "_producer_epoch",
        "_producer_id",
        "_size",
        "_timestamp_type",
    )

    def __init__(
        self,
        compression: int | str | Compression = Compression.NONE,
        *,
        compression_level: int | None = None,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        is_control: bool = False,
        timestamp_type: int = TimestampType.CREATE_TIME,
        base_offset: int = 0,
        partition_leader_epoch: int = -1,
        buffer: bytearray | None = None,
    ) -> None:
        # Members pass as they are: the producer opens a builder per batch, and two enum
        # conversions were a measurable share of opening one (16 KB batches of 1 KB).
        self._codec = (compression if type(compression) is Compression
                       else Compression.parse(compression))
        self._level = compression_level
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._is_transactional = bool(is_transactional)
        self._is_control = bool(is_control)
        if type(timestamp_type) is not TimestampType:
            if timestamp_type not in (TimestampType.CREATE_TIME,
                                      TimestampType.LOG_APPEND_TIME):
                raise ValueError(f"v2 batches have no timestamp type {timestamp_type}")
            timestamp_type = TimestampType(timestamp_type)
        elif timestamp_type is TimestampType.NO_TIMESTAMP_TYPE:
            raise ValueError(f"v2 batches have no timestamp type {timestamp_type}")
        self._timestamp_type = timestamp_type
        self._base_offset = base_offset
        self._partition_leader_epoch = partition_leader_epoch
        # The working buffer; only its first _size bytes are the batch. A reused one (see
        # take_buffer) is written over in place: its pages are already mapped, while a fresh
        # ~1 MB buffer per batch page-faulted as the heap was trimmed and grown again.
        if buffer is None:
            buffer = bytearray(RECORD_BATCH_OVERHEAD)
        elif len(buffer) < RECORD_BATCH_OVERHEAD:
            buffer[len(buffer):] = bytes(RECORD_BATCH_OVERHEAD - len(buffer))
        self._buf = buffer
        self._size = RECORD_BATCH_OVERHEAD
        self._count = 0
        self._next_delta = 0
        self._base_ts = -1
        self._max_ts = -1
        self._built: bytes | None = None

    # ------------------------------------------------------------------ appending

    def append(
        self,
        offset_delta: int | None,
        timestamp_ms: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] = (),
    ) -> int:
        """Encode one record into the batch and return its offset delta.

        ``offset_delta=None`` takes the next one (previous + 1); an explicit delta must be
        greater than the previous one. ``timestamp_ms=None`` means now.
        """
        if self._built is not None:
            raise RuntimeError("cannot append to a batch that is already built")
        od = self._next_delta
        if offset_delta is not None:
            if offset_delta < od or offset_delta > _INT32_MAX:
                raise ValueError(
                    f"offset delta {offset_delta} must be increasing (next is {od}) and fit int32"
                )
            od = offset_delta
        if timestamp_ms is None:
            timestamp_ms = time.time_ns() // 1_000_000
        td = timestamp_ms - self._base_ts if self._count else 0
        zz = _ZZ
        small = _SMALL
        if key is None:
            kpre = b"\x01"  # zig-zag -1: null
            key = b""
        else:
            n = len(key)
            kpre = zz[n] if n < small else _encode(n)
        if value is None:
            vpre = b"\x01"
            value = b""
        else:
            n = len(value)
            vpre = zz[n] if n < small else _encode(n)
        body = b"".join(
            (
                _ATTR_TS[td] if 0 <= td < _TS_SMALL else b"\x00" + _encode(td),
                zz[od] if od < small else _encode(od),
                kpre,
                key,
                vpre,
                value,
                _encode_headers(headers) if headers else b"\x00",
            )
        )
        n = len(body)
        size = self._size
        prefix = zz[n] if n < small else _encode(n)
        end = size + len(prefix)
        self._buf[size:end] = prefix  # in place, or growing the buffer past its end
        self._buf[end:end + n] = body
        self._size = end + n
        # State changes only after the record encoded: a bad argument leaves the batch intact.
        if self._count:
            if timestamp_ms > self._max_ts:
                self._max_ts = timestamp_ms
        else:
            self._base_ts = self._max_ts = timestamp_ms
        self._count += 1
        self._next_delta = od + 1
        return od

    def append_values(
        self, values: Sequence[bytes], timestamps: Sequence[int], start: int, stop: int,
        max_bytes: int,
    ) -> int:
        """Encode keyless, header-less records ``values[start:stop]`` in one pass.

        ``timestamps`` holds one per value, indexed like ``values``. Stops before the first
        record that would take the batch past ``max_bytes`` (uncompressed; an empty batch
        takes at least one record) and returns the index reached. This is :meth:`append`
        for a producer's bulk paths: no method call per record, and the length prefix,
        timestamp delta and value length are reused while they repeat (same value size,
        same millisecond, same offset-delta width), as they mostly do.
        """
        if self._built is not None:
            raise RuntimeError("cannot append to a batch that is already built")
        if start >= stop:
            return start
        base = self._base_ts if self._count else timestamps[start]
        if (_fast_encode is not None and type(values) is list and type(timestamps) is list
                and type(self._buf) is bytearray):
            # None: an input the compiled loop leaves to this one (not bytes, past int64)
            got: tuple[int, int, int, int] | None = _fast_encode(
                self._buf, self._size, values, timestamps, start, stop, max_bytes - self._size,
                base, self._next_delta, self._count)
            if got is not None:
                return self._appended_values(*got, base=base)
        zz, small, encode, shape = _ZZ, _SMALL, _encode, _value_record_shape

        # The batch's state changes only at the end: an exception (a value that is not
        # bytes) leaves it as it was, whatever was written past _size.
        buf = self._buf
        used = self._size
        room = max_bytes - used
        od = first_od = self._next_delta
        parts: list[bytes] = []
        extend = parts.extend
        # Each record goes in as (lead, offset delta, tail, value). The lead starts with
        # the previous record's header count (0), so a record is four parts, not five; the
        # first lead's extra byte is cut off and the last record's count added at the end.
        # Parts are joined into the batch every ~_JOIN_BYTES: one join of a whole large
        # batch costs page faults (a fresh mmap'd block each time), 10x the encoding.
        # Whether the records are uniform (see below) is checked once per call: checking
        # per piece cost a third of the encoding at 1 KB values.
        cut = True
        last_n = last_ts = -1
        wider_at = 0  # the first offset delta whose varint is wider than the last one's
        lead = tail = b""
        record_size = 0
        top = -1 << 63  # the largest timestamp met, and the record it came from
        top_at = -1
        # Records that may fit: each is at least 7 bytes more than its value.
        end = start + max(room, 0) // (len(values[start]) + 7) + 1
        if end > stop:
            end = stop
        count = end - start
        uniform = False
        if count >= _BULK_MIN:
            chunk = values[start:end]
            stamps = timestamps[start:end]
            size = len(chunk[0])
            uniform = list(map(len, chunk)).count(size) == count and (
                stamps.count(stamps[0]) == count or stamps == sorted(stamps))
        flush_at = room - _JOIN_BYTES  # join the parts into the buffer when room gets here
        i = start
        if uniform:
            # Values of one size in timestamp order (the usual case): a millisecond's
            # records at a time, by C-level slice assignments. A record that does not fit
            # ends the batch: `end` is past the last one that can.
            pos = 0
            while pos < count:
                ts = stamps[pos]
                group_end = bisect_right(stamps, ts, pos)  # this millisecond's
                while pos < group_end:
                    if ts != last_ts or od >= wider_at:
                        last_ts = ts
                        lead, tail, record_size, wider_at = shape(size, ts - base, od)
                    want = min(group_end - pos, wider_at - od)
                    fit = room // record_size if room >= 0 else 0
                    if not fit and od == first_od and not self._count:
                        fit = 1  # an empty batch takes one record in any case
                    take = min(want, fit)
                    if take:
                        # Four strided slice assignments: C loops, no tuples.
                        run = [lead] * (4 * take)
                        run[1::4] = (zz[od:od + take] if od + take <= small
                                     else [encode(x) for x in range(od, od + take)])
                        run[2::4] = [tail] * take
                        run[3::4] = chunk[pos:pos + take]
                        extend(run)
                        room -= take * record_size
                        od += take
                        pos += take
                        if ts > top:
                            top = ts
                        if room <= flush_at:
                            used = _join_into(buf, used, parts, cut)
                            cut = False
                            flush_at = room - _JOIN_BYTES
                    if take < want:
                        pos = count  # full
                        break
            i = start + (od - first_od)
        else:
            while i < stop:
                value = values[i]
                ts = timestamps[i]
                n = len(value)
                odb = zz[od] if od < small else encode(od)
                if n != last_n or ts != last_ts or od >= wider_at:
                    last_n, last_ts = n, ts
                    lead, tail, record_size, wider_at = shape(n, ts - base, od)
                    if ts > top:
                        top, top_at = ts, od
                room -= record_size
                if room < 0 and (od > first_od or self._count):
                    break  # full
                extend((lead, odb, tail, value))
                od += 1
                i += 1
                if room <= flush_at:
                    used = _join_into(buf, used, parts, cut)
                    cut = False
                    flush_at = room - _JOIN_BYTES
        if parts:
            used = _join_into(buf, used, parts, cut)
        if od == first_od:
            return i
        buf[used:used + 1] = b"\x00"
        self._size = used + 1
        if top_at >= od:  # the record that raised it did not fit
            top = max(timestamps[start:i])
        if self._count:
            if top > self._max_ts:
                self._max_ts = top
        else:
            self._base_ts = base
            self._max_ts = top
        self._count += od - first_od
        self._next_delta = od
        return i

    def _appended_values(self, i: int, used: int, od: int, top: int, base: int) -> int:
        """The batch's state after the compiled ``append_values`` loop wrote records up to
        ``used`` (offset deltas up to ``od``, largest timestamp ``top``); returns ``i``."""
        first_od = self._next_delta
        if od == first_od:
            return i
        self._size = used
        if self._count:
            if top > self._max_ts:
                self._max_ts = top
        else:
            self._base_ts = base
            self._max_ts = top
        self._count += od - first_od
        self._next_delta = od
        return i

    def estimate_record_size(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] = (),
        timestamp_ms: int | None = None,
        offset_delta: int | None = None,
    ) -> int:
        """Bytes the next record will add (exact when ``timestamp_ms`` is given)."""
        if not self._count:
            td = 0  # the first record defines the base timestamp
        elif timestamp_ms is None:
            td = 1 << 19  # assume a 3-byte delta: up to ~17 minutes after the first record
        else:
            td = timestamp_ms - self._base_ts
        od = self._next_delta if offset_delta is None else offset_delta
        return record_size(od, td, key, value, headers)

    def has_room_for(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
        max_bytes: int,
        timestamp_ms: int | None = None,
    ) -> bool:
        """Would the batch stay within ``max_bytes`` (uncompressed) with this record?

        As in Kafka, an empty batch always has room: one record larger than the batch size
        still gets its own batch (the request size limit is checked elsewhere).
        """
        if self._built is not None:
            return False
        if not self._count:
            return True
        if not headers:
            # Fast accept: key and value plus the largest possible record overhead fit.
            n = self._size + _MAX_OVERHEAD
            if key is not None:
                n += len(key)
            if value is not None:
                n += len(value)
            if n <= max_bytes:
                return True
        size = self._size + self.estimate_record_size(key, value, headers, timestamp_ms)
        return size <= max_bytes

    # ------------------------------------------------------------------ state

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def last_offset_delta(self) -> int:
        return self._next_delta - 1

    @property
    def base_timestamp(self) -> int:
        return self._base_ts

    @property
    def max_timestamp(self) -> int:
        return self._max_ts

    @property
    def compression(self) -> Compression:
        return self._codec

    @property
    def producer_id(self) -> int:
        return self._producer_id

    @property
    def producer_epoch(self) -> int:
        return self._producer_epoch

    @property
    def base_sequence(self) -> int:
        return self._base_sequence

    @property
    def is_built(self) -> bool:
        return self._built is not None

    def size_in_bytes(self) -> int:
        """Current batch size: header plus uncompressed records, or the built size."""
        return len(self._built) if self._built is not None else self._size

    def compressed_size(self) -> int:
        """The size the batch would have if built now: its records region is compressed
        (and the result dropped). For a producer learning a topic's compression ratio from
        its first full batch, before the batches after it open."""
        if not self._codec:
            return self._size
        return RECORD_BATCH_OVERHEAD + len(self._compressed_records())

    def _compressed_records(self) -> bytes:
        with memoryview(self._buf) as view:  # no copy of the records region
            return compress(self._codec, view[RECORD_BATCH_OVERHEAD:self._size], self._level)

    def set_producer_state(
        self,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        is_transactional: bool | None = None,
    ) -> None:
        """Set idempotence fields before ``build`` (a producer assigns sequences at drain)."""
        if self._built is not None:
            raise RuntimeError("producer state of a built batch is fixed; use patch_producer_state")
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        if is_transactional is not None:
            self._is_transactional = bool(is_transactional)

    # ------------------------------------------------------------------ building

    def build(self) -> bytes:
        if self._built is not None:
            return self._built
        buf = self._buf
        size = self._size
        if self._codec:
            records = self._compressed_records()
            buf = bytearray(RECORD_BATCH_OVERHEAD)
            buf += records
            size = len(buf)
        attributes: int = self._codec
        if self._timestamp_type == TimestampType.LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_MASK
        if self._is_transactional:
            attributes |= TRANSACTIONAL_MASK
        if self._is_control:
            attributes |= CONTROL_MASK
        BATCH_HEADER.pack_into(
            buf,
            0,
            self._base_offset,
            size - LOG_OVERHEAD,
            self._partition_leader_epoch,
            2,  # magic
            0,  # crc, computed below over the filled-in bytes
            attributes,
            max(self._next_delta - 1, 0),
            self._base_ts,
            self._max_ts,
            self._producer_id,
            self._producer_epoch,
            self._base_sequence,
            self._count,
        )
        with memoryview(buf) as view:
            crc = header.crc32c(view[ATTRIBUTES_OFFSET:size])
            buf[CRC_OFFSET : CRC_OFFSET + 4] = crc.to_bytes(4, "big")
            self._built = bytes(view[:size])
        return self._built

    close = build

    def take_buffer(self) -> bytearray | None:
        """After ``build``: the working buffer, for another builder to reuse (None before
        ``build`` or once taken). The builder keeps only its built bytes."""
        if self._built is None:
            return None
        buf, self._buf = self._buf, bytearray()
        return buf if buf else None


def build_control_batch(
    control_type: int,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    *,
    timestamp_ms: int | None = None,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transaction marker batch (COMMIT or ABORT) as a transaction coordinator writes it."""
    if control_type not in (ControlType.ABORT, ControlType.COMMIT):
        raise ValueError(
            f"only transaction markers (ABORT=0, COMMIT=1) are built, not {control_type}"
        )
    builder = RecordBatchBuilder(
        Compression.NONE,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
    )
    builder.append(
        0,
        timestamp_ms,
        encode_control_key(control_type),
        encode_marker_value(coordinator_epoch),
    )
    return builder.build()
