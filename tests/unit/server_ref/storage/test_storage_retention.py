"""Retention by time and size, DeleteRecords, and the log start offset they move."""

from __future__ import annotations

from pathlib import Path

import pytest

from sdk.errors import OffsetOutOfRangeError

DAY = 24 * 3600 * 1000


def fill(log, make_batch, batches: int, first_ts: int, step_ms: int = 1000) -> None:
    for i in range(batches):
        log.append(make_batch(4, timestamp=first_ts + i * step_ms, value_size=30))


def test_time_retention_deletes_whole_old_segments(open_log, make_batch, clock, log_dir: Path) -> None:
    log = open_log(segment_bytes=1500, retention_ms=DAY)
    start = clock.now
    fill(log, make_batch, 40, start)
    segments = list(log.segments)
    assert len(segments) >= 4
    # Nothing is older than a day yet.
    assert log.apply_retention(clock.now) == 0
    # A day after the second segment's newest record, the first two segments are expired.
    now = segments[1].max_timestamp + DAY + 1
    assert log.apply_retention(now) == 2
    assert log.log_start_offset == segments[2].base_offset == log.segments[0].base_offset
    assert not (log_dir / f"{segments[0].base_offset:020d}.log").exists()
    assert not (log_dir / f"{segments[1].base_offset:020d}.index").exists()
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 1000)
    assert log.read(log.log_start_offset, 1000).first_offset == log.log_start_offset
    assert log.offset_for_timestamp(0) == (log.log_start_offset, segments[2].first_batch_timestamp)


def test_when_everything_expired_the_log_rolls_and_keeps_its_end(open_log, make_batch, clock) -> None:
    log = open_log(segment_bytes=1500, retention_ms=1000)
    fill(log, make_batch, 20, clock.now)
    end = log.log_end_offset
    deleted = log.apply_retention(clock.now + 10 * DAY)
    assert deleted >= 2
    assert (log.log_start_offset, log.log_end_offset) == (end, end)
    assert len(log.segments) == 1 and log.active_segment.size == 0
    assert log.read(end, 1000).size == 0
    assert log.append(make_batch(1)).first_offset == end
    assert log.apply_retention(clock.now) == 0  # the fresh record is young


def test_size_retention_keeps_the_log_under_retention_bytes(open_log, make_batch, clock) -> None:
    log = open_log(segment_bytes=1000, retention_bytes=2500, retention_ms=-1)
    fill(log, make_batch, 60, clock.now)
    total = log.size_in_bytes()
    sizes = [s.size for s in log.segments]
    deleted = log.apply_retention(clock.now + 100 * DAY)  # time is unlimited: only size counts
    assert deleted > 0
    # Kafka's rule: delete the oldest while what remains is still >= retention.bytes.
    remaining = total - sum(sizes[:deleted])
    assert remaining >= 2500 and remaining - sizes[deleted] < 2500
    assert log.size_in_bytes() == remaining
    assert log.log_start_offset == log.segments[0].base_offset


def test_compact_only_topics_are_not_deleted_by_retention(open_log, make_batch, clock) -> None:
    log = open_log(segment_bytes=1000, retention_ms=1, retention_bytes=1,
                   cleanup_policy="compact")
    fill(log, make_batch, 20, clock.now)
    assert log.apply_retention(clock.now + DAY) == 0
    assert log.log_start_offset == 0


def test_delete_records_moves_the_log_start_and_drops_covered_segments(
    open_log, make_batch, clock, read_all
) -> None:
    log = open_log(segment_bytes=1000)
    fill(log, make_batch, 30, clock.now)
    bases = [s.base_offset for s in log.segments]
    target = bases[2] + 1  # inside the third segment
    assert log.delete_records(target) == target
    assert [s.base_offset for s in log.segments] == bases[2:]
    assert log.log_start_offset == target
    with pytest.raises(OffsetOutOfRangeError):
        log.read(target - 1, 100)
    # The first batch may start before the log start offset, as in Kafka; it is served whole.
    assert log.read(target, 100).first_offset == bases[2]
    assert read_all(log)[0].offset == target
    assert log.offset_for_timestamp(0)[0] == target
    assert log.delete_records(5) == target  # never moves backwards
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(log.log_end_offset + 1)
    assert log.delete_records(-1) == log.log_end_offset  # -1: up to the high watermark


@pytest.mark.parametrize("clean", [True, False])
def test_log_start_offset_survives_reopen(open_log, make_batch, clock, clean: bool) -> None:
    log = open_log(segment_bytes=1000)
    fill(log, make_batch, 30, clock.now)
    log.delete_records(37)
    if clean:
        log.close()
    else:
        log._close_files()  # a crash: the checkpoint was written by delete_records itself
    log = open_log(segment_bytes=1000)
    assert log.log_start_offset == 37
    assert log.log_end_offset == 120


def test_a_slice_handed_out_stays_readable_after_its_segment_is_deleted(
    open_log, make_batch, clock
) -> None:
    log = open_log(segment_bytes=1000, retention_ms=1000)
    fill(log, make_batch, 20, clock.now)
    piece = log.read(0, 1 << 20)
    expected = piece.to_bytes()
    assert log.apply_retention(clock.now + DAY) > 0
    assert piece.to_bytes() == expected
