"""Leader elections and partition reassignments on one broker: ours, tansu and a single-node
Apache Kafka. With one node every partition already has its only replica as leader, so the
answers are refusals, and they must be Kafka's, messages included (the reference broker's
were checked against Apache Kafka 4.3.1 request by request).

What tansu 0.6 lacks, and what the tests assert there instead:

* ElectLeaders (API 43) and AlterPartitionReassignments (API 45) are not offered: each
  partition carries UnsupportedVersionError (the whole call raises it when asked for every
  partition).
* ListPartitionReassignments (API 46) lists every partition of the topics asked about (all
  topics when asked about none) with its replicas and nothing being added or removed. That
  is no reassignment in Kafka's terms (a move adds or removes a replica), so the client
  leaves such entries out and the call answers {} as on the other brokers; the raw answer
  is checked in test_list_reassignments_raw_answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from sdk import AdminClient, AsyncAdminClient, ElectionType, NewTopic, TopicPartition
from sdk.errors import (
    ElectionNotNeededError,
    InvalidReplicaAssignmentError,
    NoReassignmentInProgressError,
    NotControllerError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from sdk.net.client import CONTROLLER, NetClient
from sdk.net.config import CommonConfig
from sdk.protocol.messages import ApiKey
from sdk.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
)
from server_ref import EmbeddedBroker

from .conftest import Target, create_topic, new_topic

NO_PARTITION = 9


@pytest.fixture
async def admin(broker: Target) -> AsyncIterator[AsyncAdminClient]:
    async with AsyncAdminClient(bootstrap_servers=broker.bootstrap_servers,
                                default_api_timeout_ms=30_000) as client:
        yield client


async def _topic(admin: AsyncAdminClient, prefix: str) -> str:
    name = new_topic(prefix)
    (await admin.create_topics([NewTopic(name, 2, 1)])).raise_if_failed()
    return name


async def _node_id(admin: AsyncAdminClient) -> int:
    cluster = await admin.describe_cluster()
    (node,) = cluster.brokers
    return node.node_id


async def test_elect_leaders_needs_no_election(admin: AsyncAdminClient,
                                               broker: Target) -> None:
    name = await _topic(admin, "elect")
    p0, p1 = TopicPartition(name, 0), TopicPartition(name, 1)
    missing = TopicPartition(name, NO_PARTITION)
    unknown = TopicPartition("no-such-topic-here", 0)
    for kind in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        results = await admin.elect_leaders(kind, [p0, p1, missing, unknown])
        assert list(results) == [p0, p1, missing, unknown]
        if broker.name == "tansu":  # tansu 0.6 does not offer ElectLeaders
            assert all(isinstance(r.error, UnsupportedVersionError) for r in results.values())
            continue
        # One node: its replica is the preferred one and leads already; a partition with
        # a leader needs no unclean election either.
        for tp in (p0, p1):
            error = results[tp].error
            assert isinstance(error, ElectionNotNeededError), (kind, tp, error)
            assert error.message == "Leader election not needed for topic partition."
        missing_error = results[missing].error
        assert isinstance(missing_error, UnknownTopicOrPartitionError)
        assert missing_error.message == f"No such partition as {name}-{NO_PARTITION}"
        unknown_error = results[unknown].error
        assert isinstance(unknown_error, UnknownTopicOrPartitionError)
        assert unknown_error.message == "No such topic as no-such-topic-here"
    assert len(await admin.elect_leaders(ElectionType.PREFERRED, [])) == 0


async def test_elect_leaders_of_every_partition(admin: AsyncAdminClient,
                                                broker: Target) -> None:
    await _topic(admin, "elect-all")
    for kind in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        if broker.name == "tansu":
            with pytest.raises(UnsupportedVersionError):
                await admin.elect_leaders(kind)
            continue
        # Kafka leaves the partitions that needed no election out of the answer: on one
        # node, that is all of them.
        results = await admin.elect_leaders(kind)
        assert dict(results) == {}


async def test_reassign_on_one_node(admin: AsyncAdminClient, broker: Target) -> None:
    name = await _topic(admin, "reassign")
    node = await _node_id(admin)
    other = node + 1000
    same, elsewhere, empty, twice = (TopicPartition(name, 0), TopicPartition(name, 1),
                                     TopicPartition(name, 0), TopicPartition(name, 1))
    missing = TopicPartition(name, NO_PARTITION)
    unknown = TopicPartition("no-such-topic-here", 0)
    results = await admin.alter_partition_reassignments({
        same: [node], elsewhere: [other, node], missing: [node], unknown: [node]})
    if broker.name == "tansu":  # tansu 0.6 does not offer AlterPartitionReassignments
        assert all(isinstance(r.error, UnsupportedVersionError) for r in results.values())
        return
    assert results[same].error is None  # the current assignment: accepted, nothing moves
    error = results[elsewhere].error
    assert isinstance(error, InvalidReplicaAssignmentError)
    assert error.message == (f"The manual partition assignment includes broker {other}, "
                             "but no such broker is registered.")
    missing_error = results[missing].error
    assert isinstance(missing_error, UnknownTopicOrPartitionError)
    assert missing_error.message == f"Unable to find partition {name}:{NO_PARTITION}."
    unknown_error = results[unknown].error
    assert isinstance(unknown_error, UnknownTopicOrPartitionError)
    assert unknown_error.message == "Unable to find a topic named no-such-topic-here."

    refused = await admin.alter_partition_reassignments({empty: [], twice: [node, node]})
    empty_error, twice_error = refused[empty].error, refused[twice].error
    assert isinstance(empty_error, InvalidReplicaAssignmentError)
    assert empty_error.message == ("The manual partition assignment includes an empty "
                                   "replica list.")
    assert isinstance(twice_error, InvalidReplicaAssignmentError)
    assert twice_error.message == (f"The manual partition assignment includes the broker "
                                   f"{node} more than once.")

    cancelled = await admin.alter_partition_reassignments({same: None})
    assert isinstance(cancelled[same].error, NoReassignmentInProgressError)
    assert cancelled[same].error.message is None  # Kafka sends no message here

    described = (await admin.describe_topics([name]))[name]
    assert [p.replicas for p in described.partitions] == [(node,), (node,)]


async def test_list_reassignments_is_empty(admin: AsyncAdminClient, broker: Target) -> None:
    name = await _topic(admin, "list-moves")
    assert await admin.list_partition_reassignments() == {}
    asked = [TopicPartition(name, 0), TopicPartition(name, NO_PARTITION),
             TopicPartition("no-such-topic-here", 0)]
    assert await admin.list_partition_reassignments(asked) == {}
    assert await admin.list_partition_reassignments([]) == {}


async def test_list_reassignments_raw_answer(broker: Target) -> None:
    """What each broker puts on the wire for ListPartitionReassignments (see the module
    docstring for tansu's answer)."""
    name = new_topic("list-raw")
    await create_topic(broker.bootstrap_servers, name, 2)
    client = NetClient(CommonConfig.build(bootstrap_servers=broker.bootstrap_servers))
    try:
        await client.start()
        request = ListPartitionReassignmentsRequest(topics=[
            ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(
                name=name, partition_indexes=[0])])
        response = await client.call(request, CONTROLLER, timeout_s=20)
    finally:
        await client.close()
    assert response.error_code == 0
    if broker.name != "tansu":
        assert response.topics == [] and response.error_message is None
        return
    listed = {(t.name, p.partition_index): p for t in response.topics for p in t.partitions}
    assert {(name, 0), (name, 1)} <= set(listed)  # pt-1 was not even asked about
    assert all(not p.adding_replicas and not p.removing_replicas for p in listed.values())


def test_blocking_face(broker: Target) -> None:
    name = new_topic("elect-sync")
    broker.create_topic(name, 1)
    tp = TopicPartition(name, 0)
    with AdminClient(bootstrap_servers=broker.bootstrap_servers,
                     default_api_timeout_ms=30_000) as admin:
        elected = admin.elect_leaders(ElectionType.PREFERRED, [tp])
        moved = admin.alter_partition_reassignments({tp: None})
        assert admin.list_partition_reassignments([tp]) == {}
    if broker.name == "tansu":
        assert isinstance(elected[tp].error, UnsupportedVersionError)
        assert isinstance(moved[tp].error, UnsupportedVersionError)
    else:
        assert isinstance(elected[tp].error, ElectionNotNeededError)
        assert isinstance(moved[tp].error, NoReassignmentInProgressError)


async def test_bad_arguments(admin: AsyncAdminClient) -> None:
    tp = TopicPartition("any", 0)
    with pytest.raises(ValueError, match="ElectionType"):
        await admin.elect_leaders(7, [tp])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="TopicPartition"):
        await admin.elect_leaders(ElectionType.PREFERRED, [("any", 0)])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="broker ids"):
        await admin.alter_partition_reassignments({tp: "1,2"})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="broker ids"):
        await admin.alter_partition_reassignments({tp: [1, "2"]})  # type: ignore[list-item]
    with pytest.raises(TypeError, match="TopicPartition"):
        await admin.list_partition_reassignments(tp)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def ref() -> Iterator[EmbeddedBroker]:
    """The reference broker alone, for its control surface."""
    with EmbeddedBroker(data_dir=None, port=0) as embedded:
        yield embedded


async def test_not_controller_is_retried(ref: EmbeddedBroker) -> None:
    """NOT_CONTROLLER (the controller moved) refreshes the metadata and tries again; the
    reference broker's control surface makes it answer so."""
    control = ref.control
    name = new_topic("elect-nc")
    async with AsyncAdminClient(bootstrap_servers=ref.bootstrap_servers,
                                retry_backoff_ms=20, retry_backoff_max_ms=100) as admin:
        (await admin.create_topics([NewTopic(name, 1, 1)])).raise_if_failed()
        tp = TopicPartition(name, 0)
        for api, call in (
            (ApiKey.ELECT_LEADERS, lambda: admin.elect_leaders(ElectionType.PREFERRED, [tp])),
            (ApiKey.ALTER_PARTITION_REASSIGNMENTS,
             lambda: admin.alter_partition_reassignments({tp: None})),
        ):
            before = control.seen(api)
            control.fail_next(api, NotControllerError.errno)
            results = await call()
            assert control.seen(api) - before == 2
            assert isinstance(results[tp].error,
                              ElectionNotNeededError | NoReassignmentInProgressError)
        before = control.seen(ApiKey.LIST_PARTITION_REASSIGNMENTS)
        control.fail_next(ApiKey.LIST_PARTITION_REASSIGNMENTS, NotControllerError.errno)
        assert await admin.list_partition_reassignments() == {}
        assert control.seen(ApiKey.LIST_PARTITION_REASSIGNMENTS) - before == 2
