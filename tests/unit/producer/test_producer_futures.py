"""RecordFuture and BulkFuture: the concurrent.futures interface over a batch's completion."""

from __future__ import annotations

import asyncio
import threading

import pytest

from sdk.errors import KafkaTimeoutError, NotEnoughReplicasError
from sdk.producer.accumulator import PartitionQueue
from sdk.producer.batch import BulkFuture, ProducerBatch, RecordFuture
from sdk.records.builder import RecordBatchBuilder
from sdk.types import RecordMetadata


def make_batch(count: int = 3) -> tuple[ProducerBatch, list[RecordFuture]]:
    batch = ProducerBatch(PartitionQueue("t", 2), RecordBatchBuilder(), 0.0, 60.0, 0)
    futures = []
    for i in range(count):
        index = batch.builder.append(None, 1000 + i, b"k", b"value", ())  # type: ignore[union-attr]
        batch.count += 1
        futures.append(RecordFuture(batch, index, 1000 + i, 1, 5))
    return batch, futures


def test_result_waits_then_gives_metadata() -> None:
    batch, futures = make_batch()
    assert not futures[0].done() and futures[0].running() and not futures[0].cancel()
    with pytest.raises(KafkaTimeoutError):
        futures[0].result(timeout=0.01)
    threading.Timer(0.02, batch.complete, args=(40,)).start()
    meta = futures[2].result(timeout=5)
    assert meta == RecordMetadata("t", 2, 42, 1002, 1, 5)
    assert futures[0].result() == RecordMetadata("t", 2, 40, 1000, 1, 5)
    assert futures[0].exception() is None and not futures[0].cancelled()


def test_log_append_time_replaces_the_create_time() -> None:
    batch, futures = make_batch()
    batch.complete(7, log_append_time=555)
    assert [f.result().timestamp for f in futures] == [555, 555, 555]


def test_acks_zero_completion_has_no_offset() -> None:
    batch, futures = make_batch(1)
    batch.complete(-1)
    assert futures[0].result().offset == -1


def test_failure_reaches_result_exception_and_callbacks() -> None:
    batch, futures = make_batch(2)
    seen: list[object] = []
    futures[0].add_done_callback(lambda f: seen.append(("done", f.exception())))
    batch.add_callback(futures[1], lambda err, meta: seen.append(("delivery", err, meta)), True)
    error = NotEnoughReplicasError("isr")
    batch.fail(error)
    with pytest.raises(NotEnoughReplicasError):
        futures[0].result()
    assert futures[1].exception() is error
    assert seen[0] == ("done", error)
    assert seen[1][1] is error and seen[1][2].offset == -1  # type: ignore[index]
    late: list[object] = []
    futures[0].add_done_callback(late.append)  # after completion: runs at once
    assert late == [futures[0]]


def test_a_raising_callback_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    batch, futures = make_batch(1)
    ran: list[int] = []

    def bad(_: RecordFuture) -> None:
        raise RuntimeError("user bug")

    futures[0].add_done_callback(bad)
    futures[0].add_done_callback(lambda f: ran.append(1))
    batch.complete(0)
    assert ran == [1]
    assert "user bug" in caplog.text


async def test_record_future_is_awaitable_and_shielded() -> None:
    batch, futures = make_batch(2)
    waiter = asyncio.ensure_future(_await(futures[1]))
    canceller = asyncio.ensure_future(_await(futures[0]))
    await asyncio.sleep(0)
    canceller.cancel()  # cancelling one awaiter must not cancel the batch for the other
    await asyncio.sleep(0)
    batch.complete(10)
    assert (await waiter).offset == 11
    assert (await futures[0]).offset == 10


async def _await(fut: RecordFuture) -> RecordMetadata:
    return await fut


async def test_bulk_future() -> None:
    b1, _ = make_batch(2)
    b2, _ = make_batch(3)
    bulk = BulkFuture("t", [[b1, 0, 2, 100], [b2, 1, 2, 200]])
    assert len(bulk) == 4 and not bulk.done()
    callbacks: list[BulkFuture] = []
    bulk.add_done_callback(callbacks.append)
    b1.complete(10)
    assert not callbacks
    b2.complete(20)
    assert callbacks == [bulk]
    metas = await bulk
    assert [(m.offset, m.timestamp) for m in metas] == [(10, 100), (11, 100), (21, 200), (22, 200)]
    assert bulk.result(0) == metas and bulk.errors() == [] and bulk.exception() is None


def test_bulk_future_errors() -> None:
    b1, _ = make_batch(1)
    b2, _ = make_batch(1)
    bulk = BulkFuture("t", [[b1, 0, 1, 1], [b2, 0, 1, 1]])
    with pytest.raises(KafkaTimeoutError):
        bulk.result(timeout=0.01)
    b1.complete(0)
    err = NotEnoughReplicasError()
    b2.fail(err)
    assert bulk.errors() == [(1, err)]
    with pytest.raises(NotEnoughReplicasError):
        bulk.result()
