"""decode_consumer_records (the consumer's one-pass path) against the generic reader.

Every test runs on both record loops: the pure one and the compiled one (sdk/records/_fast.c,
sdk.records.fast_path), so CI checks both whichever the environment would pick.
"""

from __future__ import annotations

import random

import pytest

from sdk.records import (
    MalformedDataError,
    RecordBatch,
    RecordBatchBuilder,
    consumer_records,
    fast_path,
    patch_batch,
)
from sdk.records.consumer_records import decode_consumer_records
from sdk.records.reader import RECORD_BATCH_OVERHEAD
from sdk.types import ConsumerRecord, TimestampType

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
BASE_TS = 1_700_000_000_000


@pytest.fixture(autouse=True, params=["pure", "compiled"])
def record_loop(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test with the pure loop, then with the compiled one (which must be built:
    ``pip install -e .`` with a C compiler; without one this fails rather than skip)."""
    if request.param == "pure":
        monkeypatch.setattr(consumer_records, "_compiled", None)
    else:
        compiled = fast_path.load_compiled()
        if compiled is None:
            pytest.fail("sdk.records._fast is not built (pip install -e . needs a C compiler)")
        monkeypatch.setattr(consumer_records, "_compiled", compiled)
    return str(request.param)


def _records(rng: random.Random, n: int) -> list[tuple]:
    out = []
    for i in range(n):
        key = None if i % 7 == 3 else rng.randbytes(rng.choice([0, 1, 5, 63, 64, 200]))
        value = None if i % 11 == 5 else rng.randbytes(
            rng.choice([0, 1, 63, 64, 100, 1000, 8191, 8192, 20_000]))
        headers = [] if i % 3 else [
            (f"h{j}\u00e9", None if j == 1 else rng.randbytes(rng.choice([0, 3, 70])))
            for j in range(rng.choice([1, 2, 3]))
        ]
        # timestamps before, at and far after the base; offset deltas with gaps
        ts = BASE_TS + rng.choice([0, 1, 63, 64, 5000, 10**9]) if i else BASE_TS
        out.append((i * 3 if i % 5 else i * 3 + 1, ts, key, value, headers))
    return out


def _batch(codec: str, records: list[tuple], *, base_offset: int = 1000, epoch: int = 4,
           log_append_time: int | None = None) -> RecordBatch:
    b = RecordBatchBuilder(codec)
    last = -1
    for delta, ts, key, value, headers in records:
        delta = max(delta, last + 1)
        last = delta
        b.append(delta, ts, key, value, headers)
    data = bytearray(b.build())
    patch_batch(data, base_offset=base_offset, partition_leader_epoch=epoch,
                log_append_time_ms=log_append_time)
    return RecordBatch(bytes(data))


def _expected(batch: RecordBatch, topic: str, partition: int) -> list[ConsumerRecord]:
    ts_type = (TimestampType.LOG_APPEND_TIME if batch.timestamp_type == 1
               else TimestampType.CREATE_TIME)
    epoch = batch.partition_leader_epoch
    return [
        ConsumerRecord(topic, partition, r.offset, r.key, r.value, r.headers, r.timestamp,
                       ts_type, -1 if r.key is None else len(r.key),
                       -1 if r.value is None else len(r.value), epoch if epoch >= 0 else None)
        for r in batch.records()
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_same_records_as_the_generic_reader(codec: str) -> None:
    rng = random.Random(codec)
    batch = _batch(codec, _records(rng, 60))
    got = decode_consumer_records(batch, "orders", 3)
    want = _expected(batch, "orders", 3)
    assert got == want
    assert all(type(r) is ConsumerRecord for r in got)
    assert all(r.timestamp_type is TimestampType.CREATE_TIME for r in got)
    assert got[0].leader_epoch == 4
    # headers are fresh lists, never shared between records
    assert len({id(r.headers) for r in got}) == len(got)


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_log_append_time_and_no_leader_epoch(codec: str) -> None:
    batch = _batch(codec, _records(random.Random(1), 20), epoch=-1,
                   log_append_time=BASE_TS + 42)
    got = decode_consumer_records(batch, "t", 0)
    assert got == _expected(batch, "t", 0)
    assert {r.timestamp for r in got} == {BASE_TS + 42}
    assert all(r.timestamp_type is TimestampType.LOG_APPEND_TIME for r in got)
    assert all(r.leader_epoch is None for r in got)


def test_a_batch_inside_a_larger_buffer_and_a_bytearray() -> None:
    batch = _batch("none", _records(random.Random(2), 10))
    raw = batch.to_bytes()
    for buf in (b"\x00" * 5 + raw, bytearray(b"\x00" * 5 + raw), memoryview(b"\x00" * 5 + raw)):
        inner = RecordBatch(buf, 5)
        assert decode_consumer_records(inner, "t", 1) == _expected(inner, "t", 1)


def test_empty_batch() -> None:
    b = RecordBatchBuilder("none")
    b.append(0, BASE_TS, None, None)
    data = bytearray(b.build())
    # a batch whose only record was compacted away keeps its header and 0 records
    data = data[:RECORD_BATCH_OVERHEAD]
    data[8:12] = (RECORD_BATCH_OVERHEAD - 12).to_bytes(4, "big")
    data[57:61] = (0).to_bytes(4, "big")
    batch = RecordBatch(bytes(data))
    assert decode_consumer_records(batch, "t", 0) == batch.records() == []


@pytest.mark.parametrize("cut", [1, 2, 10, 60])
def test_malformed_records_raise_like_the_generic_reader(cut: int) -> None:
    batch = _batch("none", _records(random.Random(3), 5))
    raw = bytearray(batch.to_bytes())
    # drop bytes from the records section but keep the declared count and length consistent
    raw = raw[:-cut]
    raw[8:12] = (len(raw) - 12).to_bytes(4, "big")
    broken = RecordBatch(bytes(raw))
    with pytest.raises(MalformedDataError) as generic:
        broken.records()
    with pytest.raises(MalformedDataError) as fast:
        decode_consumer_records(broken, "t", 0)
    assert str(fast.value) == str(generic.value)


def test_bad_record_count_raises() -> None:
    batch = _batch("none", _records(random.Random(4), 3))
    raw = bytearray(batch.to_bytes())
    raw[57:61] = (4).to_bytes(4, "big")  # one more record than present
    with pytest.raises(MalformedDataError):
        decode_consumer_records(RecordBatch(bytes(raw)), "t", 0)
    raw[57:61] = (2).to_bytes(4, "big")  # one fewer: bytes left over
    with pytest.raises(MalformedDataError, match="follow the last"):
        decode_consumer_records(RecordBatch(bytes(raw)), "t", 0)


@pytest.mark.parametrize("enabled", [True, False])
def test_the_garbage_collector_is_left_as_it_was(enabled: bool) -> None:
    """Decoding pauses the cyclic GC for one batch; its state afterwards is the caller's,
    also when the batch turns out to be malformed."""
    import gc

    good = _batch("none", _records(random.Random(7), 50))
    data = bytearray(good._buf)  # type: ignore[attr-defined]
    data[RECORD_BATCH_OVERHEAD] = 0x7F  # the first record's length now runs past the batch
    bad = RecordBatch(bytes(data), 0)  # type: ignore[call-arg]
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        assert len(decode_consumer_records(good, "t", 0)) == 50
        assert gc.isenabled() is enabled
        with pytest.raises(MalformedDataError):
            decode_consumer_records(bad, "t", 0)
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
