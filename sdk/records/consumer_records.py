"""The consumer's decode path: a v2 batch straight to :class:`sdk.types.ConsumerRecord`.

:meth:`RecordBatch.records` builds generic ``Record`` tuples that a consumer would then turn
into ``ConsumerRecord`` objects in a second pass. :func:`decode_consumer_records` does it in
one pass over the record bytes: each record is parsed and its ``ConsumerRecord`` built at
once, with the serialized sizes taken from the length varints. Keys and values stay raw
bytes (the consumer applies its deserializers to what it hands out, so a failing
deserializer can name the record and keep the position).

Records are built with ``object.__new__`` and one store per slot: on CPython 3.11 that is
about a third cheaper than the dataclass ``__init__`` (specialised slot stores against a
Python-level call with eleven arguments). Every field is set, so the result is identical.

The cyclic garbage collector is paused while one batch is decoded. Every record is two
fresh container objects (the record and its header list), so a batch of thousands of records
would trigger a collection every 700 of them, each walking the records made so far; measured
on a consumer reading 1 MB batches, that was a third of the decode time. The records hold no
cycles, and the pause ends with the batch (a few milliseconds); if the collector was already
off, it is left alone.

Errors are those of the generic reader (``MalformedDataError`` for bad framing); the CRC is
the caller's business (``RecordBatch.validate_crc``). Legacy message sets stay on the
generic path.

The record loop has a compiled twin (``sdk/records/_fast.c``, picked by
``sdk.records.fast_path``): same arguments, same records, same errors and messages. It reads
``bytes`` only; anything else takes the pure loop.
"""

from __future__ import annotations

import gc

from sdk.records import fast_path
from sdk.records._varint import DEC1, LOW2, decode_varint
from sdk.records.errors import MalformedDataError
from sdk.records.header import TIMESTAMP_TYPE_MASK
from sdk.records.reader import RecordBatch, decode_headers
from sdk.types import ConsumerRecord, TimestampType

__all__ = ["decode_consumer_records"]

_gc_isenabled, _gc_disable, _gc_enable = gc.isenabled, gc.disable, gc.enable
_CREATE_TIME = TimestampType.CREATE_TIME
_LOG_APPEND_TIME = TimestampType.LOG_APPEND_TIME


def decode_consumer_records(batch: RecordBatch, topic: str, partition: int,
                            record_class: type[ConsumerRecord] = ConsumerRecord
                            ) -> list[ConsumerRecord]:
    """Every record of ``batch`` as a ``ConsumerRecord`` of ``topic``/``partition``.

    Offsets and timestamps are absolute; a LogAppendTime batch gives every record the
    batch's max timestamp; ``leader_epoch`` is the batch's partition leader epoch (None when
    negative). Same records, in the same order, as ``batch.records()``. ``record_class``
    is a ``ConsumerRecord`` subclass to build instead (the share consumer's); its own
    extra slots are left for the caller to set.
    """
    if _gc_isenabled():
        _gc_disable()
        try:
            return _decode_batch(batch, topic, partition, record_class)
        finally:
            _gc_enable()
    return _decode_batch(batch, topic, partition, record_class)


def _decode_batch(batch: RecordBatch, topic: str, partition: int,
                  cls: type[ConsumerRecord]) -> list[ConsumerRecord]:
    data, start, end = batch.record_bytes()
    epoch = batch.partition_leader_epoch
    loop = _compiled if _compiled is not None and type(data) is bytes else _decode_pure
    if batch.attributes & TIMESTAMP_TYPE_MASK:
        out = loop(data, start, end, batch.record_count, batch.base_offset,
                   batch.base_timestamp, topic, partition, _LOG_APPEND_TIME,
                   epoch if epoch >= 0 else None, cls)
        ts = batch.max_timestamp
        for rec in out:
            rec.timestamp = ts
        return out
    return loop(data, start, end, batch.record_count, batch.base_offset,
                batch.base_timestamp, topic, partition, _CREATE_TIME,
                epoch if epoch >= 0 else None, cls)


def _decode_pure(buf: bytes, pos: int, end: int, count: int, base_offset: int,
                 base_ts: int, topic: str, partition: int, ts_type: TimestampType,
                 epoch: int | None, cls: type[ConsumerRecord] = ConsumerRecord
                 ) -> list[ConsumerRecord]:
    """The hot loop: ``reader._decode_records`` with the record built in place. Varints of
    one and two bytes are decoded inline; longer ones take ``decode_varint``."""
    out: list[ConsumerRecord] = []
    append = out.append
    new = object.__new__
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
            rec = new(cls)
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
                rec.key = buf[pos : pos + n]
                pos += n
            elif n == -1:
                rec.key = None
            else:
                raise MalformedDataError(f"key length {n} is negative")
            rec.serialized_key_size = n
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
                rec.value = buf[pos : pos + n]
                pos += n
            elif n == -1:
                rec.value = None
            else:
                raise MalformedDataError(f"value length {n} is negative")
            rec.serialized_value_size = n
            # headers: a fresh list per record, since ConsumerRecord.headers is a list
            if buf[pos] == 0:
                rec.headers = []
                pos += 1
            else:
                rec.headers, pos = decode_headers(buf, pos, rec_end)
            if pos != rec_end:
                raise MalformedDataError(
                    f"record ends at offset {pos}, but its length says {rec_end}"
                )
            rec.topic = topic
            rec.partition = partition
            rec.offset = base_offset + od
            rec.timestamp = base_ts + td
            rec.timestamp_type = ts_type
            rec.leader_epoch = epoch
            append(rec)
    except IndexError:
        raise MalformedDataError(
            f"records end inside a record starting near offset {rec_end}"
        ) from None
    if pos != end:
        raise MalformedDataError(f"{end - pos} bytes follow the last of {count} records")
    return out


# The compiled loop when built (and not turned off by KAFKA_SDK_PURE_PYTHON); tests swap it.
_compiled = fast_path.compiled_decode
