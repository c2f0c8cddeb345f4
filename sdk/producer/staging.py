"""Staged sends: the per-record fast path of ``send``.

A record without headers, explicit partition or timestamp is not appended to a batch by
``send``: the stage adds it to its topic's *run* (three lists: values, keys, timestamps) and
returns a :class:`StagedFuture`. The producer faces call the function :meth:`Stage.stager`
makes (``send``'s arguments, one Python call per record); :meth:`Stage.put` is the same for
a record the general path has serialized. Runs enter the accumulator in bulk
(``RecordAccumulator.append_many``, which encodes a batch's records in one pass):

* by the sending thread, when the stage holds ``cap`` bytes (``put`` returns None and the
  producer drains, waiting for ``buffer_memory`` like any append, then puts again);
* by the sender, once a run's ``linger_ms`` has passed since its first record, and at once
  while a flush or close runs;
* by ``flush``, ``close``, ``send_many``, a general-path ``send`` and a future asked for
  its outcome.

Per record ``send`` then costs two list appends (three with a key), a clock read, a lock
and a future; partitioning, batch lookup and encoding are paid once per run. The rules that keep this invisible:

* Order: one run per topic, drained from its first undrained record on, under the stage's
  lock; whatever appends to the accumulator directly drains the stage first.
* Timestamps are taken by ``put`` (CreateTime is the time of the send); batches opened by a
  drain count their linger and delivery timeout from the run's first record.
* Memory: the stage holds at most ``cap`` bytes (values, keys and ``_RECORD_COST`` per
  record), a share of ``buffer_memory`` the producer keeps out of the batches' pool.
* A run that cannot be drained (the pool stays exhausted, the topic's metadata vanished)
  fails after ``delivery_timeout_ms``, like a batch that cannot be sent.

Lock order: the stage's lock, then the accumulator's; never the other way round.
"""

from __future__ import annotations

import inspect
import threading
import time
from bisect import bisect_left, bisect_right
from collections.abc import Awaitable, Callable, Container, Generator
from itertools import repeat
from typing import TYPE_CHECKING, Any

from sdk.errors import DeliveryTimeoutError, KafkaTimeoutError
from sdk.producer.accumulator import RECORD_OVERHEAD_BOUND, NeedMemory, RecordAccumulator
from sdk.producer.batch import (
    DeliveryCallback,
    DeliveryInfo,
    RecordFuture,
    run_callback,
    run_deliveries,
)
from sdk.records import fast_path
from sdk.types import RecordMetadata

if TYPE_CHECKING:
    from sdk.producer.batch import ProducerBatch

__all__ = ["Stage", "StagedFuture", "StagedRun"]

_time_ns = time.time_ns
_monotonic = time.monotonic
# Bytes charged per staged record besides its key and value: bounds the record count too.
_RECORD_COST = 64
# The compiled per-record send, or None (sdk.records.fast_path; KAFKA_SDK_PURE_PYTHON=1)
_Stager: Any = fast_path.compiled_stager



def _named(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``fn`` as the public ``send`` it stands for: its name (Python's TypeError for a wrong
    argument names the function) and a signature without the ``callback`` trap."""
    fn.__name__ = name.rpartition(".")[2]
    fn.__qualname__ = name
    fn.__signature__ = _SEND_SIGNATURE  # type: ignore[attr-defined]
    return fn


def _send_signature() -> inspect.Signature:
    def send(topic: str, value: Any = None, key: Any = None, headers: Any = None,
             partition: int | None = None, timestamp_ms: int | None = None,
             on_delivery: DeliveryCallback | None = None) -> RecordFuture:
        raise NotImplementedError  # only its signature is used

    return inspect.signature(send)


_SEND_SIGNATURE = _send_signature()


def _callback_refused(name: str) -> TypeError:
    return TypeError(
        f"{name}() got an unexpected keyword argument 'callback': the delivery callback is "
        "on_delivery=fn (called as fn(error_or_None, RecordMetadata) once the record is "
        "acknowledged or failed), or add_done_callback on the returned future")


class StagedRun:
    """Records of one topic staged in send order; ``drained`` of them are in batches."""

    __slots__ = ("callbacks", "deliveries", "delivery_pos", "drained", "keys", "millis",
                 "parts", "stage", "started", "starts", "timestamps", "topic", "values")

    def __init__(self, stage: Stage, topic: str, started: float) -> None:
        self.stage = stage
        self.topic = topic
        self.started = started
        self.values: list[bytes] = []
        self.keys: list[bytes | None] | None = None  # None while every key is None
        # Send times in nanoseconds as read by put, and in milliseconds for a prefix of
        # them (converted in bulk before a drain: a division per record cost a tenth of
        # put). Both lists only grow, so a reader on any thread needs no lock.
        self.timestamps: list[int] = []
        self.millis: list[int] = []
        self.drained = 0
        # Where drained records went: [batch, first offset delta, count, timestamp]
        # segments in record order, and the run index each segment starts at.
        self.parts: list[list[Any]] = []
        self.starts: list[int] = []
        self.callbacks: list[tuple[StagedFuture, Callable[..., Any], bool]] = []
        # send's on_delivery functions and their records' positions, in send order: no
        # tuple and no future kept per record (the GC traversed both until delivery).
        self.deliveries: list[DeliveryCallback] = []
        self.delivery_pos: list[int] = []

    def add_key(self, pos: int, key: bytes | None) -> None:
        if self.keys is None:
            self.keys = [None] * pos
        self.keys.append(key)

    def timestamp(self, pos: int) -> int:
        """The send time of record ``pos`` in milliseconds."""
        millis = self.millis
        return millis[pos] if pos < len(millis) else self.timestamps[pos] // 1_000_000

    def stamps_in_ms(self) -> list[int]:
        """The send times in milliseconds, indexed like ``values`` (under the lock)."""
        millis, stamps = self.millis, self.timestamps
        if len(millis) < len(stamps):
            millis += _ns_to_ms(stamps[len(millis):])
        return millis

    def held(self, start: int, stop: int) -> int:
        """Stage bytes held by records ``start:stop`` (what ``Stage.put`` charged them)."""
        size = sum(map(len, self.values[start:stop])) + _RECORD_COST * (stop - start)
        if self.keys is not None:
            size += sum(len(k) for k in self.keys[start:stop] if k is not None)
        return size

    def locate(self, pos: int) -> tuple[ProducerBatch | _FailedRecords, int] | None:
        """The batch of drained record ``pos`` and its offset delta there."""
        if pos >= self.drained:
            return None
        k = bisect_right(self.starts, pos) - 1
        part = self.parts[k]
        return part[0], part[1] + pos - self.starts[k]


def _ns_to_ms(stamps: list[int]) -> list[int]:
    """Nanosecond times in milliseconds. Staged times are mostly in order and many share
    a millisecond: then one division per millisecond, found by bisection."""
    n = len(stamps)
    if n < 8 or stamps != sorted(stamps):
        return [t // 1_000_000 for t in stamps]
    out: list[int] = []
    i = 0
    while i < n:
        ms = stamps[i] // 1_000_000
        j = bisect_left(stamps, (ms + 1) * 1_000_000, i)
        out += repeat(ms, j - i)
        i = j
    return out


def _hand_over(run: StagedRun) -> list[tuple[StagedFuture, Callable[..., Any], bool]]:
    """Give the callbacks of drained records to their batches (under the stage's lock):
    each future resolved in place (one look-up per segment, not per record) and each batch
    given its callbacks in one call. Returns the entries of records not drained yet."""
    drained, starts, parts = run.drained, run.starts, run.parts
    millis, stamps, values, keys = run.millis, run.timestamps, run.values, run.keys
    waiting: list[tuple[StagedFuture, Callable[..., Any], bool]] = []
    group: list[tuple[StagedFuture, Callable[..., Any], bool]] = []
    batch: Any = None
    lo = hi = delta = 0  # the current segment: run positions lo:hi, offset delta at lo
    for entry in run.callbacks:
        future = entry[0]
        pos = future._pos
        if pos >= drained:
            waiting.append(entry)
            continue
        if not lo <= pos < hi:
            k = bisect_right(starts, pos) - 1
            part = parts[k]
            lo = starts[k]
            hi, delta = lo + part[2], part[1]
            if part[0] is not batch:
                if group:
                    batch.add_callbacks(group)
                    group = []
                batch = part[0]
        future._index = delta + pos - lo
        future._timestamp = millis[pos] if pos < len(millis) else stamps[pos] // 1_000_000
        key = None if keys is None else keys[pos]
        future._key_size = -1 if key is None else len(key)
        future._value_size = len(values[pos])
        future._batch = batch
        group.append(entry)
    if group:
        batch.add_callbacks(group)
    return waiting


def _hand_over_deliveries(run: StagedRun) -> None:
    """Give the on_delivery functions of drained records to their batches (under the
    stage's lock), with what each record's metadata needs: offset delta, send time and
    sizes (``ProducerBatch.add_deliveries``). A segment whose records all have one (the
    usual case: a callback on every send) takes slices and ``map``, not a step per record."""
    poss = run.delivery_pos
    n = bisect_left(poss, run.drained)  # positions ascend: send order
    if n == 0:
        return
    fns, starts, parts = run.deliveries, run.starts, run.parts
    millis, stamps, values, keys = run.millis, run.timestamps, run.values, run.keys
    known = len(millis)  # send times converted so far (all drained ones but failed runs')
    k = bisect_right(starts, poss[0]) - 1
    i = 0
    while i < n:
        lo = starts[k]
        batch, delta, count = parts[k][0], parts[k][1], parts[k][2]
        j = bisect_left(poss, lo + count, i, n)
        if j > i:
            first, last = poss[i], poss[j - 1] + 1
            if last - first == j - i and last <= known:  # every record from first to last
                at = delta + first - lo
                chosen = values[first:last]
                info = (list(range(at, at + j - i)), millis[first:last],
                        [-1] * (j - i) if keys is None else
                        [-1 if key is None else len(key) for key in keys[first:last]],
                        list(map(len, chosen)))
            else:
                picked = poss[i:j]
                info = ([delta + pos - lo for pos in picked],
                        [millis[pos] if pos < known else stamps[pos] // 1_000_000
                         for pos in picked],
                        [-1 if keys is None or keys[pos] is None else len(keys[pos])  # type: ignore[arg-type]
                         for pos in picked],
                        [len(values[pos]) for pos in picked])
            batch.add_deliveries(fns[i:j], info)
        i = j
        k += 1
    del fns[:n], poss[:n]


class _FailedRecords:
    """Stands in for the batch of staged records that failed before reaching one: done from
    the start, so futures never wait on it."""

    __slots__ = ("error", "topic")

    done = True
    partition = -1
    base_offset = -1
    log_append_time = -1
    split = None

    def __init__(self, topic: str, error: BaseException) -> None:
        self.topic = topic
        self.error = error

    def add_callback(self, record_future: Any, fn: Callable[..., Any], is_delivery: bool) -> None:
        run_callback(record_future, fn, is_delivery)

    def add_callbacks(self, entries: list[tuple[Any, Callable[..., Any], bool]]) -> None:
        for entry in entries:
            run_callback(*entry)

    def add_deliveries(self, fns: list[DeliveryCallback], info: DeliveryInfo) -> None:
        run_deliveries(self, fns, info)  # type: ignore[arg-type]


class StagedFuture(RecordFuture):
    """The future of a staged record: a :class:`RecordFuture` whose batch is found once
    the record is drained. Asking for the outcome drains the stage first."""

    __slots__ = ("_pos", "_run")

    # Made by Stage.stager without __init__: only _run and _pos are set; _batch is set
    # once the record is found in its batch (unset until then).
    _run: StagedRun
    _pos: int

    def _resolve(self) -> ProducerBatch | None:
        """Fill in the batch fields once the record is drained; None before."""
        run = self._run
        found = run.locate(self._pos)
        if found is None:
            return None
        batch, delta = found
        pos = self._pos
        self._index = delta
        self._timestamp = run.timestamp(pos)
        key = run.keys[pos] if run.keys is not None else None
        self._key_size = -1 if key is None else len(key)
        self._value_size = len(run.values[pos])
        self._batch = batch  # type: ignore[assignment]
        return batch  # type: ignore[return-value]

    def _batch_now(self) -> ProducerBatch | None:
        try:
            return self._batch
        except AttributeError:  # not drained, or not looked up since
            return self._resolve()

    def _batch_waiting(self, timeout: float | None) -> ProducerBatch:
        batch = self._batch_now()
        if batch is None:
            deadline = None if timeout is None else _monotonic() + timeout
            self._run.stage.drain_blocking(deadline)
            batch = self._resolve()
            if batch is None:
                raise KafkaTimeoutError(f"record not appended to a batch within {timeout} s")
        return batch

    def _batch_awaiting(self) -> Generator[Any, None, ProducerBatch]:
        batch = self._batch_now()
        if batch is None:
            yield from self._run.stage.drain_async(None).__await__()
            batch = self._resolve()
            assert batch is not None  # drain_async returns when everything is drained
        return batch

    def _add_callback(self, fn: Callable[..., Any], is_delivery: bool) -> None:
        stage = self._run.stage
        with stage.lock:
            batch = self._batch_now()
            if batch is None:
                self._run.callbacks.append((self, fn, is_delivery))
                return
        batch.add_callback(self, fn, is_delivery)

    @property
    def topic(self) -> str:
        return self._run.topic

    @property
    def partition(self) -> int:
        """The record's partition; -1 until it is appended to a batch."""
        batch = self._batch_now()
        return -1 if batch is None else batch.partition

    def metadata(self) -> RecordMetadata:
        if self._batch_now() is None:
            run, pos = self._run, self._pos
            key = run.keys[pos] if run.keys is not None else None
            return RecordMetadata(run.topic, -1, -1, run.timestamp(pos),
                                  -1 if key is None else len(key), len(run.values[pos]))
        return super().metadata()

    def __repr__(self) -> str:
        if self._batch_now() is None:
            return f"<RecordFuture {self._run.topic} staged>"
        return super().__repr__()


class Stage:
    """The staged runs of one producer; see the module docstring."""

    def __init__(
        self,
        accumulator: RecordAccumulator,
        *,
        cap: int,
        linger_s: float,
        delivery_timeout_s: float,
        wake_sender: Callable[[], None],
        reserve_blocking: Callable[[int, float], None],
        reserve_async: Callable[[int, float], Awaitable[None]],
        topic_blocking: Callable[[str, float], None],
        topic_async: Callable[[str, float], Awaitable[Any]],
        max_block_s: float,
        after_blocking_drain: Callable[[], None] = lambda: None,
        held: Container[str] = frozenset(),
    ) -> None:
        self.lock = threading.Lock()
        self.runs: dict[str, StagedRun] = {}
        self.held = 0
        self.cap = cap
        self.closed = False
        self._acc = accumulator
        self._linger_s = linger_s
        self._delivery_timeout_s = delivery_timeout_s
        self._wake_sender = wake_sender
        self._reserve_blocking = reserve_blocking
        self._reserve_async = reserve_async
        self._topic_blocking = topic_blocking
        self._topic_async = topic_async
        self._max_block_s = max_block_s
        self._after_blocking_drain = after_blocking_drain
        # Topics with send_many records waiting for their metadata (sdk.producer.held):
        # nothing is staged for them until those are appended, so they stay first.
        self._held = held
        self._value_limit = accumulator.record_limit - RECORD_OVERHEAD_BOUND
        self._put = self.stager(True, None)

    # ================================================================== staging

    def put(self, topic: str, key: bytes | None, value: bytes,
            on_delivery: DeliveryCallback | None) -> StagedFuture | None:
        """Stage one serialized record; None when it cannot be staged now: the stage is full
        (drain, then put again), closed, or the topic's metadata is not known."""
        return self._put(topic, value, key, None, None, None, on_delivery)

    def stager(self, raw: bool, otherwise: Callable[..., Any] | None,
               name: str = "send") -> Callable[..., Any]:
        """The per-record hot path of ``send``, as a function with ``send``'s arguments
        ``(topic, value, key, headers, partition, timestamp_ms, on_delivery)``, named
        ``name`` (what Python's own TypeError for a wrong argument shows).

        It stages a plain record (bytes value, bytes or no key, nothing else; with ``raw``
        False, none at all, as serializers must run first) and returns its future; any
        other call, and a record that cannot be staged now (see :meth:`put`), goes to
        ``otherwise`` with the same arguments (None: returns None).

        A closure rather than a method: the producer faces bind it directly, so a plain
        send is one Python call with the stage's state in cells. Every line here costs.
        ``callback`` is not a parameter of ``send``: it is there so that confluent-kafka's
        ``callback=`` is refused with a TypeError naming ``on_delivery`` (checked off the
        fast path; testing it costs what deciding ``raw`` per call cost before).
        """
        if not raw:
            def general_send(topic: str, value: Any = None, key: Any = None,
                             headers: Any = None, partition: int | None = None,
                             timestamp_ms: int | None = None,
                             on_delivery: DeliveryCallback | None = None,
                             callback: Any = None) -> Any:
                if callback is not None:
                    raise _callback_refused(name)
                if otherwise is None:
                    return None
                return otherwise(topic, value, key, headers, partition, timestamp_ms,
                                 on_delivery)

            return _named(general_send, name)

        lock = self.lock
        runs = self.runs
        value_limit = self._value_limit
        open_run = self._open_run
        too_large = self._acc.too_large
        new_future = object.__new__

        def stage_send(topic: str, value: Any = None, key: Any = None,
                       headers: Any = None, partition: int | None = None,
                       timestamp_ms: int | None = None,
                       on_delivery: DeliveryCallback | None = None,
                       callback: Any = None) -> Any:
            if (type(value) is bytes and headers is None and partition is None
                    and timestamp_ms is None and callback is None
                    and (key is None or type(key) is bytes)):
                size = len(value) if key is None else len(value) + len(key)
                if size > value_limit:
                    raise too_large(size + RECORD_OVERHEAD_BOUND)
                lock.acquire()
                try:
                    run = runs.get(topic)
                    if run is None:
                        run = open_run(topic)
                    elif self.held >= self.cap:
                        run = None
                    if run is not None:
                        pos = len(run.values)
                        run.timestamps.append(_time_ns())
                        if key is not None or run.keys is not None:
                            run.add_key(pos, key)
                        run.values.append(value)
                        self.held += size + _RECORD_COST
                        # No __init__ call: its frame would cost a tenth of this function.
                        future = new_future(StagedFuture)
                        future._run = run
                        future._pos = pos
                        if on_delivery is not None:
                            run.deliveries.append(on_delivery)
                            run.delivery_pos.append(pos)
                        return future
                finally:
                    lock.release()
            if callback is not None:
                raise _callback_refused(name)
            if otherwise is None:
                return None
            return otherwise(topic, value, key, headers, partition, timestamp_ms, on_delivery)

        if _Stager is None:
            return _named(stage_send, name)
        # The compiled twin (sdk.records.fast_path): the same staging for a plain record
        # into an existing run, in C (~0.35 us less per send); every other call, unchanged,
        # to stage_send.
        return _named(_Stager(_named(stage_send, name), self, runs, lock.locked, StagedRun,
                              StagedFuture, value_limit, _RECORD_COST), name)

    def _open_run(self, topic: str) -> StagedRun | None:
        """A run for ``topic``'s first staged record (under the lock); None when the stage
        is closed or full, the topic's metadata is not known, or send_many records wait for
        it."""
        if (self.closed or self.held >= self.cap or not self._acc.knows(topic)
                or topic in self._held):
            return None
        run = self.runs[topic] = StagedRun(self, topic, _monotonic())
        # Its linger runs from now: the sender must look at it in time (the wake-up goes
        # through the loop's call_soon_threadsafe, which takes no lock of ours).
        self._wake_sender()
        return run

    def close(self) -> None:
        """Refuse further records (the staged ones are still drained)."""
        with self.lock:
            self.closed = True
            self.cap = -1  # every put takes the general path, which raises

    # ================================================================== draining

    def drain(self, now: float | None = None, reserved: int = 0) -> NeedMemory | str | None:
        """Append staged records to the accumulator without waiting.

        With ``now``, only runs whose linger has passed; else all. Returns None when done,
        NeedMemory when the pool is short (reserve it and call again with ``reserved``), or
        a topic whose metadata must come back first.
        """
        with self.lock:
            for run in list(self.runs.values()):
                if now is not None and now < run.started + self._linger_s:
                    continue
                outcome = self._drain_run(run, reserved)
                reserved = 0  # handed to the first run, which gave back what it did not use
                if outcome is not None:
                    return outcome
        if reserved:
            self._acc.give_back(reserved)
        return None

    def _drain_run(self, run: StagedRun, reserved: int) -> NeedMemory | str | None:
        start = run.drained
        parts = run.parts
        before = len(parts)
        need: NeedMemory | None = None
        try:
            i, need = self._acc.append_many(run.topic, None, run.keys, run.values, start,  # type: ignore[arg-type]
                                            parts, run.stamps_in_ms(), reserved, True, run.started,
                                            sized=True)
        except Exception as exc:  # e.g. the producer closed: the rest fail with it
            run.drained = self._note_parts(run, before, start)
            self.held -= run.held(start, run.drained)
            self._fail_rest(run, exc)
            return None
        self._note_parts(run, before, start)
        if i < 0:
            return run.topic
        run.drained = i
        if i == len(run.values) and len(self.runs) == 1:
            self.held = 0  # the usual drain, of everything: spares summing the sizes
        else:
            self.held -= run.held(start, i)
        self._settle(run)
        return need

    @staticmethod
    def _note_parts(run: StagedRun, before: int, start: int) -> int:
        """Record where the segments added since ``before`` start; the index after them."""
        pos = start
        for part in run.parts[before:]:
            run.starts.append(pos)
            pos += part[2]
        return pos

    def _settle(self, run: StagedRun) -> None:
        """After a drain (under lock): hand callbacks to their batches, retire a done run."""
        if run.deliveries:
            _hand_over_deliveries(run)
        if run.callbacks:
            run.callbacks = _hand_over(run)
        if run.drained >= len(run.values) and self.runs.get(run.topic) is run:
            del self.runs[run.topic]

    def _fail_rest(self, run: StagedRun, error: BaseException) -> None:
        start, n = run.drained, len(run.values)
        if start < n:
            run.parts.append([_FailedRecords(run.topic, error), 0, n - start,
                              run.timestamp(start)])
            run.starts.append(start)
            run.drained = n
            self.held -= run.held(start, n)
        self._settle(run)

    def drain_blocking(self, deadline: float | None = None) -> None:
        """Drain everything from a thread other than the producer's loop, waiting for
        memory and metadata up to ``deadline`` (default: ``max_block_ms`` from now)."""
        if deadline is None:
            deadline = _monotonic() + self._max_block_s
        reserved = 0
        # A reservation always goes back through drain: the sender may have drained every
        # run while this thread waited for it (drain gives back what no run takes).
        while self.runs or reserved:
            outcome = self.drain(None, reserved)
            reserved = 0
            if outcome is None:
                self._after_blocking_drain()
                return
            remaining = max(0.0, deadline - _monotonic())
            if isinstance(outcome, NeedMemory):
                self._reserve_blocking(outcome.nbytes, remaining)
                reserved = outcome.nbytes
            else:
                self._topic_blocking(outcome, remaining)

    async def drain_async(self, deadline: float | None = None) -> None:
        """:meth:`drain_blocking` for the producer's event loop (``deadline`` None: no limit
        but the records' delivery timeout)."""
        reserved = 0
        # As in drain_blocking: the sender's pass (Stage.service) may drain every run while
        # this waits for memory; leaving with the reservation lost it for good (each time a
        # batch's worth, until the pool was empty with nothing in flight to free it).
        while self.runs or reserved:
            outcome = self.drain(None, reserved)
            reserved = 0
            if outcome is None:
                return
            remaining = (self._delivery_timeout_s if deadline is None
                         else max(0.0, deadline - _monotonic()))
            if isinstance(outcome, NeedMemory):
                await self._reserve_async(outcome.nbytes, remaining)
                reserved = outcome.nbytes
            else:
                await self._topic_async(outcome, remaining)

    # ================================================================== for the sender

    def service(self, now: float, everything: bool) -> float | None:
        """The sender's pass: drain runs whose linger passed (all with ``everything``),
        fail those past their delivery timeout; the time to look again, if any run is left."""
        if not self.runs:
            return None
        self.drain(None if everything else now)
        with self.lock:
            for run in list(self.runs.values()):
                if now >= run.started + self._delivery_timeout_s:
                    self._fail_rest(run, DeliveryTimeoutError(
                        f"{len(run.values) - run.drained} record(s) for {run.topic} expired "
                        "before they could be put in a batch (no buffer memory or no "
                        "metadata for the topic within delivery_timeout_ms)"))
            if not self.runs:
                return None
            first = min(run.started for run in self.runs.values())
        if everything or now >= first + self._linger_s:
            return now + 0.01  # waiting for memory or metadata: look again soon
        return first + self._linger_s

    def fail_all(self, error: BaseException) -> None:
        with self.lock:
            for run in list(self.runs.values()):
                self._fail_rest(run, error)
