"""Share-group start offsets (KIP-932, Kafka 4.1+): DescribeShareGroupOffsets v0-v1,
AlterShareGroupOffsets v0, DeleteShareGroupOffsets v0, on the share coordinator's state.

A share-partition the group never read answers start offset -1. Altering needs a group
without members (NON_EMPTY_GROUP otherwise) and starts the share-partition over at the new
offset; deleting forgets a topic's share-partitions unless a member is subscribed to it
(GROUP_SUBSCRIBED_TO_TOPIC), so the group starts over there at share.auto.offset.reset.
"""

from __future__ import annotations

from sdk.protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
)
from sdk.protocol.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
)
from sdk.protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
)
from server_ref.handlers import RequestContext, handles
from server_ref.share.coordinator import NON_EMPTY_GROUP, ShareCoordinator
from server_ref.share.group import ShareGroup
from server_ref.share.partition import RecordState

UNKNOWN_TOPIC_OR_PARTITION = 3
GROUP_ID_NOT_FOUND = 69
GROUP_SUBSCRIBED_TO_TOPIC = 86
INVALID_REQUEST = 42


@handles(90, 0, 1)
def describe_share_group_offsets(ctx: RequestContext, req: DescribeShareGroupOffsetsRequest
                                 ) -> DescribeShareGroupOffsetsResponse:
    coordinator = ShareCoordinator.of(ctx.broker)
    r = DescribeShareGroupOffsetsResponse
    groups = []
    for g in req.groups:
        if g.group_id not in coordinator.groups:
            groups.append(r.DescribeShareGroupOffsetsResponseGroup(
                group_id=g.group_id, error_code=GROUP_ID_NOT_FOUND,
                error_message=f"Group {g.group_id} not found."))
            continue
        wanted: dict[str, list[int]] = {}
        if g.topics is None:  # every share-partition the group has
            for (group_id, topic_id, index) in coordinator.partitions:
                topic = ctx.broker.topics.by_id(topic_id)
                if group_id == g.group_id and topic is not None:
                    wanted.setdefault(topic.name, []).append(index)
        else:
            for t in g.topics:
                wanted.setdefault(t.topic_name, []).extend(t.partitions)
        topics = []
        for name, indexes in sorted(wanted.items()):
            topic = ctx.broker.topics.get(name)
            entry = r.DescribeShareGroupOffsetsResponseTopic(topic_name=name)
            if topic is not None:
                entry.topic_id = topic.topic_id
            for index in sorted(set(indexes)):
                part = r.DescribeShareGroupOffsetsResponsePartition(
                    partition_index=index, start_offset=-1, leader_epoch=0, lag=-1)
                if topic is None or not 0 <= index < len(topic.partitions):
                    part.error_code = UNKNOWN_TOPIC_OR_PARTITION
                    part.error_message = "This server does not host this topic-partition."
                else:
                    sp = coordinator.partitions.get((g.group_id, topic.topic_id, index))
                    if sp is not None:
                        part.start_offset = sp.start
                        settled = sum(1 for _, rec in sp.in_flight()
                                      if rec.state in (RecordState.ACKNOWLEDGED,
                                                       RecordState.ARCHIVED))
                        end = topic.partitions[index].log.log_end_offset
                        part.lag = max(0, end - sp.start - settled)
                entry.partitions.append(part)
            topics.append(entry)
        groups.append(r.DescribeShareGroupOffsetsResponseGroup(group_id=g.group_id,
                                                               topics=topics))
    return r(groups=groups)


@handles(91, 0, 0)
def alter_share_group_offsets(ctx: RequestContext, req: AlterShareGroupOffsetsRequest
                              ) -> AlterShareGroupOffsetsResponse:
    coordinator = ShareCoordinator.of(ctx.broker)
    r = AlterShareGroupOffsetsResponse
    group = coordinator.groups.get(req.group_id)
    if group is not None and group.members:
        return r(error_code=NON_EMPTY_GROUP, error_message=(
            "The group has active members: offsets can only be altered when it is empty."))
    responses = []
    for t in req.topics:
        topic = ctx.broker.topics.get(t.topic_name)
        entry = r.AlterShareGroupOffsetsResponseTopic(topic_name=t.topic_name)
        if topic is not None:
            entry.topic_id = topic.topic_id
        for p in t.partitions:
            part = r.AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index)
            if topic is None or not 0 <= p.partition_index < len(topic.partitions):
                part.error_code = UNKNOWN_TOPIC_OR_PARTITION
            elif p.start_offset < 0:
                part.error_code = INVALID_REQUEST
                part.error_message = "The start offset must not be negative."
            else:
                coordinator.groups.setdefault(req.group_id, ShareGroup(req.group_id))
                sp = coordinator.share_partition(req.group_id, topic.topic_id,
                                                 topic.partitions[p.partition_index])
                sp.reset(p.start_offset)
                coordinator.mark_dirty(sp)
            entry.partitions.append(part)
        responses.append(entry)
    coordinator.flush()
    return r(responses=responses)


@handles(92, 0, 0)
def delete_share_group_offsets(ctx: RequestContext, req: DeleteShareGroupOffsetsRequest
                               ) -> DeleteShareGroupOffsetsResponse:
    coordinator = ShareCoordinator.of(ctx.broker)
    r = DeleteShareGroupOffsetsResponse
    group = coordinator.groups.get(req.group_id)
    if group is None:
        return r(error_code=GROUP_ID_NOT_FOUND, error_message=f"Group {req.group_id} not found.")
    subscribed = group.subscribed_topics()
    responses = []
    for t in req.topics:
        topic = ctx.broker.topics.get(t.topic_name)
        entry = r.DeleteShareGroupOffsetsResponseTopic(topic_name=t.topic_name)
        if topic is None:
            entry.error_code = UNKNOWN_TOPIC_OR_PARTITION
        else:
            entry.topic_id = topic.topic_id
            if t.topic_name in subscribed:
                entry.error_code = GROUP_SUBSCRIBED_TO_TOPIC
                entry.error_message = "The group is subscribed to the topic."
            else:
                coordinator.forget_partitions(req.group_id, {topic.topic_id})
        responses.append(entry)
    coordinator.flush()
    return r(responses=responses)
