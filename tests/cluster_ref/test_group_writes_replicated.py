"""Group membership answers on our broker's cluster wait for the ISR of the group's
``__consumer_offsets`` partition (Kafka's coordinator appends them with acks=-1): the
coordinator's broker SIGKILLed right after SyncGroup (classic group) or a
ConsumerGroupHeartbeat (KIP-848 group) answered, the new coordinator knows the member, its
generation or epoch, and the assignment it was given."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from cluster.conftest import create_topic

from sdk import errors
from sdk.net.client import NetClient
from sdk.net.config import CommonConfig
from sdk.net.targets import Coordinator
from sdk.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from sdk.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from sdk.protocol.messages.describe_groups import DescribeGroupsRequest
from sdk.protocol.messages.join_group import JoinGroupRequest
from sdk.protocol.messages.sync_group import SyncGroupRequest
from server_ref.cluster import EmbeddedCluster

SESSION_MS = 60_000  # the member outlives the failover without heartbeats


def _check(response: Any) -> None:
    code = getattr(response, "error_code", 0)
    if code:
        errors.raise_for_code(code, f"{type(response).__name__} answered error {code}")


async def _with_client(bootstrap: str, body: Any) -> Any:
    client = NetClient(CommonConfig.build(bootstrap_servers=bootstrap))
    try:
        await client.start()
        return await body(client)
    finally:
        await client.close()


def test_sync_group_assignment_survives_coordinator_kill(
        kafka_cluster: EmbeddedCluster) -> None:
    group = f"sync-kill-{uuid.uuid4().hex[:8]}"
    assignment = b"assignment-" + uuid.uuid4().bytes
    target = Coordinator(group)

    async def join_and_sync(client: NetClient) -> tuple[int, str, int]:
        def join(member: str) -> JoinGroupRequest:
            return JoinGroupRequest(
                group_id=group, session_timeout_ms=SESSION_MS, rebalance_timeout_ms=SESSION_MS,
                member_id=member, protocol_type="consumer",
                protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                                     metadata=b"m")])
        first = await client.send(join(""), target, timeout_s=30)
        assert first.error_code == errors.MemberIdRequiredError.errno
        joined = await client.call(join(first.member_id), target, check=_check, timeout_s=30)
        assert joined.leader == joined.member_id
        await client.call(SyncGroupRequest(
            group_id=group, generation_id=joined.generation_id, member_id=joined.member_id,
            protocol_type="consumer", protocol_name="range",
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
                member_id=joined.member_id, assignment=assignment)]),
            target, check=_check, timeout_s=30)
        return await client.resolve(target), joined.member_id, joined.generation_id

    coordinator, member, generation = asyncio.run(
        _with_client(kafka_cluster.bootstrap_servers, join_and_sync))
    # SyncGroup has answered: the coordinator's broker dies at once.
    kafka_cluster.kill(coordinator)

    async def describe(client: NetClient) -> Any:
        response = await client.call(DescribeGroupsRequest(groups=[group]), target,
                                     timeout_s=60, check=lambda r: _check(r.groups[0]))
        return response.groups[0]

    described = asyncio.run(_with_client(kafka_cluster.bootstrap_servers, describe))
    assert asyncio.run(_with_client(kafka_cluster.bootstrap_servers,
                                    lambda c: c.resolve(target))) != coordinator
    assert described.group_state == "Stable"
    assert [(m.member_id, m.member_assignment) for m in described.members] == \
        [(member, assignment)]
    assert generation >= 1


def test_consumer_group_heartbeat_survives_coordinator_kill(
        kafka_cluster: EmbeddedCluster) -> None:
    topic = create_topic(kafka_cluster, "kip848-kill", 3)
    group = f"kip848-kill-{uuid.uuid4().hex[:8]}"
    member = uuid.uuid4().hex
    target = Coordinator(group)

    async def join(client: NetClient) -> tuple[int, int, set[int]]:
        epoch, owned = 0, set()
        for _ in range(50):  # until the member holds its whole assignment
            response = await client.call(ConsumerGroupHeartbeatRequest(
                group_id=group, member_id=member, member_epoch=epoch,
                rebalance_timeout_ms=SESSION_MS, subscribed_topic_names=[topic],
                topic_partitions=[]), target, check=_check, timeout_s=30)
            epoch = response.member_epoch
            if response.assignment is not None:
                owned = {p for tp in response.assignment.topic_partitions
                         for p in tp.partitions}
            if owned == {0, 1, 2}:
                break
            await asyncio.sleep(0.1)
        return await client.resolve(target), epoch, owned

    coordinator, epoch, owned = asyncio.run(
        _with_client(kafka_cluster.bootstrap_servers, join))
    assert owned == {0, 1, 2}
    kafka_cluster.kill(coordinator)

    async def describe(client: NetClient) -> Any:
        response = await client.call(ConsumerGroupDescribeRequest(group_ids=[group]),
                                     target, timeout_s=60,
                                     check=lambda r: _check(r.groups[0]))
        return response.groups[0]

    described = asyncio.run(_with_client(kafka_cluster.bootstrap_servers, describe))
    assert [m.member_id for m in described.members] == [member]
    assert described.members[0].member_epoch == epoch
    assigned = {p for tp in described.members[0].assignment.topic_partitions
                for p in tp.partitions}
    assert assigned == {0, 1, 2}


def test_sync_group_is_not_a_success_before_the_isr_has_it(
        kafka_cluster: EmbeddedCluster) -> None:
    """The coordinator's followers paused: the assignment cannot reach the ISR, so SyncGroup
    answers the coordinator error Kafka answers for a write that did not commit
    (REQUEST_TIMED_OUT after ``offsets.commit.timeout.ms`` is COORDINATOR_NOT_AVAILABLE;
    NOT_ENOUGH_REPLICAS_AFTER_APPEND if the followers were fenced first), never success."""
    group = f"sync-paused-{uuid.uuid4().hex[:8]}"
    target = Coordinator(group)

    async def run(client: NetClient) -> int:
        def join(member: str) -> JoinGroupRequest:
            return JoinGroupRequest(
                group_id=group, session_timeout_ms=SESSION_MS, rebalance_timeout_ms=SESSION_MS,
                member_id=member, protocol_type="consumer",
                protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                                     metadata=b"m")])
        first = await client.send(join(""), target, timeout_s=30)
        joined = await client.call(join(first.member_id), target, check=_check, timeout_s=30)
        coordinator = await client.resolve(target)
        others = [n.node_id for n in kafka_cluster.brokers if n.node_id != coordinator]
        for node in others:
            kafka_cluster.pause(node)
        try:
            synced = await client.send(SyncGroupRequest(
                group_id=group, generation_id=joined.generation_id,
                member_id=joined.member_id, protocol_type="consumer", protocol_name="range",
                assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
                    member_id=joined.member_id, assignment=b"never-acknowledged")]),
                coordinator, timeout_s=60)
        finally:
            for node in others:
                kafka_cluster.resume(node)
        return int(synced.error_code)

    code = asyncio.run(_with_client(kafka_cluster.bootstrap_servers, run))
    assert code in (errors.CoordinatorNotAvailableError.errno,
                    errors.NotEnoughReplicasAfterAppendError.errno), code
