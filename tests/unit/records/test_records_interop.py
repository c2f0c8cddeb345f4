"""Cross-checks with kafka-python's and aiokafka's record code, both directions, every codec.

Batches we build must read back identically through their readers, and batches (and legacy
magic 0/1 message sets) they build must read back identically through ours.
"""

from __future__ import annotations

import os
import struct
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdk.records import (
    Compression,
    LegacyBatch,
    Record,
    RecordBatchBuilder,
    TimestampType,
    read_batches,
)

kafka_codec = pytest.importorskip("kafka.codec")
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder  # noqa: E402
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder  # noqa: E402
from kafka.record.memory_records import MemoryRecords as KpRecords  # noqa: E402

aio_records = pytest.importorskip("aiokafka.record.memory_records")
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder  # noqa: E402

_KP_HAS = {
    Compression.NONE: True,
    Compression.GZIP: kafka_codec.has_gzip(),
    Compression.SNAPPY: kafka_codec.has_snappy(),
    Compression.LZ4: kafka_codec.has_lz4(),
    Compression.ZSTD: kafka_codec.has_zstd(),
}
CODECS = list(Compression)


def _kp_codec(codec: Compression) -> Compression:
    if not _KP_HAS[codec]:
        pytest.skip(f"kafka-python has no {codec.name.lower()} library installed")
    return codec


def _sample_records() -> list[tuple[int, int, bytes | None, bytes | None, list[Any]]]:
    out: list[tuple[int, int, bytes | None, bytes | None, list[Any]]] = []
    ts = 1_700_000_000_000
    for i in range(300):
        key = None if i % 7 == 0 else b"key-%d" % i
        value = None if i % 11 == 0 else os.urandom(i % 5) * (i % 97)
        headers = [("trace", b"%d" % i), ("none", None)] if i % 5 == 0 else []
        out.append((i, ts + (i % 13) - 6, key, value, headers))
    out.append((300, ts + 100_000, b"big", os.urandom(200) * 400, [("ü-key", b"")]))
    return out


SAMPLE = _sample_records()


def _ours(codec: int, records: list[Any], **kw: Any) -> bytes:
    b = RecordBatchBuilder(codec, **kw)
    for offset, ts, key, value, headers in records:
        b.append(offset, ts, key, value, headers)
    return b.build()


def _peer_build(
    builder_cls: type,
    codec: int,
    records: list[Any],
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    txn: bool = False,
) -> bytes:
    b = builder_cls(2, codec, txn, pid, epoch, seq, 1 << 30)
    for offset, ts, key, value, headers in records:
        assert b.append(offset, ts, key, value, headers) is not None
    return bytes(b.build())


def _peer_read(memory_records_cls: type, data: bytes) -> list[tuple[Any, list[Any]]]:
    """[(batch, [(offset, timestamp, key, value, headers), ...]), ...] via a peer's reader."""
    out = []
    recs = memory_records_cls(data)
    while (batch := recs.next_batch()) is not None:
        assert batch.validate_crc()
        out.append(
            (batch, [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch])
        )
    return out


def _expected(records: list[Any], base_offset: int = 0) -> list[Record]:
    return [Record(base_offset + o, ts, k, v, list(h)) for o, ts, k, v, h in records]


# --------------------------------------------------------------------------- ours -> peers


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_kafka_python_reads_our_batches(codec: Compression) -> None:
    _kp_codec(codec)
    data = _ours(
        codec,
        SAMPLE,
        producer_id=42,
        producer_epoch=3,
        base_sequence=17,
        is_transactional=True,
        base_offset=1000,
    )
    ((batch, records),) = _peer_read(KpRecords, data)
    assert batch.compression_type == codec
    assert (batch.base_offset, batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        1000,
        42,
        3,
        17,
    )
    assert batch.is_transactional and not batch.is_control_batch
    assert batch.last_offset_delta == 300
    assert records == [tuple(r) for r in _expected(SAMPLE, 1000)]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_aiokafka_reads_our_batches(codec: Compression) -> None:
    data = _ours(codec, SAMPLE, base_offset=5)
    ((batch, records),) = _peer_read(aio_records.MemoryRecords, data)
    assert batch.compression_type == codec
    assert records == [tuple(r) for r in _expected(SAMPLE, 5)]


# --------------------------------------------------------------------------- peers -> ours


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("peer", ["kafka-python", "aiokafka"])
def test_we_read_peer_batches(codec: Compression, peer: str) -> None:
    if peer == "kafka-python":
        _kp_codec(codec)
    builder = KpBuilder if peer == "kafka-python" else AioBuilder
    data = _peer_build(builder, codec, SAMPLE, pid=7, epoch=1, seq=99, txn=True)
    (batch,) = read_batches(data)
    batch.validate_crc()
    assert batch.compression in (codec, Compression.NONE)  # kafka-python drops useless codecs
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 1, 99)
    assert batch.is_transactional
    assert batch.records() == _expected(SAMPLE)


@settings(max_examples=40, deadline=None)
@given(
    codec=st.sampled_from([c for c in CODECS if _KP_HAS[c]]),
    records=st.lists(
        st.tuples(
            st.one_of(st.none(), st.binary(max_size=50)),
            st.one_of(st.none(), st.binary(max_size=500)),
            st.lists(
                st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))),
                max_size=3,
            ),
            st.integers(min_value=0, max_value=1 << 42),
        ),
        min_size=1,
        max_size=20,
    ),
)
def test_both_ways_with_kafka_python_property(codec: Compression, records: list[Any]) -> None:
    rows = [(i, ts, k, v, h) for i, (k, v, h, ts) in enumerate(records)]
    ((_, theirs),) = _peer_read(KpRecords, _ours(codec, rows))
    assert theirs == [tuple(r) for r in _expected(rows)]
    (batch,) = read_batches(_peer_build(KpBuilder, codec, rows))
    assert batch.records() == _expected(rows)


# --------------------------------------------------------------------------- legacy magic 0 / 1


def _legacy(magic: int, codec: int, rows: list[Any]) -> bytes:
    b = KpLegacyBuilder(magic, codec, 1 << 30)
    for offset, ts, key, value in rows:
        assert b.append(offset, ts, key, value) is not None
    return bytes(b.build())


LEGACY_ROWS = [
    (
        i,
        1_600_000_000_000 + i,
        None if i % 3 else b"k%d" % i,
        None if i == 4 else b"value %d" % i * (i + 1),
    )
    for i in range(10)
]


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_uncompressed_message_set(magic: int) -> None:
    data = b"".join(_legacy(magic, 0, [row]) for row in LEGACY_ROWS)
    batches = read_batches(data)
    assert len(batches) == len(LEGACY_ROWS)
    got = []
    for batch in batches:
        assert isinstance(batch, LegacyBatch) and batch.magic == magic
        batch.validate_crc()
        assert batch.record_count == 1 and batch.compression == 0
        assert batch.timestamp_type == (
            TimestampType.NO_TIMESTAMP_TYPE if magic == 0 else TimestampType.CREATE_TIME
        )
        got.extend(batch.records())
    assert got == [Record(o, ts if magic else -1, k, v, []) for o, ts, k, v in LEGACY_ROWS]
    assert got == _kp_legacy_read(data)


def _kp_legacy_read(data: bytes) -> list[Record]:
    """kafka-python's view of a message set (it says None where Java says -1 timestamps)."""
    out = []
    recs = KpRecords(data)
    while (batch := recs.next_batch()) is not None:
        out.extend(
            Record(r.offset, -1 if r.timestamp is None else r.timestamp, r.key, r.value, [])
            for r in batch
        )
    return out


# Magic 0 + lz4 needs xxhash in kafka-python; a hand-made test below covers it.
@pytest.mark.parametrize(
    ("magic", "codec"),
    [(0, 1), (0, 2), (1, 1), (1, 2), (1, 3)],
    ids=["v0-gzip", "v0-snappy", "v1-gzip", "v1-snappy", "v1-lz4"],
)
def test_legacy_compressed_wrapper(magic: int, codec: int) -> None:
    _kp_codec(Compression(codec))
    data = _legacy(magic, codec, LEGACY_ROWS)
    (batch,) = read_batches(data)
    batch.validate_crc()
    assert batch.compression == codec and batch.record_count == len(LEGACY_ROWS)
    want = [Record(o, ts if magic else -1, k, v, []) for o, ts, k, v in LEGACY_ROWS]
    assert batch.records() == want
    assert _kp_legacy_read(data) == want

    # As stored by a broker: the wrapper offset is absolute (the last inner offset for magic 1,
    # which keeps relative inner offsets; magic 0 inner offsets are absolute already).
    if magic == 1:
        stored = struct.pack(">q", 5009) + data[8:]  # the offset is outside the CRC
        (batch,) = read_batches(stored)
        batch.validate_crc()
        assert [r.offset for r in batch.records()] == list(range(5000, 5010))
        assert (batch.base_offset, batch.last_offset, batch.next_offset) == (5000, 5009, 5010)


def test_legacy_log_append_time_wrapper_sets_record_timestamps() -> None:
    data = bytearray(_legacy(1, 1, LEGACY_ROWS))
    data[17] |= 0x08  # LogAppendTime attribute on the wrapper
    data[18:26] = struct.pack(">q", 1234)
    struct.pack_into(">I", data, 12, zlib.crc32(bytes(data[16:])))
    (batch,) = read_batches(bytes(data))
    batch.validate_crc()
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert {r.timestamp for r in batch.records()} == {1234}


def _wrapper_message(magic: int, attributes: int, offset: int, value: bytes) -> bytes:
    """A legacy wrapper message by hand: offset, size, crc, magic, attributes, [ts], key, value."""
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", 0)
    body += struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(msg)) + msg


def test_legacy_magic0_lz4_with_kafka08_header_checksum() -> None:
    lz4_frame = pytest.importorskip("lz4.frame")
    from sdk.records.compression import _xxh32_short

    inner = _legacy(0, 0, LEGACY_ROWS)
    frame = bytearray(lz4_frame.compress(inner, store_size=False, block_linked=False))
    frame[6] = (_xxh32_short(bytes(frame[0:6])) >> 8) & 0xFF  # hashed over the magic too
    data = _wrapper_message(0, 3, 9, bytes(frame))
    (batch,) = read_batches(data)
    batch.validate_crc()
    assert batch.records() == [Record(o, -1, k, v, []) for o, ts, k, v in LEGACY_ROWS]
