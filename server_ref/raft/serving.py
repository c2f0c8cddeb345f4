"""What a quorum node answers its peers: Vote, BeginQuorumEpoch, EndQuorumEpoch, and — on
the leader — Fetch and FetchSnapshot of the metadata partition (Kafka's KRaft rules).

A mixin of ``RaftNode`` (``node.py`` drives the roles; this is the serving half), called
by ``server_ref.handlers.raft`` with the decoded fields; answers are plain values.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sdk.errors import (
    FencedLeaderEpochError,
    InconsistentVoterSetError,
    InvalidRequestError,
    NotLeaderOrFollowerError,
    PositionOutOfRangeError,
    SnapshotNotFoundError,
    UnknownLeaderEpochError,
)
from server_ref.raft.log import OffsetAndEpoch
from server_ref.raft.snapshot import SnapshotId
from server_ref.raft.state import Role

if TYPE_CHECKING:
    from server_ref.raft.api import Endpoint, RaftConfig
    from server_ref.raft.log import RaftLog
    from server_ref.raft.progress import LeaderProgress
    from server_ref.raft.snapshot import SnapshotStore
    from server_ref.raft.state import QuorumState

log = logging.getLogger("server_ref.raft")


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class FetchAnswer:
    """What the leader answers a Fetch of the metadata partition (before encoding)."""

    error: int
    high_watermark: int
    log_start_offset: int
    records: bytes = b""
    diverging: OffsetAndEpoch | None = None
    snapshot: SnapshotId | None = None


class PeerRequests:
    if TYPE_CHECKING:  # what the serving half uses of RaftNode
        node_id: int
        voters: dict[int, Endpoint]
        is_voter: bool
        config: RaftConfig
        log: RaftLog
        snapshots: SnapshotStore
        quorum: QuorumState
        _hw: int
        _gen: int
        _progress: LeaderProgress | None
        _changed: asyncio.Event

        def observe(self, epoch: int, leader_id: int | None) -> bool: ...
        def _leaving_leadership(self) -> None: ...
        def _leader_changed(self) -> None: ...
        def _start_election(self) -> None: ...
        def _set_hw(self, hw: int) -> None: ...
        def _become(self, run: Callable[[int], Awaitable[None]]) -> None: ...
        async def _run_unattached(self, gen: int) -> None: ...

    def handle_vote(self, candidate_id: int, epoch: int, last_epoch: int,
                    end_offset: int) -> tuple[int, bool]:
        """A Vote request: ``(error code, granted)``; the answer carries ``leader()``."""
        q = self.quorum
        if not self.is_voter or candidate_id not in self.voters:
            return InconsistentVoterSetError.errno, False
        if epoch < q.epoch:
            return FencedLeaderEpochError.errno, False
        if epoch > q.epoch:
            self._leaving_leadership()
            q.to_unattached(epoch)
            self._become(self._run_unattached)
            self._leader_changed()
        granted = q.can_grant(candidate_id, epoch, last_epoch, end_offset,
                              self.log.last_epoch, self.log.end_offset)
        if granted and q.voted_id is None:
            q.grant(candidate_id)  # persisted before the answer leaves
            self._become(self._run_unattached)  # a fresh election timeout
        return 0, granted

    def handle_begin_epoch(self, leader_id: int, epoch: int) -> int:
        q = self.quorum
        if leader_id not in self.voters:
            return InconsistentVoterSetError.errno
        if epoch < q.epoch:
            return FencedLeaderEpochError.errno
        if epoch == q.epoch and q.leader_id not in (None, leader_id):
            return InvalidRequestError.errno  # two leaders in one epoch cannot be
        self.observe(epoch, leader_id)
        return 0

    def handle_end_epoch(self, leader_id: int, epoch: int, successors: list[int]) -> int:
        """The leader of ``epoch`` is stepping down: its preferred successors stand first."""
        q = self.quorum
        if epoch < q.epoch:
            return FencedLeaderEpochError.errno
        self.observe(epoch, leader_id)
        log.info("node %d: leader %d ends epoch %d", self.node_id, leader_id, epoch)
        if self.is_voter and q.epoch == epoch and q.role is Role.FOLLOWER \
                and q.leader_id == leader_id:
            rank = successors.index(self.node_id) if self.node_id in successors \
                else len(successors)
            delay = rank * self.config.election_backoff_max_ms / 1000 / max(len(successors), 1)

            async def stand(gen: int) -> None:
                await asyncio.sleep(delay)
                if gen == self._gen:
                    self._start_election()

            self._become(stand)
        return 0

    def _fenced(self, epoch: int) -> int:
        """The error for a leader-only request at ``epoch``, or 0 if this node leads it."""
        q = self.quorum
        if epoch < q.epoch:
            return FencedLeaderEpochError.errno
        if epoch > q.epoch:
            return UnknownLeaderEpochError.errno
        if q.role is not Role.LEADER:
            return NotLeaderOrFollowerError.errno
        return 0

    async def serve_fetch(self, replica_id: int, epoch: int, fetch_offset: int,
                          last_fetched_epoch: int, max_wait_ms: int,
                          max_bytes: int) -> FetchAnswer:
        """A Fetch of the metadata partition from a voter or an observer (leader only)."""
        error = self._fenced(epoch)
        if error:
            return FetchAnswer(error, self._hw, self.log.start_offset)
        if fetch_offset < 0 or (fetch_offset > 0 and last_fetched_epoch < 0):
            return FetchAnswer(InvalidRequestError.errno, self._hw, self.log.start_offset)
        sid = self.snapshots.latest()
        if fetch_offset < self.log.start_offset and sid is not None:
            return FetchAnswer(0, self._hw, self.log.start_offset, snapshot=sid)
        if fetch_offset > 0:
            found = self.log.end_offset_for_epoch(last_fetched_epoch)
            if found.epoch < 0:
                if sid is not None:
                    return FetchAnswer(0, self._hw, self.log.start_offset, snapshot=sid)
            elif found.epoch != last_fetched_epoch or found.offset < fetch_offset:
                return FetchAnswer(0, self._hw, self.log.start_offset, diverging=found)
        progress = self._progress
        assert progress is not None
        if replica_id >= 0 and progress.record_fetch(replica_id, fetch_offset,
                                                     self.log.end_offset, now_ms()):
            self._set_hw(progress.high_watermark)
        elif fetch_offset >= self.log.end_offset and max_wait_ms > 0:
            changed = self._changed
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(changed.wait(), max_wait_ms / 1000)
            error = self._fenced(epoch)
            if error:
                return FetchAnswer(error, self._hw, self.log.start_offset)
        records = self.log.read(fetch_offset, max_bytes) \
            if fetch_offset < self.log.end_offset else b""
        return FetchAnswer(0, self._hw, self.log.start_offset, records=records)

    def serve_fetch_snapshot(self, epoch: int, sid: SnapshotId, position: int,
                             max_bytes: int) -> tuple[int, int, bytes]:
        """``(error, snapshot size, bytes from position)`` (leader only)."""
        error = self._fenced(epoch)
        if error:
            return error, -1, b""
        if not self.snapshots.path(sid).exists():
            return SnapshotNotFoundError.errno, -1, b""
        size = self.snapshots.size(sid)
        if position < 0 or position > size:
            return PositionOutOfRangeError.errno, size, b""
        return 0, size, self.snapshots.read_chunk(sid, position, max(max_bytes, 1))

