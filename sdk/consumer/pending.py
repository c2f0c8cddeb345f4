"""Records already taken from the fetcher but not yet handed to the application.

Iteration (``async for``, ``for rec in consumer``) and the blocking ``poll`` take records
from the fetcher in bulk and hand them out from here, so a record does not cost a trip
through the event loop. They do not count as consumed until handed out: commits use the
offset of the first one still here (:meth:`PendingRecords.first_offsets`).

Thread-safe: the blocking face pops from the application thread while the event loop
thread may drop records of revoked partitions.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from sdk.types import ConsumerRecord, TopicPartition

# Deserialized records: Any here, typed by the consumer's K and V for the application.
Records = dict[TopicPartition, list[ConsumerRecord[Any, Any]]]


class PendingRecords:
    """Records in hand-out order, kept as the per-partition lists the fetcher produced
    (``[tp, records, next index]`` segments), so taking a batch slices lists instead of
    moving records one by one."""

    __slots__ = ("_count", "_lock", "_segments")

    def __init__(self) -> None:
        self._segments: deque[list[Any]] = deque()  # [TopicPartition, list[ConsumerRecord], int]
        self._count = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def extend(self, batch: Records) -> None:
        with self._lock:
            for tp, records in batch.items():
                if records:
                    self._segments.append([tp, records, 0])
                    self._count += len(records)

    def pop_one(self) -> ConsumerRecord[Any, Any] | None:
        with self._lock:
            segments = self._segments
            while segments:
                seg = segments[0]
                records, i = seg[1], seg[2]
                if i < len(records):
                    i += 1
                    if i == len(records):
                        segments.popleft()
                    else:
                        seg[2] = i
                    self._count -= 1
                    return records[i - 1]
                segments.popleft()
            return None

    def pop_batch(self, limit: int) -> Records:
        grouped: Records = {}
        with self._lock:
            segments = self._segments
            left = limit
            while segments and left > 0:
                tp, records, i = seg = segments[0]
                n = len(records) - i
                if n <= left:
                    segments.popleft()
                    part = records if i == 0 else records[i:]
                else:
                    n = left
                    part = records[i : i + n]
                    seg[2] = i + n
                left -= n
                self._count -= n
                held = grouped.get(tp)
                if held is None:
                    grouped[tp] = part
                else:
                    held.extend(part)
        return grouped

    def drop(self, matches: Callable[[TopicPartition], bool]) -> dict[TopicPartition, ConsumerRecord]:
        """Remove the records of matching partitions; returns the first removed per partition
        (where the partition's position must go back to, if it stays assigned)."""
        first: dict[TopicPartition, ConsumerRecord] = {}
        with self._lock:
            if not self._count:
                return first
            kept: deque[list[Any]] = deque()
            for seg in self._segments:
                tp, records, i = seg
                if i >= len(records):
                    continue
                if matches(tp):
                    first.setdefault(tp, records[i])
                    self._count -= len(records) - i
                else:
                    kept.append(seg)
            self._segments = kept
        return first

    def clear(self) -> None:
        with self._lock:
            self._segments.clear()
            self._count = 0

    def first_offsets(self) -> dict[TopicPartition, ConsumerRecord]:
        """The first pending record of each partition."""
        first: dict[TopicPartition, ConsumerRecord] = {}
        with self._lock:
            for tp, records, i in self._segments:
                if i < len(records):
                    first.setdefault(tp, records[i])
        return first

    def count(self, tp: TopicPartition) -> int:
        with self._lock:
            return sum(len(records) - i for t, records, i in self._segments if t == tp)
