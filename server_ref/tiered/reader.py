"""Reading remote segments: batches for a fetch, a timestamp lookup, aborted transactions.

Everything read from the store passes through ``ChunkCache``: log objects in fixed 1 MiB
chunks (one ranged GET each), indexes whole, least recently used first out, bounded by
``remote.log.storage.cache.bytes``. Remote objects never change once written (a segment id
is used for one upload only), so cached bytes never go stale. These functions block on the
store: the manager runs them in worker threads, never on the broker's loop.
"""

from __future__ import annotations

import struct
import sys
import threading
from array import array
from bisect import bisect_right
from collections import OrderedDict

from sdk.records.header import RECORD_BATCH_OVERHEAD
from sdk.records.reader import RecordBatch
from server_ref.storage.results import BatchHeader
from server_ref.storage.transactions import AbortedTxn
from server_ref.tiered.metadata import OFFSET_INDEX, TXN_INDEX, RemoteSegment
from server_ref.tiered.store import RemoteStorageError, RemoteStore

__all__ = ["CHUNK", "ChunkCache", "aborted_in", "find_timestamp", "read_batches"]

CHUNK = 1 << 20
_INDEX_ENTRY = struct.Struct(">ii")
_TXN_ENTRY = struct.Struct(">hqqqq")
_WHOLE = -1  # chunk number of an object cached whole
_INDEXES_KEPT = 64


class ChunkCache:
    """A bounded LRU of remote bytes, shared by the reader threads (one lock)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self._indexes: OrderedDict[str, tuple[array[int], array[int]]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    @property
    def size(self) -> int:
        return self._size

    def _get(self, key: tuple[str, int]) -> bytes | None:
        with self._lock:
            data = self._entries.get(key)
            if data is not None:
                self._entries.move_to_end(key)
                self.hits += 1
            else:
                self.misses += 1
            return data

    def _put(self, key: tuple[str, int], data: bytes) -> None:
        if len(data) > self.capacity:
            return  # larger than the whole cache: served, not kept
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._size -= len(old)
            self._entries[key] = data
            self._size += len(data)
            while self._size > self.capacity:
                _, evicted = self._entries.popitem(last=False)
                self._size -= len(evicted)

    def whole(self, store: RemoteStore, key: str) -> bytes:
        data = self._get((key, _WHOLE))
        if data is None:
            data = store.get(key)
            self._put((key, _WHOLE), data)
        return data

    def range(self, store: RemoteStore, key: str, start: int, length: int, size: int) -> bytes:
        """Bytes [start, start + length) of an object of ``size`` bytes."""
        end = min(start + length, size)
        if start >= end:
            return b""
        parts = []
        for number in range(start // CHUNK, (end - 1) // CHUNK + 1):
            chunk = self._get((key, number))
            if chunk is None:
                chunk = store.get_range(key, number * CHUNK, min(CHUNK, size - number * CHUNK))
                if len(chunk) != min(CHUNK, size - number * CHUNK):
                    raise RemoteStorageError(f"{key}: short read of chunk {number}")
                self._put((key, number), chunk)
            lo = max(start - number * CHUNK, 0)
            hi = min(end - number * CHUNK, len(chunk))
            parts.append(chunk[lo:hi] if lo or hi != len(chunk) else chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._size = 0
            self._indexes.clear()

    # Offset indexes decoded for bisecting, the most recent _INDEXES_KEPT of them (their
    # bytes are in the LRU above; this saves decoding one per fetch).
    def parsed_index(self, key: str) -> tuple[array[int], array[int]] | None:
        with self._lock:
            return self._indexes.get(key)

    def keep_index(self, key: str, parsed: tuple[array[int], array[int]]) -> None:
        with self._lock:
            self._indexes[key] = parsed
            self._indexes.move_to_end(key)
            while len(self._indexes) > _INDEXES_KEPT:
                self._indexes.popitem(last=False)


def _index_position(cache: ChunkCache, store: RemoteStore, segment: RemoteSegment,
                    offset: int) -> int:
    """A batch position at or before the batch holding ``offset`` (the offset index's
    entries are (last offset - base, position) of indexed batches)."""
    key = segment.key(OFFSET_INDEX)
    parsed = cache.parsed_index(key)
    if parsed is None:
        data = cache.whole(store, key)
        entries = array("i", data[:len(data) - len(data) % 8])
        if sys.byteorder == "little":
            entries.byteswap()  # the file is big-endian
        parsed = (entries[0::2], entries[1::2])
        cache.keep_index(key, parsed)
    relatives, positions = parsed
    i = bisect_right(relatives, offset - segment.start_offset)
    return positions[i - 1] if i else 0


def _header(cache: ChunkCache, store: RemoteStore, segment: RemoteSegment, pos: int
            ) -> BatchHeader:
    key = segment.key(".log")
    data = cache.range(store, key, pos, RECORD_BATCH_OVERHEAD, segment.size)
    if len(data) < RECORD_BATCH_OVERHEAD:
        raise RemoteStorageError(f"{key}: truncated batch header at {pos}")
    header = BatchHeader.parse(data)
    if header.size < RECORD_BATCH_OVERHEAD or pos + header.size > segment.size:
        raise RemoteStorageError(f"{key}: batch at {pos} declares {header.size} bytes")
    return header


def read_batches(cache: ChunkCache, store: RemoteStore, segment: RemoteSegment, offset: int,
                 max_bytes: int) -> bytes:
    """Whole batches from the one holding ``offset``: about ``max_bytes``, at least one."""
    pos = _index_position(cache, store, segment, offset)
    while pos < segment.size:
        header = _header(cache, store, segment, pos)
        if header.last_offset >= offset:
            break
        pos += header.size
    else:
        return b""
    want = max(max_bytes, header.size)
    data = cache.range(store, segment.key(".log"), pos, want, segment.size)
    end = header.size
    while end + RECORD_BATCH_OVERHEAD <= len(data):
        size = BatchHeader.parse(data, end).size
        if end + size > len(data):
            break
        end += size
    return data[:end] if end != len(data) else data


def find_timestamp(cache: ChunkCache, store: RemoteStore, segment: RemoteSegment,
                   timestamp: int, min_offset: int) -> tuple[int, int] | None:
    """First (offset, timestamp) in the segment at or after both bounds, None if none."""
    pos = _index_position(cache, store, segment, min_offset)
    key = segment.key(".log")
    while pos < segment.size:
        header = _header(cache, store, segment, pos)
        if header.last_offset >= min_offset and header.max_timestamp >= timestamp:
            batch = RecordBatch(cache.range(store, key, pos, header.size, segment.size))
            for record in batch.records():
                if record.offset >= min_offset and record.timestamp >= timestamp:
                    return record.offset, record.timestamp
        pos += header.size
    return None


def aborted_in(cache: ChunkCache, store: RemoteStore, segments: list[RemoteSegment],
               start: int, end: int) -> list[AbortedTxn]:
    """Aborted transactions overlapping [start, end) from the segments' txn indexes."""
    out = []
    for segment in segments:
        if not segment.has_txn_index:
            continue
        data = cache.whole(store, segment.key(TXN_INDEX))
        for _version, pid, first, last, lso in _TXN_ENTRY.iter_unpack(
                data[:len(data) - len(data) % _TXN_ENTRY.size]):
            if last >= start and first < end:
                out.append(AbortedTxn(pid, first, last, lso))
    return out
