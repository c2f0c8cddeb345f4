"""A Jepsen-style checker for a producer's history against what the log holds.

The producer side records, per sent record (``seq``, its global send order), what the
producer told the application: acknowledged at (partition, offset), or failed with an error
(through the future *and* the ``on_delivery`` callback, which must agree), or nothing at all
(a record left pending after flush). The log side is every record read back from the topic.
:func:`check` compares them and names the offending records:

* lost: acknowledged, but not in the log at the acknowledged partition and offset;
* duplicated: a ``seq`` stored more than once;
* reordered: in a partition, a ``seq`` stored after a larger one (one thread sends in seq
  order, and Kafka keeps a producer's order per partition);
* unreported: a future not done after flush, or a callback that ran zero or several times;
* failed but stored: a definite failure (anything but a delivery timeout, whose outcome is
  unknown) whose record is in the log anyway.

Zero in every class is the only pass.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sdk import errors


@dataclass(frozen=True, slots=True)
class StoredRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes


@dataclass(slots=True)
class Sent:
    seq: int
    key: bytes
    sent_at: float
    future: Any = None
    callbacks: int = 0
    callback_error: BaseException | None = None
    acked_at: float | None = None
    partition: int = -1
    offset: int = -1


@dataclass
class History:
    """What the producer reported, filled from the send loop and the delivery callbacks."""

    records: dict[int, Sent] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def sent(self, seq: int, key: bytes) -> Sent:
        record = Sent(seq, key, time.monotonic())
        with self.lock:
            self.records[seq] = record
        return record

    def callback_for(self, record: Sent) -> Any:
        def on_delivery(err: BaseException | None, metadata: Any) -> None:
            now = time.monotonic()
            with self.lock:
                record.callbacks += 1
                record.callback_error = err
                if err is None:
                    record.acked_at = now
                    record.partition, record.offset = metadata.partition, metadata.offset
        return on_delivery

    def first_ack_after(self, partition: int, t0: float) -> float | None:
        """Seconds from ``t0`` to the first acknowledgement on ``partition`` of a record
        sent after ``t0`` (None: none)."""
        with self.lock:
            times = [r.acked_at for r in self.records.values()
                     if r.partition == partition and r.acked_at is not None and r.sent_at > t0]
        return min(times) - t0 if times else None


@dataclass
class Verdict:
    acknowledged: int = 0
    failed: dict[int, BaseException] = field(default_factory=dict)
    lost: list[int] = field(default_factory=list)
    duplicated: dict[int, int] = field(default_factory=dict)
    reordered: list[tuple[int, int, int]] = field(default_factory=list)  # (partition, prev, seq)
    unreported: list[int] = field(default_factory=list)
    failed_but_stored: list[int] = field(default_factory=list)
    misplaced: list[tuple[int, tuple[int, int], tuple[int, int]]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.reordered or self.unreported
                    or self.failed_but_stored or self.misplaced)

    def summary(self) -> str:
        def head(items: Any, n: int = 10) -> str:
            items = list(items.items() if isinstance(items, dict) else items)
            return f"{items[:n]}{' ...' if len(items) > n else ''}"

        failures = Counter(type(e).__name__ for e in self.failed.values())
        return (f"acknowledged={self.acknowledged} failed={dict(failures)} "
                f"lost={len(self.lost)} {head(self.lost)} "
                f"duplicated={len(self.duplicated)} {head(self.duplicated)} "
                f"reordered={len(self.reordered)} {head(self.reordered)} "
                f"unreported={len(self.unreported)} {head(self.unreported)} "
                f"failed_but_stored={len(self.failed_but_stored)} {head(self.failed_but_stored)} "
                f"misplaced(seq, acked, stored)={len(self.misplaced)} {head(self.misplaced)}")


def _future_outcome(record: Sent) -> tuple[bool, BaseException | None]:
    """(done, error) as the record's future says it."""
    future = record.future
    if future is None or not future.done():
        return False, None
    return True, future.exception(0)


def check(history: History, log: dict[int, list[StoredRecord]]) -> Verdict:
    verdict = Verdict()
    stored: dict[int, list[tuple[int, int]]] = {}  # seq -> [(partition, offset)]
    for partition, records in log.items():
        previous = -1
        for rec in records:
            seq = int(rec.value)
            stored.setdefault(seq, []).append((partition, rec.offset))
            if seq < previous:
                verdict.reordered.append((partition, previous, seq))
            previous = max(previous, seq)
    for seq, places in stored.items():
        if len(places) > 1:
            verdict.duplicated[seq] = len(places)
    with history.lock:
        sent = list(history.records.values())
    for record in sent:
        done, error = _future_outcome(record)
        if not done or record.callbacks != 1 or (error is None) != (record.callback_error is None):
            verdict.unreported.append(record.seq)
            continue
        if error is not None:
            verdict.failed[record.seq] = error
            if record.seq in stored and not isinstance(error, errors.DeliveryTimeoutError):
                verdict.failed_but_stored.append(record.seq)
            continue
        verdict.acknowledged += 1
        places = stored.get(record.seq, [])
        if not places:
            verdict.lost.append(record.seq)
        elif (record.partition, record.offset) not in places:
            verdict.misplaced.append((record.seq, (record.partition, record.offset), places[0]))
    return verdict
