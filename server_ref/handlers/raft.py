"""The quorum's APIs on a voter's controller listener: Vote, BeginQuorumEpoch,
EndQuorumEpoch, Fetch and FetchSnapshot of ``__cluster_metadata``, DescribeQuorum, and
DescribeCluster for clients bootstrapped with ``--bootstrap-controller``.

These are not ``@handles`` registrations: Kafka serves them on the controller listener, not
on a broker's, so :func:`register_raft_apis` puts them on a ``ControllerServer``. Each
handler checks the partition and cluster id, calls the node, and encodes its answer. The
broker imports every handler module at start, so the message modules load inside the
handlers: a single-node broker does not pay ~27 ms of imports for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sdk.errors import (
    InconsistentClusterIdError,
    InconsistentVoterSetError,
    InvalidRequestError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
)

if TYPE_CHECKING:
    from sdk.protocol.messages.begin_quorum_epoch import (
        BeginQuorumEpochRequest,
        BeginQuorumEpochResponse,
    )
    from sdk.protocol.messages.describe_cluster import (
        DescribeClusterRequest,
        DescribeClusterResponse,
    )
    from sdk.protocol.messages.describe_quorum import (
        DescribeQuorumRequest,
        DescribeQuorumResponse,
    )
    from sdk.protocol.messages.end_quorum_epoch import (
        EndQuorumEpochRequest,
        EndQuorumEpochResponse,
    )
    from sdk.protocol.messages.fetch import FetchRequest, FetchResponse
    from sdk.protocol.messages.fetch_snapshot import FetchSnapshotRequest, FetchSnapshotResponse
    from sdk.protocol.messages.vote import VoteRequest, VoteResponse
    from server_ref.raft.node import RaftNode
    from server_ref.raft.server import ControllerServer

CONTROLLER_ENDPOINT = 2  # DescribeCluster's EndpointType for controllers (KIP-919)


def register_raft_apis(server: ControllerServer, node: RaftNode) -> None:
    server.register(52, 0, 2, lambda req, v: vote(node, req))
    server.register(53, 0, 1, lambda req, v: begin_quorum_epoch(node, req))
    server.register(54, 0, 1, lambda req, v: end_quorum_epoch(node, req))
    server.register(1, 12, 17, lambda req, v: fetch(node, req, v))
    server.register(59, 0, 1, lambda req, v: fetch_snapshot(node, req))
    server.register(55, 0, 2, lambda req, v: describe_quorum(node, req))
    server.register(60, 0, 2, lambda req, v: describe_cluster(node, req))


def _metadata_partition(topics: Any, name_attr: str, parts_attr: str) -> Any | None:
    """The single ``__cluster_metadata``-0 entry of a request, or None."""
    from server_ref.raft.api import METADATA_PARTITION, METADATA_TOPIC
    from server_ref.raft.wire import METADATA_TOPIC_ID

    if not topics or len(topics) != 1:
        return None
    topic = topics[0]
    name = getattr(topic, name_attr)
    if name != METADATA_TOPIC and getattr(topic, "topic_id", None) != METADATA_TOPIC_ID:
        return None
    parts = getattr(topic, parts_attr)
    if not parts or len(parts) != 1:
        return None
    index = getattr(parts[0], "partition_index", getattr(parts[0], "partition", None))
    return parts[0] if index == METADATA_PARTITION else None


def _cluster_mismatch(node: RaftNode, cluster_id: str | None) -> bool:
    mine = node.config.cluster_id
    return cluster_id is not None and mine is not None and cluster_id != mine


def _leader(node: RaftNode) -> tuple[int, int]:
    leader = node.leader()
    return (-1 if leader.leader_id is None else leader.leader_id), leader.epoch


# ------------------------------------------------------------------------ elections


def vote(node: RaftNode, req: VoteRequest) -> VoteResponse:
    from sdk.protocol.messages.vote import VoteResponse
    from server_ref.raft.api import METADATA_TOPIC

    if _cluster_mismatch(node, req.cluster_id):
        return VoteResponse(error_code=InconsistentClusterIdError.errno)
    part = _metadata_partition(req.topics, "topic_name", "partitions")
    if part is None:
        return VoteResponse(error_code=InvalidRequestError.errno)
    if req.voter_id >= 0 and req.voter_id != node.node_id:
        error, granted = InconsistentVoterSetError.errno, False  # meant for another voter
    elif part.pre_vote:  # KIP-996: would it vote? (nothing changes at the voter)
        error, granted = node.handle_pre_vote(part.candidate_id, part.candidate_epoch,
                                              part.last_offset_epoch, part.last_offset)
    else:
        error, granted = node.handle_vote(part.candidate_id, part.candidate_epoch,
                                          part.last_offset_epoch, part.last_offset)
    leader_id, epoch = _leader(node)
    return VoteResponse(topics=[VoteResponse.TopicData(topic_name=METADATA_TOPIC, partitions=[
        VoteResponse.PartitionData(partition_index=0, error_code=error, leader_id=leader_id,
                                   leader_epoch=epoch, vote_granted=granted)])])


def begin_quorum_epoch(node: RaftNode, req: BeginQuorumEpochRequest
                       ) -> BeginQuorumEpochResponse:
    from sdk.protocol.messages.begin_quorum_epoch import BeginQuorumEpochResponse
    from server_ref.raft.api import METADATA_TOPIC

    if _cluster_mismatch(node, req.cluster_id):
        return BeginQuorumEpochResponse(error_code=InconsistentClusterIdError.errno)
    part = _metadata_partition(req.topics, "topic_name", "partitions")
    if part is None:
        return BeginQuorumEpochResponse(error_code=InvalidRequestError.errno)
    error = node.handle_begin_epoch(part.leader_id, part.leader_epoch)
    leader_id, epoch = _leader(node)
    P = BeginQuorumEpochResponse.PartitionData
    return BeginQuorumEpochResponse(topics=[BeginQuorumEpochResponse.TopicData(
        topic_name=METADATA_TOPIC, partitions=[P(partition_index=0, error_code=error,
                                                 leader_id=leader_id, leader_epoch=epoch)])])


def end_quorum_epoch(node: RaftNode, req: EndQuorumEpochRequest) -> EndQuorumEpochResponse:
    from sdk.protocol.messages.end_quorum_epoch import EndQuorumEpochResponse
    from server_ref.raft.api import METADATA_TOPIC

    if _cluster_mismatch(node, req.cluster_id):
        return EndQuorumEpochResponse(error_code=InconsistentClusterIdError.errno)
    part = _metadata_partition(req.topics, "topic_name", "partitions")
    if part is None:
        return EndQuorumEpochResponse(error_code=InvalidRequestError.errno)
    successors = list(part.preferred_successors or []) or \
        [c.candidate_id for c in part.preferred_candidates or []]
    error = node.handle_end_epoch(part.leader_id, part.leader_epoch, successors)
    leader_id, epoch = _leader(node)
    P = EndQuorumEpochResponse.PartitionData
    return EndQuorumEpochResponse(topics=[EndQuorumEpochResponse.TopicData(
        topic_name=METADATA_TOPIC, partitions=[P(partition_index=0, error_code=error,
                                                 leader_id=leader_id, leader_epoch=epoch)])])


# ------------------------------------------------------------------------ replication


async def fetch(node: RaftNode, req: FetchRequest, version: int) -> FetchResponse:
    from sdk.protocol.messages.fetch import FetchResponse
    from server_ref.raft.api import METADATA_TOPIC

    if _cluster_mismatch(node, req.cluster_id):
        return FetchResponse(error_code=InconsistentClusterIdError.errno)
    part = _metadata_partition(req.topics, "topic", "partitions")
    topic = req.topics[0] if req.topics else None
    if part is None or topic is None:
        # Only the metadata partition lives here; anything else is not ours to serve.
        return FetchResponse(error_code=UnknownTopicOrPartitionError.errno)
    replica_id = req.replica_state.replica_id if version >= 15 else req.replica_id
    answer = await node.serve_fetch(replica_id, part.current_leader_epoch, part.fetch_offset,
                                    part.last_fetched_epoch, req.max_wait_ms,
                                    min(req.max_bytes, part.partition_max_bytes or req.max_bytes))
    leader_id, epoch = _leader(node)
    out = FetchResponse.PartitionData(
        partition_index=0, error_code=answer.error, high_watermark=answer.high_watermark,
        last_stable_offset=answer.high_watermark, log_start_offset=answer.log_start_offset,
        records=answer.records or None)
    out.current_leader = FetchResponse.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=epoch)
    if answer.diverging is not None:
        out.diverging_epoch = FetchResponse.EpochEndOffset(epoch=answer.diverging.epoch,
                                                           end_offset=answer.diverging.offset)
    if answer.snapshot is not None:
        out.snapshot_id = FetchResponse.SnapshotId(end_offset=answer.snapshot.end_offset,
                                                   epoch=answer.snapshot.epoch)
    return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        topic=METADATA_TOPIC if version < 13 else "", topic_id=topic.topic_id,
        partitions=[out])])


def fetch_snapshot(node: RaftNode, req: FetchSnapshotRequest) -> FetchSnapshotResponse:
    from sdk.protocol.messages.fetch_snapshot import FetchSnapshotResponse
    from server_ref.raft.api import METADATA_TOPIC
    from server_ref.raft.snapshot import SnapshotId

    if _cluster_mismatch(node, req.cluster_id):
        return FetchSnapshotResponse(error_code=InconsistentClusterIdError.errno)
    part = _metadata_partition(req.topics, "name", "partitions")
    if part is None:
        return FetchSnapshotResponse(error_code=UnknownTopicOrPartitionError.errno)
    sid = SnapshotId(part.snapshot_id.end_offset, part.snapshot_id.epoch)
    error, size, data = node.serve_fetch_snapshot(part.current_leader_epoch, sid,
                                                  part.position, req.max_bytes)
    leader_id, epoch = _leader(node)
    R = FetchSnapshotResponse
    return R(topics=[R.TopicSnapshot(name=METADATA_TOPIC, partitions=[R.PartitionSnapshot(
        index=0, error_code=error,
        snapshot_id=R.SnapshotId(end_offset=sid.end_offset, epoch=sid.epoch),
        current_leader=R.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=epoch),
        size=size, position=part.position, unaligned_records=data)])])


# ------------------------------------------------------------------------ describing


def describe_quorum(node: RaftNode, req: DescribeQuorumRequest) -> DescribeQuorumResponse:
    from sdk.protocol.messages.describe_quorum import DescribeQuorumResponse
    from server_ref.raft.api import METADATA_TOPIC

    R = DescribeQuorumResponse
    part = _metadata_partition(req.topics, "topic_name", "partitions")
    if part is None:
        return R(error_code=InvalidRequestError.errno,
                 error_message="only __cluster_metadata-0 has a quorum")
    info = node.describe_quorum()
    if node.leader().leader_id != node.node_id:  # DescribeQuorum: the leader answers
        out = R.PartitionData(partition_index=0, error_code=NotLeaderOrFollowerError.errno,
                              leader_id=_leader(node)[0], leader_epoch=info.epoch)
    else:
        def states(replicas: Any) -> list[Any]:
            return [R.ReplicaState(replica_id=r.replica_id, log_end_offset=r.log_end_offset,
                                   last_fetch_timestamp=r.last_fetch_timestamp,
                                   last_caught_up_timestamp=r.last_caught_up_timestamp)
                    for r in replicas]
        out = R.PartitionData(partition_index=0, leader_id=_leader(node)[0],
                              leader_epoch=info.epoch, high_watermark=info.high_watermark,
                              current_voters=states(info.voters),
                              observers=states(info.observers))
    nodes = [R.Node(node_id=v, listeners=[R.Listener(name="CONTROLLER", host=h, port=p)])
             for v, (h, p) in sorted(node.voters.items())]
    return R(topics=[R.TopicData(topic_name=METADATA_TOPIC, partitions=[out])], nodes=nodes)


def describe_cluster(node: RaftNode, req: DescribeClusterRequest) -> DescribeClusterResponse:
    """KIP-919: a client bootstrapped from controllers sees the voters as its nodes and the
    quorum leader as the controller."""
    from sdk.protocol.messages.describe_cluster import DescribeClusterResponse

    R = DescribeClusterResponse
    if req.endpoint_type != CONTROLLER_ENDPOINT:
        from sdk.errors import MismatchedEndpointTypeError

        return R(error_code=MismatchedEndpointTypeError.errno,
                 error_message="this is a controller listener: use --bootstrap-controller",
                 endpoint_type=req.endpoint_type)
    leader_id, _epoch = _leader(node)
    return R(endpoint_type=CONTROLLER_ENDPOINT, cluster_id=node.config.cluster_id or "",
             controller_id=leader_id,
             brokers=[R.DescribeClusterBroker(broker_id=v, host=h, port=p)
                      for v, (h, p) in sorted(node.voters.items())])
