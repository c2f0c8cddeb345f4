"""Idempotent producers: producer id allocation and per-partition sequence checks.

For every (partition, producer id) the broker remembers the producer epoch and the last
five batches it appended (first/last sequence and offsets), as Kafka does. A retried batch
that matches one of them is a duplicate: it is not written again and the client gets the
offsets of the original. Anything else out of sequence is OUT_OF_ORDER_SEQUENCE_NUMBER; an
old epoch is INVALID_PRODUCER_EPOCH. A retry older than the five remembered batches gets
DUPLICATE_SEQUENCE_NUMBER (every client treats it as "already written").

Producer state survives a restart: it is rebuilt from the batch headers in the logs, starting
from a snapshot written at clean shutdown when there is one (``producer_state.json``).
Producer ids are handed out in blocks whose upper bound is persisted before use
(``producer_ids.json``), so an id is never given twice, even across a crash.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from sdk.errors import (
    DuplicateSequenceNumberError,
    InvalidProducerEpochError,
    OutOfOrderSequenceNumberError,
)
from server_ref.config import write_json_atomically

log = logging.getLogger(__name__)

__all__ = [
    "AppendedBatch",
    "PartitionProducers",
    "ProducerIdAllocator",
    "load_snapshot",
    "write_snapshot",
]

BATCHES_KEPT = 5  # Kafka's NUM_BATCHES_TO_RETAIN; also the most in-flight requests allowed
ID_BLOCK = 1000
INT32_MAX = (1 << 31) - 1
NO_PRODUCER_ID = -1


class BatchHeaderLike(Protocol):
    """What producer state needs from a stored batch header (storage's ``BatchHeader``).

    Read-only properties, so a frozen dataclass satisfies it."""

    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def is_control(self) -> bool: ...


class AppendedBatch(NamedTuple):
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque[AppendedBatch] = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))
    last_seen_ms: int = -1

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1


def last_sequence_of(base_sequence: int, record_count_minus_one: int) -> int:
    """Sequences wrap from int32 max back to 0."""
    return (base_sequence + record_count_minus_one) & INT32_MAX


def _next_in_line(last: int, first: int) -> bool:
    return first == (0 if last == INT32_MAX else last + 1)


class PartitionProducers:
    """Sequence state of the idempotent producers writing to one partition."""

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: dict[int, ProducerEntry] = {}

    def check(self, producer_id: int, epoch: int, first_seq: int,
              last_seq: int) -> AppendedBatch | None:
        """Check a batch before it is appended. Returns the original append when the batch
        is a retry of a remembered one; raises the Kafka error when it cannot be appended."""
        entry = self.entries.get(producer_id)
        if entry is None:
            return None  # unknown (new, or its state expired): any sequence starts it
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"Epoch {epoch} of producer {producer_id} is older than the current {entry.epoch}"
            )
        if epoch > entry.epoch:
            if first_seq != 0:
                raise OutOfOrderSequenceNumberError(
                    f"Producer {producer_id} started epoch {epoch} with sequence {first_seq}, "
                    "not 0"
                )
            return None
        for batch in entry.batches:
            if batch.first_sequence == first_seq and batch.last_sequence == last_seq:
                return batch
        last = entry.last_sequence
        if last < 0 or _next_in_line(last, first_seq):
            return None
        oldest = entry.batches[0].first_sequence
        if last_seq < oldest and first_seq <= last_seq:
            raise DuplicateSequenceNumberError(
                f"Batch {first_seq}..{last_seq} of producer {producer_id} was written before "
                f"the {BATCHES_KEPT} remembered batches"
            )
        raise OutOfOrderSequenceNumberError(
            f"Out of order sequence number for producer {producer_id}: {first_seq} "
            f"(incoming seq. number), {last} (current end sequence number)"
        )

    def record(self, producer_id: int, epoch: int, batch: AppendedBatch, now_ms: int) -> None:
        entry = self.entries.get(producer_id)
        if entry is None or entry.epoch != epoch:
            entry = ProducerEntry(epoch)
            self.entries[producer_id] = entry
        entry.batches.append(batch)
        entry.last_seen_ms = now_ms

    def replay(self, headers: Iterable[BatchHeaderLike], now_ms: int) -> None:
        """Rebuild from stored batches (oldest first)."""
        for h in headers:
            if h.producer_id == NO_PRODUCER_ID or h.is_control or h.base_sequence < 0:
                continue
            last_seq = last_sequence_of(h.base_sequence, h.last_offset - h.base_offset)
            self.record(h.producer_id, h.producer_epoch,
                        AppendedBatch(h.base_sequence, last_seq, h.base_offset, h.last_offset,
                                      -1), now_ms)

    def expire(self, older_than_ms: int) -> int:
        stale = [pid for pid, e in self.entries.items() if e.last_seen_ms < older_than_ms]
        for pid in stale:
            del self.entries[pid]
        return len(stale)

    # ------------------------------------------------------------------ snapshots

    def to_json(self) -> dict[str, Any]:
        return {
            str(pid): {"epoch": e.epoch, "seen": e.last_seen_ms,
                       "batches": [list(b) for b in e.batches]}
            for pid, e in self.entries.items()
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PartitionProducers:
        state = cls()
        for pid, e in data.items():
            entry = ProducerEntry(int(e["epoch"]), last_seen_ms=int(e["seen"]))
            entry.batches.extend(AppendedBatch(*map(int, b)) for b in e["batches"])
            state.entries[int(pid)] = entry
        return state


SNAPSHOT_FILE = "producer_state.json"


def write_snapshot(data_dir: Path, partitions: Iterator[tuple[str, int, PartitionProducers]]
                   ) -> None:
    """``partitions`` yields (key, log end offset, state); the key names topic id and index so
    a topic deleted and created again under the same name never inherits old state."""
    data = {key: {"offset": end, "producers": state.to_json()}
            for key, end, state in partitions if state.entries}
    write_json_atomically(data_dir / SNAPSHOT_FILE, data)


def load_snapshot(data_dir: Path) -> dict[str, tuple[int, dict[str, Any]]]:
    path = data_dir / SNAPSHOT_FILE
    if not path.exists():
        return {}
    try:
        with open(path, encoding="utf-8") as fh:
            raw = json.load(fh)
        return {key: (int(v["offset"]), v["producers"]) for key, v in raw.items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("ignoring unreadable producer state snapshot %s: %s", path, exc)
        return {}


class ProducerIdAllocator:
    """Hands out producer ids; the end of the current block is on disk before it is used."""

    FILE = "producer_ids.json"

    def __init__(self, data_dir: Path, first: int = 0) -> None:
        """``first``: the lowest id to hand out (a cluster's brokers each allocate from a
        range of their own, so two brokers never give two producers the same id)."""
        self._path = data_dir / self.FILE
        self._next = first
        self._block_end = first
        if self._path.exists():
            with open(self._path, encoding="utf-8") as fh:
                stored = int(json.load(fh)["block_end"])
            if stored > first:
                self._next = self._block_end = stored

    def allocate(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + ID_BLOCK
            write_json_atomically(self._path, {"block_end": self._block_end})
        pid = self._next
        self._next += 1
        return pid
