"""The staged send path (sdk.producer.staging) without a network: order, caps, drains,
memory shortage, expiry, callbacks, and the bulk encoder it relies on."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdk.errors import DeliveryTimeoutError, MessageTooLargeError, ProducerClosedError
from sdk.net.metadata import ClusterMetadata
from sdk.producer.accumulator import NeedMemory, RecordAccumulator
from sdk.producer.partitioner import default_partition
from sdk.producer.staging import Stage, StagedFuture, _ns_to_ms
from sdk.records.builder import RecordBatchBuilder, record_size
from sdk.records.reader import iter_batches

from .test_producer_accumulator import make


class Waits:
    """Stand-ins for the producer's waits: they record what was asked for."""

    def __init__(self, acc: RecordAccumulator) -> None:
        self.acc = acc
        self.memory: list[int] = []
        self.topics: list[str] = []

    def reserve_blocking(self, n: int, timeout: float) -> None:
        """Memory comes back while we wait: every batch is sent and acknowledged."""
        self.memory.append(n)
        for pq in self.acc.all_queues():
            while pq.batches:
                with self.acc.lock:
                    batch = self.acc.pop_head(pq)
                batch.complete(0)
                self.acc.finished(batch)
        assert self.acc.pool.try_reserve(n)

    async def reserve_async(self, n: int, timeout: float) -> None:
        self.reserve_blocking(n, timeout)

    def topic_blocking(self, topic: str, timeout: float) -> None:
        self.topics.append(topic)
        raise TimeoutError(topic)

    async def topic_async(self, topic: str, timeout: float) -> None:
        self.topic_blocking(topic, timeout)


def staged(cap: int = 1 << 20, linger_s: float = 0.05, delivery_timeout_s: float = 60.0,
           **acc_kwargs: Any) -> tuple[Stage, RecordAccumulator, Waits]:
    acc, _ = make(linger_s=linger_s, delivery_timeout_s=delivery_timeout_s, **acc_kwargs)
    waits = Waits(acc)
    stage = Stage(acc, cap=cap, linger_s=linger_s, delivery_timeout_s=delivery_timeout_s,
                  wake_sender=lambda: None, reserve_blocking=waits.reserve_blocking,
                  reserve_async=waits.reserve_async, topic_blocking=waits.topic_blocking,
                  topic_async=waits.topic_async, max_block_s=1.0)
    return stage, acc, waits


def records_of(acc: RecordAccumulator, partition: int) -> list[tuple[bytes | None, bytes]]:
    out = []
    for batch in acc.queues["t"][partition].batches:
        assert batch.builder is not None
        for rb in iter_batches(batch.builder.build()):
            out.extend((r.key, r.value) for r in rb)
    return out


def test_put_stages_until_drained_then_futures_find_their_batch() -> None:
    stage, acc, _ = staged()
    before = time.time_ns() // 1_000_000
    futures = [stage.put("t", None, b"v%d" % i, None) for i in range(5)]
    assert all(isinstance(f, StagedFuture) for f in futures)
    assert not acc.queues and stage.held > 0
    assert futures[0].partition == -1 and not futures[0].done()
    assert stage.drain() is None
    assert stage.held == 0 and not stage.runs
    partitions = {f.partition for f in futures if f is not None}
    assert len(partitions) == 1  # sticky: one batch takes the whole run
    (p,) = partitions
    assert records_of(acc, p) == [(None, b"v%d" % i) for i in range(5)]
    assert [f._index for f in futures] == [0, 1, 2, 3, 4]  # type: ignore[union-attr]
    assert all(before <= f.metadata().timestamp <= time.time_ns() // 1_000_000
               for f in futures if f is not None)


def test_keyed_records_land_on_the_java_partition_in_order() -> None:
    stage, acc, _ = staged()
    sent = [(b"k%d" % (i % 4), b"v%d" % i) for i in range(40)]
    stage.put("t", None, b"first", None)  # keys appear after a keyless record
    futures = [stage.put("t", k, v, None) for k, v in sent]
    assert stage.drain() is None
    for (key, _value), fut in zip(sent, futures):
        assert fut is not None and fut.partition == default_partition(key, 3)
    for p in range(3):
        expected = [(k, v) for k, v in sent if default_partition(k, 3) == p]
        got = [r for r in records_of(acc, p) if r[0] is not None]
        assert got == expected


def test_a_full_stage_refuses_until_drained() -> None:
    stage, _, _ = staged(cap=500)
    accepted = 0
    while stage.put("t", None, b"x" * 100, None) is not None:
        accepted += 1
    assert accepted == 4 and stage.held >= 500  # 100 B + 64 charged per record
    assert stage.drain() is None and stage.held == 0
    assert stage.put("t", None, b"x" * 100, None) is not None


def test_unknown_topic_and_oversized_records_take_the_general_path() -> None:
    stage, _, _ = staged(record_limit=200)
    assert stage.put("other", None, b"v", None) is None
    with pytest.raises(MessageTooLargeError):
        stage.put("t", None, b"x" * 300, None)


def test_short_memory_drains_part_then_the_rest_after_reserving() -> None:
    stage, _, waits = staged(batch_size=200, memory=400)
    futures = [stage.put("t", None, b"x" * 60, None) for _ in range(12)]
    outcome = stage.drain()
    assert isinstance(outcome, NeedMemory)
    run = stage.runs["t"]
    assert 0 < run.drained < 12
    assert futures[run.drained].partition == -1  # type: ignore[union-attr]
    stage.drain_blocking(time.monotonic() + 1)
    assert waits.memory and not stage.runs
    assert all(f is not None and f.partition >= 0 for f in futures)


def test_a_run_without_metadata_expires_after_the_delivery_timeout() -> None:
    stage, acc, waits = staged(delivery_timeout_s=0.5)
    delivered: list[tuple[Any, Any]] = []
    fut = stage.put("t", None, b"v", lambda err, meta: delivered.append((err, meta)))
    assert fut is not None
    acc.metadata = ClusterMetadata()  # the topic vanished from the metadata
    assert stage.drain() == "t"
    with pytest.raises(TimeoutError):
        stage.drain_blocking(time.monotonic() + 0.1)
    assert waits.topics == ["t"]
    run = stage.runs["t"]
    assert stage.service(run.started + 0.1, False) is not None  # still waiting
    assert stage.service(run.started + 0.6, False) is None
    assert fut.done() and isinstance(fut.exception(0), DeliveryTimeoutError)
    assert len(delivered) == 1 and isinstance(delivered[0][0], DeliveryTimeoutError)
    assert delivered[0][1].offset == -1 and stage.held == 0


def test_the_sender_drains_a_run_once_its_linger_passed() -> None:
    stage, acc, _ = staged(linger_s=0.05)
    stage.put("t", None, b"v", None)
    started = stage.runs["t"].started
    assert stage.service(started + 0.01, False) == pytest.approx(started + 0.05)
    assert stage.runs and not acc.incomplete
    assert stage.service(started + 0.06, False) is None
    (batch,) = acc.incomplete
    assert batch.created == started  # its linger counts from the first staged record
    assert acc.is_ready(batch.queue, started + 0.06)


def test_callbacks_follow_the_record_to_its_batch() -> None:
    stage, acc, _ = staged()
    seen: list[str] = []
    fut = stage.put("t", None, b"v", lambda err, meta: seen.append(f"delivery {meta.offset}"))
    assert fut is not None
    fut.add_done_callback(lambda f: seen.append(f"done {f.result().offset}"))
    assert not seen
    stage.drain()
    (batch,) = acc.incomplete
    batch.complete(100)
    assert sorted(seen) == ["delivery 100", "done 100"]
    late: list[int] = []
    fut.add_done_callback(lambda f: late.append(f.result().offset))
    assert late == [100]


def test_closing_refuses_puts_and_fail_all_fails_what_is_staged() -> None:
    stage, _, _ = staged()
    fut = stage.put("t", None, b"v", None)
    stage.close()
    assert stage.put("t", None, b"w", None) is None
    stage.fail_all(ProducerClosedError("closed"))
    assert fut is not None and isinstance(fut.exception(0), ProducerClosedError)
    with pytest.raises(ProducerClosedError):
        fut.result(0)
    assert not stage.runs and stage.held == 0


def test_a_future_asked_for_its_outcome_drains_the_stage() -> None:
    stage, acc, _ = staged()
    fut = stage.put("t", None, b"v", None)
    assert fut is not None
    with pytest.raises(TimeoutError):  # drained by the call, then not acknowledged in time
        fut.result(0.01)
    assert not stage.runs and len(acc.incomplete) == 1


@settings(max_examples=150, deadline=None)
@given(
    values=st.lists(st.binary(max_size=300), min_size=1, max_size=60),
    deltas=st.lists(st.integers(min_value=-5, max_value=5000), min_size=60, max_size=60),
    preload=st.integers(min_value=0, max_value=70),
    max_bytes=st.integers(min_value=61, max_value=6000),
    skip=st.integers(min_value=0, max_value=3),
    dirty=st.integers(min_value=0, max_value=9000),
)
def test_append_values_encodes_exactly_like_append(values: list[bytes], deltas: list[int],
                                                   preload: int, max_bytes: int,
                                                   skip: int, dirty: int) -> None:
    base = 1_700_000_000_000
    stamps = [base + d for d in deltas[: len(values)]]
    # The bulk builder writes over a reused buffer holding ``dirty`` bytes of garbage.
    bulk = RecordBatchBuilder(buffer=bytearray(b"\xa5" * dirty) if dirty else None)
    single = RecordBatchBuilder()
    for i in range(preload):  # offset deltas past 63 take two bytes
        bulk.append(None, base, None, b"p%d" % i)
        single.append(None, base, None, b"p%d" % i)
    limit = bulk.size_in_bytes() + max_bytes
    start = min(skip, len(values) - 1)  # records before ``start`` are not this batch's
    stop = bulk.append_values(values, stamps, start, len(values), limit)
    assert stop >= start + 1 or preload  # an empty batch takes at least one record
    for i in range(start, stop):
        single.append(None, stamps[i], None, values[i])
    assert bulk.build() == single.build()
    if stop > start + 1 or preload:
        assert single.size_in_bytes() <= limit
    if stop < len(values):  # it stopped because the next record would not fit
        td = stamps[stop] - single.base_timestamp
        next_size = record_size(single.last_offset_delta + 1, td, None, values[stop])
        assert single.size_in_bytes() + next_size > limit


def test_the_faces_bind_the_stager_as_send_unless_a_subclass_overrides_it() -> None:
    from sdk import AsyncProducer, Producer

    class Counting(Producer):
        def send(self, topic: str, value: Any = None, **kwargs: Any) -> Any:
            return super().send(topic, value, **kwargs)

    class CountingAsync(AsyncProducer):
        def send_threadsafe(self, topic: str, value: Any = None, **kwargs: Any) -> Any:
            return super().send_threadsafe(topic, value, **kwargs)

    fast = AsyncProducer(bootstrap_servers="127.0.0.1:1").send_threadsafe
    assert fast.__qualname__ == "AsyncProducer.send_threadsafe"  # what a TypeError names
    assert not hasattr(fast, "__func__")  # the stager itself, not a bound method
    assert CountingAsync(bootstrap_servers="127.0.0.1:1").send_threadsafe.__func__ is (
        CountingAsync.send_threadsafe)
    with Producer(bootstrap_servers="127.0.0.1:1") as plain:
        assert plain.send.__qualname__ == "Producer.send"
        assert not hasattr(plain.send, "__func__")  # the stager: one call per plain record
    with Counting(bootstrap_servers="127.0.0.1:1") as counting:
        assert counting.send.__func__ is Counting.send  # type: ignore[attr-defined]


@settings(max_examples=150, deadline=None)
@given(
    size=st.integers(min_value=0, max_value=2000),
    count=st.integers(min_value=1, max_value=400),
    steps=st.lists(st.integers(min_value=0, max_value=3), min_size=400, max_size=400),
    preload=st.integers(min_value=0, max_value=70),
    max_bytes=st.integers(min_value=61, max_value=200_000),
    skip=st.integers(min_value=0, max_value=3),
    dirty=st.integers(min_value=0, max_value=9000),
)
def test_append_values_of_one_size_encode_exactly_like_append(
        size: int, count: int, steps: list[int], preload: int, max_bytes: int,
        skip: int, dirty: int) -> None:
    """The sliced fast path of append_values (runs of equal-sized values in time order)."""
    base = 1_700_000_000_000
    stamps, t = [], base
    for step in steps[:count]:
        t += step // 2  # mostly the same millisecond, sometimes the next ones
        stamps.append(t)
    values = [bytes([i % 251]) * size for i in range(count)]
    # Both write over reused buffers holding garbage (``append`` too, for the preload).
    bulk = RecordBatchBuilder(buffer=bytearray(b"\x5a" * dirty))
    single = RecordBatchBuilder(buffer=bytearray(b"\xc3" * (9000 - dirty)))
    for i in range(preload):  # offset deltas past 63 take two bytes
        bulk.append(None, base, None, b"p%d" % i)
        single.append(None, base, None, b"p%d" % i)
    limit = bulk.size_in_bytes() + max_bytes
    start = min(skip, count - 1)
    stop = bulk.append_values(values, stamps, start, count, limit)
    assert stop >= start + 1 or preload
    for i in range(start, stop):
        single.append(None, stamps[i], None, values[i])
    assert bulk.build() == single.build()
    if stop < count:  # it stopped because the next record would not fit
        td = stamps[stop] - single.base_timestamp
        next_size = record_size(single.last_offset_delta + 1, td, None, values[stop])
        assert single.size_in_bytes() + next_size > limit


@settings(max_examples=300, deadline=None)
@given(start=st.integers(min_value=0, max_value=2**62),
       steps=st.lists(st.integers(min_value=-3_000_000, max_value=2_500_000), max_size=80),
       forward=st.booleans())
def test_staged_send_times_convert_to_the_millisecond_they_fall_in(
        start: int, steps: list[int], forward: bool) -> None:
    """Send times are read in nanoseconds and converted in bulk before a drain; in order
    (mostly) by one division per millisecond, else one per record."""
    stamps, t = [], start
    for step in steps:
        t = max(0, t + (abs(step) if forward else step))
        stamps.append(t)
    assert _ns_to_ms(stamps) == [t // 1_000_000 for t in stamps]


def test_a_staged_record_reports_its_send_time_in_milliseconds_before_and_after_a_drain(
) -> None:
    stage, acc, _ = staged()
    before = time.time_ns() // 1_000_000
    fut = stage.put("t", None, b"v", None)
    assert fut is not None
    staged_ts = fut.metadata().timestamp
    assert before <= staged_ts <= time.time_ns() // 1_000_000
    assert stage.drain() is None
    assert fut.metadata().timestamp == staged_ts
    assert [rb.max_timestamp for pq in acc.all_queues() for batch in pq.batches
            for rb in iter_batches(batch.builder.build())] == [staged_ts]  # type: ignore[union-attr]


def test_delivery_callbacks_of_a_drained_run_report_each_record_as_its_future_does(
        caplog: pytest.LogCaptureFixture) -> None:
    """Callbacks are handed to their batches in bulk and run by the batch's inlined loop:
    per record the same (error, metadata) as the future's own answer, in send order within
    a partition, a raising callback logged without stopping the rest, a failed batch's
    error on each of its records, LogAppendTime replacing the send time."""
    stage, acc, _ = staged(batch_size=300)
    seen: list[tuple[int, Any, Any]] = []
    futures: list[StagedFuture] = []

    def on_delivery_of(i: int) -> Any:
        def on_delivery(err: Any, meta: Any) -> None:
            seen.append((i, err, meta))
            if i == 3:
                raise RuntimeError("user bug")
        return on_delivery

    for i in range(30):
        key = None if i % 3 else b"key-%d" % i
        fut = stage.put("t", key, b"v" * (i + 1), on_delivery_of(i))
        assert fut is not None
        futures.append(fut)
    late: list[int] = []  # registered out of send order, before the drain
    futures[5].add_done_callback(lambda f: late.append(f.metadata().offset))
    assert stage.drain() is None and not stage.runs
    batches = [b for pq in acc.all_queues() for b in pq.batches]
    assert len({f.partition for f in futures}) == 3 and len(batches) > 3
    failed = batches[1]
    error = MessageTooLargeError("refused")
    for n, batch in enumerate(batches):
        if batch is failed:
            batch.fail(error)
        else:
            batch.complete(1000 * n, log_append_time=777 if n == 2 else -1)
    assert "user bug" in caplog.text
    assert sorted(i for i, _, _ in seen) == list(range(30))
    for i, err, meta in seen:
        fut = futures[i]
        assert err is fut.exception(0)
        assert err is (error if fut._batch is failed else None)
        assert meta == fut.metadata()
        assert meta.serialized_value_size == i + 1
        assert meta.serialized_key_size == (-1 if i % 3 else len(b"key-%d" % i))
        if fut._batch is batches[2]:
            assert meta.timestamp == 777
    for p in range(3):
        order = [i for i, _, _ in seen if futures[i].partition == p]
        assert order == sorted(order)
    assert late == [futures[5].metadata().offset]


def test_delivery_callbacks_of_a_split_batch_report_the_part_that_carried_each_record() -> None:
    """A batch split after MESSAGE_TOO_LARGE (or KIP-467 refusals): each staged record's
    on_delivery gets the outcome and offset of its part, as its future does."""
    stage, acc, _ = staged(batch_size=100_000)
    seen: dict[int, tuple[Any, Any]] = {}
    futures = []
    for i in range(9):
        fut = stage.put("t", None, b"v" * (10 + i),
                        lambda err, meta, i=i: seen.__setitem__(i, (err, meta)))
        assert fut is not None
        futures.append(fut)
    assert stage.drain() is None
    (batch,) = [b for pq in acc.all_queues() for b in pq.batches]
    with acc.lock:
        acc.pop_head(batch.queue)
    batch.payload = batch.builder.build()  # type: ignore[union-attr]
    parts = acc.split_batch(batch)
    assert len(parts) >= 2
    first, batch.split = 0, []
    error = MessageTooLargeError("still too large")
    for n, part in enumerate(parts):
        batch.split.append((first, part))
        first += part.count
        if n == 1:
            part.fail(error)
        else:
            part.complete(100 * (n + 1))
    batch.complete(-1)
    assert sorted(seen) == list(range(9))
    for i, fut in enumerate(futures):
        err, meta = seen[i]
        assert err is fut.exception(0) and meta == fut.metadata()
    carried = [n for n, (_, p) in enumerate(batch.split) for _ in range(p.count)]
    assert [seen[i][0] is error for i in range(9)] == [n == 1 for n in carried]
    assert all(seen[i][1].offset >= 100 for i in range(9) if carried[i] != 1)


def test_delivery_callbacks_on_some_records_only_report_their_own_records() -> None:
    """Callbacks on every third record, keyed and keyless, some drained after a failure of
    the run: each reports its own record's offset, send time and sizes."""
    stage, acc, _ = staged(batch_size=400)
    seen: dict[int, tuple[Any, Any]] = {}
    futures = []
    for i in range(40):
        callback = (lambda err, meta, i=i: seen.__setitem__(i, (err, meta))) if i % 3 == 0 else None
        fut = stage.put("t", b"k%d" % i if i % 2 else None, b"v" * (i + 1), callback)
        assert fut is not None
        futures.append(fut)
    assert stage.drain() is None
    for pq in acc.all_queues():
        for n, batch in enumerate(pq.batches):
            batch.complete(1000 * (pq.partition + 1) + 100 * n)
    late = [stage.put("t", None, b"late", lambda err, meta: seen.__setitem__(99, (err, meta)))]
    stage.fail_all(ProducerClosedError("closed"))
    assert sorted(seen) == [i for i in range(40) if i % 3 == 0] + [99]
    for i in (i for i in range(40) if i % 3 == 0):
        err, meta = seen[i]
        assert err is None and meta == futures[i].metadata() and meta.offset >= 1000
        assert meta.serialized_key_size == (len(b"k%d" % i) if i % 2 else -1)
        assert meta.serialized_value_size == i + 1
    err, meta = seen[99]
    assert isinstance(err, ProducerClosedError) and meta.offset == -1
    assert late[0] is not None and meta == late[0].metadata()
