"""Log compaction for cleanup.policy=compact: keep the latest record per key.

One pass over a log:

1. The cleanable range is the sealed segments (never the active one), stopping at the first
   segment with records younger than min.compaction.lag.ms or holding a transaction that is
   still open (its outcome decides whether its records count).
2. A header walk of the whole log settles transactions: a transactional batch is committed
   or aborted by the next marker of its producer id. It also finds each producer's last
   batch, which is kept whole so the broker can rebuild producer state from the log.
3. The offset map: key -> offset of its latest record in the cleanable range (committed or
   non-transactional records only). Keys are stored as 16-byte BLAKE2b digests.
4. Each cleanable segment is rewritten to ``<base>.log.cleaned`` keeping a record when it is
   the latest for its key (or has no key), is not in an aborted transaction, and is not a
   tombstone past the segment's delete horizon. Batches whose records all survive are copied
   as they are; the others are rebuilt with the surviving records, keeping the batch's base
   offset, producer fields and each record's offset (through its offset delta). Control
   batches are kept.
5. The cleaned files replace the segment through ``.swap`` renames (see recovery.py), so a
   crash at any point leaves either the old segment or the new one.

Tombstones: a segment's delete horizon is set, in the partition checkpoint, when the segment
is first cleaned: now + delete.retention.ms. Its tombstones are kept until a pass at or after
that time, so consumers that read the log within delete.retention.ms still see the delete.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sdk.records.builder import RecordBatchBuilder
from sdk.records.control import ControlType
from sdk.records.header import TimestampType, patch_batch
from sdk.records.reader import RecordBatch
from sdk.records.record import Record
from server_ref.storage.checkpoint import fsync_directory
from server_ref.storage.recovery import CLEANED_SUFFIX, SWAP_SUFFIX
from server_ref.storage.segment import BatchInfo, LogSegment

if TYPE_CHECKING:
    from server_ref.storage.log import PartitionLog

__all__ = ["CompactionStats", "compact"]

logger = logging.getLogger(__name__)

_WRITE_CHUNK = 1 << 22  # flush cleaned output to the file in pieces of about this size


@dataclass
class CompactionStats:
    segments_cleaned: int = 0
    records_removed: int = 0
    bytes_before: int = 0
    bytes_after: int = 0


@dataclass
class _Transactions:
    aborted: set[int]  # base offsets of batches in aborted transactions
    first_open_offset: int | None  # first offset of a transaction without a marker yet
    last_batch_of_producer: set[int]  # base offset of each producer's last batch


def _key_digest(key: bytes) -> bytes:
    return hashlib.blake2b(key, digest_size=16).digest()


def _settle_transactions(segments: tuple[LogSegment, ...]) -> _Transactions:
    pending: dict[int, list[int]] = {}
    aborted: set[int] = set()
    last_of_producer: dict[int, int] = {}
    for segment in segments:
        for pos, header in segment.iter_headers():
            pid = header.producer_id
            if pid >= 0:
                last_of_producer[pid] = header.base_offset
            if not header.is_transactional:
                continue
            if header.is_control:
                marker = segment.read_batch(pos, header).control_record()
                started = pending.pop(pid, [])
                if marker.type == ControlType.ABORT:
                    aborted.update(started)
            else:
                pending.setdefault(pid, []).append(header.base_offset)
    open_starts = [offsets[0] for offsets in pending.values() if offsets]
    return _Transactions(
        aborted, min(open_starts) if open_starts else None, set(last_of_producer.values())
    )


def _cleanable_segments(log: PartitionLog, now_ms: int, txns: _Transactions) -> list[LogSegment]:
    lag = log.config.min_compaction_lag_ms
    cleanable = []
    sealed = log.segments[:-1]
    for i, segment in enumerate(sealed):
        if lag > 0 and segment.max_timestamp >= 0 and now_ms - segment.max_timestamp < lag:
            break
        # Stop before a segment whose data reaches an open transaction.
        end = sealed[i + 1].base_offset if i + 1 < len(sealed) else log.segments[-1].base_offset
        if txns.first_open_offset is not None and txns.first_open_offset < end:
            break
        cleanable.append(segment)
    return cleanable


def _build_offset_map(segments: list[LogSegment], txns: _Transactions) -> dict[bytes, int]:
    latest: dict[bytes, int] = {}
    for segment in segments:
        for _pos, batch in segment.iter_batches():
            if batch.is_control or batch.base_offset in txns.aborted:
                continue
            for record in batch.records():
                if record.key is not None:
                    latest[_key_digest(record.key)] = record.offset
    return latest


def _rebuild(batch: RecordBatch, kept: list[Record]) -> bytes:
    """A batch holding only ``kept``, at the original base offset and record offsets."""
    builder = RecordBatchBuilder(
        batch.compression,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        base_offset=batch.base_offset,
        partition_leader_epoch=batch.partition_leader_epoch,
    )
    for record in kept:
        builder.append(record.offset - batch.base_offset, record.timestamp, record.key,
                       record.value, record.headers)
    data = builder.build()
    if batch.timestamp_type == TimestampType.LOG_APPEND_TIME:
        patched = bytearray(data)
        patch_batch(patched, 0, log_append_time_ms=batch.max_timestamp)
        return bytes(patched)
    return data


class _CleanedWriter:
    """Collects surviving batches and appends them to the ``.cleaned`` segment in chunks."""

    def __init__(self, segment: LogSegment) -> None:
        self.segment = segment
        self.buffer = bytearray()
        self.infos: list[BatchInfo] = []

    def add(self, data: bytes | memoryview, last_offset: int, max_timestamp: int) -> None:
        self.infos.append((len(self.buffer), len(data), last_offset, max_timestamp))
        self.buffer += data
        if len(self.buffer) >= _WRITE_CHUNK:
            self.flush()

    def flush(self) -> None:
        if self.infos:
            self.segment.append(self.buffer, self.infos)
            self.buffer = bytearray()
            self.infos = []


def _clean_segment(
    log: PartitionLog,
    segment: LogSegment,
    offset_map: dict[bytes, int],
    txns: _Transactions,
    drop_tombstones: bool,
    stats: CompactionStats,
) -> LogSegment | None:
    """Write the cleaned copy of ``segment`` as it is read (memory stays at one write
    chunk); None, and no files left, when every record survives."""
    for stale in log.directory.glob(f"{segment.log_path.stem}.*{CLEANED_SUFFIX}"):
        stale.unlink()
    cleaned = log._make_segment(segment.base_offset, CLEANED_SUFFIX)
    writer = _CleanedWriter(cleaned)
    removed = 0
    for _pos, batch in segment.iter_batches():
        if batch.is_control or batch.base_offset in txns.last_batch_of_producer:
            writer.add(batch.to_bytes(), batch.last_offset, batch.max_timestamp)
            continue
        records = batch.records()
        aborted = batch.base_offset in txns.aborted
        kept = [
            r for r in records
            if not aborted
            and (r.key is None or offset_map.get(_key_digest(r.key), -1) <= r.offset)
            and not (drop_tombstones and r.value is None)
        ]
        if len(kept) == len(records):
            writer.add(batch.to_bytes(), batch.last_offset, batch.max_timestamp)
            continue
        removed += len(records) - len(kept)
        if not kept:
            continue
        if batch.timestamp_type == TimestampType.LOG_APPEND_TIME:
            max_ts = batch.max_timestamp
        else:
            max_ts = max(r.timestamp for r in kept)
        writer.add(_rebuild(batch, kept), kept[-1].offset, max_ts)
    writer.flush()
    if not removed:
        cleaned.close()
        cleaned.delete_files()
        return None
    stats.records_removed += removed
    return cleaned


def _swap(log: PartitionLog, old: LogSegment, cleaned: LogSegment) -> None:
    cleaned.seal()  # data and indexes fsynced under the .cleaned names
    cleaned.change_suffix(SWAP_SUFFIX)  # the log's rename commits the swap
    fsync_directory(log.directory)
    cleaned.change_suffix("")  # replaces the old files, log last
    fsync_directory(log.directory)
    log._replace_segment(old, cleaned)


def compact(log: PartitionLog, now_ms: int) -> CompactionStats:
    """One compaction pass over ``log`` (see the module docstring)."""
    stats = CompactionStats()
    segments = log.segments
    if len(segments) < 2:
        return stats
    txns = _settle_transactions(segments)
    cleanable = _cleanable_segments(log, now_ms, txns)
    if not cleanable:
        return stats
    offset_map = _build_offset_map(cleanable, txns)
    horizons = log._checkpoint.delete_horizons
    for segment in cleanable:
        horizon = horizons.setdefault(segment.base_offset, now_ms + log.config.delete_retention_ms)
        before = segment.size
        cleaned = _clean_segment(log, segment, offset_map, txns, now_ms >= horizon, stats)
        if cleaned is None:
            continue
        _swap(log, segment, cleaned)
        stats.segments_cleaned += 1
        stats.bytes_before += before
        stats.bytes_after += cleaned.size
    log._write_checkpoint(fsync=True)
    if stats.segments_cleaned:
        logger.info("%s: compacted %d segments, %d records removed, %d -> %d bytes",
                  log.directory, stats.segments_cleaned, stats.records_removed,
                  stats.bytes_before, stats.bytes_after)
    return stats
