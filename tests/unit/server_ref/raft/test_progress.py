"""The leader's high watermark: a majority of voters, and only over its own epoch."""

from __future__ import annotations

from server_ref.raft.progress import LeaderProgress


def test_high_watermark_is_what_a_majority_of_voters_hold() -> None:
    p = LeaderProgress(1, {1, 2, 3}, epoch_start_offset=0, high_watermark=0)
    assert p.update_leader(10, now_ms=100) is False  # alone: no majority
    assert p.record_fetch(2, 4, 10, now_ms=101) is True
    assert p.high_watermark == 4
    assert p.record_fetch(3, 10, 10, now_ms=102) is True
    assert p.high_watermark == 10
    # An observer's fetch never counts.
    q = LeaderProgress(1, {1, 2, 3}, 0, 0)
    q.update_leader(10, 100)
    assert q.record_fetch(1001, 10, 10, 100) is False
    assert q.high_watermark == 0


def test_entries_of_older_epochs_commit_only_with_one_of_the_leaders_epoch() -> None:
    # The new leader's epoch starts at offset 20 (its LeaderChange record).
    p = LeaderProgress(1, {1, 2, 3}, epoch_start_offset=20, high_watermark=5)
    p.update_leader(21, now_ms=1)
    assert p.record_fetch(2, 20, 21, now_ms=2) is False  # majority at 20: not past the start
    assert p.high_watermark == 5
    assert p.record_fetch(2, 21, 21, now_ms=3) is True
    assert p.high_watermark == 21


def test_quorum_check_counts_recent_fetches_and_describe_lists_replicas() -> None:
    p = LeaderProgress(1, {1, 2, 3}, 0, 0)
    p.update_leader(3, now_ms=1000)
    p.record_fetch(2, 3, 3, now_ms=900)
    p.record_fetch(1001, 1, 3, now_ms=950)
    assert p.fetched_within(since_ms=800) == 2  # the leader and voter 2
    assert p.fetched_within(since_ms=950) == 1
    voters, observers = p.describe()
    assert [(v.replica_id, v.log_end_offset) for v in voters] == [(1, 3), (2, 3), (3, -1)]
    assert [(o.replica_id, o.log_end_offset, o.last_caught_up_timestamp)
            for o in observers] == [(1001, 1, -1)]
