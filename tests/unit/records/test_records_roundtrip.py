"""Build v2 batches and read them back: header fields, records, sizes, partial batches."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdk.records import (
    RECORD_BATCH_OVERHEAD,
    Compression,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    TimestampType,
    iter_batches,
    read_batches,
    record_size,
)

CODECS = list(Compression)

headers_st = st.lists(
    st.tuples(st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=20))), max_size=4
)
record_st = st.tuples(
    st.one_of(st.none(), st.binary(max_size=300)),  # key
    st.one_of(st.none(), st.binary(max_size=3000)),  # value
    headers_st,
    st.integers(min_value=0, max_value=1 << 44),  # timestamp
    st.integers(min_value=0, max_value=70),  # gap before this record's offset delta
)


@settings(max_examples=120, deadline=None)
@given(
    codec=st.sampled_from(CODECS),
    records=st.lists(record_st, min_size=1, max_size=40),
    base_offset=st.integers(min_value=0, max_value=1 << 40),
    producer=st.tuples(
        st.integers(min_value=-1, max_value=1 << 40),
        st.integers(min_value=-1, max_value=32767),
        st.integers(min_value=-1, max_value=(1 << 31) - 1),
    ),
    transactional=st.booleans(),
    epoch=st.integers(min_value=-1, max_value=1000),
)
def test_round_trip(
    codec: Compression,
    records: list[tuple],
    base_offset: int,
    producer: tuple[int, int, int],
    transactional: bool,
    epoch: int,
) -> None:
    pid, pepoch, seq = producer
    b = RecordBatchBuilder(
        codec,
        producer_id=pid,
        producer_epoch=pepoch,
        base_sequence=seq,
        is_transactional=transactional,
        base_offset=base_offset,
        partition_leader_epoch=epoch,
    )
    expected = []
    delta = -1
    for key, value, headers, ts, gap in records:
        delta += 1 + gap
        size_before = b.size_in_bytes()
        estimate = b.estimate_record_size(key, value, headers, timestamp_ms=ts, offset_delta=delta)
        assert b.append(delta, ts, key, value, headers) == delta
        assert b.size_in_bytes() - size_before == estimate  # exact when the timestamp is known
        expected.append(Record(base_offset + delta, ts, key, value, list(headers)))
    assert b.record_count == len(records)
    data = b.build()
    assert b.build() is data and b.size_in_bytes() == len(data)

    (batch,) = read_batches(data)
    assert isinstance(batch, RecordBatch)
    batch.validate_crc()
    assert batch.crc_matches()
    assert batch.magic == 2
    assert batch.size == len(data)
    assert batch.base_offset == base_offset
    assert batch.last_offset == base_offset + delta
    assert batch.last_offset_delta == delta
    assert batch.next_offset == base_offset + delta + 1
    assert batch.partition_leader_epoch == epoch
    assert batch.compression == codec
    assert batch.timestamp_type == TimestampType.CREATE_TIME
    assert batch.is_transactional == transactional
    assert not batch.is_control
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == producer
    assert batch.base_timestamp == records[0][3]
    assert batch.max_timestamp == max(r[3] for r in records)
    assert batch.record_count == len(records)
    assert batch.records() == expected
    assert list(batch) == expected
    # The same bytes through the other buffer types the reader accepts.
    for view in (bytearray(data), memoryview(data), memoryview(b"xx" + data)[2:]):
        (again,) = read_batches(view)
        again.validate_crc()
        assert again.records() == expected


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_many_batches_and_trailing_partial(codec: Compression) -> None:
    batches = []
    for n in range(1, 6):
        b = RecordBatchBuilder(codec, base_offset=n * 100)
        for i in range(n * 10):
            b.append(None, 1_700_000_000_000 + i, b"k%d" % i, b"v" * i, [("h", b"%d" % i)])
        batches.append(b.build())
    stream = b"".join(batches)
    whole = read_batches(stream)
    assert [x.base_offset for x in whole] == [100, 200, 300, 400, 500]
    assert [x.position for x in whole] == [sum(map(len, batches[:i])) for i in range(5)]
    # Every cut inside the last batch leaves the first four, as a consumer sees a fetch cut
    # at its size limit.
    cut_start = len(stream) - len(batches[-1])
    for cut in range(cut_start, len(stream)):
        got = read_batches(stream[:cut])
        assert [x.base_offset for x in got] == [100, 200, 300, 400]
    assert read_batches(b"") == []
    assert read_batches(stream[:16]) == []


def test_implicit_offsets_timestamps_and_nulls() -> None:
    b = RecordBatchBuilder()
    before = time.time_ns() // 1_000_000
    assert b.append(None, None, None, None) == 0
    assert b.append(None, 5, b"", b"") == 1  # earlier than the first: negative delta
    assert b.append(7, 1 << 50, b"k", None, [("empty", b""), ("null", None), ("ü", b"x")]) == 7
    assert b.append(None, 10, None, b"v") == 8
    after = time.time_ns() // 1_000_000
    (batch,) = read_batches(b.build())
    recs = batch.records()
    assert before <= recs[0].timestamp <= after
    assert recs[0][2:] == (None, None, [])
    assert recs[1] == Record(1, 5, b"", b"", [])
    assert recs[2] == Record(7, 1 << 50, b"k", None, [("empty", b""), ("null", None), ("ü", b"x")])
    assert recs[3] == Record(8, 10, None, b"v", [])
    assert batch.base_timestamp == recs[0].timestamp
    assert batch.max_timestamp == 1 << 50
    assert batch.last_offset_delta == 8 and batch.record_count == 4


def test_large_lengths_use_multibyte_varints() -> None:
    b = RecordBatchBuilder()
    big = bytes(range(256)) * 400  # 102400 bytes: past every precomputed table
    b.append(None, 0, big[:5000], big, [("k" * 200, big[:9000])])
    b.append(20_000, 10_000_000, None, None)  # offset and timestamp deltas past the tables
    (batch,) = read_batches(b.build())
    r0, r1 = batch.records()
    assert r0 == Record(0, 0, big[:5000], big, [("k" * 200, big[:9000])])
    assert r1 == Record(20_000, 10_000_000, None, None, [])


def test_record_size_matches_encoding() -> None:
    b = RecordBatchBuilder()
    b.append(None, 100, b"key", b"value", [("a", b"b")])
    size = b.size_in_bytes()
    assert size == RECORD_BATCH_OVERHEAD + record_size(0, 0, b"key", b"value", [("a", b"b")])


def test_has_room_for() -> None:
    b = RecordBatchBuilder()
    assert b.has_room_for(b"k", b"x" * 10_000, (), 100)  # the first record always fits
    b.append(None, 0, b"k", b"x" * 10_000)
    size = b.size_in_bytes()
    assert not b.has_room_for(None, b"y", (), size)
    need = b.estimate_record_size(b"k", b"v", [("h", b"1")], timestamp_ms=3)
    assert b.has_room_for(b"k", b"v", [("h", b"1")], size + need, timestamp_ms=3)
    assert not b.has_room_for(b"k", b"v", [("h", b"1")], size + need - 1, timestamp_ms=3)
    # Near the limit the exact size decides, not the fast upper bound.
    exact = b.estimate_record_size(b"k", b"v", (), timestamp_ms=0)
    assert b.has_room_for(b"k", b"v", (), size + exact, timestamp_ms=0)
    b.build()
    assert not b.has_room_for(None, None, (), 1 << 30)


def test_builder_rejects_misuse() -> None:
    b = RecordBatchBuilder()
    b.append(5, 0, None, b"v")
    with pytest.raises(ValueError, match="increasing"):
        b.append(5, 0, None, b"v")
    with pytest.raises(ValueError, match="increasing"):
        b.append(1 << 31, 0, None, b"v")
    with pytest.raises(TypeError):
        b.append(None, 0, "text key", b"v")  # type: ignore[arg-type]
    assert b.record_count == 1  # a failed append leaves the batch as it was
    b.build()
    with pytest.raises(RuntimeError):
        b.append(None, 0, None, None)
    with pytest.raises(RuntimeError):
        b.set_producer_state(1, 0, 0)
    with pytest.raises(ValueError):
        RecordBatchBuilder(timestamp_type=TimestampType.NO_TIMESTAMP_TYPE)
    with pytest.raises(ValueError):
        RecordBatchBuilder(timestamp_type=-1)  # the same, as a plain int
    with pytest.raises(ValueError):
        RecordBatchBuilder("brotli")


def test_builder_takes_members_ids_and_names_alike() -> None:
    # Members skip the conversions (the producer opens a builder per batch); ids and names
    # still go through them and give the same batch.
    built = set()
    for codec, ts_type in ((Compression.GZIP, TimestampType.LOG_APPEND_TIME), (1, 1),
                           ("gzip", True)):
        b = RecordBatchBuilder(codec, timestamp_type=ts_type)  # type: ignore[arg-type]
        b.append(None, 7, b"k", b"v")
        built.add(b.build())
    assert len(built) == 1
    (batch,) = read_batches(built.pop())
    assert batch.compression == Compression.GZIP
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME


def test_set_producer_state_and_log_append_builder() -> None:
    b = RecordBatchBuilder("zstd", timestamp_type=TimestampType.LOG_APPEND_TIME)
    b.append(None, 42, b"k", b"v")
    b.set_producer_state(9, 2, 77, is_transactional=True)
    (batch,) = read_batches(b.build())
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 2, 77)
    assert batch.is_transactional and batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert batch.records()[0].timestamp == 42


def test_empty_batch() -> None:
    data = RecordBatchBuilder().build()
    assert len(data) == RECORD_BATCH_OVERHEAD
    (batch,) = iter_batches(data)
    batch.validate_crc()
    assert batch.record_count == 0 and batch.records() == []
    assert batch.base_timestamp == -1 and batch.max_timestamp == -1


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_a_builder_writing_over_a_reused_buffer_builds_the_same_batch(codec: Compression) -> None:
    def fill(b: RecordBatchBuilder) -> bytes:
        for i in range(50):
            b.append(None, 1_700_000_000_000 + i, b"k%d" % i, b"v" * i, [("h", b"%d" % i)])
        b.append_values([b"x" * 40] * 40, [1_700_000_000_100] * 40, 0, 40, 1 << 20)
        return b.build()

    fresh = RecordBatchBuilder(codec)
    assert fresh.take_buffer() is None  # nothing to hand on before build
    expected = fill(fresh)
    spare = fresh.take_buffer()
    assert spare is not None and len(spare) >= RECORD_BATCH_OVERHEAD
    assert fresh.take_buffer() is None and fresh.build() == expected  # built bytes stay
    for buffer in (spare, bytearray(b"\xee" * 100_000), bytearray(b"\x01" * 10)):
        assert fill(RecordBatchBuilder(codec, buffer=buffer)) == expected
