"""RecordAccumulator and BufferPool without a network: linger, full batches, back-pressure."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from typing import Any

import pytest

from sdk.errors import KafkaTimeoutError, MessageTooLargeError, ProducerClosedError
from sdk.net.metadata import ClusterMetadata
from sdk.producer.accumulator import (
    BATCH_OVERHEAD,
    BufferPool,
    NeedMemory,
    RecordAccumulator,
    record_size_bound,
)
from sdk.producer.batch import RecordFuture
from sdk.producer.partitioner import DefaultPartitioner
from sdk.protocol.messages.metadata import MetadataResponse
from sdk.records.builder import record_size

PARTS = (0, 1, 2)


class Wakes:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


def three_partitions() -> ClusterMetadata:
    R = MetadataResponse
    md = ClusterMetadata()
    md.apply(R(brokers=[R.MetadataResponseBroker(node_id=1, host="h", port=1)], topics=[
        R.MetadataResponseTopic(name="t", partitions=[
            R.MetadataResponsePartition(partition_index=p, leader_id=1) for p in PARTS])]))
    return md


def make(batch_size: int = 1000, linger_s: float = 0.05, memory: int = 1 << 20,
         delivery_timeout_s: float = 60.0, record_limit: int = 1 << 20,
         ) -> tuple[RecordAccumulator, Wakes]:
    wakes = Wakes()
    acc = RecordAccumulator(batch_size=batch_size, linger_s=linger_s,
                            delivery_timeout_s=delivery_timeout_s, compression="none",
                            pool=BufferPool(memory), partitioner=DefaultPartitioner(batch_size),
                            wake_sender=wakes, record_limit=record_limit)
    acc.metadata = three_partitions()
    return acc, wakes


def append(acc: RecordAccumulator, value: bytes, partition: int | None = 0,
           key: bytes | None = None, reserved: int = 0) -> RecordFuture | NeedMemory | None:
    return acc.append("t", partition, key, value, None, 1000, None, reserved)


def test_records_share_a_batch_until_linger_expires() -> None:
    acc, wakes = make()
    f1, f2 = append(acc, b"a"), append(acc, b"b")
    assert isinstance(f1, RecordFuture) and isinstance(f2, RecordFuture)
    assert f1._batch is f2._batch and f2._index == 1
    assert wakes.count == 1  # one new batch: the sender must plan its linger
    pq = acc.queues["t"][0]
    batch = pq.batches[0]
    assert not acc.is_ready(pq, batch.created + 0.01)
    assert acc.is_ready(pq, batch.created + 0.05)
    assert acc.next_linger_deadline(pq) == pytest.approx(batch.created + 0.05)


def test_a_full_batch_is_ready_at_once_and_a_new_one_opens() -> None:
    acc, wakes = make(batch_size=300)
    futures = [append(acc, b"x" * 50) for _ in range(8)]
    pq = acc.queues["t"][0]
    assert len(pq.batches) >= 2 and wakes.count == len(pq.batches)
    first = pq.batches[0]
    assert first is not pq.open
    assert acc.is_ready(pq, first.created)  # full: no waiting for linger
    assert first.builder.size_in_bytes() <= 300  # type: ignore[union-attr]
    assert sum(b.count for b in pq.batches) == len(futures)


def test_an_oversized_record_gets_a_batch_of_its_own() -> None:
    acc, _ = make(batch_size=100)
    append(acc, b"small")
    big = append(acc, b"B" * 500)
    assert isinstance(big, RecordFuture)
    assert big._batch.count == 1 and big._batch.reserved >= 500 + BATCH_OVERHEAD


def test_flush_and_close_make_batches_ready() -> None:
    acc, _ = make(linger_s=60)
    append(acc, b"v")
    pq = acc.queues["t"][0]
    now = pq.batches[0].created
    assert not acc.is_ready(pq, now)
    acc.flushing += 1
    assert acc.is_ready(pq, now)
    acc.flushing -= 1
    acc.close()
    assert acc.is_ready(pq, now)
    with pytest.raises(ProducerClosedError):
        append(acc, b"late")


def test_pop_head_closes_the_open_batch() -> None:
    acc, _ = make()
    f = append(acc, b"v")
    pq = acc.queues["t"][0]
    batch = acc.pop_head(pq)
    assert batch is f._batch and pq.open is None  # type: ignore[union-attr]
    f2 = append(acc, b"w")
    assert f2._batch is not batch  # type: ignore[union-attr]


def test_memory_is_reserved_per_batch_and_exhaustion_returns_the_need() -> None:
    acc, _ = make(batch_size=1000, memory=2000)
    assert isinstance(append(acc, b"a", partition=0), RecordFuture)
    assert isinstance(append(acc, b"b", partition=1), RecordFuture)
    assert acc.pool.available == 0
    need = append(acc, b"c", partition=2)
    assert need == NeedMemory(1000, 2)  # the caller must wait for that much
    assert isinstance(append(acc, b"d", partition=0), RecordFuture)  # room in an open batch
    batch = acc.queues["t"][0].batches[0]
    acc.finished(batch)
    assert acc.pool.available == 1000
    acc.pool.try_reserve(1000)
    assert isinstance(append(acc, b"c", partition=2, reserved=1000), RecordFuture)


def test_a_batch_size_beyond_the_pool_is_cut_to_the_pool() -> None:
    """batch_size above what the pool holds (buffer_memory less the stage's share): each
    batch takes the whole pool and holds no more than that, instead of asking for memory
    the pool can never give (every send then waited out max_block_ms)."""
    acc, _ = make(batch_size=1000, memory=900)
    assert acc.batch_limit("t") == 900
    fut = append(acc, b"a" * 300, partition=0)
    assert isinstance(fut, RecordFuture) and fut._batch.reserved == 900
    assert acc.pool.available == 0
    assert append(acc, b"b" * 300, partition=0)._batch is fut._batch  # type: ignore[union-attr]
    assert append(acc, b"c" * 300, partition=0) == NeedMemory(900, 0)  # the batch is full
    batch = acc.queues["t"][0].batches[0]
    assert batch.builder is not None and batch.builder.size_in_bytes() <= 900


def test_reserve_blocking_times_out_then_succeeds_after_a_release() -> None:
    pool = BufferPool(100)
    assert pool.try_reserve(100)
    with pytest.raises(KafkaTimeoutError, match="buffer_memory=100"):
        pool.reserve_blocking(50, 0.05)
    threading.Timer(0.05, pool.release, args=(60,)).start()
    pool.reserve_blocking(50, 10)
    assert pool.available == 10


async def test_reserve_async_waits_for_a_release() -> None:
    pool = BufferPool(100)
    pool.bind(asyncio.get_running_loop())
    assert pool.try_reserve(100)
    waiter = asyncio.ensure_future(pool.reserve_async(70, 10))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    threading.Thread(target=pool.release, args=(100,)).start()  # released from another thread
    await asyncio.wait_for(waiter, 5)
    assert pool.available == 30
    with pytest.raises(KafkaTimeoutError):
        await pool.reserve_async(50, 0.02)


def test_append_many_builds_contiguous_segments() -> None:
    acc, _ = make(batch_size=400)
    values: list[bytes | None] = [b"v%03d" % i for i in range(40)]
    parts: list[list[object]] = []
    i, need = acc.append_many("t", 1, None, values, 0, parts, 1000)
    assert (i, need) == (40, None)
    assert sum(p[2] for p in parts) == 40  # type: ignore[misc]
    assert len(parts) == len(acc.queues["t"][1].batches) > 1
    for batch, first, count, ts in parts:
        assert first == 0 and count == batch.count and ts == 1000  # type: ignore[attr-defined]


def test_append_many_stops_when_memory_runs_out() -> None:
    acc, _ = make(batch_size=200, memory=200)
    values: list[bytes | None] = [b"x" * 60] * 10
    keys: list[bytes | None] = [b"k"] * 10
    parts: list[list[object]] = []
    i, need = acc.append_many("t", 0, keys, values, 0, parts, 1)
    assert 0 < i < 10 and need == NeedMemory(200, 0)
    acc.finished(acc.queues["t"][0].batches[0])
    assert acc.pool.try_reserve(200)
    i2, _ = acc.append_many("t", 0, keys, values, i, parts, 1, reserved=200)
    assert i2 > i
    assert sum(p[2] for p in parts) == i2  # type: ignore[misc]


def test_unknown_topic_and_bad_partitions() -> None:
    acc, _ = make(record_limit=100)
    assert acc.append("other", None, None, b"v", None, None, None) is None
    assert acc.append_many("other", None, None, [b"v"], 0, [], 1) == (-1, None)
    with pytest.raises(ValueError, match=r"0\.\.2; 7 is not one of them"):
        append(acc, b"v", partition=7)
    with pytest.raises(MessageTooLargeError):
        append(acc, b"x" * 200)
    with pytest.raises(MessageTooLargeError, match="record 1 "):
        acc.append_many("t", 0, None, [b"ok", b"x" * 200], 0, [], 1)


def test_expire_unsent_takes_batches_past_their_deadline() -> None:
    acc, _ = make(delivery_timeout_s=0.01)
    append(acc, b"v")
    pq = acc.queues["t"][0]
    deadline = pq.batches[0].deadline
    assert acc.expire_unsent(deadline - 0.001) == []
    expired = acc.expire_unsent(deadline)
    assert len(expired) == 1 and not pq.batches and pq.open is None


@pytest.mark.parametrize("key", [None, b"", b"k" * 200])
@pytest.mark.parametrize("value", [None, b"", b"v" * 5000])
@pytest.mark.parametrize("headers", [None, [("h", b"1"), ("\u00e9t\u00e9", None)]])
def test_size_bound_is_never_below_the_encoded_size(key: bytes | None, value: bytes | None,
                                                    headers: list | None) -> None:
    for offset_delta, ts_delta in [(0, 0), (1000, 10**9), (2**31 - 1, -(2**40))]:
        exact = record_size(offset_delta, ts_delta, key, value, headers or ())
        assert record_size_bound(key, value, headers) >= exact


def test_partitioner_chooses_when_no_partition_is_given() -> None:
    acc, _ = make()
    keyed = append(acc, b"v", partition=None, key=b"foobar")
    assert keyed.partition == 0  # type: ignore[union-attr]  # murmur2("foobar") % 3
    sticky = {append(acc, b"v", partition=None).partition for _ in range(5)}  # type: ignore[union-attr]
    assert len(sticky) == 1


def test_appends_from_many_threads_keep_each_threads_order() -> None:
    acc, _ = make(batch_size=500)
    per_thread = 300

    def work(n: int) -> None:
        for i in range(per_thread):
            append(acc, f"{n}:{i}".encode(), partition=n % 3)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = sum(b.count for q in acc.queues["t"].values() for b in q.batches)
    assert total == 6 * per_thread
    time.sleep(0)  # nothing asynchronous happened: appends are synchronous


def test_bulk_keyless_appends_fill_one_sticky_batch_at_a_time() -> None:
    acc, _ = make(batch_size=1000)
    parts: list[list[object]] = []
    values: list[bytes | None] = [b"v" * 90] * 40
    assert acc.append_many("t", None, None, values, 0, parts, 1, plain=True) == (40, None)
    assert sum(p[2] for p in parts) == 40  # type: ignore[misc]
    batches = [p[0] for p in parts]
    assert all(b.count >= 8 for b in batches[:-1])  # type: ignore[attr-defined]
    # consecutive batches move to another partition, as the sticky partitioner does
    partitions = [b.partition for b in batches]  # type: ignore[attr-defined]
    assert all(a != b for a, b in itertools.pairwise(partitions))


def test_small_bulk_calls_still_move_the_sticky_partition_on() -> None:
    """Runs that never fill a batch report their bytes, so the partition still changes
    after about batch_size bytes (KIP-794), even when linger drains partial batches."""
    acc, _ = make(batch_size=1000)
    seen = set()
    for _ in range(30):
        parts: list[list[object]] = []
        acc.append_many("t", None, None, [b"v" * 90] * 3, 0, parts, 1, plain=True)
        seen.add(parts[0][0].partition)  # type: ignore[attr-defined]
        for pq in acc.queues["t"].values():  # the sender drains what lingered
            while pq.batches:
                acc.finished(acc.pop_head(pq))
    assert len(seen) > 1


def test_compression_ratio_estimate_lets_batches_grow() -> None:
    wakes = Wakes()
    acc = RecordAccumulator(batch_size=1000, linger_s=1, delivery_timeout_s=60,
                            compression="lz4", pool=BufferPool(1 << 30),
                            partitioner=DefaultPartitioner(1000), wake_sender=wakes,
                            record_limit=50_000)
    acc.metadata = three_partitions()
    assert acc.batch_limit("t") == 1000  # no estimate yet: ratio 1.0
    acc.observe_compression("t", 400, 40)  # a batch under half of batch_size: 10x
    # improves by at most half per such batch, with a 5% safety margin
    assert acc.batch_limit("t") == int(1000 / (0.5 * 1.05))
    for _ in range(3):
        acc.observe_compression("t", 400, 40)
    assert acc.batch_limit("t") == int(1000 / (0.1 * 1.05))  # 0.5, 0.25, 0.125 -> 0.1
    acc.observe_compression("t", 100, 90)  # worse, but a small batch: ignored
    assert acc.batch_limit("t") == int(1000 / (0.1 * 1.05))
    acc.observe_compression("t", 1000, 900)  # worse: the estimate jumps back up quickly
    assert acc.batch_limit("t") == int(1000 / (0.9 * 1.05))
    acc.observe_compression("t", 500, 50)  # half of batch_size or more: straight to its ratio
    assert acc.batch_limit("t") == int(1000 / (0.1 * 1.05))
    acc.observe_compression("t", 10_000, 1)
    acc.observe_compression("t", 10_000, 2)  # worse by a little: doubles, not + 0.05
    assert acc._ratios["t"] == 0.0002
    for _ in range(400):
        acc.observe_compression("t", 10_000, 1)
    assert acc.batch_limit("t") == 50_000  # capped by max_request_size / buffer_memory
    fut = acc.append("t", 0, None, b"x" * 900, None, None, None)
    for _ in range(20):
        acc.append("t", 0, None, b"x" * 900, None, None, None)
    assert fut._batch.count == 21 and fut._batch.limit == 50_000  # type: ignore[union-attr]
    assert acc.estimated_size(fut._batch) < 1000  # type: ignore[union-attr]
    assert make()[0].batch_limit("t") == 1000  # uncompressed: always batch_size


def test_the_first_full_batch_of_a_topic_teaches_the_ratio_to_the_batches_after_it() -> None:
    acc = RecordAccumulator(batch_size=10_000, linger_s=1, delivery_timeout_s=60,
                            compression="lz4", pool=BufferPool(1 << 30),
                            partitioner=DefaultPartitioner(10_000), wake_sender=Wakes(),
                            record_limit=500_000)
    acc.metadata = three_partitions()
    parts: list[list[Any]] = []
    now = int(time.time() * 1000)
    values = [b"x" * 400] * 1000
    assert acc.append_many("t", 0, None, values, 0, parts, now, plain=True) == (1000, None)  # type: ignore[arg-type]
    first, *rest = acc.queues["t"][0].batches
    assert first.limit == 10_000 and first.count == 24  # no estimate yet: batch_size
    # It was compressed when it filled: the next batch holds what compresses to about
    # batch_size (~40x here), nearly all the rest.
    assert acc.batch_limit("t") > 300_000
    assert rest[0].limit == acc.batch_limit("t") and rest[0].count > 900


# ============================================================================ split batches


def test_split_batch_halves_the_records_in_order_with_their_fields() -> None:
    from sdk.producer.batch import BulkFuture
    from sdk.records.reader import RecordBatch

    acc, _ = make(batch_size=100_000)
    futures = [acc.append("t", 0, b"k%d" % i, b"v" * (10 + i), [("h", b"%d" % i)], 1000 + i,
                          None, 0) for i in range(9)]
    batch = acc.pop_head(acc.queues["t"][0])
    batch.payload = batch.builder.build()  # type: ignore[union-attr]
    parts = acc.split_batch(batch)
    assert len(parts) >= 2 and sum(p.count for p in parts) == 9
    raw = len(RecordBatch(batch.payload).record_bytes()[0])
    records = []
    for part in parts:
        built = part.builder.build()  # type: ignore[union-attr]
        assert len(built) <= 61 + raw // 2 or part.count == 1
        records += [(r.key, r.value, r.headers, r.timestamp) for r in RecordBatch(built)]
        assert part.reserved == 0 and part in acc.incomplete and part.deadline == batch.deadline
    assert records == [(b"k%d" % i, b"v" * (10 + i), [("h", b"%d" % i)], 1000 + i)
                       for i in range(9)]

    # The split batch answers for its records through the parts that carried them.
    first = 0
    batch.split = []
    for n, part in enumerate(parts):
        batch.split.append((first, part))
        first += part.count
        part.complete(100 * (n + 1))
    batch.complete(-1)
    offsets = [f.result(0).offset for f in futures]  # type: ignore[union-attr]
    expected = [100 * (n + 1) + i for n, (_, p) in enumerate(batch.split) for i in range(p.count)]
    assert offsets == expected
    bulk = BulkFuture("t", [[batch, 2, 5, 1000]])
    assert [m.offset for m in bulk.result(0)] == expected[2:7]


def test_a_failed_part_fails_only_its_records() -> None:
    from sdk.errors import MessageTooLargeError

    acc, _ = make(batch_size=100_000)
    futures = [append(acc, b"x" * 50) for _ in range(6)]
    batch = acc.pop_head(acc.queues["t"][0])
    batch.payload = batch.builder.build()  # type: ignore[union-attr]
    parts = acc.split_batch(batch)
    batch.split = [(0, parts[0])]
    start = parts[0].count
    for part in parts[1:]:
        batch.split.append((start, part))
        start += part.count
    parts[0].fail(MessageTooLargeError("one"))
    for part in parts[1:]:
        part.complete(7)
    batch.fail(MessageTooLargeError("one"))
    outcomes = [f.exception(0) for f in futures]  # type: ignore[union-attr]
    assert all(isinstance(e, MessageTooLargeError) for e in outcomes[:parts[0].count])
    assert outcomes[parts[0].count:] == [None] * (6 - parts[0].count)


def test_built_batches_hand_their_buffers_to_new_batches_cut_to_their_limit() -> None:
    acc, _ = make(batch_size=1000)
    first = append(acc, b"a" * 500, partition=0)
    batch = first._batch  # type: ignore[union-attr]
    acc.finished(acc.pop_head(batch.queue))
    payload = batch.builder.build()
    spare = batch.builder.take_buffer()
    acc.recycle(spare)
    big = bytearray(5000)
    acc.recycle(big)  # larger than the next batch's limit (1000)
    acc.recycle(bytearray(100))  # a third spare is not kept
    assert len(acc._spare_buffers) == 2
    # The newest spare is cut to the batch's limit, so the batch stays within its share.
    second = append(acc, b"b" * 500, partition=1)
    assert second._batch.builder._buf is big and len(big) <= 1000  # type: ignore[union-attr]
    assert acc._spare_buffers == [spare]
    # The next batch writes over the first batch's buffer and builds what a fresh one would.
    third = append(acc, b"a" * 500, partition=2)
    assert not acc._spare_buffers
    assert third._batch.builder._buf is spare  # type: ignore[union-attr]
    assert third._batch.builder.build() == payload  # type: ignore[union-attr]
