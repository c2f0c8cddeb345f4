"""Pre-vote (KIP-996) on real processes: a voter that was SIGSTOPped past its fetch and
election timeouts comes back and asks PreVote (Vote v2 with ``PreVote`` set) before it
would bump the epoch; the leader and the follower that kept fetching refuse, so the
quorum keeps its leader and epoch. A voter's PreVote answer changes nothing it stores."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from raft_ref.procs import Quorum
from server_ref.raft import wire
from server_ref.raft.client import PeerClient

ROUNDS = 3
PAUSE_S = 3.0  # past the fetch timeout (1 s) and the election timeout (0.4-0.8 s)


@pytest.fixture
def quorum(tmp_path: Path):  # type: ignore[no-untyped-def]
    with Quorum(tmp_path, observers=0) as q:
        yield q


def test_paused_follower_does_not_disrupt_the_quorum(quorum: Quorum) -> None:
    leader, epoch = quorum.wait_leader()
    follower = next(n for n in quorum.voters if n.node_id != leader)
    marks = {n.node_id: len(n.events) for n in quorum.voters}
    for _round in range(ROUNDS):
        follower.pause()
        time.sleep(PAUSE_S)
        follower.resume()
        time.sleep(PAUSE_S)  # time to time out, ask, be refused and fetch again
        # Still one leader in the same epoch, everywhere.
        assert quorum.wait_leader(among=[n.node_id for n in quorum.voters]) == (leader, epoch)
    for node in quorum.voters:  # nobody announced another leader or epoch meanwhile
        announced = [e for e in node.events[marks[node.node_id]:] if e.startswith("leader ")]
        assert all(e == f"leader {leader} {epoch}" for e in announced), announced
    # The quorum still commits through the same leader.
    quorum.append(leader, ["after-pauses"])
    stderr = (follower.data_dir.parent / f"node-{follower.node_id}.stderr").read_text()
    assert "pre-vote" in stderr  # it did time out and ask before standing


def _pre_vote(port: int, candidate: int, epoch: int, last_epoch: int, end_offset: int
              ) -> wire.VoteAnswer:
    async def call() -> wire.VoteAnswer:
        client = PeerClient("127.0.0.1", port, f"test-prospective-{candidate}")
        try:
            request = wire.vote_request("raft-test-cluster", -1, candidate, epoch, last_epoch,
                                        end_offset, pre_vote=True)
            return wire.read_vote_response(await client.call(request, wire.VOTE_VERSION, 10))
        finally:
            await client.close()
    return asyncio.run(call())


def test_pre_vote_is_refused_while_the_leader_is_heard_and_never_bumps_the_epoch(
        quorum: Quorum) -> None:
    leader, epoch = quorum.wait_leader()
    follower = next(n for n in quorum.voters if n.node_id != leader)
    prospective = next(n for n in quorum.voters if n.node_id not in (leader, follower.node_id))
    port = quorum.ports[follower.node_id]
    answer = _pre_vote(port, prospective.node_id, epoch + 1, 10**6, 10**9)
    # A follower fetching from its leader refuses, and tells who leads which epoch.
    assert (answer.error, answer.granted, answer.leader_id, answer.epoch) == \
        (0, False, leader, epoch)
    answer = _pre_vote(quorum.ports[leader], prospective.node_id, epoch + 1, 10**6, 10**9)
    assert (answer.error, answer.granted, answer.epoch) == (0, False, epoch)
    assert quorum.wait_leader() == (leader, epoch)
