"""Transactions as the log sees them: open transactions, the last stable offset, and the
aborted-transaction index that read_committed fetches need.

A transactional data batch opens a transaction for its producer id (if none is open); the
next control batch (COMMIT or ABORT marker) of that producer closes it. An aborted
transaction is recorded in the ``.txnindex`` of the segment that received the marker, in
Kafka's format: version int16 (0), producer id int64, first offset int64, last offset int64
(the marker's offset) and the last stable offset after the abort, int64. The last stable
offset is the first offset of the oldest open transaction, or the log end offset.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from sdk.records.control import ControlType

__all__ = ["AbortedTxn", "TransactionState", "TxnIndex", "collect_aborted"]

log = logging.getLogger(__name__)

_ENTRY = struct.Struct(">hqqqq")


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction: Fetch's AbortedTransactions lists (producer_id, first_offset)."""

    producer_id: int
    first_offset: int
    last_offset: int  # offset of the ABORT marker
    last_stable_offset: int


class TxnIndex:
    """A segment's aborted transactions, in memory and in ``<base>.txnindex``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] | None = None  # loaded on first use
        self._flushed = 0
        self._rewrite = False

    def _load(self) -> list[AbortedTxn]:
        if self._entries is not None:
            return self._entries
        entries: list[AbortedTxn] = []
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        whole = len(data) - len(data) % _ENTRY.size
        if whole != len(data):
            log.warning("%s: dropping a partial entry at the end", self.path)
            self._rewrite = True
        for version, pid, first, last, lso in _ENTRY.iter_unpack(data[:whole]):
            if version != 0:
                log.warning("%s: unknown entry version %d; ignoring the rest", self.path, version)
                self._rewrite = True
                break
            entries.append(AbortedTxn(pid, first, last, lso))
        self._entries = entries
        self._flushed = len(entries)
        return entries

    def entries(self) -> list[AbortedTxn]:
        return list(self._load())

    def append(self, entry: AbortedTxn) -> None:
        self._load().append(entry)

    def reset(self) -> None:
        self._entries = []
        self._flushed = 0
        self._rewrite = True

    def truncate_to(self, offset: int) -> None:
        """Forget aborts whose marker is at ``offset`` or later."""
        entries = self._load()
        keep = [e for e in entries if e.last_offset < offset]
        if len(keep) != len(entries):
            self._entries = keep
            self._flushed = min(self._flushed, len(keep))
            self._rewrite = True

    def flush(self, fsync: bool = False) -> None:
        entries = self._entries
        if entries is None or (not self._rewrite and self._flushed == len(entries)):
            return
        if self._rewrite and not entries:
            self.path.unlink(missing_ok=True)
        else:
            start = 0 if self._rewrite else self._flushed
            data = b"".join(
                _ENTRY.pack(0, e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset)
                for e in entries[start:]
            )
            with open(self.path, "wb" if self._rewrite else "ab") as f:
                f.write(data)
                if fsync:
                    os.fsync(f.fileno())
        self._flushed = len(entries)
        self._rewrite = False

    def delete_file(self) -> None:
        self.path.unlink(missing_ok=True)


class TransactionState:
    """Open transactions of one partition: producer id -> first offset."""

    def __init__(self, ongoing: dict[int, int] | None = None) -> None:
        self.ongoing: dict[int, int] = dict(ongoing or {})

    def first_unstable_offset(self) -> int | None:
        return min(self.ongoing.values()) if self.ongoing else None

    def begin(self, producer_id: int, offset: int) -> None:
        self.ongoing.setdefault(producer_id, offset)

    def end(self, producer_id: int, marker_type: int, marker_offset: int) -> AbortedTxn | None:
        """Close the producer's transaction; an ABORT returns the index entry to record."""
        first = self.ongoing.pop(producer_id, None)
        if first is None or marker_type != ControlType.ABORT:
            return None
        unstable = self.first_unstable_offset()
        lso = marker_offset + 1 if unstable is None else min(unstable, marker_offset + 1)
        return AbortedTxn(producer_id, first, marker_offset, lso)


def collect_aborted(indexes: Iterable[TxnIndex], start: int, end: int) -> list[AbortedTxn]:
    """Aborted transactions overlapping offsets [start, end), in marker order."""
    out = []
    for index in indexes:
        for entry in index.entries():
            if entry.last_offset >= start and entry.first_offset < end:
                out.append(entry)
    return out
