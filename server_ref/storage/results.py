"""What the log hands back to the broker: append results, batch headers and read slices."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from sdk.records.header import (
    BATCH_HEADER,
    CONTROL_MASK,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
)

__all__ = ["AppendInfo", "BatchHeader", "ReadSlice", "headers_in"]

_HEADER = BATCH_HEADER  # >qiibIhiqqqhii, 61 bytes


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """Offsets given to one append. ``log_append_time_ms`` is -1 for CreateTime topics."""

    first_offset: int
    last_offset: int
    log_append_time_ms: int
    max_timestamp: int
    record_count: int


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The header fields of a stored v2 batch that the broker's producer state needs."""

    base_offset: int
    last_offset: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    is_control: bool
    record_count: int
    size: int
    partition_leader_epoch: int = -1
    base_timestamp: int = -1
    is_log_append_time: bool = False

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def last_sequence(self) -> int:
        """Sequence of the batch's last record (-1 for a batch without a producer sequence)."""
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset - self.base_offset) & 0x7FFFFFFF

    @classmethod
    def parse(cls, buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
        """Decode the 61-byte header at ``buf[pos:]`` (the caller has checked the length)."""
        (
            base_offset, length, leader_epoch, _magic, _crc, attributes, last_delta,
            base_ts, max_ts, producer_id, producer_epoch, base_sequence, count,
        ) = _HEADER.unpack_from(buf, pos)
        return cls(
            base_offset,
            base_offset + last_delta,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            bool(attributes & TRANSACTIONAL_MASK),
            bool(attributes & CONTROL_MASK),
            count,
            length + LOG_OVERHEAD,
            leader_epoch,
            base_ts,
            bool(attributes & TIMESTAMP_TYPE_MASK),
        )


def headers_in(buf: bytes | bytearray | memoryview, start_offset: int = 0
               ) -> Iterator[BatchHeader]:
    """Headers of the whole v2 batches in ``buf`` whose last offset is >= ``start_offset``
    (a partial batch at the end, as a size-capped fetch answer may carry, is left out). A
    follower replays its producer state from the bytes it has just appended this way: as
    ``PartitionLog.batch_headers`` would give them, at a sixth of the cost (no file reads,
    no index lookup)."""
    size = len(buf)
    pos = 0
    while pos + RECORD_BATCH_OVERHEAD <= size:
        header = BatchHeader.parse(buf, pos)
        if header.size < RECORD_BATCH_OVERHEAD or pos + header.size > size:
            return
        if header.last_offset >= start_offset:
            yield header
        pos += header.size



@dataclass(slots=True)
class ReadSlice:
    """Whole batches for a fetch, as ranges of open segment files.

    Serve it with ``os.sendfile(sock_fd, f.fileno(), position, size)`` or
    ``loop.sock_sendfile(sock, f, position, size)`` per chunk; ``to_bytes`` copies instead.
    The files stay readable while the log is open, even if retention or compaction removes
    their segment in the meantime (their handles are closed later, see PartitionLog).
    """

    chunks: list[tuple[BinaryIO, int, int]] = field(default_factory=list)
    size: int = 0
    first_offset: int = -1  # base offset of the first batch; -1 when empty

    def add(self, f: BinaryIO, position: int, size: int) -> None:
        if size > 0:
            self.chunks.append((f, position, size))
            self.size += size

    def to_bytes(self) -> bytes:
        parts = []
        for f, position, size in self.chunks:
            data = os.pread(f.fileno(), size, position)
            if len(data) != size:
                raise OSError(f"short read of {f.name!r}: {len(data)} of {size} bytes at {position}")
            parts.append(data)
        return b"".join(parts)

    def __len__(self) -> int:
        return self.size

    def __bool__(self) -> bool:
        return self.size > 0
