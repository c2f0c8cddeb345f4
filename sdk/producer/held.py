"""``send_many`` records held until their topic's metadata arrives.

``send_many`` must not block its caller for ``max_block_ms`` when the topic's partitions
are not known (a topic not created yet, a cluster slow to answer): ``send_many(...)``
returns its :class:`sdk.producer.batch.BulkFuture` at once, and
``.result(timeout=5)`` raises KafkaTimeoutError after 5 s whatever ``max_block_ms`` is.
The records are validated and serialized by the call (bad input still raises there), then
*held*: :class:`HeldRecords` stands in the future's parts for them until a task on the
producer's loop has waited for the topic and appended them; their batches then replace it.
When the metadata does not come within ``max_block_ms`` of the call (or the cluster says
the topic does not exist and the client remembers it, see ``sdk.net.topic_problems``), the
held records fail with that error (KafkaTimeoutError / UnknownTopicOrPartitionError).

Order: per topic, held calls are appended in call order by one task, and while a topic has
held records nothing else is appended to it: the stage opens no run for it and the general
path of ``send`` waits for the held records first (``HeldSends.wait_clear``). Records sent
by one caller therefore keep their order within a partition, as if ``send_many`` had
blocked.

``flush`` waits for held records too (appended, then acknowledged, or failed); ``close``
lets them be appended within its timeout, then fails the rest with ProducerClosedError.

Memory: held records count against ``buffer_memory``; a ``send_many`` that would hold more
waits (up to ``max_block_ms``) for earlier held records to leave, as an append waits for
buffer memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from sdk.errors import KafkaTimeoutError, ProducerClosedError
from sdk.producer.batch import run_callback

__all__ = ["Chunk", "HeldRecords", "HeldSends"]

log = logging.getLogger(__name__)

Chunk = tuple[int, "list[bytes | None] | None", "list[bytes | None]", bool]
"""Serialized records of a send_many: (timestamp, keys or None, values, no None values)."""

# Appends the records of a chunk from an index into the parts list, waiting for memory until
# a deadline; returns the index it stopped at (< len(values): the topic's metadata is gone).
AppendChunk = Callable[[str, "int | None", Chunk, int, "list[list[Any]]", float],
                       Awaitable[int]]
WaitTopic = Callable[[str, float], Awaitable[Any]]


# Guards a stand-in's callbacks and event against its completion on the loop thread.
_LOCK = threading.Lock()


def _chunk_bytes(chunk: Chunk, start: int) -> int:
    _, keys, values, _ = chunk
    size = sum(len(v) for v in values[start:] if v is not None)
    if keys is not None:
        size += sum(len(k) for k in keys[start:] if k is not None)
    return size


class HeldRecords:
    """The records of one ``send_many`` call waiting for their topic: a stand-in batch in
    the call's BulkFuture (done once appended or failed, like a batch)."""

    __slots__ = ("_aio_future", "_event", "callbacks", "chunks", "count", "deadline", "done",
                 "error", "nbytes", "partition_arg", "parts", "start", "topic")

    partition = -1
    base_offset = -1
    log_append_time = -1
    split = None

    def __init__(self, topic: str, partition: int | None, chunks: list[Chunk], start: int,
                 parts: list[list[Any]], deadline: float) -> None:
        self.topic = topic
        self.partition_arg = partition
        self.chunks = chunks
        self.start = start  # the first held record's index in chunks[0]
        self.parts = parts  # the BulkFuture's
        self.deadline = deadline
        self.count = len(chunks[0][2]) - start + sum(len(c[2]) for c in chunks[1:])
        self.nbytes = _chunk_bytes(chunks[0], start) + sum(_chunk_bytes(c, 0)
                                                           for c in chunks[1:])
        self.done = False
        self.error: BaseException | None = None
        self.callbacks: list[tuple[Any, Callable[..., Any], bool]] = []
        self._event: threading.Event | None = None
        self._aio_future: asyncio.Future[None] | None = None

    # ------------------------------------------------------------------ as a batch

    def _finish(self, error: BaseException | None) -> None:
        with _LOCK:
            self.error = error
            self.done = True
            callbacks, self.callbacks = self.callbacks, []
            event = self._event
        if event is not None:
            event.set()
        fut = self._aio_future
        if fut is not None and not fut.done():
            fut.set_result(None)
        for entry in callbacks:
            run_callback(*entry)

    def add_callback(self, record_future: Any, fn: Callable[..., Any], is_delivery: bool) -> None:
        with _LOCK:
            if not self.done:
                self.callbacks.append((record_future, fn, is_delivery))
                return
        run_callback(record_future, fn, is_delivery)

    def wait(self, timeout: float | None) -> None:
        with _LOCK:
            if self.done:
                return
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        if not event.wait(timeout):
            raise KafkaTimeoutError(
                f"{self.count} record(s) still wait for the metadata of topic {self.topic!r} "
                "(until max_block_ms after send_many): not sent yet")

    def aio_wait(self) -> asyncio.Future[None]:
        fut = self._aio_future
        if fut is None:
            fut = self._aio_future = asyncio.get_running_loop().create_future()
            if self.done:
                fut.set_result(None)
        return fut

    # ------------------------------------------------------------------ outcome

    def _index(self) -> int:
        """Where this stand-in is in the BulkFuture's parts (the last, in practice)."""
        return next(i for i in range(len(self.parts) - 1, -1, -1) if self.parts[i][0] is self)

    def appended(self, new_parts: list[list[Any]]) -> None:
        """Every record is in a batch: ``new_parts`` take this stand-in's place."""
        i = self._index()
        # One slice assignment, before the stand-in completes: a waiter that wakes re-reads
        # this position and finds the first new part (BulkFuture._wait).
        self.parts[i:i + 1] = new_parts
        self._finish(None)

    def failed(self, new_parts: list[list[Any]], error: BaseException) -> None:
        """Failed with ``error`` after the records of ``new_parts`` were appended."""
        i = self._index()
        self.parts[i][2] -= sum(p[2] for p in new_parts)  # it stands for the rest
        self.parts[i:i] = new_parts
        self._finish(error)

    def __repr__(self) -> str:
        state = "failed" if self.error is not None else "appended" if self.done else "held"
        return f"<HeldRecords {self.topic} {self.count} records {state}>"



class HeldSends:
    """The held send_many calls of one producer, per topic in call order."""

    def __init__(self, *, limit_bytes: int, wait_topic: WaitTopic,
                 append_chunk: AppendChunk) -> None:
        self.topics: dict[str, deque[HeldRecords]] = {}  # read from any thread
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._cleared: dict[str, asyncio.Future[None]] = {}
        self._limit = limit_bytes
        self._bytes = 0
        self._room: asyncio.Event | None = None
        self._wait_topic = wait_topic
        self._append_chunk = append_chunk
        self._closed_reason: str | None = None

    def __contains__(self, topic: object) -> bool:
        return topic in self.topics

    @property
    def count(self) -> int:
        return sum(e.count for q in list(self.topics.values()) for e in list(q))

    async def hold(self, topic: str, partition: int | None, chunks: list[Chunk], start: int,
                   parts: list[list[Any]], deadline: float) -> None:
        """Hold ``chunks`` (from record ``start`` of the first) for ``topic``; a stand-in
        joins ``parts``. Waits for room within ``buffer_memory`` until ``deadline``."""
        entry = HeldRecords(topic, partition, chunks, start, parts, deadline)
        while self._bytes and self._bytes + entry.nbytes > self._limit:
            room = self._room = self._room or asyncio.Event()
            room.clear()
            try:
                await asyncio.wait_for(room.wait(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                raise KafkaTimeoutError(
                    f"send_many: {self._bytes} bytes of earlier records already wait for "
                    "their topics' metadata and these would exceed buffer_memory; none left "
                    "within max_block_ms") from None
        parts.append([entry, 0, entry.count, chunks[0][0]])
        self._bytes += entry.nbytes
        queue = self.topics.get(topic)
        if queue is None:
            queue = self.topics[topic] = deque()
            self._tasks[topic] = asyncio.get_running_loop().create_task(
                self._run(topic, queue), name=f"kafka-sdk-held-{topic}")
        queue.append(entry)

    async def wait_clear(self, topic: str, timeout_s: float) -> None:
        """Wait until ``topic`` has no held records (appended or failed)."""
        if topic not in self.topics:
            return
        fut = self._cleared.get(topic)
        if fut is None:
            fut = self._cleared[topic] = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout_s)
        except TimeoutError:
            raise KafkaTimeoutError(
                f"metadata for topic {topic!r} not available within max_block_ms (records of "
                "an earlier send_many still wait for it, and later records go after them)"
            ) from None

    async def settled(self, timeout_s: float | None) -> bool:
        """Wait until the records held now are appended or failed (flush); False when
        ``timeout_s`` passed first."""
        entries = [e for queue in self.topics.values() for e in queue]
        if not entries:
            return True
        try:
            await asyncio.wait_for(asyncio.gather(*(asyncio.shield(e.aio_wait())
                                                    for e in entries)), timeout_s)
        except TimeoutError:
            return False
        return True

    async def _run(self, topic: str, queue: deque[HeldRecords]) -> None:
        try:
            while queue:
                entry = queue[0]
                await self._settle(entry)
                queue.popleft()
                self._left(entry)
        finally:
            error = ProducerClosedError(
                "the producer was closed before the metadata of topic "
                f"{topic!r} arrived{f' ({self._closed_reason})' if self._closed_reason else ''}")
            while queue:  # cancelled by close
                entry = queue.popleft()
                if not entry.done:
                    entry.failed([], error)
                self._left(entry)
            del self.topics[topic]
            self._tasks.pop(topic, None)
            fut = self._cleared.pop(topic, None)
            if fut is not None and not fut.done():
                fut.set_result(None)

    def _left(self, entry: HeldRecords) -> None:
        self._bytes -= entry.nbytes
        if self._room is not None:
            self._room.set()

    async def _settle(self, entry: HeldRecords) -> None:
        """Wait for the topic and append ``entry``'s records, or fail them."""
        topic = entry.topic
        new_parts: list[list[Any]] = []
        try:
            for k, chunk in enumerate(entry.chunks):
                i = entry.start if k == 0 else 0
                while i < len(chunk[2]):
                    await self._wait_topic(topic, max(0.0, entry.deadline - time.monotonic()))
                    i = await self._append_chunk(topic, entry.partition_arg, chunk, i,
                                                 new_parts, entry.deadline)
        except asyncio.CancelledError:
            entry.failed(new_parts, ProducerClosedError(
                "the producer was closed before the metadata of topic "
                f"{topic!r} arrived{f' ({self._closed_reason})' if self._closed_reason else ''}"))
            raise
        except Exception as exc:  # the topic's error, a timeout, a refused record
            entry.failed(new_parts, exc)
            return
        entry.appended(new_parts)

    async def close(self, timeout_s: float | None, reason: str | None) -> None:
        """Let held records be appended for up to ``timeout_s`` (None: until each is
        appended or failed), then fail the rest with ProducerClosedError."""
        self._closed_reason = reason
        tasks = list(self._tasks.values())
        if not tasks:
            return
        if timeout_s is None or timeout_s > 0:
            await asyncio.wait(tasks, timeout=timeout_s)
        left = self.count
        if left:
            log.warning("closed with %d record(s) of send_many still waiting for their "
                        "topic's metadata%s", left, f" ({reason})" if reason else "")
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
