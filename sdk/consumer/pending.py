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

from sdk.types import ConsumerRecord, TopicPartition

Records = dict[TopicPartition, list[ConsumerRecord]]


class PendingRecords:
    __slots__ = ("_lock", "_records")

    def __init__(self) -> None:
        self._records: deque[ConsumerRecord] = deque()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._records)

    def __bool__(self) -> bool:
        return bool(self._records)

    def extend(self, batch: Records) -> None:
        with self._lock:
            for records in batch.values():
                self._records.extend(records)

    def pop_one(self) -> ConsumerRecord | None:
        with self._lock:
            return self._records.popleft() if self._records else None

    def pop_batch(self, limit: int) -> Records:
        grouped: dict[tuple[str, int], list[ConsumerRecord]] = {}
        with self._lock:
            records = self._records
            popleft = records.popleft
            for _ in range(min(limit, len(records))):
                rec = popleft()
                key = (rec.topic, rec.partition)  # a tuple: cheaper than a TopicPartition
                bucket = grouped.get(key)
                if bucket is None:
                    grouped[key] = [rec]
                else:
                    bucket.append(rec)
        return {TopicPartition(t, p): recs for (t, p), recs in grouped.items()}

    def drop(self, matches: Callable[[TopicPartition], bool]) -> dict[TopicPartition, ConsumerRecord]:
        """Remove the records of matching partitions; returns the first removed per partition
        (where the partition's position must go back to, if it stays assigned)."""
        first: dict[TopicPartition, ConsumerRecord] = {}
        with self._lock:
            if not self._records:
                return first
            kept: deque[ConsumerRecord] = deque()
            for rec in self._records:
                tp = TopicPartition(rec.topic, rec.partition)
                if matches(tp):
                    first.setdefault(tp, rec)
                else:
                    kept.append(rec)
            self._records = kept
        return first

    def clear(self) -> None:
        with self._lock:
            self._records.clear()

    def first_offsets(self) -> dict[TopicPartition, ConsumerRecord]:
        """The first pending record of each partition."""
        first: dict[TopicPartition, ConsumerRecord] = {}
        with self._lock:
            for rec in self._records:
                first.setdefault(TopicPartition(rec.topic, rec.partition), rec)
        return first

    def count(self, tp: TopicPartition) -> int:
        with self._lock:
            return sum(1 for r in self._records if r.topic == tp.topic and r.partition == tp.partition)
