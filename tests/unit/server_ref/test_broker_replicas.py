"""ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments on one node: every
version on the wire, and the error answers the control surface and unsupported versions
build (the answers themselves are compared with Apache Kafka in
tests/integration/test_admin_partitions.py)."""

from __future__ import annotations

from broker_kit import Served

from sdk import errors
from sdk.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
)
from sdk.protocol.messages.create_topics import CreateTopicsRequest
from sdk.protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from sdk.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
)
from server_ref.handlers.unsupported import error_response

TOPIC = "moves"


async def _with_topic(served: Served) -> None:
    client = await served.client()
    response = await client.call(CreateTopicsRequest(timeout_ms=1000, topics=[
        CreateTopicsRequest.CreatableTopic(name=TOPIC, num_partitions=2, replication_factor=1)]))
    assert response.topics[0].error_code == 0


def _codes(response: ElectLeadersResponse) -> dict[tuple[str, int], int]:
    return {(t.topic, p.partition_id): p.error_code
            for t in response.replica_election_results for p in t.partition_result}


async def test_elect_leaders_every_version(served: Served) -> None:
    await _with_topic(served)
    client = await served.client()
    asked = [ElectLeadersRequest.TopicPartitions(topic=TOPIC, partitions=[1, 4]),
             ElectLeadersRequest.TopicPartitions(topic="absent", partitions=[0])]
    for version in (0, 1, 2):
        for kind in ((0,) if version == 0 else (0, 1)):
            response = await client.call(ElectLeadersRequest(election_type=kind,
                                                             topic_partitions=asked), version)
            assert response.error_code == 0
            assert _codes(response) == {
                (TOPIC, 1): errors.ElectionNotNeededError.errno,
                (TOPIC, 4): errors.UnknownTopicOrPartitionError.errno,
                ("absent", 0): errors.UnknownTopicOrPartitionError.errno}
        everything = await client.call(ElectLeadersRequest(topic_partitions=None), version)
        topics = {t.topic: t.partition_result for t in everything.replica_election_results}
        assert topics[TOPIC] == []  # not-needed elections are left out, the topic is listed


async def test_elect_leaders_unknown_type(served: Served) -> None:
    await _with_topic(served)
    client = await served.client()
    response = await client.call(ElectLeadersRequest(election_type=7, topic_partitions=[
        ElectLeadersRequest.TopicPartitions(topic=TOPIC, partitions=[0])]), 2)
    assert response.error_code == errors.InvalidRequestError.errno
    (result,) = response.replica_election_results[0].partition_result
    assert result.error_code == errors.InvalidRequestError.errno
    assert result.error_message == "Unknown election type 7"


async def test_reassignments(served: Served) -> None:
    await _with_topic(served)
    client = await served.client()
    node = served.b.node_id
    Partition = AlterPartitionReassignmentsRequest.ReassignablePartition
    response = await client.call(AlterPartitionReassignmentsRequest(topics=[
        AlterPartitionReassignmentsRequest.ReassignableTopic(name=TOPIC, partitions=[
            Partition(partition_index=0, replicas=[node]),
            Partition(partition_index=1, replicas=[node + 1, node]),
            Partition(partition_index=0, replicas=None),
            Partition(partition_index=7, replicas=[node])])]), 0)
    assert response.error_code == 0 and response.error_message is None
    results = [(p.partition_index, p.error_code, p.error_message)
               for p in response.responses[0].partitions]
    assert results == [
        (0, 0, None),
        (1, errors.InvalidReplicaAssignmentError.errno,
         f"The manual partition assignment includes broker {node + 1}, but no such broker "
         "is registered."),
        (0, errors.NoReassignmentInProgressError.errno, None),
        (7, errors.UnknownTopicOrPartitionError.errno, f"Unable to find partition {TOPIC}:7."),
    ]
    listed = await client.call(ListPartitionReassignmentsRequest(topics=None), 0)
    assert listed.error_code == 0 and listed.topics == [] and listed.error_message is None


def test_error_responses_name_every_partition() -> None:
    elect = ElectLeadersRequest(topic_partitions=[
        ElectLeadersRequest.TopicPartitions(topic="t", partitions=[0, 1])])
    answer = error_response(43, 2, elect, errors.NotControllerError.errno, "moved")
    assert answer.error_code == errors.NotControllerError.errno
    assert _codes(answer) == {("t", 0): errors.NotControllerError.errno,
                              ("t", 1): errors.NotControllerError.errno}
    alter = AlterPartitionReassignmentsRequest(topics=[
        AlterPartitionReassignmentsRequest.ReassignableTopic(name="t", partitions=[
            AlterPartitionReassignmentsRequest.ReassignablePartition(partition_index=3)])])
    answer = error_response(45, 0, alter, errors.NotControllerError.errno, "moved")
    assert answer.error_code == errors.NotControllerError.errno
    assert answer.error_message == "moved"
    (part,) = answer.responses[0].partitions
    assert (part.partition_index, part.error_code) == (3, errors.NotControllerError.errno)
    listed = error_response(46, 0, ListPartitionReassignmentsRequest(),
                            errors.NotControllerError.errno, "moved")
    assert listed.error_code == errors.NotControllerError.errno
