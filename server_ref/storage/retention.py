"""Which leading segments retention may delete (Kafka's three rules, applied in order).

1. retention.ms: a segment whose largest record timestamp (its file's mtime when it has no
   timestamps) is more than retention.ms old. The walk stops at the first young segment.
2. retention.bytes: while the log minus the oldest remaining segment is still at least
   retention.bytes, that segment goes.
3. log start offset: a segment whose offsets are all below the log start offset
   (DeleteRecords moved it) goes.

Only whole segments are deleted. The active segment counts too when it has data: the log
then rolls first, so an empty active segment remains at the log end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from server_ref.storage.log import PartitionLog
    from server_ref.storage.segment import LogSegment

__all__ = ["below_log_start", "deletable_segment_count"]


def _expired(segment: LogSegment, now_ms: int, retention_ms: int) -> bool:
    newest = segment.max_timestamp
    if newest < 0:
        newest = segment.last_modified_ms()
    return now_ms - newest > retention_ms


def below_log_start(log: PartitionLog) -> int:
    """How many leading segments hold only offsets below the log start offset."""
    segments = log.segments
    count = 0
    while count < len(segments) - 1 and segments[count + 1].base_offset <= log.log_start_offset:
        count += 1
    return count


def deletable_segment_count(log: PartitionLog, now_ms: int) -> int:
    """How many leading segments the retention rules allow deleting now."""
    segments = log.segments
    config = log.config
    count = 0
    if config.delete:
        if config.retention_ms >= 0:
            while count < len(segments) and _expired(segments[count], now_ms, config.retention_ms):
                count += 1
        if config.retention_bytes >= 0:
            excess = sum(s.size for s in segments[count:]) - config.retention_bytes
            while count < len(segments) and excess - segments[count].size >= 0:
                excess -= segments[count].size
                count += 1
    count = max(count, below_log_start(log))
    if count == len(segments) and segments[-1].size == 0:
        count -= 1  # an empty active segment is where the log continues; it stays
    return count
