"""The quorum's requests as a node sends them and the answers as it reads them.

Kafka's own message layouts (``sdk.protocol.messages``) on the metadata partition; the
serving side is ``server_ref.handlers.raft``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sdk.errors import FencedLeaderEpochError
from sdk.protocol.messages.begin_quorum_epoch import BeginQuorumEpochRequest
from sdk.protocol.messages.end_quorum_epoch import EndQuorumEpochRequest
from sdk.protocol.messages.fetch import FetchRequest, FetchResponse
from sdk.protocol.messages.fetch_snapshot import FetchSnapshotRequest, FetchSnapshotResponse
from sdk.protocol.messages.vote import VoteRequest, VoteResponse
from server_ref.raft.api import METADATA_PARTITION, METADATA_TOPIC, Endpoint
from server_ref.raft.snapshot import SnapshotId

# Kafka's fixed topic id of __cluster_metadata (Uuid.METADATA_TOPIC_ID: all zero but 1).
METADATA_TOPIC_ID = uuid.UUID(int=1)
VOTE_VERSION = 2  # v2 carries PreVote (KIP-996)
BEGIN_EPOCH_VERSION = 0
END_EPOCH_VERSION = 0
FETCH_VERSION = 17
FETCH_SNAPSHOT_VERSION = 0
FENCED_EPOCH = FencedLeaderEpochError.errno


@dataclass(frozen=True, slots=True)
class VoteAnswer:
    error: int
    leader_id: int | None
    epoch: int
    granted: bool


def vote_request(cluster_id: str | None, voter_id: int, candidate_id: int, epoch: int,
                 last_epoch: int, end_offset: int, *, pre_vote: bool = False) -> VoteRequest:
    part = VoteRequest.PartitionData(
        partition_index=METADATA_PARTITION, candidate_epoch=epoch, candidate_id=candidate_id,
        last_offset_epoch=last_epoch, last_offset=end_offset, pre_vote=pre_vote)
    return VoteRequest(cluster_id=cluster_id, voter_id=voter_id, topics=[
        VoteRequest.TopicData(topic_name=METADATA_TOPIC, partitions=[part])])


def read_vote_response(response: object) -> VoteAnswer:
    assert isinstance(response, VoteResponse)
    if response.error_code or not response.topics or not response.topics[0].partitions:
        return VoteAnswer(response.error_code or -1, None, -1, False)
    p = response.topics[0].partitions[0]
    return VoteAnswer(p.error_code, p.leader_id if p.leader_id >= 0 else None,
                      p.leader_epoch, bool(p.vote_granted))


def begin_epoch_request(cluster_id: str | None, voter_id: int, leader_id: int, epoch: int,
                        endpoint: Endpoint) -> BeginQuorumEpochRequest:
    part = BeginQuorumEpochRequest.PartitionData(
        partition_index=METADATA_PARTITION, leader_id=leader_id, leader_epoch=epoch)
    return BeginQuorumEpochRequest(
        cluster_id=cluster_id, voter_id=voter_id,
        topics=[BeginQuorumEpochRequest.TopicData(topic_name=METADATA_TOPIC,
                                                  partitions=[part])],
        leader_endpoints=[BeginQuorumEpochRequest.LeaderEndpoint(
            name="CONTROLLER", host=endpoint[0], port=endpoint[1])])


def read_epoch_response(response: object) -> tuple[int, int, int | None]:
    """``(error, epoch, leader)`` of a BeginQuorumEpoch/EndQuorumEpoch answer."""
    topics = getattr(response, "topics", None)
    top = getattr(response, "error_code", 0)
    if top or not topics or not topics[0].partitions:
        return top or -1, -1, None
    p = topics[0].partitions[0]
    return p.error_code, p.leader_epoch, p.leader_id if p.leader_id >= 0 else None


def end_epoch_request(cluster_id: str | None, leader_id: int, epoch: int,
                      successors: Sequence[int]) -> EndQuorumEpochRequest:
    part = EndQuorumEpochRequest.PartitionData(
        partition_index=METADATA_PARTITION, leader_id=leader_id, leader_epoch=epoch,
        preferred_successors=list(successors))
    return EndQuorumEpochRequest(cluster_id=cluster_id, topics=[
        EndQuorumEpochRequest.TopicData(topic_name=METADATA_TOPIC, partitions=[part])])


def fetch_request(cluster_id: str | None, replica_id: int, epoch: int, fetch_offset: int,
                  last_fetched_epoch: int, log_start_offset: int, max_wait_ms: int,
                  max_bytes: int) -> FetchRequest:
    part = FetchRequest.FetchPartition(
        partition=METADATA_PARTITION, current_leader_epoch=epoch, fetch_offset=fetch_offset,
        last_fetched_epoch=last_fetched_epoch, log_start_offset=log_start_offset,
        partition_max_bytes=max_bytes)
    return FetchRequest(
        cluster_id=cluster_id,  # v15+: the replica id travels in ReplicaState
        replica_state=FetchRequest.ReplicaState(replica_id=replica_id, replica_epoch=-1),
        max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
        topics=[FetchRequest.FetchTopic(topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID,
                                        partitions=[part])])


def read_fetch_response(response: object) -> FetchResponse.PartitionData | None:
    assert isinstance(response, FetchResponse)
    if response.error_code or not response.responses or \
            not response.responses[0].partitions:
        return None
    return response.responses[0].partitions[0]


def fetch_snapshot_request(cluster_id: str | None, replica_id: int, epoch: int,
                           sid: SnapshotId, position: int, max_bytes: int
                           ) -> FetchSnapshotRequest:
    part = FetchSnapshotRequest.PartitionSnapshot(
        partition=METADATA_PARTITION, current_leader_epoch=epoch,
        snapshot_id=FetchSnapshotRequest.SnapshotId(end_offset=sid.end_offset,
                                                    epoch=sid.epoch),
        position=position)
    return FetchSnapshotRequest(cluster_id=cluster_id, replica_id=replica_id,
                                max_bytes=max_bytes, topics=[
                                    FetchSnapshotRequest.TopicSnapshot(
                                        name=METADATA_TOPIC, partitions=[part])])


def read_fetch_snapshot_response(response: object
                                 ) -> FetchSnapshotResponse.PartitionSnapshot | None:
    assert isinstance(response, FetchSnapshotResponse)
    if response.error_code or not response.topics or not response.topics[0].partitions:
        return None
    return response.topics[0].partitions[0]

