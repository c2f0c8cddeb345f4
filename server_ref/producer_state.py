"""Idempotent producers: producer id allocation and per-partition sequence checks.

For every (partition, producer id) the broker remembers the producer epoch and the last
five batches it appended (first/last sequence and offsets), as Kafka does. A retried batch
that matches one of them is a duplicate: it is not written again and the client gets the
offsets of the original. Anything else out of sequence is OUT_OF_ORDER_SEQUENCE_NUMBER; an
old epoch is INVALID_PRODUCER_EPOCH. A retry older than the five remembered batches gets
DUPLICATE_SEQUENCE_NUMBER (every client treats it as "already written").

Transaction markers (control batches) are part of that state, as in Kafka's
ProducerStateManager: a marker's epoch becomes the producer's (transactions v2 write it with
the bumped epoch, which fences the old one) and the partition keeps the coordinator epoch of
the last marker, refusing a marker from an older coordinator with
TRANSACTION_COORDINATOR_FENCED. Rebuilding from the log applies markers too, so a new
leader or a restarted broker fences what the original leader fenced.

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
from itertools import takewhile
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from sdk.errors import (
    DuplicateSequenceNumberError,
    InvalidProducerEpochError,
    OutOfOrderSequenceNumberError,
    TransactionCoordinatorFencedError,
)
from sdk.records.reader import RecordBatch
from server_ref.config import write_json_atomically
from server_ref.storage.snapshots import read_snapshot, snapshot_offsets

if TYPE_CHECKING:
    from server_ref.storage.log import PartitionLog

log = logging.getLogger(__name__)

__all__ = [
    "AppendedBatch",
    "PartitionProducers",
    "ProducerIdAllocator",
    "load_snapshot",
    "producers_at_end",
    "state_as_of",
    "write_snapshot",
]

BATCHES_KEPT = 5  # Kafka's NUM_BATCHES_TO_RETAIN; also the most in-flight requests allowed
ID_BLOCK = 1000
INT32_MAX = (1 << 31) - 1
NO_PRODUCER_ID = -1
NO_COORDINATOR_EPOCH = -1


class LogLike(Protocol):
    """What a rebuild reads from a partition log (storage's ``PartitionLog``)."""

    def batch_headers(self, start_offset: int = 0) -> Iterator[Any]: ...
    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None) -> Any: ...


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
    coordinator_epoch: int = NO_COORDINATOR_EPOCH  # of the last marker written

    def take_epoch(self, epoch: int) -> None:
        """A newer epoch starts over: its sequences begin at 0."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()

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
        if entry is None:
            entry = self.entries[producer_id] = ProducerEntry(epoch)
        entry.take_epoch(epoch)  # the coordinator epoch stays: it is not the producer's
        entry.batches.append(batch)
        entry.last_seen_ms = now_ms

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """Before a COMMIT/ABORT marker is appended (Kafka's appendEndTxnMarker checks)."""
        entry = self.entries.get(producer_id)
        if entry is None:
            return
        if epoch < entry.epoch:
            # A marker from an older epoch than the data the partition holds is a zombie
            # coordinator's.
            raise InvalidProducerEpochError(
                f"marker epoch {epoch} of producer {producer_id} is older than {entry.epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"marker of producer {producer_id} from coordinator epoch {coordinator_epoch}"
                f", older than the {entry.coordinator_epoch} of the last marker written")

    def record_marker(self, producer_id: int, epoch: int, coordinator_epoch: int,
                      now_ms: int) -> None:
        """A marker was appended: its epoch becomes the producer's (a v2 marker carries the
        bumped one, which fences late writes of the old) and its coordinator epoch the
        partition's for this producer. A marker has no sequence."""
        entry = self.entries.get(producer_id)
        if entry is None:
            entry = self.entries[producer_id] = ProducerEntry(epoch)
        elif epoch > entry.epoch:
            entry.take_epoch(epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.last_seen_ms = now_ms

    def replay(self, headers: Iterable[BatchHeaderLike], now_ms: int,
               log: LogLike | None = None) -> None:
        """Rebuild from stored batches (oldest first). With ``log`` (the one the headers come
        from) control batches are applied too: their coordinator epoch is read from it."""
        for h in headers:
            if h.producer_id == NO_PRODUCER_ID:
                continue
            if h.is_control:
                if log is not None:
                    self.record_marker(h.producer_id, h.producer_epoch,
                                       _marker_coordinator_epoch(log, h), now_ms)
                continue
            if h.base_sequence < 0:
                continue
            last_seq = last_sequence_of(h.base_sequence, h.last_offset - h.base_offset)
            self.record(h.producer_id, h.producer_epoch,
                        AppendedBatch(h.base_sequence, last_seq, h.base_offset, h.last_offset,
                                      -1), now_ms)

    def rebuild(self, log: LogLike, start_offset: int, now_ms: int) -> None:
        """Apply every batch of ``log`` from ``start_offset``, markers included."""
        self.replay(log.batch_headers(start_offset), now_ms, log)

    def expire(self, older_than_ms: int) -> int:
        stale = [pid for pid, e in self.entries.items() if e.last_seen_ms < older_than_ms]
        for pid in stale:
            del self.entries[pid]
        return len(stale)

    # ------------------------------------------------------------------ snapshots

    def to_json(self) -> dict[str, Any]:
        return {
            str(pid): {"epoch": e.epoch, "seen": e.last_seen_ms,
                       "coordinator_epoch": e.coordinator_epoch,
                       "batches": [list(b) for b in e.batches]}
            for pid, e in self.entries.items()
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PartitionProducers:
        state = cls()
        for pid, e in data.items():
            entry = ProducerEntry(int(e["epoch"]), last_seen_ms=int(e["seen"]),
                                  coordinator_epoch=int(e.get("coordinator_epoch",
                                                              NO_COORDINATOR_EPOCH)))
            entry.batches.extend(AppendedBatch(*map(int, b)) for b in e["batches"])
            state.entries[int(pid)] = entry
        return state


def _marker_coordinator_epoch(log: LogLike, header: BatchHeaderLike) -> int:
    """The coordinator epoch in a stored marker's value (NO_COORDINATOR_EPOCH if it is not a
    COMMIT/ABORT marker)."""
    data = log.read(header.base_offset, 1).to_bytes()
    epoch = RecordBatch(data).control_record().coordinator_epoch
    return NO_COORDINATOR_EPOCH if epoch is None else int(epoch)


def state_as_of(plog: PartitionLog, offset: int, now_ms: int) -> dict[str, Any]:
    """The producer state (``to_json``) as of ``offset``, every batch below it applied: the
    snapshot the log took when it rolled there; without one (lost, or a segment rolled
    before snapshots were taken), the latest earlier snapshot still local, or none from the
    local log start, with the batches from there to ``offset`` replayed."""
    saved = read_snapshot(plog.directory, offset)
    if saved is not None:
        return saved
    state, start = PartitionProducers(), plog.log_start_offset
    for earlier in reversed(snapshot_offsets(plog.directory)):
        found = read_snapshot(plog.directory, earlier) if start <= earlier < offset else None
        if found is not None:
            state, start = PartitionProducers.from_json(found), earlier
            break
    log.info("%s: no producer snapshot at %d; replaying batches from %d", plog.directory,
             offset, start)
    state.replay(takewhile(lambda h: h.base_offset < offset, plog.batch_headers(start)),
                 now_ms, plog)
    return state.to_json()


def producers_at_end(plog: PartitionLog, now_ms: int) -> PartitionProducers:
    """The producer state after every batch of ``plog``: from its latest snapshot plus the
    batches after it (a new leader's, or a follower's after a truncation)."""
    return PartitionProducers.from_json(state_as_of(plog, plog.log_end_offset, now_ms))


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
