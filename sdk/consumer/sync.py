"""Consumer: the blocking face. It runs an :class:`AsyncConsumer` on a private event loop
thread and holds no consumer logic of its own.

* ``poll(timeout_ms=..., max_records=...)`` returns
  ``dict[TopicPartition, list[ConsumerRecord]]`` (the timeout by keyword or as a timedelta);
  ``for rec in consumer`` yields records one by one. Ctrl-C during iteration ends the loop
  cleanly (the records not yet yielded are not counted as consumed).
* Each trip through the loop thread takes a slice of up to ``_SYNC_SLICE`` records; later
  polls and iteration steps are served from it in the application thread. A hand-off
  between threads can cost up to the interpreter's switch interval, so this is what keeps
  the blocking face close to the async one.
* ``wakeup()`` from any thread makes the poll in progress (or the next one) raise
  :class:`sdk.errors.WakeupError`.
* Rebalance listeners with plain methods run on a worker thread, not on the event loop, so
  they may call blocking methods of this consumer (e.g. ``commit()`` in
  ``on_partitions_revoked``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import re
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from datetime import timedelta
from typing import Any, Generic, TypeVar, overload

from sdk.consumer.consumer import AsyncConsumer, Records, poll_timeout_s
from sdk.consumer.coordinator import CommitCallback, ConsumerRebalanceListener
from sdk.consumer.group_metadata import ConsumerGroupMetadata
from sdk.errors import ConsumerClosedError
from sdk.metrics import MetricName
from sdk.net import LoopThread
from sdk.net.describe import describe_client
from sdk.net.fork import watch
from sdk.types import (
    ConsumerRecord,
    K,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
    V,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

_MARGIN_S = 5.0  # extra time for a blocking wait beyond the operation's own timeout
# Records taken from the fetcher per trip through the event loop; polls are served from
# them in the application thread (a thread hand-off costs up to the GIL switch interval).
_SYNC_SLICE = 5000


async def _call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return fn(*args, **kwargs)


class _ThreadedListener(ConsumerRebalanceListener):
    """Runs a listener's plain methods on a worker thread (blocking calls inside are fine)."""

    def __init__(self, target: Any) -> None:
        self._target = target

    async def _run(self, name: str, partitions: set[TopicPartition]) -> Any:
        fn = getattr(self._target, name, None)
        if fn is None:
            if name == "on_partitions_lost":
                return await self._run("on_partitions_revoked", partitions)
            return None
        if inspect.iscoroutinefunction(fn):
            return await fn(partitions)
        return await asyncio.to_thread(fn, partitions)

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> Any:
        return await self._run("on_partitions_revoked", revoked)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> Any:
        return await self._run("on_partitions_assigned", assigned)

    async def on_partitions_lost(self, lost: set[TopicPartition]) -> Any:
        return await self._run("on_partitions_lost", lost)


class Consumer(Generic[K, V]):
    """Consume records from Kafka, blocking. Same settings as :class:`AsyncConsumer`.

    ``Consumer("orders", bootstrap_servers=..., group_id="billing")``; a context manager.
    Type checkers see ``Consumer[K, V]``, typed as :class:`AsyncConsumer` is: ``bytes``
    without deserializers, else what they return.
    """

    @overload
    def __init__(self, *topics: str, config: None = None,
                 key_deserializer: Callable[[bytes | None], K | None] | None = None,
                 value_deserializer: Callable[[bytes | None], V | None] | None = None,
                 **settings: Any) -> None: ...

    @overload
    def __init__(self: Consumer[Any, Any], *topics: str | Mapping[str, Any],
                 config: Mapping[str, Any] | None = None,
                 key_deserializer: str | Callable[[bytes | None], Any] | None = None,
                 value_deserializer: str | Callable[[bytes | None], Any] | None = None,
                 **settings: Any) -> None: ...

    def __init__(self, *topics: str | Mapping[str, Any],
                 config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self._core: AsyncConsumer[K, V] = AsyncConsumer(*topics, config=config,
                                                        **settings)  # validates first
        self._thread = LoopThread(name="kafka-sdk-consumer",
                                  client_id=self._core.config.client_id)
        self._closed = False
        try:
            self._run(self._core.start(), self._core.config.request_timeout_ms / 1000)
        except BaseException:
            self._thread.stop(timeout=5)
            raise
        watch(self)  # unusable in the child of a fork (sdk.net.fork)

    @property
    def config(self) -> Any:
        """The validated settings (:class:`~sdk.consumer.config.ConsumerConfig`)."""
        return self._core.config

    # ------------------------------------------------------------------ plumbing

    def _run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        if self._closed:
            coro.close()
            raise ConsumerClosedError("the consumer is closed")
        return self._thread.run(coro, timeout_s)

    def _do(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a plain core method on the loop thread (the core is not thread-safe)."""
        return self._run(_call(fn, *args, **kwargs), None)

    @staticmethod
    def _limit(timeout_ms: int | None, default_s: float) -> float:
        return (default_s if timeout_ms is None else timeout_ms / 1000) + _MARGIN_S

    # ------------------------------------------------------------------ consuming

    def poll(self, timeout: timedelta | None = None, /, *, timeout_ms: float | None = None,
             max_records: int | None = None) -> Records[K, V]:
        """Records by partition: ready ones, else what arrives within the timeout:
        ``timeout_ms=`` milliseconds, or a ``datetime.timedelta`` (default: none, do not
        wait). A bare number is refused with a TypeError, as ``poll(1.0)`` means one second
        in confluent-kafka but one millisecond in kafka-python."""
        timeout_s = poll_timeout_s("poll", timeout, timeout_ms)
        if self._closed:
            raise ConsumerClosedError("the consumer is closed")
        core = self._core
        limit = core._limit(max_records)
        batch = core.take_pending_batch(limit)  # thread-safe, no trip through the loop
        if batch:
            return batch
        # Take a bigger slice than asked for: the next polls are served from it directly.
        # It does not count as consumed (nor committed) until handed out.
        self._wait(core.fill_pending(timeout_s, max(limit, _SYNC_SLICE), count_now=False))
        return core.take_pending_batch(limit)

    def _wait(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop with no deadline of its own; Ctrl-C cancels it."""
        if self._closed:
            coro.close()
            raise ConsumerClosedError("the consumer is closed")
        future = self._thread.submit(coro)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # e.g. Ctrl-C: do not leave the poll running on the loop
            raise

    def __iter__(self) -> Iterator[ConsumerRecord[K, V]]:
        return self

    def __next__(self) -> ConsumerRecord[K, V]:
        core = self._core
        try:
            while True:
                if self._closed:
                    raise StopIteration
                record = core.take_pending()  # thread-safe: see PendingRecords
                if record is not None:
                    return record
                self._wait(core.fill_pending(1.0, _SYNC_SLICE))
        except KeyboardInterrupt:
            log.info("consumer iteration interrupted (Ctrl-C)")
            raise StopIteration from None

    def wakeup(self) -> None:
        """Make the poll in progress (or the next one) raise WakeupError. Any thread."""
        if not self._closed:
            self._thread.call_soon(self._core.wakeup)

    # ------------------------------------------------------------------ subscription

    def subscribe(self, topics: Iterable[str] = (), *, pattern: str | re.Pattern[str] | None = None,
                  listener: Any = None) -> None:
        """Subscribe to topics, or to every topic matching ``pattern`` (a regular expression
        matched against whole names); replaces the previous subscription.

        With a group_id the group shares their partitions; without one this consumer reads
        every partition of them. ``listener`` has any of ``on_partitions_revoked``,
        ``on_partitions_assigned``, ``on_partitions_lost`` (each takes a set of
        TopicPartition); plain methods run on a worker thread and may call this consumer's
        blocking methods (``commit()`` in ``on_partitions_revoked``), coroutine methods run
        on the consumer's loop thread.
        """
        wrapped = _ThreadedListener(listener) if listener is not None else None
        self._do(self._core.subscribe, topics, pattern=pattern, listener=wrapped)

    def unsubscribe(self) -> None:
        """Drop the subscription; a group member leaves the group (waits for that)."""
        async def unsubscribe() -> None:
            await self._core.unsubscribe()

        self._run(unsubscribe(), self._limit(None, self._core._timeout_s))

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly these partitions, without group membership (replaces a
        subscription). Positions come from the group's commits, else
        ``auto_offset_reset``."""
        self._do(self._core.assign, list(partitions))

    def assignment(self) -> set[TopicPartition]:
        """The partitions this consumer reads now (assigned by the group or by
        :meth:`assign`)."""
        return self._do(self._core.assignment)

    def subscription(self) -> set[str]:
        """The subscribed topic names (those matching the pattern, with a pattern)."""
        return self._do(self._core.subscription)

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop fetching and handing out these partitions until :meth:`resume`; the group
        membership is kept."""
        self._do(self._core.pause, *partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        """Fetch paused partitions again, from where they stopped."""
        self._do(self._core.resume, *partitions)

    def paused(self) -> set[TopicPartition]:
        """The partitions paused now."""
        return self._do(self._core.paused)

    # ------------------------------------------------------------------ positions

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Consume ``partition`` (assigned to this consumer) from ``offset`` next."""
        self._do(self._core.seek, partition, offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Start from the earliest offset (of every assigned partition if none given); the
        offset is looked up at the next poll."""
        self._do(self._core.seek_to_beginning, *partitions)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Start after the last record (of every assigned partition if none given); the
        offset is looked up at the next poll."""
        self._do(self._core.seek_to_end, *partitions)

    def position(self, partition: TopicPartition, timeout_ms: int | None = None) -> int:
        """The offset of the next record to be handed out for ``partition`` (looked up if
        not known yet: committed offset, else ``auto_offset_reset``)."""
        return self._run(self._core.position(partition, timeout_ms),
                         self._limit(timeout_ms, self._core._timeout_s))

    def committed(self, partition: TopicPartition,
                  timeout_ms: int | None = None) -> OffsetAndMetadata | None:
        """The group's committed offset of ``partition``, None if there is none (needs a
        group_id)."""
        return self._run(self._core.committed(partition, timeout_ms),
                         self._limit(timeout_ms, self._core._timeout_s))

    def beginning_offsets(self, partitions: Iterable[TopicPartition],
                          timeout_ms: int | None = None) -> dict[TopicPartition, int]:
        """The first offset still in the log, per partition."""
        return self._run(self._core.beginning_offsets(list(partitions), timeout_ms),
                         self._limit(timeout_ms, self._core._timeout_s))

    def end_offsets(self, partitions: Iterable[TopicPartition],
                    timeout_ms: int | None = None) -> dict[TopicPartition, int]:
        """The offset after the last record, per partition (the last stable offset under
        ``isolation_level="read_committed"``)."""
        return self._run(self._core.end_offsets(list(partitions), timeout_ms),
                         self._limit(timeout_ms, self._core._timeout_s))

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int],
                          timeout_ms: int | None = None) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The earliest offset whose timestamp is >= the given one (ms since the epoch), per
        partition; None where no record is that recent."""
        return self._run(self._core.offsets_for_times(dict(timestamps), timeout_ms),
                         self._limit(timeout_ms, self._core._timeout_s))

    def lag(self, partition: TopicPartition) -> int | None:
        """Records between the position and the end of ``partition`` as of the last fetch
        (None before the first fetch of it answered). No request is sent."""
        return self._do(self._core.lag, partition)

    def highwater(self, partition: TopicPartition) -> int | None:
        """The partition's high watermark as of the last fetch (None before one answered).
        No request is sent."""
        return self._do(self._core.highwater, partition)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The group, generation and member id now, for a transactional producer's
        ``send_offsets_to_transaction`` (KIP-447)."""
        return self._do(self._core.group_metadata)

    def topics(self, timeout_ms: int | None = None) -> set[str]:
        """Every topic in the cluster (asks a broker)."""
        return self._run(self._core.topics(timeout_ms),
                         self._limit(timeout_ms, self._core._timeout_s))

    def partitions_for_topic(self, topic: str, timeout_ms: int | None = None) -> set[int]:
        """The partition ids of ``topic`` (waits for its metadata up to ``timeout_ms``)."""
        return self._run(self._core.partitions_for_topic(topic, timeout_ms),
                         self._limit(timeout_ms, self._core._timeout_s))

    # ------------------------------------------------------------------ commits

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
               timeout_ms: int | None = None) -> None:
        """Commit ``offsets`` (default: everything handed out so far) and wait."""
        self._run(self._core.commit(offsets, timeout_ms),
                  self._limit(timeout_ms, self._core._timeout_s))

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
                     callback: CommitCallback | None = None) -> concurrent.futures.Future[None]:
        """Commit without waiting. ``callback(offsets, error_or_None)`` runs on the
        consumer's loop thread: keep it short and do not call blocking methods in it.
        Without a group_id, or closed, it raises at once, as :meth:`commit` does."""
        if self._closed:
            raise ConsumerClosedError("the consumer is closed")
        self._core._require_group("commit_async()")

        async def start() -> None:
            await self._core.commit_async(offsets, callback)

        return self._thread.submit(start())

    # ------------------------------------------------------------------ closing

    def close(self, timeout_ms: int | None = None) -> None:
        """Commit (with auto-commit), leave the group, close connections. Safe twice."""
        if self._closed:
            return
        try:
            self._run(self._core.close(timeout_ms),
                      self._limit(timeout_ms, self._core._timeout_s))
        finally:
            self._closed = True
            self._thread.stop(timeout=5)

    def __enter__(self) -> Consumer[K, V]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def metrics(self) -> dict[MetricName, float]:
        """The client's metrics by :class:`sdk.metrics.MetricName` (see
        :meth:`sdk.metrics.telemetry.ObservedClient.metrics`); safe from any thread."""
        return self._core.metrics()

    def __repr__(self) -> str:
        state = "closed" if self._closed else self._core._state()
        return describe_client(type(self).__name__, self.config, state,
                               group_id=self.config.group_id)
