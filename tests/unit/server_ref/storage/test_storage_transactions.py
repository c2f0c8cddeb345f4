"""Open transactions, the last stable offset, aborted-transaction indexes and leader epochs."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from sdk.records.builder import build_control_batch
from sdk.records.control import ControlType
from server_ref.storage import LogConfig, PartitionLog
from server_ref.storage.transactions import AbortedTxn


@pytest.fixture
def txn(make_batch):
    def _txn(pid: int, count: int = 2, seq: int = 0) -> bytes:
        return make_batch(count, producer_id=pid, producer_epoch=0, base_sequence=seq,
                          transactional=True)
    return _txn


def marker(kind: ControlType, pid: int) -> bytes:
    return build_control_batch(kind, pid, 0, 1, timestamp_ms=1)


def test_last_stable_offset_waits_for_the_oldest_open_transaction(open_log, make_batch, txn) -> None:
    log = open_log()
    log.append(make_batch(5))
    assert log.last_stable_offset == log.log_end_offset == 5
    log.append(txn(1))  # 5..6
    log.append(make_batch(3))  # 7..9
    log.append(txn(2))  # 10..11
    assert log.last_stable_offset == 5
    assert log.ongoing_transactions() == {1: 5, 2: 10}
    log.append(marker(ControlType.COMMIT, 1))  # 12
    assert log.last_stable_offset == 10
    # A read_committed fetch stops at the LSO.
    piece = log.read(0, 1 << 20, max_offset=log.last_stable_offset)
    assert piece.size == sum(len(b) for b in (make_batch(5), txn(1), make_batch(3)))
    log.delete_records(11)  # the LSO never falls below the log start offset
    assert log.last_stable_offset == 11
    log.append(marker(ControlType.ABORT, 2))  # 13
    assert log.last_stable_offset == log.log_end_offset == 14
    assert log.ongoing_transactions() == {}


def test_aborted_transactions_are_indexed_for_fetch(open_log, make_batch, txn, log_dir: Path) -> None:
    log = open_log()
    log.append(txn(7, 3))  # 0..2
    log.append(txn(8, 1))  # 3
    log.append(marker(ControlType.ABORT, 7))  # 4
    log.append(make_batch(2))  # 5..6
    log.append(marker(ControlType.COMMIT, 8))  # 7
    log.append(txn(9, 2))  # 8..9
    log.append(marker(ControlType.ABORT, 9))  # 10
    first = AbortedTxn(7, 0, 4, 3)  # LSO after the abort: producer 8 still open at 3
    second = AbortedTxn(9, 8, 10, 11)
    assert log.aborted_transactions(0, 11) == [first, second]
    assert log.aborted_transactions(5, 8) == []  # neither overlaps [5, 8)
    assert log.aborted_transactions(2, 3) == [first]
    assert log.aborted_transactions(9, 11) == [second]
    log.close()
    raw = (log_dir / "00000000000000000000.txnindex").read_bytes()
    assert raw == struct.pack(">hqqqq", 0, 7, 0, 4, 3) + struct.pack(">hqqqq", 0, 9, 8, 10, 11)
    again = open_log()
    assert again.aborted_transactions(0, 11) == [first, second]


def test_transactions_survive_a_crash_across_a_roll(open_log, make_batch, txn) -> None:
    log = open_log()
    log.append(txn(4))  # 0..1, in the segment sealed below
    log.append(txn(5))  # 2..3
    log.roll()  # the recovery point notes producers 4 and 5 as open
    log.append(marker(ControlType.ABORT, 4))  # 4
    log.append(txn(6))  # 5..6
    log._close_files()  # crash
    again = open_log()
    assert not again.recovery_report.clean
    assert again.ongoing_transactions() == {5: 2, 6: 5}
    assert again.last_stable_offset == 2
    assert again.aborted_transactions(0, 10) == [AbortedTxn(4, 0, 4, 2)]
    again.append(marker(ControlType.COMMIT, 5))
    assert again.last_stable_offset == 5


def test_truncation_reopens_a_transaction_whose_marker_is_cut(open_log, txn) -> None:
    log = open_log(segment_bytes=300)
    log.append(txn(3))  # 0..1
    log.append(txn(3, 1, seq=2))  # 2
    log.append(marker(ControlType.ABORT, 3))  # 3
    assert log.aborted_transactions(0, 4) and log.last_stable_offset == 4
    assert log.truncate_to(3) == 3
    assert log.aborted_transactions(0, 4) == []
    assert log.ongoing_transactions() == {3: 0} and log.last_stable_offset == 0


def test_leader_epochs_are_cached_and_answer_offset_for_leader_epoch(
    open_log, make_batch, log_dir: Path
) -> None:
    log = open_log()
    log.append(make_batch(5), leader_epoch=0)  # 0..4
    log.append(make_batch(5), leader_epoch=0)  # 5..9
    log.append(make_batch(3), leader_epoch=2)  # 10..12
    log.append(make_batch(2), leader_epoch=5)  # 13..14
    assert log.leader_epoch_cache.entries() == [(0, 0), (2, 10), (5, 13)]
    assert (log_dir / "leader-epoch-checkpoint").read_text() == "0\n3\n0 0\n2 10\n5 13\n"
    assert log.end_offset_for_epoch(5) == (5, 15)  # the latest epoch ends at the log end
    assert log.end_offset_for_epoch(2) == (2, 13)
    assert log.end_offset_for_epoch(3) == (2, 13)  # unknown epoch: the one below it
    assert log.end_offset_for_epoch(9) == (-1, -1)
    assert log.truncate_to(11) == 10
    assert log.leader_epoch_cache.entries() == [(0, 0)]
    log.delete_records(7)
    assert log.leader_epoch_cache.entries() == [(0, 7)]
    log.close()
    assert open_log().leader_epoch_cache.entries() == [(0, 7)]


def test_a_follower_learns_epochs_from_the_batches_it_copies(
    open_log, make_batch, tmp_path: Path
) -> None:
    leader = open_log()
    leader.append(make_batch(3), leader_epoch=1)
    leader.append(make_batch(3), leader_epoch=1)
    leader.append(make_batch(3), leader_epoch=4)
    follower = PartitionLog.open(tmp_path / "follower-0", LogConfig())
    try:
        follower.append(leader.read(0, 1 << 20).to_bytes(), assign_offsets=False)
        assert follower.leader_epoch_cache.entries() == [(1, 0), (4, 6)]
        assert follower.end_offset_for_epoch(1) == leader.end_offset_for_epoch(1) == (1, 6)
    finally:
        follower.close()
