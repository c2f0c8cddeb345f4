"""PartitionLog: one partition's log on disk, laid out as Kafka lays it out.

``<dir>/<20-digit base offset>.log`` segments with ``.index``, ``.timeindex`` and (when a
transaction aborted there) ``.txnindex`` beside them, ``partition.checkpoint`` (log start
offset, recovery point; see checkpoint.py) and ``leader-epoch-checkpoint`` (epochs.py).

All methods run on the broker's event-loop thread; nothing here locks. Batches arrive
already validated by the broker core (CRC, magic, sizes, keys for compacted topics); the log
assigns offsets by patching headers in place and stores the bytes it was given.
"""

from __future__ import annotations

import logging
import shutil
import struct
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from sdk.errors import (
    CorruptMessageError,
    IllegalStateError,
    InvalidRecordError,
    MalformedDataError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    UnsupportedForMessageFormatError,
)
from sdk.records.header import (
    ATTRIBUTES_OFFSET,
    CONTROL_MASK,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORD_BATCH_OVERHEAD,
    TRANSACTIONAL_MASK,
    patch_batch,
)
from sdk.records.reader import RecordBatch
from server_ref.storage import cleaner, retention
from server_ref.storage.checkpoint import CleanShutdown, PartitionCheckpoint
from server_ref.storage.config import LogConfig
from server_ref.storage.epochs import LeaderEpochCache
from server_ref.storage.recovery import (
    RecoveryReport,
    finish_interrupted_operations,
    load_segments,
)
from server_ref.storage.results import AppendInfo, BatchHeader, ReadSlice
from server_ref.storage.segment import BatchInfo, LogSegment
from server_ref.storage.snapshots import delete_snapshots, write_snapshot
from server_ref.storage.transactions import AbortedTxn, TransactionState, collect_aborted

__all__ = ["PartitionLog"]

log = logging.getLogger(__name__)

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_INT32_MAX = (1 << 31) - 1
_LAST_OFFSET_DELTA_OFFSET = 23
_RECORDS_COUNT_OFFSET = 57


def _transaction_event(
    buf: bytearray | memoryview, pos: int, base: int, attributes: int
) -> tuple[int, int, int | None]:
    """(base offset, producer id, marker type for a control batch else None)."""
    producer_id = _INT64.unpack_from(buf, pos + PRODUCER_ID_OFFSET)[0]
    if not attributes & CONTROL_MASK:
        return base, producer_id, None
    try:
        marker = RecordBatch(buf, pos).control_record().type
    except MalformedDataError as exc:
        raise CorruptMessageError(f"control batch at position {pos}: {exc}") from exc
    return base, producer_id, int(marker)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def _writable(data: bytes | bytearray | memoryview) -> bytearray | memoryview:
    """The buffer to patch: the caller's own if it is writable, else a copy."""
    if isinstance(data, bytearray):
        return data
    if isinstance(data, memoryview) and not data.readonly:
        return data.cast("B") if data.format != "B" or data.ndim != 1 else data
    return bytearray(data)


class PartitionLog:
    """A partition's segmented log. Create or recover one with ``PartitionLog.open``."""

    def __init__(self, directory: Path, config: LogConfig, now_ms: Callable[[], int]) -> None:
        # Use open(): it recovers the directory before the log is usable.
        self.directory = directory
        self.config = config
        self._now_ms = now_ms
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._next_offset = 0
        self.log_start_offset = 0
        self._checkpoint = PartitionCheckpoint()
        self._unflushed = 0
        # Files of removed segments stay open one more maintenance pass: a ReadSlice handed
        # out just before may still be on its way to a socket.
        self._retired_recent: list[BinaryIO] = []
        self._retired_old: list[BinaryIO] = []
        self._closed = False
        self.recovery_report = RecoveryReport()
        self._txns = TransactionState()
        self._epochs: LeaderEpochCache | None = None
        # The producer state now (set by the partition's owner): written at each roll as
        # the snapshot of the sealed segment's end (snapshots.py)
        self.producer_snapshot: Callable[[], dict[str, Any]] | None = None

    # ================================================================== opening

    @classmethod
    def open(
        cls,
        directory: Path | str,
        config: LogConfig | None = None,
        *,
        now_ms: Callable[[], int] = wall_clock_ms,
    ) -> PartitionLog:
        """Open the log in ``directory``, creating it, or recovering it after a crash."""
        directory = Path(directory)
        self = cls(directory, config if config is not None else LogConfig(), now_ms)
        directory.mkdir(parents=True, exist_ok=True)
        finish_interrupted_operations(directory)
        checkpoint = PartitionCheckpoint.read(directory)
        segments, report = load_segments(directory, checkpoint, self._make_segment)
        if not segments:
            segments = [self._make_segment(checkpoint.log_start_offset)]
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._next_offset = segments[-1].next_offset
        self.log_start_offset = min(
            max(checkpoint.log_start_offset, segments[0].base_offset), self._next_offset
        )
        clean_shutdown = checkpoint.clean_shutdown
        checkpoint.clean_shutdown = None  # until close() says otherwise
        live = set(self._bases)
        checkpoint.delete_horizons = {
            b: h for b, h in checkpoint.delete_horizons.items() if b in live
        }
        self._checkpoint = checkpoint
        self.recovery_report = report
        self._epochs = LeaderEpochCache(directory)
        self._epochs.truncate_from_end(self._next_offset)
        # snapshots past the end recovery left (their batches were cut) or of segments gone
        delete_snapshots(directory, below=self._bases[0], above=self._next_offset)
        if report.clean and clean_shutdown is not None:
            self._txns = TransactionState(checkpoint.ongoing_transactions)
        else:
            self._rebuild_transactions()
        checkpoint.recovery_point = min(checkpoint.recovery_point, self._next_offset)
        self._write_checkpoint(fsync=not report.clean)
        return self

    def _rebuild_transactions(self) -> None:
        """Replay transactional batch headers after the recovery point, starting from the
        open transactions noted with it (or from the log start when that note is unusable),
        rebuilding the open set and the aborted-transaction indexes of those segments."""
        checkpoint = self._checkpoint
        if checkpoint.recovery_point <= self._next_offset:
            start = checkpoint.recovery_point
            self._txns = TransactionState(checkpoint.ongoing_transactions)
        else:
            start = 0
            self._txns = TransactionState()
        first = max(0, bisect_right(self._bases, start) - 1)
        for segment in self._segments[first:]:
            segment.txn_index.truncate_to(start)
            found = segment.translate_offset(start) if segment.base_offset < start else (0, None)
            if found is None:
                continue
            for pos, header in segment.iter_headers(found[0]):
                if not header.is_transactional or header.base_offset < start:
                    continue
                if header.is_control:
                    marker = segment.read_batch(pos, header).control_record().type
                    aborted = self._txns.end(header.producer_id, marker, header.base_offset)
                    if aborted is not None:
                        segment.txn_index.append(aborted)
                else:
                    self._txns.begin(header.producer_id, header.base_offset)

    def _make_segment(self, base_offset: int, suffix: str = "") -> LogSegment:
        return LogSegment(
            self.directory,
            base_offset,
            self.config.segment_index_bytes,
            self.config.index_interval_bytes,
            self._now_ms(),
            suffix=suffix,
        )

    # ================================================================== state

    @property
    def log_end_offset(self) -> int:
        """The next offset to assign; the high watermark on a single node."""
        return self._next_offset

    @property
    def high_watermark(self) -> int:
        return self._next_offset

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def closed(self) -> bool:
        """Closed or deleted (e.g. its topic went while a remote read was under way)."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError(f"partition log {self.directory} is closed")

    # ================================================================== appending

    def append(
        self,
        batches: bytes | bytearray | memoryview,
        *,
        now_ms: int | None = None,
        leader_epoch: int | None = None,
        assign_offsets: bool = True,
    ) -> AppendInfo:
        """Append one or more v2 batches (already validated by the caller) as one write.

        Offsets are assigned by patching each batch's base offset in place (in the caller's
        buffer when it is a bytearray or a writable memoryview; a batch that fails the checks
        leaves nothing written, though earlier batches of the buffer may be patched). With LogAppendTime the max
        timestamp and the timestamp-type bit are set too, and the CRC recomputed.
        ``leader_epoch`` sets each batch's partitionLeaderEpoch. ``assign_offsets=False``
        keeps the offsets the batches carry (a follower copying its leader's log); they must
        not go below the log end offset.
        """
        self._check_open()
        buf = _writable(batches)
        total = len(buf)
        if total == 0:
            return AppendInfo(-1, -1, -1, -1, 0)
        config = self.config
        stamp_time = config.log_append_time and assign_offsets
        now = now_ms if now_ms is not None else self._now_ms()
        max_message_bytes = config.max_message_bytes
        next_offset = self._next_offset
        infos: list[BatchInfo] = []
        # (base offset, producer id, marker type or None) of transactional batches
        txn_events: list[tuple[int, int, int | None]] = []
        epoch_starts: list[tuple[int, int]] = []
        first_offset = -1
        max_ts = -1
        record_count = 0
        pos = 0
        while pos < total:
            if total - pos < RECORD_BATCH_OVERHEAD:
                raise CorruptMessageError(
                    f"{total - pos} bytes at position {pos} are too few for a batch header"
                )
            size = _INT32.unpack_from(buf, pos + 8)[0] + LOG_OVERHEAD
            if size < RECORD_BATCH_OVERHEAD or pos + size > total:
                raise CorruptMessageError(f"batch at position {pos} declares {size} bytes")
            magic = buf[pos + MAGIC_OFFSET]
            if magic != 2:
                raise UnsupportedForMessageFormatError(f"batch at position {pos} has magic {magic}")
            if size > max_message_bytes:
                raise MessageTooLargeError(
                    f"batch of {size} bytes exceeds max.message.bytes {max_message_bytes}"
                )
            last_delta = _INT32.unpack_from(buf, pos + _LAST_OFFSET_DELTA_OFFSET)[0]
            if last_delta < 0:
                raise CorruptMessageError(f"batch at position {pos} has lastOffsetDelta {last_delta}")
            if assign_offsets:
                base = next_offset
                _INT64.pack_into(buf, pos, base)
            else:
                base = _INT64.unpack_from(buf, pos)[0]
                if base < next_offset:
                    raise InvalidRecordError(
                        f"batch base offset {base} is below the log end offset {next_offset}"
                    )
            if leader_epoch is not None:
                _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, leader_epoch)
            elif not assign_offsets:
                epoch = _INT32.unpack_from(buf, pos + PARTITION_LEADER_EPOCH_OFFSET)[0]
                if epoch >= 0 and (not epoch_starts or epoch > epoch_starts[-1][0]):
                    epoch_starts.append((epoch, base))
            attributes = _INT16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0]
            if attributes & TRANSACTIONAL_MASK:
                txn_events.append(_transaction_event(buf, pos, base, attributes))
            if stamp_time:
                try:
                    patch_batch(buf, pos, log_append_time_ms=now)  # type: ignore[arg-type]
                except MalformedDataError as exc:  # the CRC is checked before it is redone
                    raise CorruptMessageError(str(exc)) from exc
                batch_max_ts = now
            else:
                batch_max_ts = _INT64.unpack_from(buf, pos + MAX_TIMESTAMP_OFFSET)[0]
            if first_offset < 0:
                first_offset = base
            if batch_max_ts > max_ts:
                max_ts = batch_max_ts
            record_count += _INT32.unpack_from(buf, pos + _RECORDS_COUNT_OFFSET)[0]
            next_offset = base + last_delta + 1
            infos.append((pos, size, next_offset - 1, batch_max_ts))
            pos += size
        self._maybe_roll(total, max_ts, first_offset, next_offset - 1, now)
        active = self._segments[-1]
        active.append(buf, infos)
        for base, producer_id, marker in txn_events:
            if marker is None:
                self._txns.begin(producer_id, base)
            else:
                aborted = self._txns.end(producer_id, marker, base)
                if aborted is not None:
                    active.txn_index.append(aborted)
        assert self._epochs is not None
        if leader_epoch is not None:
            epoch_starts.append((leader_epoch, first_offset))
        for epoch, start in epoch_starts:
            self._epochs.assign(epoch, start)
        self._unflushed += next_offset - self._next_offset
        self._next_offset = next_offset
        if self._unflushed >= config.flush_messages:
            self._segments[-1].fsync_log()
            self._unflushed = 0
        return AppendInfo(first_offset, next_offset - 1, now if stamp_time else -1, max_ts, record_count)

    def _maybe_roll(
        self, size: int, max_ts: int, first_offset: int, last_offset: int, now: int
    ) -> None:
        active = self._segments[-1]
        if active.size == 0:
            if last_offset - active.base_offset > _INT32_MAX or first_offset < active.base_offset:
                self._replace_empty_active(first_offset)
            return
        config = self.config
        first_ts = active.first_batch_timestamp
        waited = max_ts - first_ts if first_ts >= 0 and max_ts >= 0 else now - active.created_ms
        if (
            active.size + size > config.segment_bytes
            or waited > config.segment_ms
            or active.offset_index.is_full
            or active.time_index.is_full
            or last_offset - active.base_offset > _INT32_MAX
        ):
            self.roll(first_offset)

    def _replace_empty_active(self, base_offset: int) -> None:
        old = self._segments.pop()
        self._bases.pop()
        old.close()
        old.delete_files()
        self._add_segment(base_offset)

    def _add_segment(self, base_offset: int) -> LogSegment:
        segment = self._make_segment(base_offset)
        self._segments.append(segment)
        self._bases.append(base_offset)
        return segment

    def roll(self, base_offset: int | None = None) -> LogSegment:
        """Seal the active segment (indexes written, data fsynced) and start a new one."""
        self._check_open()
        active = self._segments[-1]
        if active.size == 0:
            return active
        base = self._next_offset if base_offset is None else base_offset
        active.seal()
        if self.producer_snapshot is not None:
            try:
                write_snapshot(self.directory, self._next_offset, self.producer_snapshot())
            except OSError as exc:  # only an optimisation: rebuilt from the log when read
                log.warning("%s: producer snapshot at %d not written: %s", self.directory,
                            self._next_offset, exc)
        self._unflushed = 0
        self._set_recovery_point()
        segment = self._add_segment(base)
        self._write_checkpoint(fsync=True)
        return segment

    # ================================================================== reading

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None) -> ReadSlice:
        """Whole batches from the one holding ``offset``, about ``max_bytes`` of them.

        At least one batch is returned even if it is larger than ``max_bytes`` (Kafka's
        rule, so a consumer always progresses); an empty slice at the log end.
        ``max_offset`` (exclusive, e.g. the last stable offset) stops before the batch that
        holds it. Raises ``OffsetOutOfRangeError`` outside [log start, log end].
        """
        self._check_open()
        if offset < self.log_start_offset or offset > self._next_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{self.log_start_offset}, {self._next_offset}]"
            )
        limit = self._next_offset if max_offset is None else min(max_offset, self._next_offset)
        result = ReadSlice()
        if offset >= limit:
            return result
        budget = max_bytes
        i = max(0, bisect_right(self._bases, offset) - 1)
        while i < len(self._segments):
            segment = self._segments[i]
            i += 1
            found = segment.translate_offset(offset)
            if found is None:
                continue  # offset lies past this segment's last batch (a compacted gap)
            start, header = found
            if header.last_offset >= limit:
                break
            end = segment.size
            if limit < self._next_offset and (i == len(self._segments) or limit < self._bases[i]):
                cut = segment.translate_offset(limit)
                if cut is not None:
                    end = cut[0]
            want = segment.boundary_at_or_before(start + max(budget, 0), start)
            if not result.size:
                want = max(want, start + header.size)
                result.first_offset = header.base_offset
            end = min(end, want)
            result.add(segment.file, start, end - start)
            budget -= end - start
            if end < segment.size or budget <= 0:
                break
        return result

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """Earliest (offset, timestamp) with timestamp >= ``timestamp_ms``, None if none."""
        self._check_open()
        start = max(0, bisect_right(self._bases, self.log_start_offset) - 1)
        for segment in self._segments[start:]:
            if segment.max_timestamp >= timestamp_ms:
                found = segment.find_timestamp(timestamp_ms, self.log_start_offset)
                if found is not None:
                    return found
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record holding the largest timestamp."""
        self._check_open()
        best: LogSegment | None = None
        for segment in self._segments:
            if segment.max_timestamp >= 0 and (
                best is None or segment.max_timestamp > best.max_timestamp
            ):
                best = segment
        if best is None:
            return None
        ts = best.max_timestamp
        found = best.translate_offset(best.offset_of_max_timestamp)
        if found is not None:
            for record in best.read_batch(*found).records():
                if record.timestamp == ts:
                    return record.offset, ts
        return best.offset_of_max_timestamp, ts

    def batch_headers(self, start_offset: int = 0) -> Iterator[BatchHeader]:
        """Headers of the stored batches whose last offset is >= ``start_offset``."""
        self._check_open()
        first = max(0, bisect_right(self._bases, start_offset) - 1)
        for segment in list(self._segments[first:]):
            found = segment.translate_offset(start_offset)
            if found is None:
                continue
            for _pos, header in segment.iter_headers(found[0]):
                yield header

    # ================================================================== transactions, epochs

    @property
    def last_stable_offset(self) -> int:
        """First offset of the oldest open transaction, else the log end offset: the limit
        of a read_committed fetch (``read(..., max_offset=log.last_stable_offset)``)."""
        first = self._txns.first_unstable_offset()
        if first is None:
            return self._next_offset
        return min(max(first, self.log_start_offset), self._next_offset)

    def ongoing_transactions(self) -> dict[int, int]:
        """Open transactions: producer id -> first offset."""
        return dict(self._txns.ongoing)

    def aborted_transactions(self, start_offset: int, end_offset: int) -> list[AbortedTxn]:
        """Aborted transactions with data in [start_offset, end_offset), oldest marker first:
        the AbortedTransactions list of a read_committed Fetch response."""
        self._check_open()
        first = max(0, bisect_right(self._bases, start_offset) - 1)
        return collect_aborted((s.txn_index for s in self._segments[first:]), start_offset,
                               end_offset)

    @property
    def leader_epoch_cache(self) -> LeaderEpochCache:
        assert self._epochs is not None
        return self._epochs

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= ``epoch``, the offset where it ends)."""
        return self.leader_epoch_cache.end_offset_for(epoch, self._next_offset)

    # ================================================================== removing data

    def delete_records(self, before_offset: int) -> int:
        """DeleteRecords: make ``before_offset`` the log start offset (-1 = high watermark).

        Whole segments below it are deleted; the rest become unreadable. Returns the new log
        start offset (unchanged when ``before_offset`` is below it).
        """
        self._check_open()
        if before_offset == -1:
            before_offset = self._next_offset
        if not 0 <= before_offset <= self._next_offset:
            raise OffsetOutOfRangeError(
                f"cannot delete records before {before_offset}: log ends at {self._next_offset}"
            )
        if before_offset > self.log_start_offset:
            self.log_start_offset = before_offset
            self._close_retired()
            self._delete_leading_segments(retention.below_log_start(self))
            assert self._epochs is not None
            self._epochs.truncate_from_start(self.log_start_offset)
            self._write_checkpoint(fsync=True)
        return self.log_start_offset

    def apply_retention(self, now_ms: int) -> int:
        """Delete whole segments past retention.ms or beyond retention.bytes (cleanup.policy
        with "delete"); the log start offset moves to the first kept offset. Returns how many
        segments were deleted."""
        self._check_open()
        self._close_retired()
        count = retention.deletable_segment_count(self, now_ms)
        if not count:
            return 0
        if count == len(self._segments):
            self.roll()  # keep an (empty) active segment at the log end
        self._delete_leading_segments(count)
        self.log_start_offset = max(self.log_start_offset, self._bases[0])
        assert self._epochs is not None
        self._epochs.truncate_from_start(self.log_start_offset)
        self._write_checkpoint(fsync=True)
        log.info("%s: retention deleted %d segments; log start offset %d",
                 self.directory, count, self.log_start_offset)
        return count

    def _delete_leading_segments(self, count: int) -> None:
        count = min(count, len(self._segments) - 1)
        for segment in self._segments[:count]:
            self._retired_recent.append(segment.delete_files())
            self._checkpoint.delete_horizons.pop(segment.base_offset, None)
        del self._segments[:count]
        del self._bases[:count]
        if count > 0:
            delete_snapshots(self.directory, below=self._bases[0])

    def compact(self, now_ms: int) -> cleaner.CompactionStats:
        """Compact the sealed segments (cleanup.policy with "compact"): keep the latest
        record per key at its original offset; drop tombstones past delete.retention.ms."""
        self._check_open()
        self._close_retired()
        if not self.config.compact:
            return cleaner.CompactionStats()
        return cleaner.compact(self, now_ms)

    def _replace_segment(self, old: LogSegment, new: LogSegment) -> None:
        """Put a compacted segment in place of ``old`` (its files were already renamed over
        the old ones; the old file handle stays open a while for in-flight reads)."""
        i = self._segments.index(old)
        new.txn_index = old.txn_index  # offsets are unchanged, so are the aborted ranges
        self._segments[i] = new
        self._retired_recent.append(old.file)

    def truncate_to(self, offset: int) -> int:
        """Drop everything from the batch holding ``offset`` on (a follower diverged from
        its leader). Returns the new log end offset."""
        self._check_open()
        if offset >= self._next_offset:
            return self._next_offset
        if offset <= self.log_start_offset or offset <= self._bases[0]:
            return self.truncate_fully_and_start_at(offset)
        keep = bisect_right(self._bases, offset)
        for segment in self._segments[keep:]:
            self._retired_recent.append(segment.delete_files())
        del self._segments[keep:]
        del self._bases[keep:]
        self._next_offset = self._segments[-1].truncate_to(offset)
        delete_snapshots(self.directory, above=self._next_offset)  # of a diverged suffix
        self._unflushed = 0
        assert self._epochs is not None
        self._epochs.truncate_from_end(self._next_offset)
        self._rebuild_transactions()
        self._segments[-1].flush(fsync=True)
        self._set_recovery_point()
        self._write_checkpoint(fsync=True)
        return self._next_offset

    def truncate_fully_and_start_at(self, offset: int) -> int:
        """Delete every segment and restart the log, empty, at ``offset``."""
        self._check_open()
        for segment in self._segments:
            self._retired_recent.append(segment.delete_files())
        self._segments.clear()
        self._bases.clear()
        self._checkpoint.delete_horizons.clear()
        delete_snapshots(self.directory)
        self._add_segment(offset)
        self._next_offset = offset
        self.log_start_offset = offset
        self._unflushed = 0
        self._txns = TransactionState()
        assert self._epochs is not None
        self._epochs.clear()
        self._set_recovery_point()
        self._write_checkpoint(fsync=True)
        return offset

    # ================================================================== lifecycle

    def update_config(self, config: LogConfig) -> None:
        """New topic configs take effect from the next append, roll or maintenance pass."""
        self.config = config
        for segment in self._segments:
            segment.index_interval_bytes = config.index_interval_bytes

    def flush(self) -> None:
        """fsync the log and its indexes; the recovery point moves to the log end."""
        self._check_open()
        for segment in self._segments:
            segment.flush(fsync=segment is self._segments[-1])
        self._unflushed = 0
        self._set_recovery_point()
        self._write_checkpoint(fsync=True)

    def _set_recovery_point(self) -> None:
        """Everything up to the log end is on disk: note it, with the transactions open there."""
        self._checkpoint.recovery_point = self._next_offset
        self._checkpoint.ongoing_transactions = dict(self._txns.ongoing)

    def close(self) -> None:
        """Flush, note a clean shutdown (so the next open skips recovery) and close files."""
        if self._closed:
            return
        active = self._segments[-1]
        if active.max_timestamp >= 0:
            active.time_index.maybe_append(active.max_timestamp, active.offset_of_max_timestamp)
        self.flush()
        self._checkpoint.clean_shutdown = CleanShutdown(
            active.base_offset, active.size, self._next_offset
        )
        self._write_checkpoint(fsync=True)
        self._close_files()

    def delete(self) -> None:
        """Close without flushing and remove the partition's directory."""
        if not self._closed:
            self._close_files()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _close_files(self) -> None:
        for segment in self._segments:
            segment.close()
        for f in self._retired_recent + self._retired_old:
            f.close()
        self._retired_recent.clear()
        self._retired_old.clear()
        self._closed = True

    def _close_retired(self) -> None:
        for f in self._retired_old:
            f.close()
        self._retired_old = self._retired_recent
        self._retired_recent = []

    def _write_checkpoint(self, *, fsync: bool) -> None:
        self._checkpoint.log_start_offset = self.log_start_offset
        self._checkpoint.write(self.directory, fsync=fsync)

    def __enter__(self) -> PartitionLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"PartitionLog({str(self.directory)!r}, start={self.log_start_offset}, "
            f"end={self._next_offset}, segments={len(self._segments)})"
        )
