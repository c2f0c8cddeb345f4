"""One log segment: ``<base>.log`` with its ``.index``, ``.timeindex`` and ``.txnindex``.

The log file holds v2 record batches back to back, exactly as they are served to consumers.
It is opened once, unbuffered and in append mode: writes go to the end in one ``write`` per
append (the page cache does the buffering, as in Kafka), reads use ``pread`` at explicit
positions, so readers and the writer never share a file position.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from crc32c import crc32c

from sdk.errors import KafkaStorageError
from sdk.records.header import ATTRIBUTES_OFFSET, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD
from sdk.records.reader import RecordBatch
from server_ref.storage.index import OffsetIndex, TimeIndex
from server_ref.storage.results import BatchHeader
from server_ref.storage.transactions import TxnIndex

__all__ = [
    "INDEX_SUFFIX",
    "LOG_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "TXN_INDEX_SUFFIX",
    "BatchInfo",
    "LogSegment",
    "segment_stem",
]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"

log = logging.getLogger(__name__)

_INT32_MAX = (1 << 31) - 1
_SCAN_CHUNK = 8192  # bytes read per pread while walking batch headers
_RECOVERY_CHUNK = 1 << 22  # bytes read per pread while verifying a whole segment

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc
_PREFIX = struct.Struct(">qiibI")
# lastOffsetDelta, baseTimestamp, maxTimestamp
_DELTA_TIMES = struct.Struct(">iqq")
_LAST_DELTA_OFFSET = 23

# (position in the segment, size, last offset, max timestamp) of one appended batch
BatchInfo = tuple[int, int, int, int]


def segment_stem(base_offset: int) -> str:
    """Kafka's file name stem: the base offset as 20 digits."""
    return f"{base_offset:020d}"


class LogSegment:
    """A segment file plus its sparse indexes and the facts the log needs about it."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        max_index_bytes: int,
        index_interval_bytes: int,
        created_ms: int,
        *,
        suffix: str = "",
    ) -> None:
        stem = segment_stem(base_offset)
        self.directory = directory
        self.base_offset = base_offset
        self.log_path = directory / f"{stem}{LOG_SUFFIX}{suffix}"
        self.offset_index = OffsetIndex(
            directory / f"{stem}{INDEX_SUFFIX}{suffix}",
            base_offset,
            max_index_bytes // OffsetIndex.ENTRY.size,
        )
        self.time_index = TimeIndex(
            directory / f"{stem}{TIME_INDEX_SUFFIX}{suffix}",
            base_offset,
            max_index_bytes // TimeIndex.ENTRY.size,
        )
        # Aborted transactions whose marker is in this segment. Compaction keeps offsets, so
        # a compacted copy inherits this object (and its file name) from the original.
        self.txn_index = TxnIndex(directory / f"{stem}{TXN_INDEX_SUFFIX}{suffix}")
        self.file: BinaryIO = open(self.log_path, "a+b", buffering=0)
        self.size = os.fstat(self.file.fileno()).st_size
        self.created_ms = created_ms
        self.index_interval_bytes = index_interval_bytes
        # Known after a scan (recovery, or appends to a new segment); None means not yet.
        self._next_offset: int | None = base_offset if self.size == 0 else None
        self._max_timestamp: int | None = -1 if self.size == 0 else None
        self._offset_of_max_timestamp = base_offset - 1
        self._first_batch_timestamp: int | None = -1 if self.size == 0 else None
        self._bytes_since_index = 0
        self._indexes_checked = self.size == 0
        if self.size == 0:
            self.offset_index.mark_loaded_empty()
            self.time_index.mark_loaded_empty()

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size})"

    # ------------------------------------------------------------------ facts

    @property
    def next_offset(self) -> int:
        """Offset after the segment's last batch (the base offset when empty)."""
        if self._next_offset is None:
            self._load_tail()
        assert self._next_offset is not None
        return self._next_offset

    @property
    def max_timestamp(self) -> int:
        """Largest record timestamp in the segment, -1 when it has none."""
        if self._max_timestamp is None:
            self._load_tail()
        assert self._max_timestamp is not None
        return self._max_timestamp

    @property
    def offset_of_max_timestamp(self) -> int:
        """Last offset of the (first) batch holding ``max_timestamp``."""
        if self._max_timestamp is None:
            self._load_tail()
        return self._offset_of_max_timestamp

    @property
    def first_batch_timestamp(self) -> int:
        """Max timestamp of the first batch (Kafka rolls by segment.ms from it); -1 if none."""
        if self._first_batch_timestamp is None:
            header = self.read_header(0)
            self._first_batch_timestamp = header.max_timestamp if header else -1
        return self._first_batch_timestamp

    def last_modified_ms(self) -> int:
        return os.fstat(self.file.fileno()).st_mtime_ns // 1_000_000

    def _load_tail(self) -> None:
        """Learn next offset and max timestamp of a sealed segment from its indexes.

        The time index's last entry is the segment's max timestamp (a final entry is written
        when a segment is sealed or closed). The next offset comes from walking the headers
        after the last offset index entry. Index files that disagree with the log are rebuilt.
        """
        self._ensure_indexes()
        if self._next_offset is not None and self._max_timestamp is not None:
            return  # the indexes were rebuilt, which scanned everything
        last_offset, position = self.offset_index.lookup(1 << 62)
        for _pos, header in self.iter_headers(position):
            last_offset = header.last_offset
        self._next_offset = last_offset + 1
        entry = self.time_index.last_entry()
        self._max_timestamp, self._offset_of_max_timestamp = entry or (-1, self.base_offset - 1)

    def _ensure_indexes(self) -> None:
        """Load the index files once, rebuilding them from the log if they look wrong."""
        if self._indexes_checked:
            return
        self._indexes_checked = True
        if not (self.offset_index.load() and self.time_index.load() and self._indexes_fit()):
            log.warning("%s: index files missing or inconsistent; rebuilding", self.log_path)
            self.rebuild_indexes()

    def _indexes_fit(self) -> bool:
        last = self.offset_index.last_entry()
        if last is not None and last[1] + RECORD_BATCH_OVERHEAD > self.size:
            return False
        if last is not None and self.size:
            header = self.read_header(last[1])
            if header is None or header.last_offset != last[0]:
                return False
        return True

    # ------------------------------------------------------------------ appending

    def append(self, data: bytes | bytearray | memoryview, batches: list[BatchInfo]) -> None:
        """Write already-patched batches in one write and index them.

        ``batches`` holds (position within ``data``, size, last offset, max timestamp).
        """
        base_position = self.size
        if self.size == 0:
            self._first_batch_timestamp = batches[0][3]
            self.offset_index.mark_loaded_empty()
            self.time_index.mark_loaded_empty()
        elif self._next_offset is None or self._max_timestamp is None:
            self._load_tail()
        else:
            self._ensure_indexes()
        view = memoryview(data)
        written = 0
        fd = self.file.fileno()
        while written < len(view):
            written += os.write(fd, view[written:])
        for rel_position, size, last_offset, max_ts in batches:
            self._index_batch(base_position + rel_position, size, last_offset, max_ts)
        self.size += len(view)
        self._next_offset = batches[-1][2] + 1

    def _index_batch(self, position: int, size: int, last_offset: int, max_ts: int) -> None:
        # As Kafka: an index entry once more than index.interval.bytes were written since the
        # last one; the time index gets the max timestamp so far at the same points.
        if self._max_timestamp is None or max_ts > self._max_timestamp:
            self._max_timestamp = max_ts
            self._offset_of_max_timestamp = last_offset
        if self._bytes_since_index > self.index_interval_bytes:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += size

    def seal(self) -> None:
        """Called when the segment stops being active: final time index entry, indexes out."""
        self._ensure_indexes()
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.flush(fsync=True)

    def fsync_log(self) -> None:
        os.fdatasync(self.file.fileno())

    def flush(self, fsync: bool = True) -> None:
        if fsync:
            os.fsync(self.file.fileno())
        self.offset_index.flush(fsync)
        self.time_index.flush(fsync)
        self.txn_index.flush(fsync)

    # ------------------------------------------------------------------ reading

    def read_header(self, position: int) -> BatchHeader | None:
        if position + RECORD_BATCH_OVERHEAD > self.size:
            return None
        data = os.pread(self.file.fileno(), RECORD_BATCH_OVERHEAD, position)
        if len(data) < RECORD_BATCH_OVERHEAD:
            return None
        return BatchHeader.parse(data)

    def iter_headers(
        self, start_position: int = 0, end_position: int | None = None
    ) -> Iterator[tuple[int, BatchHeader]]:
        """Yield (position, header) of each batch starting in [start, end), reading in chunks."""
        end = self.size if end_position is None else min(end_position, self.size)
        fd = self.file.fileno()
        pos = start_position
        buf = b""
        buf_start = pos
        while pos + RECORD_BATCH_OVERHEAD <= end:
            rel = pos - buf_start
            if rel + RECORD_BATCH_OVERHEAD > len(buf):
                buf = os.pread(fd, max(_SCAN_CHUNK, RECORD_BATCH_OVERHEAD), pos)
                buf_start, rel = pos, 0
                if len(buf) < RECORD_BATCH_OVERHEAD:
                    break
            header = BatchHeader.parse(buf, rel)
            if header.size < RECORD_BATCH_OVERHEAD or pos + header.size > self.size:
                raise KafkaStorageError(
                    f"{self.log_path.name}: batch at position {pos} declares {header.size} bytes"
                )
            yield pos, header
            pos += header.size

    def translate_offset(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= ``offset``."""
        self._ensure_indexes()
        _, position = self.offset_index.lookup(offset)
        for pos, header in self.iter_headers(position):
            if header.last_offset >= offset:
                return pos, header
        return None

    def boundary_at_or_before(self, limit: int, start_position: int) -> int:
        """The last batch boundary <= ``limit`` that is >= ``start_position``."""
        if limit >= self.size:
            return self.size
        self._ensure_indexes()
        _, position = self.offset_index.lookup_position(limit)
        boundary = max(position, start_position)
        for pos, header in self.iter_headers(boundary, self.size):
            if pos + header.size > limit:
                break
            boundary = pos + header.size
        return boundary

    def read_batch(self, position: int, header: BatchHeader) -> RecordBatch:
        data = os.pread(self.file.fileno(), header.size, position)
        if len(data) != header.size:
            raise KafkaStorageError(f"{self.log_path.name}: short read at position {position}")
        return RecordBatch(data)

    def iter_batches(self) -> Iterator[tuple[int, RecordBatch]]:
        """Yield (position, batch) for every batch, reading the file in large chunks."""
        fd = self.file.fileno()
        pos = 0
        while pos + RECORD_BATCH_OVERHEAD <= self.size:
            (length,) = struct.unpack_from(">i", os.pread(fd, 12, pos), 8)
            want = max(_RECOVERY_CHUNK, length + LOG_OVERHEAD)
            chunk = os.pread(fd, min(want, self.size - pos), pos)
            rel = 0
            while rel + RECORD_BATCH_OVERHEAD <= len(chunk):
                size = struct.unpack_from(">i", chunk, rel + 8)[0] + LOG_OVERHEAD
                if rel + size > len(chunk):
                    break
                yield pos + rel, RecordBatch(chunk, rel)
                rel += size
            if rel == 0:
                raise KafkaStorageError(f"{self.log_path.name}: unreadable batch at {pos}")
            pos += rel

    def find_timestamp(self, target: int, min_offset: int) -> tuple[int, int] | None:
        """Earliest (offset, timestamp) at or after ``min_offset`` with timestamp >= ``target``."""
        if self.max_timestamp < target:
            return None
        self._ensure_indexes()
        start = self.time_index.lookup_below(target)
        start_offset = max(min_offset, start[1] if start else self.base_offset)
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        for pos, header in self.iter_headers(found[0]):
            if header.max_timestamp < target or header.last_offset < min_offset:
                continue
            for record in self.read_batch(pos, header).records():
                if record.offset >= min_offset and record.timestamp >= target:
                    return record.offset, record.timestamp
        return None

    # ------------------------------------------------------------------ recovery

    def recover(self, *, cut: bool = True) -> int:
        """Verify every batch, rebuild the indexes and cut the file at the first bad batch.

        A batch is bad when it is torn (shorter than it declares), not magic 2, fails its
        CRC-32C, or does not move offsets forward. Returns the number of bytes from the first
        bad batch on (cut off unless ``cut`` is False).
        """
        self.offset_index.mark_loaded_empty()
        self.time_index.mark_loaded_empty()
        self._indexes_checked = True
        self._max_timestamp = -1
        self._offset_of_max_timestamp = self.base_offset - 1
        self._bytes_since_index = 0
        self._first_batch_timestamp = -1
        fd = self.file.fileno()
        file_size = os.fstat(fd).st_size
        expected_offset = self.base_offset
        pos = 0  # start of the first batch not yet verified
        want = _RECOVERY_CHUNK
        bad = False
        while not bad and pos + RECORD_BATCH_OVERHEAD <= file_size:
            chunk = os.pread(fd, min(want, file_size - pos), pos)
            want = _RECOVERY_CHUNK
            rel = 0
            while rel + RECORD_BATCH_OVERHEAD <= len(chunk):
                base, length, _epoch, magic, crc = _PREFIX.unpack_from(chunk, rel)
                size = length + LOG_OVERHEAD
                if magic != 2 or size < RECORD_BATCH_OVERHEAD or pos + rel + size > file_size:
                    bad = True  # torn tail or garbage
                    break
                if rel + size > len(chunk):
                    want = max(size, _RECOVERY_CHUNK)  # read on from this batch
                    break
                last_delta, _base_ts, max_ts = _DELTA_TIMES.unpack_from(chunk, rel + _LAST_DELTA_OFFSET)
                last = base + last_delta
                if (
                    base < expected_offset
                    or last_delta < 0
                    or last - self.base_offset > _INT32_MAX
                    or crc32c(memoryview(chunk)[rel + ATTRIBUTES_OFFSET : rel + size]) != crc
                ):
                    bad = True
                    break
                if pos + rel == 0:
                    self._first_batch_timestamp = max_ts
                self._index_batch(pos + rel, size, last, max_ts)
                expected_offset = last + 1
                rel += size
            pos += rel
        valid_end = pos
        bad_bytes = file_size - valid_end
        if bad_bytes and cut:
            os.ftruncate(fd, valid_end)
            self.size = valid_end
        else:
            self.size = file_size
        self._next_offset = expected_offset
        return bad_bytes

    def rebuild_indexes(self) -> None:
        """Rebuild both indexes from the log (they were found missing or inconsistent).

        Only recovery at open cuts files; a sealed segment found damaged later is left as it
        is and reported, so a read never destroys data as a side effect.
        """
        bad = self.recover(cut=False)
        if bad:
            raise KafkaStorageError(
                f"{self.log_path.name}: sealed segment failed verification; "
                f"{bad} bytes from position {self.size - bad} are unreadable"
            )

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset is >= ``offset``; returns the new next offset.

        A batch holding ``offset`` goes whole (a batch is never split), so the next offset
        may end up below ``offset``.
        """
        found = self.translate_offset(offset)
        if found is None:
            return self.next_offset
        position, header = found
        os.ftruncate(self.file.fileno(), position)
        self.size = position
        self.offset_index.truncate_to_position(position)
        self.time_index.truncate_to_offset(header.base_offset)
        # Max timestamp must forget the dropped batches: the time index still bounds what
        # precedes its last entry, so only the headers after that entry are walked.
        entry = self.time_index.last_entry()
        max_ts, max_offset = entry if entry else (-1, self.base_offset - 1)
        start = self.offset_index.lookup(max_offset)[1] if entry else 0
        for _pos, h in self.iter_headers(start):
            if h.max_timestamp > max_ts:
                max_ts, max_offset = h.max_timestamp, h.last_offset
        self._max_timestamp, self._offset_of_max_timestamp = max_ts, max_offset
        self._first_batch_timestamp = None
        self._bytes_since_index = 0
        self._next_offset = max(min(offset, header.base_offset), self.base_offset)
        return self._next_offset

    # ------------------------------------------------------------------ files

    def close(self) -> None:
        self.file.close()

    def change_suffix(self, suffix: str) -> None:
        """Rename the three files to ``<stem>.<kind><suffix>``: indexes first, the log last
        (renaming the log is the step that commits a compaction swap)."""
        stem = segment_stem(self.base_offset)
        self.offset_index.rename(self.directory / f"{stem}{INDEX_SUFFIX}{suffix}")
        self.time_index.rename(self.directory / f"{stem}{TIME_INDEX_SUFFIX}{suffix}")
        path = self.directory / f"{stem}{LOG_SUFFIX}{suffix}"
        os.replace(self.log_path, path)
        self.log_path = path

    def delete_files(self) -> BinaryIO:
        """Unlink the segment's files; the open log file is returned for the caller to close
        later, so reads already handed out keep working (a deleted file stays readable)."""
        self.log_path.unlink(missing_ok=True)
        self.offset_index.delete_file()
        self.time_index.delete_file()
        self.txn_index.delete_file()
        return self.file
