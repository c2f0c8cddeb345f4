"""RaftNode in one event loop over loopback TCP: a single voter, three voters and an
observer, restart replay, errors a caller sees, the wire answers of DescribeQuorum."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sdk.errors import NotControllerError
from sdk.protocol.messages.describe_quorum import DescribeQuorumRequest
from server_ref.cluster.processes import free_port
from server_ref.handlers.raft import describe_quorum
from server_ref.raft.api import CommittedBatch, LeaderAndEpoch, RaftConfig, parse_voters
from server_ref.raft.node import RaftNode
from server_ref.raft.state import Role

FAST = RaftConfig(election_timeout_ms=200, fetch_timeout_ms=500, fetch_max_wait_ms=100)


def ports(n: int) -> list[int]:
    return [free_port() for _ in range(n)]


class Recorder:
    def __init__(self, node: RaftNode) -> None:
        self.values: list[bytes] = []
        self.offsets: list[int] = []
        self.leaders: list[LeaderAndEpoch] = []
        node.register_listener(self.commit, self.snapshot, self.leaders.append)

    def commit(self, batch: CommittedBatch) -> None:
        self.values += batch.records
        self.offsets.append(batch.last_offset)

    def snapshot(self, payload: bytes, last_offset: int) -> None:
        self.values = payload.split(b",") if payload else []
        self.offsets = [last_offset]


async def until(cond, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def test_single_voter_leads_commits_and_replays_after_restart(tmp_path: Path) -> None:
    voters = {1: ("127.0.0.1", ports(1)[0])}
    node = RaftNode(1, voters, tmp_path, FAST)
    rec = Recorder(node)
    await node.start()
    assert node.is_leader and node.leader() == LeaderAndEpoch(1, 1)
    first = await node.append([b"a", b"b"])
    second = await node.append([b"c"])
    assert (first, second) == (2, 3)  # offset 0 is the LeaderChange control record
    assert rec.values == [b"a", b"b", b"c"]
    await node.close()

    again = RaftNode(1, voters, tmp_path, FAST)
    events: list[object] = []
    again.register_listener(lambda b: events.extend(b.records), None, events.append)
    rec2 = Recorder(again)
    await again.start()
    # A new epoch; the old entries were replayed once, in order, before new ones — and the
    # node announces itself as leader only after that replay (the controller's cue).
    assert again.leader() == LeaderAndEpoch(1, 2) and again.is_leader
    assert events == [b"a", b"b", b"c", LeaderAndEpoch(1, 2)]
    await again.append([b"d"])
    assert rec2.values == [b"a", b"b", b"c", b"d"]
    await again.close()


async def test_three_voters_and_an_observer_agree(tmp_path: Path) -> None:
    voters = {i: ("127.0.0.1", p) for i, p in zip((1, 2, 3), ports(3), strict=True)}
    nodes = {i: RaftNode(i, voters, tmp_path / str(i), FAST) for i in (1, 2, 3, 50)}
    recs = {i: Recorder(n) for i, n in nodes.items()}
    for n in nodes.values():
        await n.start()
    try:
        leader = await nodes[50].wait_for_leader(10)
        assert leader.leader_id in voters
        lead = nodes[leader.leader_id]  # type: ignore[index]
        for k in range(5):
            await lead.append([f"v{k}".encode()])
        want = [f"v{k}".encode() for k in range(5)]
        await until(lambda: all(r.values == want for r in recs.values()))
        follower = next(n for i, n in nodes.items() if i in voters and not n.is_leader)
        with pytest.raises(NotControllerError) as info:
            await follower.append([b"x"])
        assert info.value.leader == leader  # type: ignore[attr-defined]
        assert nodes[50].role is Role.FOLLOWER and not nodes[50].is_voter
        with pytest.raises(TypeError, match="bytes"):
            await lead.append(["not bytes"])  # type: ignore[list-item]

        # DescribeQuorum as Kafka lays it out: voters, the observer, the HW.
        request = DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
            topic_name="__cluster_metadata",
            partitions=[DescribeQuorumRequest.PartitionData(partition_index=0)])])
        answer = describe_quorum(lead, request)
        part = answer.topics[0].partitions[0]
        assert (part.error_code, part.leader_id, part.high_watermark) == (
            0, leader.leader_id, lead.high_watermark)
        assert sorted(v.replica_id for v in part.current_voters) == [1, 2, 3]
        assert [o.replica_id for o in part.observers] == [50]
        assert describe_quorum(follower, request).topics[0].partitions[0].error_code == 6
        # Snapshot on the leader: the log before it is gone, the state is kept.
        last = lead.high_watermark - 1
        sid = lead.snapshot(last, b",".join(want))
        assert lead.log.start_offset == sid.end_offset == last + 1
        with pytest.raises(ValueError, match="not applied"):
            lead.snapshot(last + 10, b"")
    finally:
        for n in nodes.values():
            await n.close()


def test_constructor_and_voters_errors(tmp_path: Path) -> None:
    assert parse_voters(" 1@h:1, 2@[::1]:2") == {1: ("h", 1), 2: ("::1", 2)}
    for bad in ("", "1@h", "x@h:1", "1@h:1,1@h:2", "1h:1"):
        with pytest.raises(ValueError):
            parse_voters(bad)
    with pytest.raises(ValueError, match="is_voter"):
        RaftNode(7, {1: ("h", 1)}, tmp_path, is_voter=True)
    with pytest.raises(ValueError, match="node id"):
        RaftNode(-1, {1: ("h", 1)}, tmp_path)


async def test_listener_snapshots_from_inside_on_commit(tmp_path: Path) -> None:
    """The controller snapshots every N records from its on_commit callback."""
    voters = {1: ("127.0.0.1", ports(1)[0])}
    node = RaftNode(1, voters, tmp_path, FAST)
    state: list[bytes] = []

    def on_commit(batch: CommittedBatch) -> None:
        state.extend(batch.records)
        if len(state) % 2 == 0:
            node.snapshot(batch.last_offset, b",".join(state))

    node.register_listener(on_commit)
    await node.start()
    for k in range(5):
        await node.append([f"s{k}".encode()])
    assert state == [f"s{k}".encode() for k in range(5)]
    snapshot = node.snapshots.latest()
    assert snapshot is not None and node.log.start_offset == snapshot.end_offset
    await node.close()

    again = RaftNode(1, voters, tmp_path, FAST)
    rec = Recorder(again)
    await again.start()
    await again.append([b"s5"])
    # The snapshot (s0..s3), then the log after it (s4), then the new entry.
    assert rec.values == [f"s{k}".encode() for k in range(6)]
    await again.close()


def test_config_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="election_timeout_ms must be > 0"):
        RaftConfig(election_timeout_ms=0)
    with pytest.raises(ValueError, match="fetch_max_wait_ms must be >= 0"):
        RaftConfig(fetch_max_wait_ms=-1)
    assert RaftConfig(fetch_timeout_ms=400, fetch_max_wait_ms=500).fetch_wait_ms == 200


async def test_requests_for_another_cluster_or_partition_are_refused(tmp_path: Path) -> None:
    from sdk.errors import (
        InconsistentClusterIdError,
        MismatchedEndpointTypeError,
        UnknownTopicOrPartitionError,
    )
    from sdk.protocol.messages.describe_cluster import DescribeClusterRequest
    from sdk.protocol.messages.fetch import FetchRequest
    from server_ref.handlers.raft import describe_cluster, fetch, vote
    from server_ref.raft import wire

    voters = {1: ("127.0.0.1", ports(1)[0])}
    node = RaftNode(1, voters, tmp_path, RaftConfig(cluster_id="mine", election_timeout_ms=200,
                                                    fetch_timeout_ms=500,
                                                    fetch_max_wait_ms=100))
    await node.start()
    try:
        answer = vote(node, wire.vote_request("other", 1, 2, 9, 0, 0))
        assert answer.error_code == InconsistentClusterIdError.errno
        assert node.leader().epoch == 1  # nothing adopted from it
        wrong_topic = FetchRequest(replica_state=FetchRequest.ReplicaState(replica_id=2),
                                   topics=[FetchRequest.FetchTopic(topic="orders", partitions=[
                                       FetchRequest.FetchPartition(partition=0)])])
        assert (await fetch(node, wrong_topic, 12)).error_code == \
            UnknownTopicOrPartitionError.errno
        as_broker = describe_cluster(node, DescribeClusterRequest(endpoint_type=1))
        assert as_broker.error_code == MismatchedEndpointTypeError.errno
        as_controller = describe_cluster(node, DescribeClusterRequest(endpoint_type=2))
        assert (as_controller.cluster_id, as_controller.controller_id,
                [b.broker_id for b in as_controller.brokers]) == ("mine", 1, [1])
    finally:
        await node.close()
