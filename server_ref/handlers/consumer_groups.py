"""KIP-848 consumer groups: ConsumerGroupHeartbeat v0-v1 and ConsumerGroupDescribe v0-v1,
translated to :class:`~server_ref.groups.consumer_coordinator.ConsumerGroupCoordinator`.

Version 1 of the heartbeat adds the regex subscription and requires a member id the client
generated (KIP-1082); v0 members may send an empty one, and the coordinator makes one up.
"""

from __future__ import annotations

from typing import Any

from sdk import errors
from sdk.protocol.api import ApiKey
from sdk.protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from sdk.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from server_ref.groups.assignors import Assignment
from server_ref.groups.consumer_coordinator import ConsumerGroupCoordinator
from server_ref.handlers import RequestContext, handles
from server_ref.handlers.groups import (
    GROUP_AUTHORIZED_OPERATIONS,
    OPERATIONS_NOT_REQUESTED,
    client_host,
)
from server_ref.replication.group_writes import group_write_replicated, needs_wait

_CLASSIC_MEMBER_TYPE = 0  # ConsumerGroupDescribe v1 MemberType
_CONSUMER_MEMBER_TYPE = 1


def _consumer(ctx: RequestContext) -> ConsumerGroupCoordinator:
    groups = ctx.broker.groups
    if groups is None:
        raise errors.CoordinatorNotAvailableError("the group coordinator is not started")
    if not groups.loaded:
        raise errors.CoordinatorLoadInProgressError("the group journal is not loaded yet")
    consumer = groups.consumer
    topics = ctx.broker.topics
    consumer.bind_topics(lambda: [(t.name, t.topic_id, len(t.partitions), t.is_internal)
                                  for t in topics])
    # The GROUP config resource (consumer.session.timeout.ms, ...) lives in the share
    # coordinator's store, the broker's one (replayed from the metadata log in cluster mode).
    from server_ref.share import ShareCoordinator

    consumer.bind_group_configs(ShareCoordinator.of(ctx.broker).configs.value)
    return consumer


@handles(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1)
def consumer_group_heartbeat(ctx: RequestContext, req: ConsumerGroupHeartbeatRequest
                             ) -> Any:
    response = _heartbeat(ctx, req)
    if not needs_wait(ctx.broker, req.group_id, response.error_code):
        return response
    return _after_replication(ctx, req.group_id, response)


async def _after_replication(ctx: RequestContext, group_id: str,
                             response: ConsumerGroupHeartbeatResponse
                             ) -> ConsumerGroupHeartbeatResponse:
    """Cluster mode: a heartbeat that wrote the group's records (a new member epoch, a
    target assignment) is answered once the ISR has them, as Kafka's coordinator appends
    with acks=-1; a failed wait answers the coordinator error instead."""
    error = await group_write_replicated(ctx.broker, group_id, 0)
    return response if error == 0 else ConsumerGroupHeartbeatResponse(error_code=error)


def _heartbeat(ctx: RequestContext, req: ConsumerGroupHeartbeatRequest
               ) -> ConsumerGroupHeartbeatResponse:
    try:
        if ctx.api_version >= 1 and not req.member_id:
            raise errors.InvalidRequestError("MemberId can't be empty.")
        owned = (None if req.topic_partitions is None
                 else {tp.topic_id: set(tp.partitions) for tp in req.topic_partitions})
        result = _consumer(ctx).heartbeat(
            req.group_id, req.member_id, req.member_epoch,
            instance_id=req.instance_id, rack_id=req.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            subscribed_topic_names=req.subscribed_topic_names,
            subscribed_topic_regex=req.subscribed_topic_regex if ctx.api_version >= 1 else None,
            server_assignor=req.server_assignor, owned=owned,
            client_id=ctx.client_id or "", client_host=client_host(ctx.peer))
    except errors.BrokerResponseError as exc:
        # Kafka's message alone, as its broker answers (the text the error was raised with).
        message = str(exc.args[0]) if exc.args else exc.description
        return ConsumerGroupHeartbeatResponse(error_code=exc.errno, error_message=message)
    return ConsumerGroupHeartbeatResponse(
        member_id=result.member_id, member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.interval_ms,
        assignment=None if result.assignment is None else
        ConsumerGroupHeartbeatResponse.Assignment(topic_partitions=[
            ConsumerGroupHeartbeatResponse.TopicPartitions(topic_id=t, partitions=sorted(ps))
            for t, ps in sorted(result.assignment.items(), key=lambda kv: str(kv[0]))
        ]))


@handles(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1)
def consumer_group_describe(ctx: RequestContext, req: ConsumerGroupDescribeRequest
                            ) -> ConsumerGroupDescribeResponse:
    consumer = _consumer(ctx)
    operations = (GROUP_AUTHORIZED_OPERATIONS if req.include_authorized_operations
                  else OPERATIONS_NOT_REQUESTED)
    described = []
    for group_id in req.group_ids or ():
        group = consumer.group(group_id)
        if group is None:
            classic = ctx.broker.groups.group(group_id) if ctx.broker.groups else None
            message = (f"Group {group_id} is not a consumer group." if classic is not None
                       and classic.members else f"Group {group_id} not found.")
            described.append(ConsumerGroupDescribeResponse.DescribedGroup(
                group_id=group_id, error_code=errors.GroupIdNotFoundError.errno,
                error_message=message, group_state="Dead", authorized_operations=operations))
            continue

        def assignment(parts: Assignment) -> ConsumerGroupDescribeResponse.Assignment:
            return ConsumerGroupDescribeResponse.Assignment(topic_partitions=[
                ConsumerGroupDescribeResponse.TopicPartitions(
                    topic_id=t, topic_name=consumer.topic_name(t) or "",
                    partitions=sorted(ps))
                for t, ps in sorted(parts.items(), key=lambda kv: str(kv[0]))
            ])

        described.append(ConsumerGroupDescribeResponse.DescribedGroup(
            group_id=group_id, group_state=group.state.value, group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch, assignor_name=group.assignor or "uniform",
            authorized_operations=operations,
            members=[
                ConsumerGroupDescribeResponse.Member(
                    member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                    member_epoch=m.member_epoch, client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=list(m.subscribed_topic_names),
                    subscribed_topic_regex=m.subscribed_topic_regex,
                    assignment=assignment(m.assigned),
                    target_assignment=assignment(group.target.get(m.member_id, {})),
                    member_type=(-1 if ctx.api_version < 1 else _CLASSIC_MEMBER_TYPE
                                 if m.classic is not None else _CONSUMER_MEMBER_TYPE))
                for m in group.members.values()
            ]))
    return ConsumerGroupDescribeResponse(groups=described)
