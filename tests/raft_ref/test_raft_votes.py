"""A voter process never votes twice in one epoch, even across SIGKILL, and fences
candidates of a stale epoch (Kafka's Vote rules; the log comparison is unit-tested)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from raft_ref.procs import NodeProc, free_ports
from sdk.errors import FencedLeaderEpochError
from server_ref.raft import wire
from server_ref.raft.client import PeerClient


def ask(port: int, candidate: int, epoch: int, last_epoch: int = 0,
        end_offset: int = 0) -> wire.VoteAnswer:
    async def call() -> wire.VoteAnswer:
        client = PeerClient("127.0.0.1", port, f"test-candidate-{candidate}")
        try:
            request = wire.vote_request("raft-test-cluster", 1, candidate, epoch, last_epoch,
                                        end_offset)
            return wire.read_vote_response(await client.call(request, wire.VOTE_VERSION, 10))
        finally:
            await client.close()
    return asyncio.run(call())


def test_restarted_voter_does_not_vote_twice_in_one_epoch(tmp_path: Path) -> None:
    ports = free_ports(3)
    spec = ",".join(f"{i}@127.0.0.1:{p}" for i, p in zip((1, 2, 3), ports, strict=True))
    # Only voter 1 runs; the test speaks as candidates 2 and 3. A long election timeout keeps
    # node 1 from standing itself while the test votes.
    (tmp_path / "n1").mkdir()
    node = NodeProc(1, spec, tmp_path / "n1",
                    ["--election-timeout-ms", "60000", "--cluster-id", "raft-test-cluster"])
    node.start()
    try:
        granted = ask(ports[0], candidate=2, epoch=5)
        assert (granted.error, granted.epoch, granted.granted) == (0, 5, True)
        node.kill()
        node.start()  # same data dir: the quorum-state file remembers the vote
        other = ask(ports[0], candidate=3, epoch=5)
        assert (other.error, other.epoch, other.granted) == (0, 5, False)
        again = ask(ports[0], candidate=2, epoch=5)  # a retried request: same answer
        assert again.granted is True
        stale = ask(ports[0], candidate=3, epoch=4)
        assert (stale.error, stale.epoch, stale.granted) == (FencedLeaderEpochError.errno, 5,
                                                             False)
        # A new epoch frees the vote.
        assert ask(ports[0], candidate=3, epoch=6).granted is True
    finally:
        node.stop()
