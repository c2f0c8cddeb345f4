"""ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments on one node.

This broker is the only replica of every partition, and so its leader, its preferred
replica and its whole ISR: no election is ever needed and no replica can move. The answers
are the ones a single-node Apache Kafka (KRaft) gives, messages included:

* ElectLeaders: ELECTION_NOT_NEEDED for every existing partition, preferred or unclean
  (a partition with a leader needs no unclean election); UNKNOWN_TOPIC_OR_PARTITION for the
  others. Asked for every partition (null), Kafka lists each topic with no partition
  results, since it leaves out the elections that were not needed. An unknown election type
  is INVALID_REQUEST, at the top and for each partition.
* AlterPartitionReassignments: replicas equal to ``[this node]`` are accepted and change
  nothing; any other broker id is INVALID_REPLICA_ASSIGNMENT ("no such broker is
  registered"), as are an empty list and a repeated id; cancelling finds no reassignment in
  progress (NO_REASSIGNMENT_IN_PROGRESS, no message).
* ListPartitionReassignments: nothing is ever being reassigned.
"""

from __future__ import annotations

from typing import Any

from sdk.errors import (
    ElectionNotNeededError,
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)
from sdk.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from sdk.protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from sdk.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from server_ref.handlers import RequestContext, handles

_ELECTION_TYPES = (0, 1)  # preferred, unclean
_NOT_NEEDED = "Leader election not needed for topic partition."  # Kafka's exact words

PartitionResult = ElectLeadersResponse.PartitionResult
Reassigned = AlterPartitionReassignmentsResponse.ReassignablePartitionResponse


def _election(ctx: RequestContext, topic: str, index: int) -> PartitionResult:
    known = ctx.broker.topics.get(topic)
    if known is None:
        return PartitionResult(partition_id=index, error_code=UnknownTopicOrPartitionError.errno,
                               error_message=f"No such topic as {topic}")
    if not 0 <= index < len(known.partitions):
        return PartitionResult(partition_id=index, error_code=UnknownTopicOrPartitionError.errno,
                               error_message=f"No such partition as {topic}-{index}")
    return PartitionResult(partition_id=index, error_code=ElectionNotNeededError.errno,
                           error_message=_NOT_NEEDED)


@handles(43, 0, 2)
def elect_leaders(ctx: RequestContext, req: ElectLeadersRequest) -> Any:
    if ctx.broker.cluster is not None:  # the active controller elects
        from server_ref.cluster import forwarding

        return forwarding.elect_leaders(ctx, req)
    results = []
    if req.topic_partitions is None:
        # Every partition: all "not needed", and Kafka leaves those out of the answer.
        return ElectLeadersResponse(replica_election_results=[
            ElectLeadersResponse.ReplicaElectionResult(topic=t.name, partition_result=[])
            for t in ctx.broker.topics])
    bad_type = req.election_type not in _ELECTION_TYPES
    for t in req.topic_partitions:
        if bad_type:
            parts = [PartitionResult(partition_id=p, error_code=InvalidRequestError.errno,
                                     error_message=f"Unknown election type "
                                                   f"{req.election_type}")
                     for p in t.partitions]
        else:
            parts = [_election(ctx, t.topic, p) for p in t.partitions]
        results.append(ElectLeadersResponse.ReplicaElectionResult(topic=t.topic,
                                                                  partition_result=parts))
    return ElectLeadersResponse(error_code=InvalidRequestError.errno if bad_type else 0,
                                replica_election_results=results)


def _reassignment(ctx: RequestContext, topic: str,
                  p: AlterPartitionReassignmentsRequest.ReassignablePartition) -> Reassigned:
    out = Reassigned(partition_index=p.partition_index, error_message=None)
    known = ctx.broker.topics.get(topic)
    if known is None:
        out.error_code = UnknownTopicOrPartitionError.errno
        out.error_message = f"Unable to find a topic named {topic}."
    elif not 0 <= p.partition_index < len(known.partitions):
        out.error_code = UnknownTopicOrPartitionError.errno
        out.error_message = f"Unable to find partition {topic}:{p.partition_index}."
    elif p.replicas is None:
        out.error_code = NoReassignmentInProgressError.errno  # Kafka sends no message here
    else:
        problem = _assignment_problem(ctx.broker.node_id, p.replicas)
        if problem is not None:
            out.error_code = InvalidReplicaAssignmentError.errno
            out.error_message = problem
    return out


def _assignment_problem(node_id: int, replicas: list[int]) -> str | None:
    """Kafka's checks of a manual assignment, in its order (broker ids sorted)."""
    if not replicas:
        return "The manual partition assignment includes an empty replica list."
    previous = None
    for broker_id in sorted(replicas):
        if broker_id != node_id:
            return (f"The manual partition assignment includes broker {broker_id}, but no "
                    "such broker is registered.")
        if broker_id == previous:
            return (f"The manual partition assignment includes the broker {broker_id} more "
                    "than once.")
        previous = broker_id
    return None  # [this node]: the current assignment, nothing to move


@handles(45, 0, 0)
def alter_partition_reassignments(ctx: RequestContext, req: AlterPartitionReassignmentsRequest
                                  ) -> Any:
    if ctx.broker.cluster is not None:  # the active controller moves replicas
        from server_ref.cluster import forwarding

        return forwarding.alter_partition_reassignments(ctx, req)
    return AlterPartitionReassignmentsResponse(error_message=None, responses=[
        AlterPartitionReassignmentsResponse.ReassignableTopicResponse(
            name=t.name, partitions=[_reassignment(ctx, t.name, p) for p in t.partitions])
        for t in req.topics])


@handles(46, 0, 0)
def list_partition_reassignments(ctx: RequestContext, req: ListPartitionReassignmentsRequest
                                 ) -> Any:
    if ctx.broker.cluster is not None:
        from server_ref.cluster import forwarding

        return forwarding.list_partition_reassignments(ctx, req)
    del ctx, req  # a single node never moves a replica
    return ListPartitionReassignmentsResponse(error_message=None, topics=[])
