"""The metadata log on disk: one file of record batches, an in-memory index, epochs.

The metadata log is small and written by one node at a time, so one file suffices (Kafka's
segments matter for data logs of terabytes, not here). Offsets start at the log start offset
(after a snapshot) and every batch's ``partitionLeaderEpoch`` is the epoch of the leader that
appended it; the epoch history (which epoch started at which offset) is derived from the
batches, so it can never disagree with them. A torn tail (a crash mid-write) is cut at open.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sdk.errors import MalformedDataError
from sdk.records.header import LOG_OVERHEAD, RECORD_BATCH_OVERHEAD
from sdk.records.reader import RecordBatch

LOG_FILE = "00000000000000000000.log"
_START_FILE = "log-start-offset"
_LENGTH = struct.Struct(">qi")


@dataclass(frozen=True, slots=True)
class BatchEntry:
    base_offset: int
    last_offset: int
    epoch: int
    position: int
    size: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class OffsetAndEpoch:
    offset: int
    epoch: int


class RaftLog:
    """Append, read, truncate and trim the replicated log of one node."""

    def __init__(self, directory: Path, *, fsync: bool = False) -> None:
        self.directory = directory
        self.fsync = fsync
        directory.mkdir(parents=True, exist_ok=True)
        self._path = directory / LOG_FILE
        self._entries: list[BatchEntry] = []
        self._start = self._read_start()
        # The (end offset, epoch) of the snapshot the log continues from: answers epoch
        # questions about offsets before the first batch.
        self.base = OffsetAndEpoch(self._start, 0)
        self._file = open(self._path, "a+b")  # held open for the node's life
        self._recover()

    # ------------------------------------------------------------------ state

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._entries[-1].last_offset + 1 if self._entries else self._start

    @property
    def last_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else self.base.epoch

    @property
    def entries(self) -> list[BatchEntry]:
        return self._entries

    def set_base(self, base: OffsetAndEpoch) -> None:
        """The snapshot the log continues from (called at open and after a snapshot)."""
        self.base = base

    # ------------------------------------------------------------------ writes

    def append(self, batch: bytes, *, expected_epoch: int | None = None) -> BatchEntry:
        """Append one v2 batch whose base offset must be the log end offset."""
        rb = RecordBatch(batch)
        if rb.size != len(batch):
            raise MalformedDataError(f"{len(batch)} bytes hold a batch of {rb.size}")
        rb.validate_crc()
        if rb.base_offset != self.end_offset:
            raise MalformedDataError(
                f"batch at offset {rb.base_offset} does not continue the log at "
                f"{self.end_offset}")
        epoch = rb.partition_leader_epoch
        if epoch < self.last_epoch or (expected_epoch is not None and epoch != expected_epoch):
            raise MalformedDataError(
                f"batch epoch {epoch} after epoch {self.last_epoch} (expected {expected_epoch})")
        self._file.seek(0, os.SEEK_END)
        pos = self._file.tell()
        self._file.write(batch)
        self._file.flush()
        if self.fsync:
            os.fsync(self._file.fileno())
        entry = BatchEntry(rb.base_offset, rb.last_offset, epoch, pos, rb.size, rb.max_timestamp)
        self._entries.append(entry)
        return entry

    def truncate_to(self, offset: int) -> None:
        """Remove every batch holding an offset ≥ ``offset`` (a batch straddling it goes
        whole: truncation points are batch boundaries in practice)."""
        keep = len(self._entries)
        while keep and self._entries[keep - 1].last_offset >= offset:
            keep -= 1
        if keep == len(self._entries):
            return
        cut = self._entries[keep].position
        del self._entries[keep:]
        self._file.flush()
        self._file.truncate(cut)
        if self.fsync:
            os.fsync(self._file.fileno())

    def reset_to(self, start_offset: int) -> None:
        """Drop every batch and start the log at ``start_offset`` (a snapshot was installed)."""
        self._file.truncate(0)
        self._entries.clear()
        self._write_start(start_offset)

    def delete_before(self, offset: int) -> None:
        """Drop whole batches that end before ``offset`` (covered by a snapshot): the rest is
        rewritten to a new file that replaces the old one atomically."""
        drop = 0
        while drop < len(self._entries) and self._entries[drop].last_offset < offset:
            drop += 1
        if not drop:
            return
        new_start = self._entries[drop].base_offset if drop < len(self._entries) else offset
        tmp = self.directory / (LOG_FILE + ".tmp")
        kept: list[BatchEntry] = []
        with open(tmp, "wb") as out:
            for entry in self._entries[drop:]:
                data = self.read_batch(entry)
                kept.append(BatchEntry(entry.base_offset, entry.last_offset, entry.epoch,
                                       out.tell(), entry.size, entry.timestamp))
                out.write(data)
            out.flush()
            if self.fsync:
                os.fsync(out.fileno())
        # The start offset first: a crash between the two leaves a start offset that is
        # too high for the old file, and _recover drops the batches below it.
        self._write_start(new_start)
        self._file.close()
        os.replace(tmp, self._path)
        self._file = open(self._path, "a+b")
        self._entries = kept

    def close(self) -> None:
        self._file.close()

    # ------------------------------------------------------------------ reads

    def read_batch(self, entry: BatchEntry) -> bytes:
        self._file.flush()
        return os.pread(self._file.fileno(), entry.size, entry.position)

    def index_of(self, offset: int) -> int:
        """Index of the batch holding ``offset`` (or the first one after it)."""
        lo, hi = 0, len(self._entries)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._entries[mid].last_offset < offset:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding ``offset``: at least one, then up to
        ``max_bytes``."""
        i = self.index_of(offset)
        if i >= len(self._entries):
            return b""
        first = self._entries[i]
        end = first.position + first.size
        j = i + 1
        while j < len(self._entries):
            e = self._entries[j]
            if e.position + e.size - first.position > max_bytes:
                break
            end = e.position + e.size
            j += 1
        self._file.flush()
        return os.pread(self._file.fileno(), end - first.position, first.position)

    def batches(self, offset: int, end_offset: int) -> Iterator[tuple[BatchEntry, bytes]]:
        """Batches holding offsets in [offset, end_offset)."""
        for entry in self._entries[self.index_of(offset):]:
            if entry.base_offset >= end_offset:
                return
            yield entry, self.read_batch(entry)

    def epoch_of(self, offset: int) -> int:
        """The epoch of the batch holding ``offset`` (the snapshot's epoch before the log)."""
        i = self.index_of(offset)
        if i < len(self._entries) and self._entries[i].base_offset <= offset:
            return self._entries[i].epoch
        return self.base.epoch

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch ≤ ``epoch`` this log knows and the offset where it ends (the
        start of the next epoch, or the log end): Kafka's OffsetForLeaderEpoch rule, which
        followers use to find where their log and the leader's diverge. ``(-1, -1)`` when
        ``epoch`` is older than anything kept (the snapshot covers it)."""
        found: int | None = None
        for entry in reversed(self._entries):
            if entry.epoch <= epoch:
                found = entry.epoch
                break
        if found is None:
            if epoch >= self.base.epoch:
                return OffsetAndEpoch(self.base.offset, self.base.epoch)
            return OffsetAndEpoch(-1, -1)
        for entry in self._entries:
            if entry.epoch > found:
                return OffsetAndEpoch(entry.base_offset, found)
        return OffsetAndEpoch(self.end_offset, found)

    # ------------------------------------------------------------------ open

    def _read_start(self) -> int:
        try:
            return int((self.directory / _START_FILE).read_text().strip() or 0)
        except FileNotFoundError:
            return 0

    def _write_start(self, offset: int) -> None:
        tmp = self.directory / (_START_FILE + ".tmp")
        tmp.write_text(f"{offset}\n")
        os.replace(tmp, self.directory / _START_FILE)
        self._start = offset

    def _recover(self) -> None:
        """Index every whole, valid batch; cut the file after the last one."""
        self._file.seek(0)
        data = self._file.read()
        pos = 0
        last_epoch = -1
        while len(data) - pos >= RECORD_BATCH_OVERHEAD:
            _base, length = _LENGTH.unpack_from(data, pos)
            size = length + LOG_OVERHEAD
            if size < RECORD_BATCH_OVERHEAD or pos + size > len(data):
                break
            try:
                rb = RecordBatch(data, pos)
                rb.validate_crc()
            except MalformedDataError:
                break
            expected = self.end_offset
            if rb.partition_leader_epoch < last_epoch or (
                    self._entries and rb.base_offset != expected):
                break
            if not self._entries and rb.last_offset < self._start:
                # Below the start offset written before an interrupted rewrite: skip.
                pos += size
                continue
            self._entries.append(BatchEntry(rb.base_offset, rb.last_offset,
                                            rb.partition_leader_epoch, pos, size,
                                            rb.max_timestamp))
            last_epoch = rb.partition_leader_epoch
            pos += size
        if self._entries and self._entries[0].position:
            # An interrupted delete_before left batches below the start: finish the job.
            first = self._entries[0].position
            self._entries = [BatchEntry(e.base_offset, e.last_offset, e.epoch,
                                        e.position - first, e.size, e.timestamp)
                             for e in self._entries]
            tail = data[first:pos]
            self._file.truncate(0)
            self._file.write(tail)
            self._file.flush()
            return
        if self._entries:
            self._start = min(self._start, self._entries[0].base_offset)
        if pos < len(data):
            self._file.truncate(pos)
            self._file.flush()
