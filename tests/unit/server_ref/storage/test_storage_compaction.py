"""Log compaction: latest value per key, offsets kept, tombstones, transactions, crash safety."""

from __future__ import annotations

from pathlib import Path

import pytest

from sdk.records.builder import build_control_batch
from sdk.records.control import ControlType
from sdk.records.header import TimestampType
from server_ref.storage.segment import LogSegment

HOUR = 3600 * 1000


def write_keyed(log, make_batch, rounds: int, keys: int, per_batch: int = 4) -> dict[bytes, tuple[int, bytes]]:
    """Write ``rounds`` values for each key; return key -> (offset, value) of the latest."""
    latest: dict[bytes, tuple[int, bytes]] = {}
    pending: list[tuple[bytes, bytes]] = []
    for r in range(rounds):
        for k in range(keys):
            pending.append((b"key-%d" % k, b"value-%d-%d" % (k, r)))
            if len(pending) == per_batch:
                info = log.append(make_batch(pending))
                for i, (key, value) in enumerate(pending):
                    latest[key] = (info.first_offset + i, value)
                pending = []
    if pending:
        info = log.append(make_batch(pending))
        for i, (key, value) in enumerate(pending):
            latest[key] = (info.first_offset + i, value)
    return latest


def test_compaction_keeps_the_latest_value_per_key_at_its_offset(
    open_log, make_batch, read_all, batches_of, clock
) -> None:
    log = open_log(cleanup_policy="compact", segment_bytes=2000)
    latest = write_keyed(log, make_batch, rounds=20, keys=7)
    end = log.log_end_offset
    log.roll()  # seal everything: the active segment is never compacted
    size_before = log.size_in_bytes()
    stats = log.compact(clock.now)
    assert stats.segments_cleaned > 0 and stats.records_removed == 20 * 7 - 7
    records = read_all(log)
    assert {r.key: (r.offset, r.value) for r in records} == latest
    assert len(records) == 7 and log.log_end_offset == end
    assert log.size_in_bytes() < size_before / 5
    for batch in batches_of(log.read(0, 1 << 20).to_bytes()):
        assert batch.crc_matches()
        assert all(batch.base_offset <= r.offset <= batch.last_offset for r in batch.records())
    # A second pass finds nothing to do, and reopening gives the same records.
    assert log.compact(clock.now).segments_cleaned == 0
    log.close()
    again = open_log(cleanup_policy="compact", segment_bytes=2000)
    assert read_all(again) == records
    assert not list(again.directory.glob("*.cleaned")) and not list(again.directory.glob("*.swap"))


def test_rebuilt_batches_keep_base_offset_and_untouched_batches_stay_byte_identical(
    open_log, make_batch, batches_of, clock
) -> None:
    log = open_log(cleanup_policy="compact")
    log.append(make_batch([(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], timestamp=[10, 11, 12]))
    untouched = make_batch([(b"x", b"1"), (b"y", b"1")], timestamp=20)
    log.append(untouched)
    log.append(make_batch([(b"b", b"2")], timestamp=30))
    log.roll()
    log.compact(clock.now)
    first, second, third = batches_of(log.read(0, 1 << 20).to_bytes())
    assert (first.base_offset, [(r.offset, r.key, r.timestamp) for r in first.records()]) == (
        0, [(0, b"a", 10), (2, b"c", 12)]
    )
    assert first.crc_matches() and first.max_timestamp == 12
    stored = bytearray(untouched)
    stored[:8] = (3).to_bytes(8, "big")  # the offset the log gave it
    assert second.to_bytes() == bytes(stored)
    assert [r.offset for r in third.records()] == [5]


def test_tombstones_are_dropped_only_after_delete_retention(
    open_log, make_batch, read_all, clock
) -> None:
    log = open_log(cleanup_policy="compact", delete_retention_ms=HOUR)
    log.append(make_batch([(b"gone", b"v1"), (b"kept", b"v1")]))
    log.append(make_batch([(b"gone", None)]))  # a tombstone
    log.roll()
    log.compact(clock.now)
    assert [(r.key, r.value) for r in read_all(log)] == [(b"kept", b"v1"), (b"gone", None)]
    log.compact(clock.now + HOUR - 1)
    assert [r.key for r in read_all(log)] == [b"kept", b"gone"]
    log.compact(clock.now + HOUR)
    assert [(r.offset, r.key) for r in read_all(log)] == [(1, b"kept")]


def test_with_zero_delete_retention_tombstones_go_in_the_first_pass(
    open_log, make_batch, read_all, clock
) -> None:
    log = open_log(cleanup_policy="compact", delete_retention_ms=0)
    log.append(make_batch([(b"k", b"v"), (b"k", None), (b"other", b"v")]))
    log.roll()
    log.compact(clock.now)
    assert [(r.offset, r.key) for r in read_all(log)] == [(2, b"other")]


def test_active_segment_and_young_segments_are_left_alone(
    open_log, make_batch, read_all, clock
) -> None:
    log = open_log(cleanup_policy="compact", segment_bytes=1000, min_compaction_lag_ms=HOUR)
    old = clock.now - 2 * HOUR
    for i in range(10):
        log.append(make_batch([(b"k", b"old-%d" % i)] * 3, timestamp=old))
    young_from = log.log_end_offset
    log.roll()
    for i in range(10):
        log.append(make_batch([(b"k", b"new-%d" % i)] * 3, timestamp=clock.now))
    log.compact(clock.now)
    records = read_all(log)
    old_left = [r for r in records if r.offset < young_from]
    assert [r.value for r in old_left] == [b"old-9"]  # compacted among the old segments only
    assert len([r for r in records if r.offset >= young_from]) == 30  # untouched


def test_compressed_and_log_append_time_batches_survive_compaction(
    open_log, make_batch, batches_of, read_all, clock
) -> None:
    log = open_log(cleanup_policy="compact", message_timestamp_type="LogAppendTime")
    log.append(make_batch([(b"a", b"1"), (b"b", b"1"), (b"a", b"2")], compression="zstd"))
    log.append(make_batch([(b"b", b"2"), (b"c", b"1")], compression="gzip"))
    log.roll()
    log.compact(clock.now + 5)
    first, second = batches_of(log.read(0, 1 << 20).to_bytes())
    assert (first.compression, second.compression) == (4, 1)
    assert first.timestamp_type == TimestampType.LOG_APPEND_TIME and first.crc_matches()
    assert [(r.offset, r.key, r.value, r.timestamp) for r in read_all(log)] == [
        (2, b"a", b"2", clock.now), (3, b"b", b"2", clock.now), (4, b"c", b"1", clock.now)
    ]


def test_aborted_transactions_are_removed_and_never_supersede(
    open_log, make_batch, read_all, clock
) -> None:
    log = open_log(cleanup_policy="compact")
    log.append(make_batch([(b"k", b"committed-1")]))
    log.append(make_batch([(b"k", b"aborted")], producer_id=9, producer_epoch=0,
                          base_sequence=0, transactional=True))
    log.append(build_control_batch(ControlType.ABORT, 9, 0, 1, timestamp_ms=clock.now))
    log.append(make_batch([(b"j", b"in-committed-txn")], producer_id=9, producer_epoch=0,
                          base_sequence=1, transactional=True))
    log.append(make_batch([(b"j", b"tail")], producer_id=4, producer_epoch=0, base_sequence=0))
    log.append(build_control_batch(ControlType.COMMIT, 9, 0, 1, timestamp_ms=clock.now))
    log.roll()
    log.compact(clock.now)
    kept = [(r.offset, r.key, r.value) for r in read_all(log)]
    # offset 1 (aborted) is gone; offset 0 survives because the aborted write does not count.
    # Producer 4's only batch (offset 4) is its last, so it is kept whole for producer state;
    # offset 3 is superseded by it. Both control batches (2 and 5) stay.
    assert [o for o, _k, _v in kept] == [0, 2, 4, 5]
    assert kept[0][2] == b"committed-1" and kept[2][2] == b"tail"
    headers = list(log.batch_headers())
    assert [h.is_control for h in headers] == [False, True, False, True]


def test_records_after_an_open_transaction_are_not_compacted(
    open_log, make_batch, read_all, clock
) -> None:
    log = open_log(cleanup_policy="compact")
    log.append(make_batch([(b"k", b"1")]))
    log.append(make_batch([(b"k", b"txn")], producer_id=3, producer_epoch=0,
                          base_sequence=0, transactional=True))  # no marker yet
    log.append(make_batch([(b"k", b"2")]))
    log.roll()
    log.compact(clock.now)
    assert [r.offset for r in read_all(log)] == [0, 1, 2]


def test_keyless_records_are_kept(open_log, make_batch, read_all, clock) -> None:
    log = open_log(cleanup_policy="compact")
    log.append(make_batch([(None, b"a"), (b"k", b"1"), (None, b"b"), (b"k", b"2")]))
    log.roll()
    log.compact(clock.now)
    assert [(r.offset, r.value) for r in read_all(log)] == [(0, b"a"), (2, b"b"), (3, b"2")]


def test_delete_policy_logs_are_not_compacted(open_log, make_batch, read_all, clock) -> None:
    log = open_log(cleanup_policy="delete")
    log.append(make_batch([(b"k", b"1"), (b"k", b"2")]))
    log.roll()
    assert log.compact(clock.now).segments_cleaned == 0
    assert len(read_all(log)) == 2


@pytest.mark.parametrize("fail_at_rename", [1, 2])
def test_a_crash_during_the_swap_leaves_old_or_new_data_never_a_mix(
    open_log, make_batch, read_all, clock, monkeypatch, log_dir: Path, fail_at_rename: int
) -> None:
    log = open_log(cleanup_policy="compact", segment_bytes=1500)
    latest = write_keyed(log, make_batch, rounds=10, keys=5)
    log.roll()
    original = read_all(log)
    real = LogSegment.change_suffix
    calls = {"n": 0}

    def crashing_change_suffix(self: LogSegment, suffix: str) -> None:
        calls["n"] += 1
        if calls["n"] == fail_at_rename:
            if fail_at_rename == 2:  # the .swap rename happened; the final one did not
                raise SystemExit("crash after the commit point")
            raise SystemExit("crash before the commit point")
        real(self, suffix)

    monkeypatch.setattr(LogSegment, "change_suffix", crashing_change_suffix)
    with pytest.raises(SystemExit):
        log.compact(clock.now)
    monkeypatch.setattr(LogSegment, "change_suffix", real)
    log._close_files()  # the process died here
    leftovers = {p.suffix for p in log_dir.iterdir()}
    assert (".swap" in leftovers) == (fail_at_rename == 2)
    again = open_log(cleanup_policy="compact", segment_bytes=1500)
    records = read_all(again)
    first_segment_end = again.segments[1].base_offset
    if fail_at_rename == 1:
        assert records == original  # nothing committed
    else:
        # The first segment was replaced by its compacted copy; the rest is untouched.
        compacted_first = [r for r in records if r.offset < first_segment_end]
        assert len(compacted_first) < len([r for r in original if r.offset < first_segment_end])
        assert [r for r in records if r.offset >= first_segment_end] == [
            r for r in original if r.offset >= first_segment_end
        ]
    assert not list(log_dir.glob("*.swap")) and not list(log_dir.glob("*.cleaned"))
    again.compact(clock.now)
    assert {r.key: (r.offset, r.value) for r in read_all(again)} == latest
