"""A producer batch and the light per-record futures that point at it.

One :class:`ProducerBatch` holds the records of one partition as an open
:class:`sdk.records.builder.RecordBatchBuilder` (records are encoded as they are appended),
then the built bytes while it is sent and retried. Its completion (offset or error) is what
every record future reads, Java style: a :class:`RecordFuture` is four fields (batch, offset
delta, timestamp, sizes), not an ``asyncio.Future`` or ``concurrent.futures.Future`` per
record, which would cost more than encoding the record.

``RecordFuture`` has the interface of ``concurrent.futures.Future`` (``result``,
``exception``, ``done``, ``add_done_callback``, ``cancel``...) and is awaitable on the
producer's event loop (``meta = await fut``). :class:`BulkFuture` does the same for the
records of one ``send_many`` call.

A batch the broker refuses as MESSAGE_TOO_LARGE is *split* (``Sender._split``): its records
go out again in smaller batches, listed in its ``split``; it completes once they all have,
and a record's outcome is that of the part that carried it (:meth:`ProducerBatch.part_of`).

Threading: a batch completes on the producer's event loop thread; blocking waiters use a
``threading.Event`` that the first of them makes (most batches never have one); callbacks
registered after completion run at once in the registering thread, before it on the loop
thread (delivery callbacks must be quick and must not block on the producer).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any

from sdk.errors import KafkaTimeoutError
from sdk.records import fast_path
from sdk.records.builder import RecordBatchBuilder
from sdk.types import RecordMetadata

if TYPE_CHECKING:
    from sdk.producer.accumulator import PartitionQueue

__all__ = ["BulkFuture", "DeliveryCallback", "ProducerBatch", "RecordFuture", "run_callback"]

log = logging.getLogger(__name__)

DeliveryCallback = Callable[[BaseException | None, RecordMetadata], Any]
"""``on_delivery(err, metadata)``: err is None on success; metadata.offset is -1 on failure."""
# Per delivery function: the record's index in its batch, send time, key and value sizes.
DeliveryInfo = tuple[list[int], list[int], list[int], list[int]]

# Guards callback lists against a registration racing the completion (rare, cheap).
_CALLBACKS_LOCK = threading.Lock()


class ProducerBatch:
    """The records of one partition sent together; see the module docstring."""

    __slots__ = (
        "_aio_future",
        "attempts",
        "base_offset",
        "base_sequence",
        "builder",
        "callbacks",
        "count",
        "created",
        "deadline",
        "deliveries",
        "delivery_info",
        "done",
        "error",
        "event",
        "in_flight",
        "last_error",
        "limit",
        "log_append_time",
        "outcome_unknown",
        "parent",
        "partition",
        "payload",
        "payload_state",
        "producer_epoch",
        "producer_id",
        "queue",
        "reserved",
        "retry_at",
        "room",
        "split",
        "topic",
    )

    def __init__(self, queue: PartitionQueue, builder: RecordBatchBuilder, created: float,
                 deadline: float, reserved: int) -> None:
        self.queue = queue
        self.topic = queue.topic
        self.partition = queue.partition
        self.builder: RecordBatchBuilder | None = builder
        self.created = created
        self.deadline = deadline
        self.reserved = reserved
        self.limit = 0  # uncompressed bytes this batch may hold (see RecordAccumulator)
        self.room = 0  # bytes left under `limit` by a (loose) upper bound
        self.count = 0
        self.callbacks: list[tuple[Any, Callable[..., Any], bool]] | None = None
        # Staged records' on_delivery functions, and per record its index here, send time,
        # key and value sizes (four lists of ints, indexed like the functions): see
        # add_deliveries.
        self.deliveries: list[DeliveryCallback] | None = None
        self.delivery_info: DeliveryInfo | None = None
        self.done = False
        self.error: BaseException | None = None
        self.base_offset = -1
        self.log_append_time = -1
        self.event: threading.Event | None = None  # made by the first blocking waiter
        self._aio_future: asyncio.Future[None] | None = None
        # After a split: [(index of its first record here, part)]; a part's parent.
        self.split: list[tuple[int, ProducerBatch]] | None = None
        self.parent: ProducerBatch | None = None
        # Sending state (owned by the sender, on the loop thread).
        self.payload: bytes | None = None
        self.payload_state: tuple[int, int, int] | None = None  # (pid, epoch, seq) encoded
        self.attempts = 0
        self.retry_at = 0.0
        self.in_flight = False
        self.outcome_unknown = False  # an attempt ended without a definite answer
        self.last_error: BaseException | None = None
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1

    # ------------------------------------------------------------------ split batches

    def part_of(self, index: int) -> tuple[ProducerBatch, int]:
        """The batch that carried record ``index`` of this one, and the record's index there:
        itself unless the batch was split."""
        batch = self
        while batch.split is not None:
            parts = batch.split
            first, batch = parts[bisect_right([f for f, _ in parts], index) - 1]
            index -= first
        return batch, index

    def segments(self, first: int, n: int) -> list[tuple[ProducerBatch, int, int]]:
        """Records ``first`` to ``first + n`` as ``(batch that carried them, index there,
        count)`` runs, in order."""
        if self.split is None:
            return [(self, first, n)]
        out: list[tuple[ProducerBatch, int, int]] = []
        for start, part in self.split:
            lo, hi = max(first, start), min(first + n, start + part.count)
            if lo < hi:
                out.extend(part.segments(lo - start, hi - lo))
        return out

    # ------------------------------------------------------------------ completion

    def complete(self, base_offset: int, log_append_time: int = -1) -> None:
        self._finish(base_offset, log_append_time, None)

    def fail(self, error: BaseException) -> None:
        self._finish(-1, -1, error)

    def _finish(self, base_offset: int, log_append_time: int, error: BaseException | None) -> None:
        if self.done:
            return
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.error = error
        self.builder = None
        self.payload = None
        with _CALLBACKS_LOCK:
            self.done = True
            callbacks, self.callbacks = self.callbacks, None
            deliveries, self.deliveries = self.deliveries, None
            info, self.delivery_info = self.delivery_info, None
            event = self.event
        if event is not None:
            event.set()
        fut = self._aio_future
        if fut is not None and not fut.done():
            fut.set_result(None)
        if deliveries:
            run_deliveries(self, deliveries, info)  # type: ignore[arg-type]
        if callbacks:
            run_callbacks(self, callbacks)

    def add_callback(self, record_future: Any, fn: Callable[..., Any], is_delivery: bool) -> None:
        """Run ``fn`` when the batch completes (at once if it has)."""
        with _CALLBACKS_LOCK:
            if not self.done:
                if self.callbacks is None:
                    self.callbacks = []
                self.callbacks.append((record_future, fn, is_delivery))
                return
        run_callback(record_future, fn, is_delivery)

    def add_callbacks(self, entries: list[tuple[Any, Callable[..., Any], bool]]) -> None:
        """:meth:`add_callback` for many ``(record future, fn, is_delivery)``, in order,
        under one lock (the stage hands over a drained run's callbacks this way)."""
        with _CALLBACKS_LOCK:
            if not self.done:
                if self.callbacks is None:
                    self.callbacks = entries
                else:
                    self.callbacks += entries
                return
        run_callbacks(self, entries)

    def add_deliveries(self, fns: list[DeliveryCallback], info: DeliveryInfo) -> None:
        """``fns[n](error, metadata)`` for record ``info[0][n]`` of this batch once it
        completes (at once if it has); ``info`` is four lists indexed like ``fns``: the
        record's index here, send time, key size and value size. A staged record's
        ``on_delivery`` comes this way: no future and no tuple kept per record until
        delivery. They run before the callbacks of :meth:`add_callback`."""
        with _CALLBACKS_LOCK:
            if not self.done:
                if self.deliveries is None:
                    self.deliveries, self.delivery_info = fns, info
                else:
                    self.deliveries += fns
                    for mine, more in zip(self.delivery_info, info):  # type: ignore[arg-type]
                        mine += more
                return
        run_deliveries(self, fns, info)

    def wait(self, timeout: float | None) -> None:
        with _CALLBACKS_LOCK:
            if self.done:
                return
            event = self.event
            if event is None:
                event = self.event = threading.Event()
        if not event.wait(timeout):
            raise KafkaTimeoutError(f"record not acknowledged within {timeout:g} s")

    def aio_wait(self) -> asyncio.Future[None]:
        """A future of the running loop that resolves when the batch completes."""
        fut = self._aio_future
        if fut is None:
            fut = self._aio_future = asyncio.get_running_loop().create_future()
            if self.done:
                fut.set_result(None)
        return fut

    def __repr__(self) -> str:
        state = "done" if self.done else ("in flight" if self.in_flight else "pending")
        return f"<ProducerBatch {self.topic}-{self.partition} {self.count} records {state}>"


def run_callback(record_future: Any, fn: Callable[..., Any], is_delivery: bool) -> None:
    try:
        if is_delivery:
            fn(record_future.exception(0), record_future.metadata())
        else:
            fn(record_future)
    except Exception:  # a user's callback must not break delivery of the others
        log.exception("producer callback %r raised", fn)


def run_callbacks(batch: ProducerBatch,
                  callbacks: list[tuple[Any, Callable[..., Any], bool]]) -> None:
    """Run the callbacks of ``batch``, done, in order: :func:`run_callback` for each, with
    the delivery callbacks of its own records inlined (the batch's fields read once, the
    metadata built without the frozen dataclass's ``__init__``; ~1 µs less per record)."""
    if batch.split is not None:  # a record's outcome is its part's: the general way
        for entry in callbacks:
            run_callback(*entry)
        return
    error = batch.error
    topic, partition = batch.topic, batch.partition
    base, appended = batch.base_offset, batch.log_append_time
    metadata = new_metadata
    for record_future, fn, is_delivery in callbacks:
        try:
            if not is_delivery or record_future._batch is not batch:
                run_callback(record_future, fn, is_delivery)
                continue
            fn(error, metadata(topic, partition,
                               base + record_future._index if base >= 0 else -1,
                               appended if appended >= 0 else record_future._timestamp,
                               record_future._key_size, record_future._value_size))
        except Exception:  # a user's callback must not break delivery of the others
            log.exception("producer callback %r raised", fn)


def run_deliveries(batch: ProducerBatch, fns: list[DeliveryCallback], info: DeliveryInfo
                   ) -> None:
    """Run the delivery functions :meth:`ProducerBatch.add_deliveries` took, in order, as
    :func:`run_callback` runs a record future's: ``fn(error or None, RecordMetadata)``."""
    make = new_metadata
    topic, partition = batch.topic, batch.partition
    base, appended, error = batch.base_offset, batch.log_append_time, batch.error
    split = batch.split is not None
    for fn, index, stamp, key_size, value_size in zip(fns, *info):
        try:
            if split:  # the record's outcome is that of the part that carried it
                part, at = batch.part_of(index)
                fn(part.error, make(part.topic, part.partition,
                                    part.base_offset + at if part.base_offset >= 0 else -1,
                                    part.log_append_time if part.log_append_time >= 0
                                    else stamp, key_size, value_size))
                continue
            fn(error, make(topic, partition, base + index if base >= 0 else -1,
                           appended if appended >= 0 else stamp, key_size, value_size))
        except Exception:  # a user's callback must not break delivery of the others
            log.exception("producer callback %r raised", fn)


_new = object.__new__
_FIELDS = ("topic", "partition", "offset", "timestamp", "serialized_key_size",
           "serialized_value_size")
_SLOT_SETTERS = tuple(getattr(RecordMetadata, name).__set__ for name in _FIELDS)


def _metadata_pure(topic: str, partition: int, offset: int, timestamp: int, key_size: int,
                   value_size: int) -> RecordMetadata:
    """``RecordMetadata(...)`` with its slots written directly: the frozen dataclass's
    ``__init__`` (``object.__setattr__`` per field) costs twice as much."""
    md = _new(RecordMetadata)
    set_topic, set_partition, set_offset, set_ts, set_ks, set_vs = _SLOT_SETTERS
    set_topic(md, topic)
    set_partition(md, partition)
    set_offset(md, offset)
    set_ts(md, timestamp)
    set_ks(md, key_size)
    set_vs(md, value_size)
    return md


# The compiled twin (sdk.records.fast_path): the same object in ~60 ns instead of ~350 ns,
# untracked by the cyclic GC (its values are atomic).
new_metadata: Callable[[str, int, int, int, int, int], RecordMetadata] = (
    _metadata_pure if fast_path.compiled_slot_maker is None
    else fast_path.compiled_slot_maker(RecordMetadata, _FIELDS))


class RecordFuture:
    """The outcome of one sent record: a light, awaitable ``concurrent.futures.Future`` look-alike."""

    __slots__ = ("_batch", "_index", "_key_size", "_timestamp", "_value_size")

    def __init__(self, batch: ProducerBatch, index: int, timestamp: int, key_size: int,
                 value_size: int) -> None:
        self._batch = batch
        self._index = index
        self._timestamp = timestamp
        self._key_size = key_size
        self._value_size = value_size

    # Hooks for a record that is not in a batch yet (sdk.producer.staging.StagedFuture).
    def _batch_now(self) -> ProducerBatch | None:
        return self._batch

    def _batch_waiting(self, timeout: float | None) -> ProducerBatch:
        return self._batch

    def _batch_awaiting(self) -> Generator[Any, None, ProducerBatch]:
        return self._batch
        yield  # a generator, so a subclass may wait

    def _add_callback(self, fn: Callable[..., Any], is_delivery: bool) -> None:
        self._batch.add_callback(self, fn, is_delivery)

    @property
    def topic(self) -> str:
        return self._batch.topic

    @property
    def partition(self) -> int:
        return self._batch.partition

    def done(self) -> bool:
        b = self._batch_now()
        return b is not None and b.done

    def running(self) -> bool:
        return not self.done()

    def cancelled(self) -> bool:
        return False

    def cancel(self) -> bool:
        """Records cannot be taken back once handed to the producer: always False."""
        return False

    def _error_of(self, b: ProducerBatch) -> BaseException | None:
        """The record's error once ``b``, its batch, is done."""
        return b.error if b.split is None else b.part_of(self._index)[0].error

    def metadata(self) -> RecordMetadata:
        """Metadata of the completed record (offset -1 if it failed or acks=0)."""
        b, index = self._batch, self._index
        if b.split is not None:
            b, index = b.part_of(index)
        offset = b.base_offset + index if b.base_offset >= 0 else -1
        ts = b.log_append_time if b.log_append_time >= 0 else self._timestamp
        return new_metadata(b.topic, b.partition, offset, ts, self._key_size, self._value_size)

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """Wait up to ``timeout`` seconds; the metadata, or raise the delivery error.

        Raises KafkaTimeoutError (a TimeoutError) when the record is still in flight.
        """
        b = self._batch_waiting(timeout)
        if not b.done:
            b.wait(timeout)
        error = self._error_of(b)
        if error is not None:
            raise error
        return self.metadata()

    def exception(self, timeout: float | None = None) -> BaseException | None:
        b = self._batch_waiting(timeout)
        if not b.done:
            b.wait(timeout)
        return self._error_of(b)

    def add_done_callback(self, fn: Callable[[RecordFuture], Any]) -> None:
        """``fn(future)`` when the record completes (runs at once if it has)."""
        self._add_callback(fn, False)

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        b = yield from self._batch_awaiting()
        if not b.done:
            # shield: a cancelled awaiter must not cancel the batch's shared future.
            yield from asyncio.shield(b.aio_wait()).__await__()
        error = self._error_of(b)
        if error is not None:
            raise error
        return self.metadata()

    def __repr__(self) -> str:
        b = self._batch
        state = "failed" if b.error is not None else ("done" if b.done else "pending")
        return f"<RecordFuture {b.topic}-{b.partition} {state}>"


class BulkFuture:
    """The outcome of the records of one ``send_many`` call, in the order given.

    ``result()`` returns their RecordMetadata list, or raises the first delivery error;
    ``errors()`` lists ``(index, error)`` for every failed record.
    """

    __slots__ = ("_chunks", "_parts", "_topic")

    def __init__(self, topic: str, parts: list[list[Any]],
                 chunks: Sequence[tuple[Sequence[Any], Sequence[Any] | None]] = ()) -> None:
        self._topic = topic
        self._parts = parts  # (batch, first offset delta, record count, timestamp)
        # The serialized (values, keys or None) in the order given: RecordMetadata's sizes are
        # measured when asked for, not at send time (len() per record costs ~10% of a send).
        self._chunks = chunks

    def _sizes(self) -> tuple[list[int], list[int]]:
        """Serialized (key sizes, value sizes) in the order given, -1 for None (as Java)."""
        key_sizes: list[int] = []
        value_sizes: list[int] = []
        for values, keys in self._chunks:
            value_sizes += [-1 if v is None else len(v) for v in values]
            key_sizes += ([-1] * len(values) if keys is None
                          else [-1 if k is None else len(k) for k in keys])
        return key_sizes, value_sizes

    def __len__(self) -> int:
        return sum(n for _, _, n, _ in self._parts)

    def done(self) -> bool:
        return all(b.done for b, _, _, _ in self._parts)

    def cancel(self) -> bool:
        return False

    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return not self.done()

    def _wait(self, timeout: float | None) -> None:
        # By index, re-reading the part waited for: records held for their topic's
        # metadata (sdk.producer.held) are replaced by their batches when appended.
        deadline = None if timeout is None else time.monotonic() + timeout
        parts = self._parts
        i = 0
        while i < len(parts):
            b = parts[i][0]
            if b.done:
                i += 1
            else:
                b.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def _carried(self) -> list[tuple[ProducerBatch, int, int, int]]:
        """The parts as ``(batch, first offset delta, count, timestamp)``, split batches
        replaced by the batches that carried their records."""
        if all(b.split is None for b, _, _, _ in self._parts):
            return self._parts  # type: ignore[return-value]
        return [(part, i, k, ts) for b, first, n, ts in self._parts
                for part, i, k in b.segments(first, n)]

    def errors(self, timeout: float | None = None) -> list[tuple[int, BaseException]]:
        self._wait(timeout)
        out: list[tuple[int, BaseException]] = []
        i = 0
        for b, _, n, _ in self._carried():
            if b.error is not None:
                out.extend((i + k, b.error) for k in range(n))
            i += n
        return out

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        return next((b.error for b, _, _, _ in self._carried() if b.error is not None), None)

    def result(self, timeout: float | None = None) -> list[RecordMetadata]:
        self._wait(timeout)
        return self._collect()

    def _collect(self) -> list[RecordMetadata]:
        out: list[RecordMetadata] = []
        ksizes, vsizes = self._sizes()
        known = bool(vsizes)  # sizes of a BulkFuture built without its records: -1
        i = 0  # index of the part's first record in the order given
        for b, first, n, ts in self._carried():
            if b.error is not None:
                raise b.error
            stamp = b.log_append_time if b.log_append_time >= 0 else ts
            base = b.base_offset + first if b.base_offset >= 0 else -1
            topic, partition, make = b.topic, b.partition, new_metadata
            out.extend(make(
                topic, partition, base + k if base >= 0 else -1, stamp,
                ksizes[i + k] if known else -1,
                vsizes[i + k] if known else -1) for k in range(n))
            i += n
        return out

    def add_done_callback(self, fn: Callable[[BulkFuture], Any]) -> None:
        """``fn(bulk_future)`` once every record has completed."""
        parts = self._parts
        at = [0]  # the part waited for; one waits at a time, so no lock is needed

        def next_part(_: Any = None) -> None:
            i = at[0]
            while i < len(parts):
                b = parts[i][0]
                if not b.done:
                    at[0] = i
                    b.add_callback(None, next_part, False)  # re-reads part i when done
                    return
                i += 1
            try:
                fn(self)
            except Exception:
                log.exception("producer callback %r raised", fn)

        next_part()

    def __await__(self) -> Generator[Any, None, list[RecordMetadata]]:
        parts = self._parts
        i = 0
        while i < len(parts):
            b = parts[i][0]
            if b.done:
                i += 1
            else:
                yield from asyncio.shield(b.aio_wait()).__await__()
        return self._collect()
