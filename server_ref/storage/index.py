"""Sparse segment indexes in Kafka's file formats.

- offset index (``.index``): entries of relative offset int32 + file position int32; an entry
  (o, p) says the batch starting at byte p of the log file ends at offset base + o.
- time index (``.timeindex``): entries of timestamp int64 + relative offset int32; an entry
  (t, o) says no record at or before offset base + o has a timestamp above t.

Both columns of either index grow strictly, so lookups are a bisect. Entries live in memory
(``array``), loaded lazily from the file; new entries are appended to the file on ``flush``.
The indexes are hints that can always be rebuilt from the log, which is why the active
segment's are only written at flush, roll and close, and why a file that fails its sanity
check is rebuilt rather than trusted.
"""

from __future__ import annotations

import os
import struct
from abc import ABC, abstractmethod
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

__all__ = ["OffsetIndex", "TimeIndex"]

_INT32_MAX = (1 << 31) - 1


class _SparseIndex(ABC):
    """Two strictly increasing columns (``keys``, ``values``) persisted as fixed-size entries.

    A subclass names its file ``ENTRY`` layout and maps entries to and from the file's
    relative form (:meth:`_decode`, :meth:`_encode`).
    """

    ENTRY: struct.Struct

    def __init__(self, path: Path, base_offset: int, max_entries: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_entries
        self._keys: array[int] = array("q")
        self._values: array[int] = array("q")
        self._loaded = False
        self._flushed = 0  # entries already in the file
        self._rewrite = False  # the file holds entries we dropped: write it whole next flush

    # ------------------------------------------------------------------ loading

    def load(self) -> bool:
        """Read the file; False (and an empty index) when it is missing or fails the checks."""
        self._keys = array("q")
        self._values = array("q")
        self._loaded = True
        self._flushed = 0
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            self._rewrite = True
            return False
        size = self.ENTRY.size
        if len(data) % size:
            self._rewrite = True
            return False
        keys, values = self._keys, self._values
        for pair in self.ENTRY.iter_unpack(data):
            key, value = self._decode(*pair)
            if keys and (key <= keys[-1] or value < values[-1]):
                self._keys, self._values = array("q"), array("q")
                self._rewrite = True
                return False
            keys.append(key)
            values.append(value)
        self._flushed = len(keys)
        self._rewrite = False
        return True

    def mark_loaded_empty(self) -> None:
        """Start a fresh index (a new segment, or one being rebuilt from its log)."""
        self._keys = array("q")
        self._values = array("q")
        self._loaded = True
        self._flushed = 0
        self._rewrite = True

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            self.load()

    @abstractmethod
    def _decode(self, a: int, b: int) -> tuple[int, int]:
        """An entry as stored in the file (``ENTRY`` fields) -> (key, value)."""

    @abstractmethod
    def _encode(self, key: int, value: int) -> bytes:
        """(key, value) -> the entry's bytes in the file."""

    # ------------------------------------------------------------------ state

    def __len__(self) -> int:
        self._ensure_loaded()
        return len(self._keys)

    @property
    def is_full(self) -> bool:
        return len(self) >= self.max_entries

    def last_entry(self) -> tuple[int, int] | None:
        self._ensure_loaded()
        if not self._keys:
            return None
        return self._keys[-1], self._values[-1]

    def entries(self) -> list[tuple[int, int]]:
        self._ensure_loaded()
        return list(zip(self._keys, self._values))

    def _append(self, key: int, value: int) -> None:
        self._ensure_loaded()
        if self._keys and (key <= self._keys[-1] or value < self._values[-1]):
            raise ValueError(
                f"{self.path.name}: entry ({key}, {value}) does not follow "
                f"({self._keys[-1]}, {self._values[-1]})"
            )
        self._keys.append(key)
        self._values.append(value)

    def _truncate_entries(self, keep: int) -> None:
        if keep < len(self._keys):
            del self._keys[keep:]
            del self._values[keep:]
            if keep < self._flushed:
                self._rewrite = True
                self._flushed = keep

    # ------------------------------------------------------------------ persistence

    def flush(self, fsync: bool = False) -> None:
        if not self._loaded:
            return  # nothing changed since the file was written
        if self._rewrite:
            data = b"".join(self._encode(k, v) for k, v in zip(self._keys, self._values))
            tmp = self.path.with_name(self.path.name + ".tmp")
            with open(tmp, "wb") as f:
                f.write(data)
                if fsync:
                    os.fsync(f.fileno())
            os.replace(tmp, self.path)
        elif self._flushed < len(self._keys):
            data = b"".join(
                self._encode(self._keys[i], self._values[i])
                for i in range(self._flushed, len(self._keys))
            )
            with open(self.path, "ab") as f:
                f.write(data)
                if fsync:
                    os.fsync(f.fileno())
        else:
            return
        self._flushed = len(self._keys)
        self._rewrite = False

    def rename(self, path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, path)
        self.path = path

    def delete_file(self) -> None:
        self.path.unlink(missing_ok=True)


class OffsetIndex(_SparseIndex):
    """Maps offsets to batch positions in the segment's log file."""

    ENTRY = struct.Struct(">ii")

    def _decode(self, a: int, b: int) -> tuple[int, int]:
        return self.base_offset + a, b

    def _encode(self, key: int, value: int) -> bytes:
        return self.ENTRY.pack(key - self.base_offset, value)

    def append(self, last_offset: int, position: int) -> None:
        """Record that the batch at ``position`` ends at ``last_offset``."""
        if not 0 <= last_offset - self.base_offset <= _INT32_MAX:
            raise ValueError(f"offset {last_offset} is not relative to base {self.base_offset}")
        self._append(last_offset, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """The last entry whose offset is at or below ``offset``, as (offset, position).

        The batch at that position ends at or before ``offset``, so a forward scan from it
        reaches the batch holding ``offset`` without passing it. (base - 1, 0) when none is.
        """
        self._ensure_loaded()
        i = bisect_right(self._keys, offset)
        if i == 0:
            return self.base_offset - 1, 0
        return self._keys[i - 1], self._values[i - 1]

    def lookup_position(self, position: int) -> tuple[int, int]:
        """The last entry whose batch starts at or before ``position``; (base - 1, 0) if none."""
        self._ensure_loaded()
        i = bisect_right(self._values, position)
        if i == 0:
            return self.base_offset - 1, 0
        return self._keys[i - 1], self._values[i - 1]

    def truncate_to_position(self, position: int) -> None:
        """Drop entries for batches starting at or after ``position``."""
        self._ensure_loaded()
        self._truncate_entries(bisect_left(self._values, position))


class TimeIndex(_SparseIndex):
    """Maps timestamps to offsets: where a search for a timestamp may start."""

    ENTRY = struct.Struct(">qi")

    def _decode(self, a: int, b: int) -> tuple[int, int]:
        return a, self.base_offset + b

    def _encode(self, key: int, value: int) -> bytes:
        return self.ENTRY.pack(key, value - self.base_offset)

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add (timestamp, offset) if the timestamp is above the last entry's."""
        self._ensure_loaded()
        if self._keys and timestamp <= self._keys[-1]:
            return
        if not 0 <= offset - self.base_offset <= _INT32_MAX:
            raise ValueError(f"offset {offset} is not relative to base {self.base_offset}")
        self._append(timestamp, offset)

    def lookup_below(self, timestamp: int) -> tuple[int, int] | None:
        """The last entry with a timestamp strictly below ``timestamp`` (a safe scan start).

        Every record up to that entry's offset is older than ``timestamp``, so the earliest
        record at or after ``timestamp`` lies after it. None when no entry qualifies.
        """
        self._ensure_loaded()
        i = bisect_left(self._keys, timestamp)
        if i == 0:
            return None
        return self._keys[i - 1], self._values[i - 1]

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries pointing at ``offset`` or later."""
        self._ensure_loaded()
        self._truncate_entries(bisect_left(self._values, offset))
