"""``buffer_memory`` waits against the events that race them: the sender draining the stage
while a send waits for memory, and a release from another thread while a waiter registers.

The AsyncProducer stall (1 KB records, ``batch_size=1000000``: ``send blocked for 60000 ms
... 1000000 more are needed`` with nothing in flight) was the first: a drain that waited
for memory left with its reservation when the sender's pass had drained the stage
meanwhile, and every such exit lost a batch's worth of the pool for good. Each test drives
its interleaving step by step; none depends on timing.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from sdk import AdminClient, AsyncProducer
from sdk.producer.accumulator import BufferPool, RecordAccumulator
from sdk.producer.staging import Stage
from sdk.types import NewTopic

from .test_producer_accumulator import make

BATCH = 1000
POOL = 3 * BATCH


def _stage(acc: RecordAccumulator, reserve_blocking: Callable[[int, float], None],
           reserve_async: Callable[[int, float], Any]) -> Stage:
    async def no_topic(topic: str, timeout: float) -> None:
        raise AssertionError(f"the topic {topic} is known")

    def no_topic_blocking(topic: str, timeout: float) -> None:
        raise AssertionError(f"the topic {topic} is known")

    return Stage(acc, cap=1 << 20, linger_s=0.0, delivery_timeout_s=60.0,
                 wake_sender=lambda: None, reserve_blocking=reserve_blocking,
                 reserve_async=reserve_async, topic_blocking=no_topic_blocking,
                 topic_async=no_topic, max_block_s=60.0)


def _complete_all(acc: RecordAccumulator) -> int:
    """Send and acknowledge every batch (as the sender would); how many there were."""
    done = 0
    for pq in acc.all_queues():
        while pq.batches:
            with acc.lock:
                batch = acc.pop_head(pq)
            batch.complete(0)
            acc.finished(batch)
            done += 1
    return done


def _stage_records(stage: Stage, count: int) -> None:
    for i in range(count):
        assert stage.put("t", None, b"v%03d" % i, None) is not None


async def test_async_drain_gives_back_memory_the_sender_made_unneeded() -> None:
    acc, _ = make(batch_size=BATCH, memory=POOL)
    pool = acc.pool
    pool.bind(asyncio.get_running_loop())
    stage = _stage(acc, pool.reserve_blocking, pool.reserve_async)
    assert pool.try_reserve(POOL)  # every batch's worth is in flight
    _stage_records(stage, 10)

    # A send drains the stage: the pool is short, so it waits for a batch's worth.
    drainer = asyncio.ensure_future(stage.drain_async(None))
    for _ in range(100):  # a few loop turns until it waits (no timing involved)
        if pool._async_waiters:
            break
        await asyncio.sleep(0)
    assert pool._async_waiters and not drainer.done()

    # In one loop turn, before the waiter resumes: the in-flight batches are acknowledged
    # (their memory wakes it) and the sender's pass drains the whole stage itself.
    pool.release(POOL)
    assert stage.service(now=1e12, everything=True) is None
    assert not stage.runs and pool.available == POOL - BATCH

    await asyncio.wait_for(drainer, 10)
    assert pool.available == POOL - BATCH  # the waiter's reservation went back
    assert _complete_all(acc) == 1
    assert pool.available == POOL  # before the fix: POOL - BATCH, lost for good


def test_blocking_drain_gives_back_memory_the_sender_made_unneeded() -> None:
    acc, _ = make(batch_size=BATCH, memory=POOL)
    pool = acc.pool
    stage: Stage

    def reserve_blocking(n: int, timeout: float) -> None:
        # While this thread waits, the in-flight batches are acknowledged and the sender
        # drains the stage; then this thread gets its memory.
        pool.release(POOL)
        assert stage.service(now=1e12, everything=True) is None
        pool.reserve_blocking(n, timeout)

    async def reserve_async(n: int, timeout: float) -> None:
        raise AssertionError("the blocking drain waits on its own thread")

    stage = _stage(acc, reserve_blocking, reserve_async)
    assert pool.try_reserve(POOL)
    _stage_records(stage, 10)
    stage.drain_blocking()
    assert not stage.runs
    assert _complete_all(acc) == 1
    assert pool.available == POOL  # before the fix: POOL - BATCH


async def test_reserve_async_sees_a_release_from_another_thread_while_it_registers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pool = BufferPool(POOL)
    loop = asyncio.get_running_loop()
    pool.bind(loop)
    assert pool.try_reserve(POOL)
    create_future = loop.create_future
    released: list[bool] = []

    def create_future_then_release() -> asyncio.Future[Any]:
        # The waiter's future is made after its first check found the pool short: a
        # blocking caller gives back memory right then, from its own thread.
        if not released:
            released.append(True)
            giver = threading.Thread(target=pool.release, args=(BATCH,))
            giver.start()
            giver.join()
        return create_future()

    monkeypatch.setattr(loop, "create_future", create_future_then_release)
    # Nothing else will ever be released: before the fix the release found no waiter
    # registered and this one slept until its timeout (an hour here) ran out.
    waiter = asyncio.ensure_future(pool.reserve_async(BATCH, 3600.0))
    for _ in range(100):  # loop turns, not time
        if waiter.done():
            break
        await asyncio.sleep(0)
    try:
        assert waiter.done(), "the waiter missed the release"
        await waiter
    finally:
        waiter.cancel()
    assert released and pool.available == 0  # the released batch went to the waiter


@pytest.mark.timeout(60)
@pytest.mark.parametrize("face", ["async", "blocking"])
def test_buffer_memory_is_all_back_after_flush_under_pressure(embedded_broker: Any,
                                                              topic: str, face: str) -> None:
    """1 KB records, 1 MB batches, a pool of five batches: the sends wait for memory all
    the time, racing the sender's drains of the stage. Before the fix the async face lost
    1-5 MB of the pool in 10 of 10 runs and stalled for good in 6 (nothing in flight)."""
    bootstrap = embedded_broker.bootstrap_servers
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 6, 1)]).raise_if_failed()
    options = dict(bootstrap_servers=bootstrap, linger_ms=5, batch_size=1_000_000,
                   buffer_memory=6_000_000, max_block_ms=20_000)
    value = b"x" * 1000
    count = 20_000

    if face == "async":
        async def run() -> tuple[int, int]:
            async with AsyncProducer(**options) as p:
                futures = [await p.send(topic, value) for _ in range(count)]
                await p.flush()
                assert all(f.done() and f.exception() is None for f in futures)
                return p._pool.available, p._pool.total - p._stage.cap

        available, expected = asyncio.run(run())
    else:
        from sdk import Producer

        with Producer(**options) as sp:
            sync_futures = [sp.send(topic, value) for _ in range(count)]
            sp.flush()
            assert all(f.exception() is None for f in sync_futures)
            inner = sp._core
            available, expected = inner._pool.available, inner._pool.total - inner._stage.cap
    assert available == expected


async def test_a_batch_size_above_the_pools_share_still_sends(embedded_broker: Any,
                                                             topic: str) -> None:
    """batch_size 1 MB, buffer_memory 1.2 MB: a quarter is kept for staged records, so the
    batches' pool holds 900 KB. Before, each batch asked for 1 MB and every send waited
    out max_block_ms ("send blocked ... 1000000 more are needed")."""
    async with AsyncProducer(bootstrap_servers=embedded_broker.bootstrap_servers,
                             batch_size=1_000_000, buffer_memory=1_200_000,
                             max_block_ms=20_000) as p:
        futures = [await p.send(topic, b"x" * 1000) for _ in range(3000)]
        await p.flush()
        metas = [await f for f in futures]
    assert [m.offset for m in metas] == list(range(3000))
