"""The metadata log file: appends, epochs, truncation, trimming, recovery; snapshots and
KRaft control records."""

from __future__ import annotations

from pathlib import Path

import pytest

from sdk.errors import MalformedDataError
from sdk.records.control import ControlType
from sdk.records.reader import RecordBatch
from server_ref.raft.log import LOG_FILE, OffsetAndEpoch, RaftLog
from server_ref.raft.records import (
    LeaderChange,
    control_batch,
    control_type_of,
    data_batch,
    decode_leader_change,
    encode_leader_change,
    entry_values,
)
from server_ref.raft.snapshot import SnapshotId, SnapshotStore, decode_snapshot


def fill(log: RaftLog, epochs: list[tuple[int, int]]) -> None:
    """Append ``count`` one-entry batches per ``(epoch, count)``."""
    for epoch, count in epochs:
        for _ in range(count):
            log.append(data_batch(log.end_offset, epoch, [f"e{log.end_offset}".encode()]))


def test_append_read_and_epoch_stamps(tmp_path: Path) -> None:
    log = RaftLog(tmp_path)
    fill(log, [(1, 2), (3, 2)])
    assert (log.start_offset, log.end_offset, log.last_epoch) == (0, 4, 3)
    batches = [RecordBatch(data) for _e, data in log.batches(0, 4)]
    assert [b.partition_leader_epoch for b in batches] == [1, 1, 3, 3]
    assert [entry_values(b) for b in batches] == [[b"e0"], [b"e1"], [b"e2"], [b"e3"]]
    assert log.read(2, 1) == log.read_batch(log.entries[2])  # at least one batch
    with pytest.raises(MalformedDataError, match="does not continue"):
        log.append(data_batch(7, 3, [b"gap"]))
    with pytest.raises(MalformedDataError, match="epoch 2 after epoch 3"):
        log.append(data_batch(4, 2, [b"older epoch"]))


def test_end_offset_for_epoch_is_kafkas_divergence_rule(tmp_path: Path) -> None:
    log = RaftLog(tmp_path)
    fill(log, [(1, 3), (2, 2), (5, 1)])
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(3, 1)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(5, 2)
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(5, 2)  # unknown epoch: the one below
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(6, 5)
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(0, 0)  # the empty start


def test_truncate_and_reopen_keeps_exactly_the_prefix(tmp_path: Path) -> None:
    log = RaftLog(tmp_path)
    fill(log, [(1, 5)])
    log.truncate_to(3)
    assert log.end_offset == 3
    fill(log, [(2, 1)])
    log.close()
    again = RaftLog(tmp_path)
    assert [(e.base_offset, e.epoch) for e in again.entries] == [(0, 1), (1, 1), (2, 1), (3, 2)]


def test_torn_tail_is_cut_at_open(tmp_path: Path) -> None:
    log = RaftLog(tmp_path)
    fill(log, [(1, 3)])
    log.close()
    path = tmp_path / LOG_FILE
    data = path.read_bytes()
    path.write_bytes(data + data[:30])  # half a batch, as a crash mid-write leaves it
    again = RaftLog(tmp_path)
    assert again.end_offset == 3
    assert path.stat().st_size == len(data)


def test_delete_before_trims_whole_batches_and_survives_reopen(tmp_path: Path) -> None:
    log = RaftLog(tmp_path)
    fill(log, [(1, 4), (2, 2)])
    log.set_base(OffsetAndEpoch(4, 1))
    log.delete_before(4)
    assert (log.start_offset, log.end_offset) == (4, 6)
    assert [v for _e, d in log.batches(0, 10) for v in entry_values(RecordBatch(d))] == \
        [b"e4", b"e5"]
    log.close()
    again = RaftLog(tmp_path)
    assert (again.start_offset, again.end_offset) == (4, 6)
    again.reset_to(9)
    assert (again.start_offset, again.end_offset, again.entries) == (9, 9, [])


def test_snapshot_files_round_trip_and_replace_older_ones(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)
    payload = bytes(range(256)) * 5000  # > one 512 KB record
    store.write(SnapshotId(10, 2), b"old", 1)
    store.write(SnapshotId(40, 3), payload, 1234)
    assert store.ids() == [SnapshotId(40, 3)]
    assert store.payload(SnapshotId(40, 3)) == payload
    raw = store.path(SnapshotId(40, 3)).read_bytes()
    # A download in two chunks installs the same snapshot elsewhere.
    other = SnapshotStore(tmp_path / "follower")
    sid = SnapshotId(40, 3)
    held = other.write_part(sid, 0, raw[:1000])
    held = other.write_part(sid, held, raw[1000:])
    assert held == len(raw)
    assert other.finish_part(sid) == payload
    with pytest.raises(MalformedDataError):
        decode_snapshot(raw[:-20])


def test_leader_change_and_control_batches(tmp_path: Path) -> None:
    change = LeaderChange(2, [1, 2, 3], [2, 3])
    value = encode_leader_change(change)
    assert decode_leader_change(value) == change
    # Kafka's layout: version, leader id, compact arrays of {voter id, no tags}, no tags.
    assert value[:6] == b"\x00\x00\x00\x00\x00\x02" and value[6] == 4
    batch = RecordBatch(control_batch(7, 4, ControlType.LEADER_CHANGE, value))
    assert batch.is_control and batch.partition_leader_epoch == 4
    assert control_type_of(batch) == ControlType.LEADER_CHANGE
    assert entry_values(batch) == []
    with pytest.raises(ValueError, match="at least one"):
        data_batch(0, 1, [])
