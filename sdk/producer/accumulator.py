"""Per-partition batch queues, filled by ``send`` and drained by the sender.

:class:`RecordAccumulator` keeps one :class:`PartitionQueue` per partition: a deque of
batches waiting to be sent, the last of which may still be *open* (accepting records), plus
the retry list and sequence state the sender owns. ``append`` encodes each record straight
into the open batch's buffer; when the record does not fit (``batch_size``),
the batch is closed and a new one opened. A batch becomes ready to send when it is closed
(full), when its ``linger_ms`` expired, or while a flush or close is in progress.

With compression, ``batch_size`` counts *estimated compressed* bytes: a batch may hold
``batch_size / ratio`` uncompressed bytes, the ratio being estimated per topic from the
batches built so far (:meth:`RecordAccumulator.observe_compression`). Unlike Java, whose
estimate improves by 0.005 per batch (~200 batches of ``batch_size`` to learn a 100:1
ratio), ours takes the ratio of any batch of at least half ``batch_size`` (a *telling*
one), and the first full batch of a topic is compressed as soon as it fills to learn it:
a batch's uncompressed size is capped at ``max_request_size`` anyway, and a batch the
broker refuses as too large is split.

Memory: every batch reserves its uncompressed limit (at least ``batch_size``, or the record
size) of ``buffer_memory`` in a :class:`BufferPool` when it opens, released when it
completes. When the pool is exhausted ``append`` returns the number of bytes it needs
instead of a future; the caller waits for them (blocking thread:
``BufferPool.reserve_blocking``; event loop: ``BufferPool.reserve_async``), up to
``max_block_ms``, and calls ``append`` again with the reservation. Outside that count: at
most two spare working buffers of built batches, kept for new batches (:meth:`recycle`),
each no larger than the largest batch limit (``max_request_size``).

Thread-safety: ``append``/``append_many`` may run on any thread (the blocking Producer
appends from its callers' threads), everything else on the producer's event loop. The
shared structures (``batches``/``open`` of each queue, the incomplete-batch set) are
guarded by one lock, held for a few microseconds per record. The partitioner runs under the
same lock.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from sdk.errors import KafkaTimeoutError, MessageTooLargeError, ProducerClosedError
from sdk.net.metadata import ClusterMetadata, TopicInfo
from sdk.producer.batch import ProducerBatch, RecordFuture
from sdk.producer.partitioner import (
    DefaultPartitioner,
    Partitioner,
    UniformStickyPartitioner,
)
from sdk.records.builder import RecordBatchBuilder
from sdk.records.compression import Compression
from sdk.records.reader import RecordBatch

__all__ = ["BufferPool", "NeedMemory", "PartitionQueue", "RecordAccumulator",
           "record_size_bound"]

_time_ns = time.time_ns
# Compression ratio estimate (see observe_compression): a small batch improves it by at
# most half; a telling batch worsens it at once, by Java's step or at most doubling it;
# Java's 5% safety factor.
_RATIO_BETTER_FACTOR = 0.5
_RATIO_WORSE_STEP = 0.05
_RATIO_SAFETY = 1.05
# Built batches' working buffers kept for reuse (RecordAccumulator.recycle).
_SPARE_BUFFERS = 2

BATCH_OVERHEAD = 61  # v2 batch header
# Worst-case framing of one record besides key, value and headers: length (5), attributes
# (1), timestamp delta (10), offset delta (5), key/value lengths (5 + 5), header count (5).
RECORD_OVERHEAD_BOUND = 36


def record_size_bound(key: bytes | None, value: bytes | None,
                      headers: Sequence[tuple[str, bytes | None]] | None) -> int:
    """An upper bound of a record's encoded size (exact sizes need the batch's deltas)."""
    size = RECORD_OVERHEAD_BOUND
    if key is not None:
        size += len(key)
    if value is not None:
        size += len(value)
    if headers:
        for hkey, hvalue in headers:
            size += 10 + len(hkey) * 4 + (len(hvalue) if hvalue is not None else 0)
    return size


class BufferPool:
    """``buffer_memory`` accounting: reserve bytes before opening a batch, release after."""

    def __init__(self, total: int, held_back: int = 0) -> None:
        """``total`` is ``buffer_memory``; ``held_back`` of it is not for batches (the
        producer keeps it for staged records, see ``sdk.producer.staging``)."""
        self.total = total
        self.capacity = total - held_back  # the most one reservation can ever get
        self._available = self.capacity
        self._cond = threading.Condition(threading.Lock())
        self._sleepers = 0  # threads in reserve_blocking (release notifies only if any)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._async_waiters: list[asyncio.Future[None]] = []

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    @property
    def available(self) -> int:
        return self._available

    def try_reserve(self, n: int) -> bool:
        with self._cond:
            if self._available >= n:
                self._available -= n
                return True
            return False

    def reserve_blocking(self, n: int, timeout_s: float) -> None:
        """Block the calling thread (never the event loop's) until ``n`` bytes are free."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            self._sleepers += 1
            try:
                while self._available < n:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise self._timeout(n, timeout_s)
                    self._cond.wait(remaining)
            finally:
                self._sleepers -= 1
            self._available -= n

    async def reserve_async(self, n: int, timeout_s: float) -> None:
        """Await (on the producer's loop) until ``n`` bytes are free."""
        if self.try_reserve(n):
            return
        deadline = time.monotonic() + timeout_s
        loop = asyncio.get_running_loop()
        while True:
            fut: asyncio.Future[None] = loop.create_future()
            # Check and register under one lock hold: a release from another thread (a
            # blocking caller giving back a surplus) between a failed check and the
            # registration found no waiter to wake, and this one slept on.
            with self._cond:
                if self._available >= n:
                    self._available -= n
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._timeout(n, timeout_s)
                self._async_waiters.append(fut)
            try:
                await asyncio.wait_for(fut, remaining)
            except TimeoutError:
                pass  # the loop checks the pool once more, then raises the timeout itself
            finally:
                with self._cond:
                    if fut in self._async_waiters:
                        self._async_waiters.remove(fut)

    def release(self, n: int) -> None:
        if n <= 0:
            return
        with self._cond:
            self._available += n
            if self._sleepers:
                self._cond.notify_all()
            waiters, self._async_waiters = self._async_waiters, []
        for fut in waiters:
            if not fut.done():
                loop = fut.get_loop()
                if self._loop is loop and _on_loop(loop):
                    fut.set_result(None)
                else:
                    loop.call_soon_threadsafe(_resolve, fut)

    def _timeout(self, n: int, timeout_s: float) -> KafkaTimeoutError:
        return KafkaTimeoutError(
            f"send blocked for {timeout_s * 1000:.0f} ms (max_block_ms): buffer_memory={self.total} "
            f"bytes are all taken by unsent batches and staged records, and {n} more are "
            f"needed (the brokers are slower than the sends, or unreachable)"
        )


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class NeedMemory(NamedTuple):
    """``append`` could not open a batch: reserve ``nbytes``, then retry on ``partition``."""

    nbytes: int
    partition: int


class PartitionQueue:
    """Batches of one partition. ``batches`` and ``open`` are shared (under the lock); the
    rest belongs to the sender on the loop thread."""

    __slots__ = (
        "batches",
        "in_flight",
        "last_acked_sequence",
        "next_sequence",
        "open",
        "partition",
        "retries",
        "topic",
    )

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.batches: deque[ProducerBatch] = deque()  # never sent, oldest first
        self.open: ProducerBatch | None = None  # accepting records; also in `batches`
        self.retries: list[ProducerBatch] = []  # to resend, in sequence / creation order
        self.in_flight: list[ProducerBatch] = []  # sent, awaiting their response, in order
        self.next_sequence = 0
        self.last_acked_sequence = -1

    def has_work(self) -> bool:
        return bool(self.batches or self.retries)

    def __repr__(self) -> str:
        return (f"<PartitionQueue {self.topic}-{self.partition} {len(self.batches)} queued "
                f"{len(self.retries)} retrying {len(self.in_flight)} in flight>")


class RecordAccumulator:
    """See the module docstring."""

    def __init__(
        self,
        *,
        batch_size: int,
        linger_s: float,
        delivery_timeout_s: float,
        compression: str,
        pool: BufferPool,
        partitioner: Partitioner,
        wake_sender: Callable[[], None],
        record_limit: int,
    ) -> None:
        self.batch_size = batch_size
        self.linger_s = linger_s
        self.delivery_timeout_s = delivery_timeout_s
        self.compression = Compression.parse(compression)
        self.pool = pool
        self.partitioner = partitioner
        self.lock = threading.Lock()
        self.queues: dict[str, dict[int, PartitionQueue]] = {}
        self.incomplete: set[ProducerBatch] = set()
        self.flushing = 0
        self.closed = False
        self.record_limit = record_limit
        self._ratios: dict[str, float] = {}  # compressed / uncompressed, per topic
        self._ratio_told: set[str] = set()  # topics with an estimate from a telling batch
        # A batch reserves its limit: one larger than the pool could never be reserved
        # (batch_size above buffer_memory less the stage's share), and every send would
        # wait out max_block_ms. Such batches are cut to the pool instead.
        self._batch_cap = min(batch_size, pool.capacity)
        self._max_uncompressed = min(max(batch_size, record_limit), pool.capacity)
        # The built-in partitioners stick to one partition per batch for keyless records:
        # bulk appends then ask them once per batch instead of once per record.
        self._sticky = isinstance(partitioner, (DefaultPartitioner, UniformStickyPartitioner))
        self.metadata: ClusterMetadata = ClusterMetadata()  # the network client's, once started
        self._wake_sender = wake_sender
        # Working buffers of built batches, for new batches to write over (see recycle).
        self._spare_buffers: list[bytearray] = []

    # ================================================================== appending

    def knows(self, topic: str) -> bool:
        """Whether ``topic``'s partitions are known (appends to it can go ahead)."""
        info = self.metadata.topics.get(topic)
        return info is not None and not info.error_code and bool(info.partition_ids)

    def append(
        self,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
        timestamp: int | None,
        on_delivery: Callable[..., Any] | None,
        reserved: int = 0,
    ) -> RecordFuture | NeedMemory | None:
        """Append one serialized record: its future, or why it could not be appended.

        None: the topic's partitions are not known yet (nothing was done). NeedMemory: the
        pool is exhausted; reserve ``nbytes`` and call again with ``reserved`` and the
        ``partition`` already chosen. ``timestamp`` None means now. Raises
        MessageTooLargeError, ProducerClosedError, or ValueError for a partition the topic
        does not have. This is the per-record hot path: keep it lean.
        """
        info = self.metadata.topics.get(topic)
        if info is None or info.error_code or not info.partition_ids:
            self.give_back(reserved)
            return None
        vlen = 0 if value is None else len(value)
        klen = -1 if key is None else len(key)
        if headers:
            size = record_size_bound(key, value, headers)
        else:
            size = RECORD_OVERHEAD_BOUND + vlen + (klen if klen > 0 else 0)
        if size > self.record_limit:
            self.give_back(reserved)
            raise self.too_large(size)
        if timestamp is None:
            timestamp = _time_ns() // 1_000_000
        with self.lock:
            if self.closed:
                self.give_back(reserved)
                raise ProducerClosedError("the producer is closed; no more records are accepted")
            if partition is None:
                partition = self.partitioner.partition(
                    topic, key, int(vlen * self._ratios[topic]) if topic in self._ratios else vlen,
                    info.partition_ids, info.available_ids)
            queues = self.queues.get(topic)
            pq = queues.get(partition) if queues is not None else None
            if pq is None:
                pq = self._new_queue(topic, partition, info.partitions)
            batch = pq.open
            if batch is not None:
                room = batch.room - size
                if room < 0 and batch.count:  # the bound is loose: check the real size
                    room = batch.limit - batch.builder.size_in_bytes() - size  # type: ignore[union-attr]
                    if room < 0:
                        self._learn_ratio(topic, batch)
                        batch = None
            if batch is None:
                opened = self._open_batch_for(pq, size, reserved)
                if isinstance(opened, NeedMemory):
                    return opened
                batch = opened
                room = batch.limit - BATCH_OVERHEAD - size
            elif reserved:
                self.give_back(reserved)
            batch.room = room
            index = batch.builder.append(None, timestamp, key, value, headers or ())  # type: ignore[union-attr]
            batch.count += 1
            fut = RecordFuture(batch, index, timestamp, klen, vlen if value is not None else -1)
            if on_delivery is not None:
                if batch.callbacks is None:
                    batch.callbacks = []
                batch.callbacks.append((fut, on_delivery, True))
            return fut

    def append_many(
        self,
        topic: str,
        partition: int | None,
        keys: list[bytes | None] | None,
        values: list[bytes | None],
        start: int,
        parts: list[list[Any]],
        timestamp: int | list[int],
        reserved: int = 0,
        plain: bool = False,
        created: float | None = None,
        sized: bool = False,
    ) -> tuple[int, NeedMemory | None]:
        """Append ``values[start:]`` (with ``keys``, or no keys) under one lock hold.

        ``timestamp`` is one for all records or a list indexed like ``values``. ``plain``
        promises that no value is None; without keys it enables a tight loop that fills one
        batch at a time (and consults a sticky partitioner once per batch). ``created``
        backdates the batches this call opens (their linger started when the records were
        staged, see ``sdk.producer.staging``). ``sized`` promises that every record fits
        ``record_limit`` (the stage checked each), which spares the bulk path a scan.

        Extends ``parts`` with ``[batch, first offset delta, count, timestamp]`` segments
        (the BulkFuture's). Returns ``(len(values), None)`` when all were appended, or
        ``(i, NeedMemory)`` when record ``i`` needs memory first: reserve it and call again
        from ``i`` with ``reserved`` and ``partition=need.partition`` for that record.
        Raises like :meth:`append`; None as the second item with ``i == -1``: the topic's
        partitions are not known yet.
        """
        info = self.metadata.topics.get(topic)
        if info is None or info.error_code or not info.partition_ids:
            self.give_back(reserved)
            return -1, None
        if plain and keys is None and (partition is not None or self._sticky):
            return self._append_run(topic, info, partition, values, start, parts,  # type: ignore[arg-type]
                                    timestamp, reserved, created, sized)
        stamps = timestamp if type(timestamp) is list else None
        ids, avail = info.partition_ids, info.available_ids
        choose = self.partitioner.partition
        limit = self.record_limit
        scale = self._ratios.get(topic, 1.0)  # partitioners count estimated wire bytes
        first_partition = partition if partition is not None and keys is None else None
        n = len(values)
        i = start
        seg_batch: ProducerBatch | None = None
        seg_first = seg_last = 0
        seg_ts = 0
        with self.lock:
            queues = self._open_queues(topic, reserved)
            try:
                while i < n:
                    value = values[i]
                    key = keys[i] if keys is not None else None
                    ts: int = stamps[i] if stamps is not None else timestamp  # type: ignore[assignment]
                    vlen = 0 if value is None else len(value)
                    size = RECORD_OVERHEAD_BOUND + vlen + (len(key) if key else 0)
                    if size > limit:
                        raise self.too_large(size, i)
                    if partition is not None:
                        p = partition
                    elif first_partition is not None:
                        p, first_partition = first_partition, None
                    else:
                        p = choose(topic, key, int(vlen * scale), ids, avail)
                    pq = queues.get(p)
                    if pq is None:
                        pq = self._new_queue(topic, p, info.partitions)
                    batch = pq.open
                    if batch is not None:
                        room = batch.room - size
                        if room < 0 and batch.count:
                            room = batch.limit - batch.builder.size_in_bytes() - size  # type: ignore[union-attr]
                            if room < 0:
                                self._learn_ratio(topic, batch)
                                batch = None
                    if batch is None:
                        opened = self._open_batch_for(pq, size, reserved, created)
                        reserved = 0
                        if isinstance(opened, NeedMemory):
                            return i, opened
                        batch = opened
                        room = batch.limit - BATCH_OVERHEAD - size
                    batch.room = room
                    index = batch.builder.append(None, ts, key, value, ())  # type: ignore[union-attr]
                    batch.count += 1
                    if batch is not seg_batch:
                        if seg_batch is not None:
                            parts.append([seg_batch, seg_first, seg_last - seg_first + 1,
                                          seg_ts])
                        seg_batch, seg_first, seg_ts = batch, index, ts
                    seg_last = index
                    i += 1
            finally:
                if seg_batch is not None:
                    parts.append([seg_batch, seg_first, seg_last - seg_first + 1, seg_ts])
        self.give_back(reserved)
        return n, None

    def _append_run(self, topic: str, info: TopicInfo, partition: int | None,
                    values: list[bytes], start: int, parts: list[list[Any]],
                    timestamp: int | list[int], reserved: int,
                    created: float | None, sized: bool) -> tuple[int, NeedMemory | None]:
        """append_many for keyless, non-null values: batch by batch, each batch's records
        encoded in one pass (``RecordBatchBuilder.append_values``).

        Without an explicit partition the (sticky) partitioner picks one per batch and is
        told when a batch filled (``on_new_batch``), which is when Java's built-in
        partitioner moves on too.
        """
        n = len(values)
        if start < n and not sized:
            largest = max(map(len, values[start:]))
            if RECORD_OVERHEAD_BOUND + largest > self.record_limit:
                self.give_back(reserved)
                index = next(j for j in range(start, n) if len(values[j]) == largest)
                raise self.too_large(RECORD_OVERHEAD_BOUND + largest, index)
        stamps = timestamp if isinstance(timestamp, list) else [timestamp] * n
        partitioner = self.partitioner
        scale = self._ratios.get(topic, 1.0)  # partitioners count estimated wire bytes
        i = start
        p = partition
        switched = False
        with self.lock:
            queues = self._open_queues(topic, reserved)
            while i < n:
                if p is None:
                    p = partitioner.partition(topic, None, int(len(values[i]) * scale),
                                              info.partition_ids, info.available_ids)
                pq = queues.get(p)
                if pq is None:
                    pq = self._new_queue(topic, p, info.partitions)
                size = RECORD_OVERHEAD_BOUND + len(values[i])
                batch = pq.open
                if batch is not None and size > batch.room and batch.count:
                    batch.room = batch.limit - batch.builder.size_in_bytes()  # type: ignore[union-attr]
                    if size > batch.room:
                        if partition is None and not switched:
                            # Sticky: this batch is full, move on (once: the next
                            # partition's batch may be full too, then open a new one).
                            partitioner.on_new_batch(topic, p)
                            p, switched = None, True
                            continue
                        batch = None
                if batch is None:
                    opened = self._open_batch_for(pq, size, reserved, created)
                    reserved = 0
                    if isinstance(opened, NeedMemory):
                        return i, opened
                    batch = opened
                builder = batch.builder
                assert builder is not None
                first = batch.count
                size_before = builder.size_in_bytes()
                j = builder.append_values(values, stamps, i, n, batch.limit)
                batch.count = first + (j - i)
                batch.room = batch.limit - builder.size_in_bytes()
                parts.append([batch, first, j - i, stamps[i]])
                switched = False
                if j < n:
                    self._learn_ratio(topic, batch)
                if partition is None:
                    if j < n:  # the batch is full: move on, as the partitioner would
                        partitioner.on_new_batch(topic, p)
                        p, switched = None, True
                    elif j - i > 1:
                        # The run ended with room left: tell the partitioner how many bytes
                        # went to its sticky partition (it counted the first record's value
                        # only), so it still moves on after batch_size bytes over several
                        # calls. The batch's growth counts them, records' framing included.
                        written = builder.size_in_bytes() - size_before - len(values[i])
                        partitioner.partition(topic, None, int(written * scale),
                                              info.partition_ids, info.available_ids)
                i = j
        self.give_back(reserved)
        return n, None

    def _open_queues(self, topic: str, reserved: int) -> dict[int, PartitionQueue]:
        """The partition queues of ``topic`` for a bulk append (under lock); once the
        accumulator is closed, ProducerClosedError (``reserved`` is given back)."""
        if self.closed:
            self.give_back(reserved)
            raise ProducerClosedError("the producer is closed; no more records are accepted")
        queues = self.queues.get(topic)
        if queues is None:
            queues = self.queues[topic] = {}
        return queues

    def too_large(self, size: int, index: int | None = None) -> MessageTooLargeError:
        which = "record" if index is None else f"record {index}"
        return MessageTooLargeError(
            f"{which} of about {size} bytes is larger than max_request_size / buffer_memory "
            f"allow ({self.record_limit + BATCH_OVERHEAD} bytes for a batch of one)"
        )

    def _new_queue(self, topic: str, partition: int, known: Mapping[int, Any]) -> PartitionQueue:
        if partition not in known:
            if type(partition) is not int:
                raise TypeError(f"partition must be an int, not {partition!r}")
            raise ValueError(f"topic {topic!r} has partitions 0..{max(known)}; "
                             f"{partition} is not one of them")
        pq = PartitionQueue(topic, partition)
        self.queues.setdefault(topic, {})[partition] = pq
        return pq

    def _open_batch_for(self, pq: PartitionQueue, size: int, reserved: int,
                        created: float | None = None) -> ProducerBatch | NeedMemory:
        """Open a new batch in ``pq`` for a record of (bound) ``size`` bytes (under lock).

        The batch takes ``buffer_memory`` for its uncompressed limit, or for the record if
        that is larger: out of ``reserved`` (bytes the caller reserved already; any surplus
        is given back), else from the pool. NeedMemory when the pool is short or
        ``reserved`` is not enough; the reservation is given back then. Either way the
        caller's reservation is used up.
        """
        limit = self.batch_limit(pq.topic)
        need = max(limit, size + BATCH_OVERHEAD)
        if reserved >= need:
            self.give_back(reserved - need)
        elif reserved or not self.pool.try_reserve(need):
            self.give_back(reserved)
            return NeedMemory(need, pq.partition)
        return self._open_batch(pq, need, limit, created)

    def _open_batch(self, pq: PartitionQueue, reserved: int, limit: int,
                    created: float | None = None) -> ProducerBatch:
        if created is None:
            created = time.monotonic()
        builder = RecordBatchBuilder(self.compression, buffer=self._spare_buffer(limit))
        batch = ProducerBatch(pq, builder, created, created + self.delivery_timeout_s, reserved)
        batch.limit = limit
        pq.open = batch
        pq.batches.append(batch)
        self.incomplete.add(batch)
        # A closed batch is ready now, and a new linger deadline may be sooner than the
        # sender's sleep: either way the sender must look again.
        self._wake_sender()
        return batch

    def recycle(self, buffer: bytearray | None) -> None:
        """Keep a built batch's working buffer (``RecordBatchBuilder.take_buffer``) for a
        new batch: writing over mapped pages instead of growing a fresh ~1 MB buffer per
        batch, which page-faulted as the heap was trimmed and grown again (1 KB lz4: 0.06 to
        0.1 faults per record, 0 to 0.05 with reuse). Any thread; at most _SPARE_BUFFERS are
        kept, outside ``buffer_memory`` (each at most the largest batch limit)."""
        if buffer is not None and len(self._spare_buffers) < _SPARE_BUFFERS:
            self._spare_buffers.append(buffer)

    def _spare_buffer(self, limit: int) -> bytearray | None:
        """A spare buffer cut to at most ``limit`` bytes. The limit moves with the ratio
        estimate, so spares often are a little larger (dropping them, a third of the lz4
        batches started fresh again); CPython keeps the allocation when at most half is cut
        and frees the rest otherwise, so a batch holds at most twice what it reserved."""
        try:
            buffer = self._spare_buffers.pop()  # atomic: recycle may run on another thread
        except IndexError:
            return None
        if len(buffer) > limit:
            del buffer[limit:]
        return buffer

    def give_back(self, n: int) -> None:
        if n > 0:
            self.pool.release(n)

    def split_batch(self, batch: ProducerBatch) -> list[ProducerBatch]:
        """``batch``'s records (from its built bytes) in new batches of its partition, in
        order, each holding at most half of its record bytes and at most ``batch_size``,
        so a batch refused again splits again until single records remain.

        The parts share the batch's creation time and deadline and reserve no buffer
        memory (the batch keeps its share until it completes). They are not queued: the
        sender sends them next, as retries.
        """
        assert batch.payload is not None
        rb = RecordBatch(batch.payload)
        _, start, end = rb.record_bytes()
        limit = max(1, min(self.batch_size, BATCH_OVERHEAD + (end - start) // 2))
        parts: list[ProducerBatch] = []
        builder: RecordBatchBuilder | None = None
        with self.lock:
            for record in rb.records():
                if builder is None or not builder.has_room_for(
                        record.key, record.value, record.headers, limit, record.timestamp):
                    builder = RecordBatchBuilder(self.compression)
                    part = ProducerBatch(batch.queue, builder, batch.created, batch.deadline, 0)
                    part.limit = limit
                    parts.append(part)
                    self.incomplete.add(part)
                builder.append(None, record.timestamp, record.key, record.value, record.headers)
                parts[-1].count += 1
        return parts

    def regroup_batch(self, batch: ProducerBatch, refused: dict[int, BaseException]
                      ) -> list[tuple[int, ProducerBatch]]:
        """``batch``'s records as ``(index of the first record, part)`` runs, in order, after
        the broker refused the records ``refused`` names (KIP-467 record errors): each
        refused record is a part of its own, failed at once with its error and never sent;
        each run of the others is a new batch for the sender to send next, as a retry (its
        parts hold no more than ``batch`` did, so they fit wherever it fit)."""
        assert batch.payload is not None
        parts: list[tuple[int, ProducerBatch]] = []
        current: ProducerBatch | None = None
        with self.lock:
            for index, record in enumerate(RecordBatch(batch.payload).records()):
                error = refused.get(index)
                if error is not None:
                    failed = ProducerBatch(batch.queue, RecordBatchBuilder(), batch.created,
                                           batch.deadline, 0)
                    failed.count = 1
                    failed.fail(error)
                    parts.append((index, failed))
                    current = None
                    continue
                if current is None:
                    current = ProducerBatch(batch.queue, RecordBatchBuilder(self.compression),
                                            batch.created, batch.deadline, 0)
                    current.limit = batch.limit
                    parts.append((index, current))
                    self.incomplete.add(current)
                assert current.builder is not None
                current.builder.append(None, record.timestamp, record.key, record.value,
                                       record.headers)
                current.count += 1
        return parts

    # ================================================================== for the sender

    def is_ready(self, pq: PartitionQueue, now: float) -> bool:
        """Whether the oldest unsent batch of ``pq`` should be sent now (call under lock)."""
        head = pq.batches[0]
        return (
            head is not pq.open
            or now >= head.created + self.linger_s
            or self.flushing > 0
            or self.closed
            or head.builder is None
            or head.builder.size_in_bytes() >= head.limit
        )

    def any_ready(self, now: float) -> bool:
        """Whether some partition has a batch to send now (full, or its linger passed)."""
        with self.lock:
            return any(pq.batches and self.is_ready(pq, now)
                       for queues in self.queues.values() for pq in queues.values())

    # ------------------------------------------------------------------ compression estimate

    def batch_limit(self, topic: str) -> int:
        """Uncompressed bytes a new batch of ``topic`` may hold: ``batch_size`` of estimated
        *compressed* bytes, as Java does, so compressible data makes full-sized batches."""
        if not self.compression:
            return self._batch_cap
        ratio = self._ratios.get(topic, 1.0) * _RATIO_SAFETY
        if ratio >= 1.0:
            return self._batch_cap
        return min(int(self.batch_size / ratio), self._max_uncompressed)

    def observe_compression(self, topic: str, uncompressed: int, compressed: int) -> None:
        """Update the topic's compression ratio estimate from a built batch.

        A *telling* batch (at least half of ``batch_size`` uncompressed) sets it to its own
        ratio when better, and when worse to its ratio or Java's step more, whichever is
        higher, but at most double. A smaller batch (a lone record, a few that lingered)
        improves it by at most half and never worsens it: the batch header is most of
        such a batch, and its ratio says little (at 100:1, one made batches 12x smaller).
        Only full batches depend on the estimate, and those are telling.
        """
        if uncompressed <= 0:
            return
        observed = compressed / uncompressed
        current = self._ratios.get(topic, 1.0)
        telling = uncompressed >= self.batch_size // 2
        if observed > current:
            if telling:
                self._ratios[topic] = max(observed, current + min(_RATIO_WORSE_STEP, current))
        elif observed < current:
            if not telling:
                observed = max(current * _RATIO_BETTER_FACTOR, observed)
            self._ratios[topic] = observed
        if telling:
            self._ratio_told.add(topic)

    def _learn_ratio(self, topic: str, batch: ProducerBatch) -> None:
        """A batch filled (under lock): until a batch of at least half ``batch_size`` was
        built, it is compressed at once to learn the ratio, so the batches opened after it
        are sized by it. Otherwise the first drain of a send loop (up to a megabyte staged)
        opened dozens of ``batch_size`` batches before the sender built one."""
        if self.compression and topic not in self._ratio_told and batch.builder is not None:
            builder = batch.builder
            self.observe_compression(topic, builder.size_in_bytes(), builder.compressed_size())

    def estimated_size(self, batch: ProducerBatch) -> int:
        """Expected size on the wire of an unsent batch (its compressed size estimate)."""
        builder = batch.builder
        if builder is None:
            return len(batch.payload) if batch.payload is not None else 0
        raw = builder.size_in_bytes()
        if not self.compression:
            return raw
        return int(raw * min(1.0, self._ratios.get(batch.topic, 1.0) * _RATIO_SAFETY))

    def pop_head(self, pq: PartitionQueue) -> ProducerBatch:
        """Take the oldest unsent batch out of the queue, closing it if open (under lock)."""
        batch = pq.batches.popleft()
        if batch is pq.open:
            pq.open = None
        return batch

    def next_linger_deadline(self, pq: PartitionQueue) -> float:
        head = pq.batches[0]
        return head.created + self.linger_s

    def finished(self, batch: ProducerBatch) -> None:
        """Bookkeeping after a batch completed or failed: memory and the incomplete set."""
        with self.lock:
            self.incomplete.discard(batch)
        self.pool.release(batch.reserved)
        batch.reserved = 0

    def snapshot_incomplete(self) -> list[ProducerBatch]:
        with self.lock:
            return list(self.incomplete)

    def all_queues(self) -> list[PartitionQueue]:
        with self.lock:
            return [pq for queues in self.queues.values() for pq in queues.values()]

    def expire_unsent(self, now: float) -> list[ProducerBatch]:
        """Remove and return never-sent batches whose delivery deadline passed."""
        expired: list[ProducerBatch] = []
        with self.lock:
            for queues in self.queues.values():
                for pq in queues.values():
                    while pq.batches and pq.batches[0].deadline <= now:
                        expired.append(self.pop_head(pq))
        return expired

    def close(self) -> None:
        """Refuse further records; open batches become ready."""
        with self.lock:
            self.closed = True
