"""The group and offset APIs over a socket, at every version the broker advertises, and
offsets surviving a broker restart through the real ``__consumer_offsets`` journal."""

from __future__ import annotations

import asyncio

import pytest
from broker_kit import Served, WireClient

from sdk import errors
from sdk.protocol.messages.delete_groups import DeleteGroupsRequest
from sdk.protocol.messages.describe_groups import DescribeGroupsRequest
from sdk.protocol.messages.find_coordinator import FindCoordinatorRequest
from sdk.protocol.messages.heartbeat import HeartbeatRequest
from sdk.protocol.messages.join_group import JoinGroupRequest
from sdk.protocol.messages.leave_group import LeaveGroupRequest
from sdk.protocol.messages.list_groups import ListGroupsRequest
from sdk.protocol.messages.offset_commit import OffsetCommitRequest
from sdk.protocol.messages.offset_delete import OffsetDeleteRequest
from sdk.protocol.messages.offset_fetch import OffsetFetchRequest
from sdk.protocol.messages.sync_group import SyncGroupRequest

OK = 0
METADATA = b"\x00\x01\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff\x00\x00\x00\x00"


def join_request(group: str, member_id: str = "", instance: str | None = None,
                 session_ms: int = 10_000) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=5_000,
        member_id=member_id, group_instance_id=instance, protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=METADATA)])


async def join(client: WireClient, group: str, version: int, instance: str | None = None):
    response = await client.call(join_request(group, instance=instance), version)
    if response.error_code == errors.MemberIdRequiredError.errno:
        assert version >= 4 and response.member_id
        response = await client.call(join_request(group, response.member_id, instance),
                                     version)
    assert response.error_code == OK, response
    return response


def commit_request(group: str, generation: int, member_id: str, offset: int,
                   topic: str = "t", partition: int = 0) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
            OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_leader_epoch=2,
                committed_metadata="note")])])


def fetch_request(group: str, topic: str = "t", partition: int = 0) -> OffsetFetchRequest:
    return OffsetFetchRequest(group_id=group, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[partition])])


@pytest.mark.parametrize("version", range(7))
async def test_find_coordinator_answers_itself(served: Served, version: int) -> None:
    client = await served.client()
    if version < 4:
        response = await client.call(FindCoordinatorRequest(key="g"), version)
        assert response.error_code == OK
        assert (response.node_id, response.host, response.port) == \
            (served.b.node_id, served.b.host, served.port)
        return
    response = await client.call(FindCoordinatorRequest(key_type=1,
                                                        coordinator_keys=["tx1", "tx2"]), version)
    assert [(c.key, c.error_code, c.port) for c in response.coordinators] == \
        [("tx1", OK, served.port), ("tx2", OK, served.port)]
    bad = await client.call(FindCoordinatorRequest(key_type=7, coordinator_keys=["x"]), version)
    assert bad.coordinators[0].error_code == errors.InvalidRequestError.errno


@pytest.mark.parametrize("version", range(10))
async def test_join_sync_heartbeat_leave_at_each_join_version(served: Served,
                                                              version: int) -> None:
    client = await served.client()
    group = f"g{version}"
    joined = await join(client, group, version)
    assert joined.generation_id == 1 and joined.leader == joined.member_id
    assert joined.protocol_name == "range"
    assert [m.metadata for m in joined.members] == [METADATA]
    sync_version = min(version, 5)
    synced = await client.call(SyncGroupRequest(
        group_id=group, generation_id=1, member_id=joined.member_id,
        protocol_type="consumer", protocol_name="range",
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
            member_id=joined.member_id, assignment=b"plan")]), sync_version)
    assert synced.error_code == OK and synced.assignment == b"plan"
    beat = await client.call(HeartbeatRequest(group_id=group, generation_id=1,
                                              member_id=joined.member_id), min(version, 4))
    assert beat.error_code == OK
    leave_version = min(version, 5)
    if leave_version < 3:
        left = await client.call(LeaveGroupRequest(group_id=group, member_id=joined.member_id),
                                 leave_version)
        assert left.error_code == OK
    else:
        left = await client.call(LeaveGroupRequest(group_id=group, members=[
            LeaveGroupRequest.MemberIdentity(member_id=joined.member_id),
            LeaveGroupRequest.MemberIdentity(member_id="ghost")]), leave_version)
        assert left.error_code == OK
        assert [m.error_code for m in left.members] == \
            [OK, errors.UnknownMemberIdError.errno]
    assert served.b.groups.group(group).state.value == "Empty"


async def test_parked_follower_is_answered_over_the_wire(served: Served) -> None:
    first, second = await served.client(), await served.client()
    a, b = await asyncio.gather(join(first, "pair", 9), join(second, "pair", 9))
    assert a.generation_id == b.generation_id
    leader, follower = (a, b) if a.leader == a.member_id else (b, a)
    leader_client = first if leader is a else second
    follower_client = second if leader is a else first
    parked = asyncio.ensure_future(follower_client.call(SyncGroupRequest(
        group_id="pair", generation_id=follower.generation_id, member_id=follower.member_id)))
    await asyncio.sleep(0.05)
    plan = [SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=m.encode())
            for m in (leader.member_id, follower.member_id)]
    await leader_client.call(SyncGroupRequest(group_id="pair", generation_id=leader.generation_id,
                                              member_id=leader.member_id, assignments=plan))
    assert (await parked).assignment == follower.member_id.encode()


@pytest.mark.parametrize("version", range(10))
async def test_offset_commit_and_fetch_at_each_commit_version(served: Served,
                                                             version: int) -> None:
    served.b.auto_create("t")
    client = await served.client()
    group = f"c{version}"
    generation, member_id = -1, ""
    if version >= 1:
        joined = await join(client, group, 5)
        await client.call(SyncGroupRequest(group_id=group, generation_id=1,
                                           member_id=joined.member_id, assignments=[]))
        generation, member_id = 1, joined.member_id
    response = await client.call(commit_request(group, generation, member_id, 40 + version),
                                 version)
    assert [p.error_code for t in response.topics for p in t.partitions] == [OK]
    fetched = await client.call(fetch_request(group), min(version, 7))
    partition = fetched.topics[0].partitions[0]
    assert (partition.committed_offset, partition.metadata, partition.error_code) == \
        (40 + version, "note", OK)
    if version >= 6:
        assert partition.committed_leader_epoch == 2


async def test_offset_commit_errors_by_version(served: Served) -> None:
    served.b.auto_create("t")
    client = await served.client()
    unknown_topic = await client.call(commit_request("g", -1, "", 1, topic="nope"), 9)
    assert unknown_topic.topics[0].partitions[0].error_code == \
        errors.UnknownTopicOrPartitionError.errno
    # A member commit to a group that does not exist: v9 says so, older versions say
    # ILLEGAL_GENERATION.
    v8 = await client.call(commit_request("missing", 3, "m", 1), 8)
    v9 = await client.call(commit_request("missing", 3, "m", 1), 9)
    assert v8.topics[0].partitions[0].error_code == errors.IllegalGenerationError.errno
    assert v9.topics[0].partitions[0].error_code == errors.GroupIdNotFoundError.errno


async def test_offset_fetch_all_topics_and_many_groups(served: Served) -> None:
    served.b.auto_create("t")
    served.b.auto_create("u")
    client = await served.client()
    for group, offset in (("a", 5), ("b", 6)):
        await client.call(commit_request(group, -1, "", offset), 9)
        await client.call(commit_request(group, -1, "", offset + 100, topic="u"), 9)
    everything = await client.call(OffsetFetchRequest(group_id="a", topics=None), 7)
    assert sorted((t.name, t.partitions[0].committed_offset) for t in everything.topics) == \
        [("t", 5), ("u", 105)]
    v0 = await client.call(fetch_request("a", "u"), 0)
    assert v0.topics[0].partitions[0].committed_offset == 105
    many = await client.call(OffsetFetchRequest(groups=[
        OffsetFetchRequest.OffsetFetchRequestGroup(group_id="a", topics=[
            OffsetFetchRequest.OffsetFetchRequestTopics(name="t", partition_indexes=[0, 1])]),
        OffsetFetchRequest.OffsetFetchRequestGroup(group_id="b", topics=None),
        OffsetFetchRequest.OffsetFetchRequestGroup(group_id="", topics=None),
    ], require_stable=True), 9)
    a, b, empty = many.groups
    assert [(p.partition_index, p.committed_offset) for p in a.topics[0].partitions] == \
        [(0, 5), (1, -1)]
    assert sorted(t.name for t in b.topics) == ["t", "u"]
    assert empty.error_code == errors.InvalidGroupIdError.errno


async def test_group_admin_apis(served: Served) -> None:
    served.b.auto_create("t")
    client = await served.client()
    joined = await join(client, "live", 9, instance="inst-1")
    await client.call(SyncGroupRequest(group_id="live", generation_id=1,
                                       member_id=joined.member_id, group_instance_id="inst-1",
                                       assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
                                           member_id=joined.member_id, assignment=b"plan")]))
    await client.call(commit_request("idle", -1, "", 3), 9)

    listed = await client.call(ListGroupsRequest(), 0)
    assert sorted((g.group_id, g.protocol_type) for g in listed.groups) == \
        [("idle", ""), ("live", "consumer")]
    stable_only = await client.call(ListGroupsRequest(states_filter=["Stable"]), 5)
    assert [(g.group_id, g.group_state, g.group_type) for g in stable_only.groups] == \
        [("live", "Stable", "classic")]

    described = await client.call(DescribeGroupsRequest(groups=["live", "nope"],
                                                        include_authorized_operations=True), 5)
    live, nope = described.groups
    assert (live.group_state, live.protocol_type, live.protocol_data) == \
        ("Stable", "consumer", "range")
    [member] = live.members
    assert (member.member_id, member.group_instance_id, member.client_id) == \
        (joined.member_id, "inst-1", "broker-tests")
    assert member.client_host == "/127.0.0.1"
    assert (member.member_metadata, member.member_assignment) == (METADATA, b"plan")
    assert live.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)
    assert (nope.group_state, nope.error_code) == ("Dead", OK)

    deleted = await client.call(DeleteGroupsRequest(groups_names=["live", "idle", "nope"]), 2)
    assert [(r.group_id, r.error_code) for r in deleted.results] == [
        ("live", errors.NonEmptyGroupError.errno), ("idle", OK),
        ("nope", errors.GroupIdNotFoundError.errno)]

    subscribed = await client.call(OffsetDeleteRequest(group_id="live", topics=[
        OffsetDeleteRequest.OffsetDeleteRequestTopic(name="t", partitions=[
            OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)]),
        OffsetDeleteRequest.OffsetDeleteRequestTopic(name="gone", partitions=[
            OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])]), 0)
    assert subscribed.error_code == OK
    assert [(t.name, t.partitions[0].error_code) for t in subscribed.topics] == [
        ("t", errors.GroupSubscribedToTopicError.errno),
        ("gone", errors.UnknownTopicOrPartitionError.errno)]


async def test_offsets_and_groups_survive_a_restart(served: Served) -> None:
    served.b.auto_create("t")
    client = await served.client()
    joined = await join(client, "durable", 9, instance="inst-1")
    await client.call(SyncGroupRequest(group_id="durable", generation_id=1,
                                       member_id=joined.member_id, group_instance_id="inst-1",
                                       assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
                                           member_id=joined.member_id, assignment=b"plan")]))
    await client.call(commit_request("durable", 1, joined.member_id, 77), 7)
    await served.restart()

    client = await served.client()
    fetched = await client.call(fetch_request("durable"), 7)
    partition = fetched.topics[0].partitions[0]
    assert (partition.committed_offset, partition.metadata) == (77, "note")
    described = await client.call(DescribeGroupsRequest(groups=["durable"]), 5)
    group = described.groups[0]
    assert group.group_state == "Stable"
    assert [(m.member_id, m.member_assignment) for m in group.members] == \
        [(joined.member_id, b"plan")]
    beat = await client.call(HeartbeatRequest(group_id="durable", generation_id=1,
                                              member_id=joined.member_id,
                                              group_instance_id="inst-1"), 4)
    assert beat.error_code == OK
