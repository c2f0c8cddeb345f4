"""One share-partition: a share group's delivery state of one topic partition. Pure, no IO.

Offsets below the share-partition start offset (SPSO, ``start``) are settled for the group;
offsets from ``end`` (the SPEO) on were never handed out. Each offset in between is in
flight and has a state (Kafka's RecordState numbering):

* AVAILABLE -- may be acquired (it was released, or its lock timed out);
* ACQUIRED -- locked for one member until ``deadline`` (``share.record.lock.duration.ms``);
* ACKNOWLEDGED -- accepted (or a gap: no record for the application at that offset);
* ARCHIVED -- rejected, or delivered ``share.delivery.count.limit`` times already.

Acquiring bumps the delivery count. A release or a lock timeout makes the record AVAILABLE
again, unless its delivery count reached the limit: then it is ARCHIVED, never delivered
again. ``start`` moves past every settled offset at the front. At most
``share.partition.max.record.locks`` offsets are in flight (``end - start``), as in Kafka.

The state a restart keeps (:meth:`snapshot` / :meth:`restore`) is ``start`` and the
in-flight offsets with their delivery counts; acquired records come back AVAILABLE, since
their locks did not survive.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["AcquiredRange", "InFlight", "RecordState", "SharePartition"]


class RecordState(enum.IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
RENEW_DISABLED = "Renewing acquisition locks is not enabled for the group."
_SETTLED = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
NO_DEADLINE = 1 << 62

AcquiredRange = tuple[int, int, int]  # first offset, last offset, delivery count


@dataclass(slots=True)
class InFlight:
    state: RecordState
    count: int  # delivery count
    member: str = ""
    deadline: int = NO_DEADLINE


class InvalidAcknowledgement(Exception):
    """An acknowledgement the record's state does not allow (INVALID_RECORD_STATE), or a
    malformed batch (``invalid_request``)."""

    def __init__(self, message: str, *, invalid_request: bool = False) -> None:
        super().__init__(message)
        self.invalid_request = invalid_request


class SharePartition:
    def __init__(self, group_id: str, topic_id: Any, partition: int, start: int) -> None:
        self.group_id = group_id
        self.topic_id = topic_id
        self.partition = partition
        self.start = start
        self.end = start
        self.records: dict[int, InFlight] = {}
        self.next_deadline = NO_DEADLINE  # earliest lock expiry (may be stale: a hint)

    # ------------------------------------------------------------------ acquiring

    def acquire(self, member: str, log_start: int, log_end: int, max_records: int,
                lock_ms: int, max_locks: int, now: int) -> list[AcquiredRange]:
        """Lock up to ``max_records`` records for ``member``: released ones first, then new
        ones up to the log end. Returns the acquired ranges in offset order."""
        if self.start < log_start:  # retention deleted what we had not settled
            self._move_start(log_start)
        got: list[int] = []
        deadline = now + lock_ms
        for offset in range(self.start, self.end):
            if len(got) >= max_records:
                break
            rec = self.records[offset]
            if rec.state is RecordState.AVAILABLE:
                rec.state, rec.member, rec.deadline = RecordState.ACQUIRED, member, deadline
                rec.count += 1
                got.append(offset)
        limit = min(log_end, self.start + max_locks, self.end + max_records - len(got))
        while self.end < limit:
            self.records[self.end] = InFlight(RecordState.ACQUIRED, 1, member, deadline)
            got.append(self.end)
            self.end += 1
        if got:
            self.next_deadline = min(self.next_deadline, deadline)
        return self._ranges(got)

    def _ranges(self, offsets: list[int]) -> list[AcquiredRange]:
        out: list[AcquiredRange] = []
        for offset in offsets:
            count = self.records[offset].count
            if out and out[-1][1] == offset - 1 and out[-1][2] == count:
                out[-1] = (out[-1][0], offset, count)
            else:
                out.append((offset, offset, count))
        return out

    # ------------------------------------------------------------------ settling

    def acknowledge(self, member: str, first: int, last: int, types: list[int],
                    delivery_limit: int, *, renew_ack: bool = False,
                    renew_deadline: int | None = None) -> bool:
        """Apply one acknowledgement batch; all of it or nothing. Returns whether a record
        became AVAILABLE (waiting fetches may want it). RENEW (KIP-1222, v2 requests with
        IsRenewAck, ``renew_ack``) keeps a record acquired by the member until
        ``renew_deadline``; None: the group's share.renew.acknowledge.enable is off."""
        if last < first or not types or len(types) not in (1, last - first + 1):
            raise InvalidAcknowledgement(
                f"batch {first}-{last} with {len(types)} types", invalid_request=True)
        if any(not GAP <= t <= (RENEW if renew_ack else REJECT) for t in types):
            raise InvalidAcknowledgement(f"unknown acknowledge type in {types}",
                                         invalid_request=True)
        for offset in range(first, last + 1):
            rec = self.records.get(offset)
            if rec is None or rec.state is not RecordState.ACQUIRED or rec.member != member:
                raise InvalidAcknowledgement(
                    f"offset {offset} is not acquired by member {member}")
        if RENEW in types and renew_deadline is None:
            raise InvalidAcknowledgement(RENEW_DISABLED)
        released = False
        for i, offset in enumerate(range(first, last + 1)):
            kind = types[0] if len(types) == 1 else types[i]
            rec = self.records[offset]
            if kind == RENEW and renew_deadline is not None:
                rec.deadline = renew_deadline  # still acquired by the member
                continue
            rec.member, rec.deadline = "", NO_DEADLINE
            if kind == RELEASE:
                released |= self._release(rec, delivery_limit)
            elif kind == REJECT:
                rec.state = RecordState.ARCHIVED
            else:  # ACCEPT, GAP
                rec.state = RecordState.ACKNOWLEDGED
        self._advance()
        return released

    @staticmethod
    def _release(rec: InFlight, delivery_limit: int) -> bool:
        rec.member, rec.deadline = "", NO_DEADLINE
        if rec.count >= delivery_limit:
            rec.state = RecordState.ARCHIVED
            return False
        rec.state = RecordState.AVAILABLE
        return True

    def expire(self, now: int, delivery_limit: int) -> bool:
        """Locks past their deadline end; returns whether anything changed."""
        if now < self.next_deadline:
            return False
        changed = False
        upcoming = NO_DEADLINE
        for rec in self.records.values():
            if rec.state is RecordState.ACQUIRED:
                if rec.deadline <= now:
                    self._release(rec, delivery_limit)
                    changed = True
                else:
                    upcoming = min(upcoming, rec.deadline)
        self.next_deadline = upcoming
        if changed:
            self._advance()
        return changed

    def release_member(self, member: str, delivery_limit: int) -> bool:
        """Everything ``member`` holds goes back (it left, or its session closed)."""
        changed = False
        for rec in self.records.values():
            if rec.state is RecordState.ACQUIRED and rec.member == member:
                self._release(rec, delivery_limit)
                changed = True
        if changed:
            self._advance()
        return changed

    def _advance(self) -> None:
        records = self.records
        while self.start < self.end and records[self.start].state in _SETTLED:
            del records[self.start]
            self.start += 1

    def _move_start(self, offset: int) -> None:
        for o in range(self.start, min(offset, self.end)):
            self.records.pop(o, None)
        self.start = offset
        self.end = max(self.end, offset)

    def reset(self, offset: int) -> None:
        """AlterShareGroupOffsets: start over at ``offset`` (the group has no members)."""
        self.records.clear()
        self.start = self.end = offset
        self.next_deadline = NO_DEADLINE

    # ------------------------------------------------------------------ questions

    def has_available(self, log_end: int, max_locks: int) -> bool:
        if self.end < log_end and self.end < self.start + max_locks:
            return True
        return any(r.state is RecordState.AVAILABLE for r in self.records.values())

    def in_flight(self) -> Iterator[tuple[int, InFlight]]:
        return iter(sorted(self.records.items()))

    # ------------------------------------------------------------------ persistence

    def snapshot(self) -> dict[str, Any]:
        """``start`` and runs of in-flight offsets: [first, last, state, delivery count];
        ACQUIRED is written as AVAILABLE (a lock does not survive a restart)."""
        runs: list[list[int]] = []
        for offset, rec in self.in_flight():
            state = RecordState.AVAILABLE if rec.state is RecordState.ACQUIRED else rec.state
            if runs and runs[-1][1] == offset - 1 and runs[-1][2] == state \
                    and runs[-1][3] == rec.count:
                runs[-1][1] = offset
            else:
                runs.append([offset, offset, int(state), rec.count])
        return {"start": self.start, "runs": runs}

    def restore(self, data: dict[str, Any]) -> None:
        self.records.clear()
        self.start = self.end = int(data["start"])
        for first, last, state, count in data.get("runs", []):
            for offset in range(first, last + 1):
                self.records[offset] = InFlight(RecordState(state), count)
            self.end = max(self.end, last + 1)
        for offset in range(self.start, self.end):  # holes would break the invariant
            self.records.setdefault(offset, InFlight(RecordState.ARCHIVED, 0))
        self._advance()
