"""Epoch states and the vote rules, with the quorum-state file on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from server_ref.raft.state import QuorumState, QuorumStateFile, Role


def state(tmp_path: Path, node: int = 1, voters: tuple[int, ...] = (1, 2, 3)) -> QuorumState:
    return QuorumState(node, set(voters), QuorumStateFile(tmp_path))


def test_candidate_bumps_epoch_votes_for_itself_and_leads_with_a_majority(tmp_path: Path) -> None:
    q = state(tmp_path)
    q.to_candidate()
    assert (q.role, q.epoch, q.voted_id, q.granted) == (Role.CANDIDATE, 1, 1, {1})
    assert q.record_vote(2, granted=False) is False
    assert q.record_vote(9, granted=True) is False  # not a voter: ignored
    assert q.record_vote(3, granted=True) is True
    q.to_leader()
    assert (q.role, q.leader_id) == (Role.LEADER, 1)


def test_leader_needs_a_majority(tmp_path: Path) -> None:
    q = state(tmp_path)
    q.to_candidate()
    with pytest.raises(ValueError, match="no majority"):
        q.to_leader()


def test_one_vote_per_epoch_survives_a_restart(tmp_path: Path) -> None:
    q = state(tmp_path)
    q.to_unattached(5)
    assert q.can_grant(2, 5, 0, 0, 0, 0)
    q.grant(2)
    restarted = state(tmp_path)
    assert (restarted.epoch, restarted.voted_id, restarted.role) == (5, 2, Role.UNATTACHED)
    assert not restarted.can_grant(3, 5, 0, 0, 0, 0)
    assert restarted.can_grant(2, 5, 0, 0, 0, 0)  # the same candidate asking again


def test_vote_refused_to_a_less_up_to_date_log(tmp_path: Path) -> None:
    q = state(tmp_path)
    q.to_unattached(3)
    mine = (2, 10)  # (last epoch, end offset)
    assert not q.can_grant(2, 3, 1, 50, *mine)  # older last epoch, longer log: refused
    assert not q.can_grant(2, 3, 2, 9, *mine)  # same epoch, shorter
    assert q.can_grant(2, 3, 2, 10, *mine)
    assert q.can_grant(2, 3, 3, 0, *mine)


def test_follower_and_leader_grant_no_second_leader_in_their_epoch(tmp_path: Path) -> None:
    q = state(tmp_path)
    q.to_follower(4, 3)
    assert not q.can_grant(2, 4, 9, 99, 0, 0)
    (tmp_path / "x").mkdir()
    leader = state(tmp_path / "x", node=2)
    leader.to_candidate()
    leader.record_vote(1, granted=True)
    leader.to_leader()
    assert not leader.can_grant(3, 1, 9, 99, 0, 0)


def test_observers_never_stand_or_vote(tmp_path: Path) -> None:
    q = state(tmp_path, node=1001)
    with pytest.raises(ValueError, match="not a voter"):
        q.to_candidate()
    q.to_unattached(2)
    assert not q.can_grant(1, 2, 5, 5, 0, 0)


def test_restart_after_leading_resigns_the_epoch(tmp_path: Path) -> None:
    q = state(tmp_path)
    q.to_candidate()
    q.record_vote(2, granted=True)
    q.to_leader()
    restarted = state(tmp_path)
    # It may not lead epoch 1 again from a fresh process, nor vote for anyone in it.
    assert (restarted.role, restarted.epoch, restarted.voted_id) == (Role.RESIGNED, 1, 1)
    assert not restarted.can_grant(2, 1, 9, 99, 0, 0)


def test_quorum_state_file_is_kafkas_json_and_bad_files_are_named(tmp_path: Path) -> None:
    q = state(tmp_path)
    q.to_follower(7, 2)
    text = (tmp_path / "quorum-state").read_text()
    assert '"leaderId": 2' in text and '"leaderEpoch": 7' in text and '"votedId": -1' in text
    (tmp_path / "quorum-state").write_text("{not json")
    with pytest.raises(ValueError, match="not a quorum-state file"):
        state(tmp_path)


def test_epochs_never_go_back(tmp_path: Path) -> None:
    q = state(tmp_path)
    q.to_unattached(3)
    with pytest.raises(ValueError):
        q.to_unattached(3)
    with pytest.raises(ValueError):
        q.to_follower(2, 2)
