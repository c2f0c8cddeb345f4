"""Who this node is in the current epoch, and the rules that move it — no I/O but the
quorum-state file.

Roles (Kafka's epoch states): UNATTACHED (an epoch with no known leader; a voter may have
voted in it), FOLLOWER (knows the leader of the epoch), CANDIDATE (asked for votes in an
epoch it started), LEADER, RESIGNED (was leader of this epoch and stepped down: it votes
for no one else in it and waits for the next epoch). Observers are never candidates,
leaders or voters.

The quorum-state file records ``(epoch, voted_id, leader_id)`` before any message that
depends on them leaves the node, so a restarted voter never votes twice in one epoch.
"""

from __future__ import annotations

import enum
import json
import os
from dataclasses import dataclass
from pathlib import Path

QUORUM_STATE_FILE = "quorum-state"


class Role(enum.Enum):
    UNATTACHED = "Unattached"
    FOLLOWER = "Follower"
    CANDIDATE = "Candidate"
    LEADER = "Leader"
    RESIGNED = "Resigned"


@dataclass(frozen=True, slots=True)
class ElectionState:
    epoch: int = 0
    voted_id: int | None = None
    leader_id: int | None = None


class QuorumStateFile:
    """Kafka's ``quorum-state`` JSON file (leaderId, leaderEpoch, votedId), written
    atomically (temporary file, then rename)."""

    def __init__(self, directory: Path, *, fsync: bool = False) -> None:
        self.path = directory / QUORUM_STATE_FILE
        self.fsync = fsync

    def read(self) -> ElectionState:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return ElectionState()
        except ValueError as exc:
            raise ValueError(f"{self.path} is not a quorum-state file: {exc}") from exc
        voted = int(data.get("votedId", -1))
        leader = int(data.get("leaderId", -1))
        return ElectionState(int(data.get("leaderEpoch", 0)), None if voted < 0 else voted,
                             None if leader < 0 else leader)

    def write(self, state: ElectionState) -> None:
        body = json.dumps({
            "leaderId": -1 if state.leader_id is None else state.leader_id,
            "leaderEpoch": state.epoch,
            "votedId": -1 if state.voted_id is None else state.voted_id,
            "data_version": 0,
        })
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as f:
            f.write(body)
            f.flush()
            if self.fsync:
                os.fsync(f.fileno())
        os.replace(tmp, self.path)


class QuorumState:
    """The node's role, epoch, leader and vote, persisted on every change."""

    def __init__(self, node_id: int, voters: set[int], store: QuorumStateFile) -> None:
        self.node_id = node_id
        self.voters = voters
        self.store = store
        saved = store.read()
        self.epoch = saved.epoch
        self.voted_id = saved.voted_id
        self.leader_id: int | None = None
        self.role = Role.UNATTACHED
        self.granted: set[int] = set()  # votes a candidate holds
        if saved.leader_id is not None and saved.leader_id != node_id:
            # Restarted as a follower of the epoch it knew; it will learn more by fetching.
            self.leader_id = saved.leader_id
            self.role = Role.FOLLOWER
        elif saved.leader_id == node_id or saved.voted_id == node_id:
            # Was leader or candidate of this epoch before the restart: it cannot lead this
            # epoch again (its log may not match what it promised), nor vote for another.
            self.role = Role.RESIGNED

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def _save(self) -> None:
        self.store.write(ElectionState(self.epoch, self.voted_id, self.leader_id))

    # ------------------------------------------------------------------ transitions

    def to_unattached(self, epoch: int) -> None:
        """A higher epoch with no known leader."""
        if epoch <= self.epoch:
            raise ValueError(f"unattached needs an epoch above {self.epoch}, not {epoch}")
        self.epoch, self.voted_id, self.leader_id = epoch, None, None
        self.role = Role.UNATTACHED
        self.granted = set()
        self._save()

    def to_follower(self, epoch: int, leader_id: int) -> None:
        if epoch < self.epoch:
            raise ValueError(f"follower of epoch {epoch} below the current {self.epoch}")
        if epoch == self.epoch and self.role is Role.LEADER:
            raise ValueError(f"leader of epoch {epoch} cannot follow {leader_id} in it")
        if epoch == self.epoch and self.leader_id not in (None, leader_id):
            raise ValueError(f"epoch {epoch} already has leader {self.leader_id}")
        if epoch > self.epoch:
            self.voted_id = None
        self.epoch, self.leader_id = epoch, leader_id
        self.role = Role.FOLLOWER
        self.granted = set()
        self._save()

    def to_candidate(self) -> None:
        if not self.is_voter:
            raise ValueError(f"node {self.node_id} is not a voter and cannot stand")
        self.epoch += 1
        self.voted_id, self.leader_id = self.node_id, None
        self.role = Role.CANDIDATE
        self.granted = {self.node_id}
        self._save()

    def record_vote(self, voter_id: int, granted: bool) -> bool:
        """A vote answer for the current candidacy; True once a majority granted."""
        if self.role is not Role.CANDIDATE or voter_id not in self.voters:
            return False
        if granted:
            self.granted.add(voter_id)
        return len(self.granted) >= self.majority

    def to_leader(self) -> None:
        if self.role is not Role.CANDIDATE or len(self.granted) < self.majority:
            raise ValueError(f"node {self.node_id} has no majority in epoch {self.epoch}")
        self.leader_id = self.node_id
        self.role = Role.LEADER
        self._save()

    def to_resigned(self) -> None:
        """The leader steps down in its epoch (lost the quorum, or shutting down)."""
        if self.role is not Role.LEADER:
            raise ValueError("only a leader resigns")
        self.leader_id = None
        self.role = Role.RESIGNED
        self._save()

    # ------------------------------------------------------------------ votes

    def can_grant(self, candidate_id: int, epoch: int, last_epoch: int, end_offset: int,
                  my_last_epoch: int, my_end_offset: int) -> bool:
        """Would this node vote for ``candidate_id`` in ``epoch`` (already adopted)?"""
        if not self.is_voter or candidate_id not in self.voters or epoch != self.epoch:
            return False
        if self.role in (Role.LEADER, Role.CANDIDATE, Role.RESIGNED):
            return self.voted_id == candidate_id and self.role is Role.CANDIDATE \
                and candidate_id == self.node_id
        if self.role is Role.FOLLOWER:
            return False  # the epoch has a leader: no second one
        if self.voted_id is not None:
            return self.voted_id == candidate_id
        # Raft's rule: only a candidate whose log is at least as up to date.
        return (last_epoch, end_offset) >= (my_last_epoch, my_end_offset)

    def grant(self, candidate_id: int) -> None:
        self.voted_id = candidate_id
        self._save()
