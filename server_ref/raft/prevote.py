"""Pre-vote (KIP-996): a voter asks whether it could win before it bumps the epoch.

A voter whose leader went quiet (fetch timeout) or that has none (election timeout) turns
*prospective*: it keeps its epoch and role, and sends Vote requests (v2) with ``PreVote``
set and the epoch it would stand in. A voter grants a pre-vote if the prospective's log is
at least as up to date as its own, unless it leads or has fetched from its leader within
the fetch timeout (the leader is alive: no election is needed); answering changes nothing
it stores. A majority of grants starts the real election (``_start_election``); a
majority of refusals, or no majority within an election timeout, sends the voter back to
following its leader (or waiting, unattached). So a voter that was cut off or SIGSTOPped
comes back without disturbing a healthy quorum: in plain Raft its higher epoch would have
made the leader step down.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from sdk.errors import FencedLeaderEpochError, InconsistentVoterSetError
from server_ref.raft import wire
from server_ref.raft.client import PeerUnavailableError
from server_ref.raft.state import Role

if TYPE_CHECKING:
    from server_ref.raft.api import Endpoint, RaftConfig
    from server_ref.raft.log import RaftLog
    from server_ref.raft.state import QuorumState

log = logging.getLogger("server_ref.raft")

RETRY_S = 0.2


class PreVoting:
    if TYPE_CHECKING:  # what this half uses of RaftNode
        node_id: int
        voters: dict[int, Endpoint]
        is_voter: bool
        config: RaftConfig
        log: RaftLog
        quorum: QuorumState
        _gen: int
        _leader_seen: float

        def observe(self, epoch: int, leader_id: int | None) -> bool: ...
        def _start_election(self) -> None: ...
        def _become(self, run: Callable[[int], Awaitable[None]]) -> None: ...
        def _spawn(self, coro: Coroutine[Any, Any, None]) -> None: ...
        def _election_timeout_s(self) -> float: ...
        async def _call(self, node: int, purpose: str, request: object, version: int,
                        timeout_s: float | None = None) -> object: ...
        async def _run_follower(self, gen: int) -> None: ...
        async def _run_unattached(self, gen: int) -> None: ...

    # ------------------------------------------------------------------ voter side

    def leader_heard_recently(self) -> bool:
        """A follower that fetched from its leader within the fetch timeout."""
        return self.quorum.role is Role.FOLLOWER and \
            time.monotonic() - self._leader_seen < self.config.fetch_timeout_ms / 1000

    def handle_pre_vote(self, candidate_id: int, epoch: int, last_epoch: int,
                        end_offset: int) -> tuple[int, bool]:
        """A PreVote: ``(error code, granted)``; nothing is stored or changed."""
        q = self.quorum
        if not self.is_voter or candidate_id not in self.voters:
            return InconsistentVoterSetError.errno, False
        if epoch < q.epoch:
            return FencedLeaderEpochError.errno, False
        if q.role is Role.LEADER or self.leader_heard_recently():
            return 0, False
        return 0, (last_epoch, end_offset) >= (self.log.last_epoch, self.log.end_offset)

    # ------------------------------------------------------------------ prospective side

    def _stand(self) -> None:
        """Time to elect: straight to candidacy alone, else through a pre-vote."""
        if len(self.voters) == 1:
            self._start_election()
        else:
            self._become(self._run_prospective)

    async def _run_prospective(self, gen: int) -> None:
        q = self.quorum
        epoch = q.epoch
        last_epoch, end = self.log.last_epoch, self.log.end_offset
        answers: dict[int, bool] = {}
        decided = asyncio.Event()
        log.info("node %d: pre-vote for epoch %d (leader %s)", self.node_id, epoch + 1,
                 q.leader_id)
        for voter in self.voters:
            if voter != self.node_id:
                self._spawn(self._ask_pre_vote(gen, voter, epoch + 1, last_epoch, end,
                                               answers, decided))
        try:
            await asyncio.wait_for(decided.wait(), self._election_timeout_s())
        except TimeoutError:
            pass
        if gen != self._gen:
            return
        granted = 1 + sum(answers.values())
        if granted >= q.majority:
            log.info("node %d: pre-vote won (%d of %d)", self.node_id, granted,
                     len(self.voters))
            self._start_election()
            return
        log.info("node %d: pre-vote refused (%d of %d granted); leader %s stays",
                 self.node_id, granted, len(self.voters), q.leader_id)
        if q.role is Role.FOLLOWER and q.leader_id is not None:
            self._become(self._run_follower)
        else:
            self._become(self._run_unattached)

    async def _ask_pre_vote(self, gen: int, voter: int, epoch: int, last_epoch: int,
                            end_offset: int, answers: dict[int, bool],
                            decided: asyncio.Event) -> None:
        request = wire.vote_request(self.config.cluster_id, voter, self.node_id, epoch,
                                    last_epoch, end_offset, pre_vote=True)
        while gen == self._gen:
            try:
                response = await self._call(voter, "control", request, wire.VOTE_VERSION)
            except PeerUnavailableError:
                await asyncio.sleep(RETRY_S)
                continue
            if gen != self._gen:
                return
            answer = wire.read_vote_response(response)
            if self.observe(answer.epoch, answer.leader_id):
                return  # a newer epoch or a leader we did not know: following it now
            if answer.error and answer.error != wire.FENCED_EPOCH:
                await asyncio.sleep(RETRY_S)
                continue
            answers[voter] = answer.granted and not answer.error
            majority = self.quorum.majority
            if 1 + sum(answers.values()) >= majority or \
                    sum(not g for g in answers.values()) >= majority:
                decided.set()
            return
