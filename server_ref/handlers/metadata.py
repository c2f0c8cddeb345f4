"""Metadata (brokers, the cluster id, topics with their partitions, auto-creating them) and
its paged successor DescribeTopicPartitions (KIP-966)."""

from __future__ import annotations

import uuid

from sdk.errors import (
    InvalidTopicError,
    KafkaError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from sdk.protocol.messages.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from sdk.protocol.messages.metadata import MetadataRequest, MetadataResponse
from sdk.protocol.primitives import ZERO_UUID
from server_ref.handlers import RequestContext, handles
from server_ref.topics import Topic, validate_topic_name

# Authorized-operation bit sets for a broker without an authorizer: everything is allowed.
# (AclOperation codes: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
# CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12)
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
UNREQUESTED_OPERATIONS = -(1 << 31)


def broker_entries(ctx: RequestContext) -> list[MetadataResponse.MetadataResponseBroker]:
    b = ctx.broker
    host, port = b.endpoint(ctx.listener)  # the listener the client came in on
    return [MetadataResponse.MetadataResponseBroker(node_id=b.node_id, host=host,
                                                    port=port, rack=None)]


def topic_entry(ctx: RequestContext, topic: Topic, include_ops: bool
                ) -> MetadataResponse.MetadataResponseTopic:
    node = ctx.broker.node_id
    partitions = [
        MetadataResponse.MetadataResponsePartition(
            error_code=0, partition_index=p.index, leader_id=node, leader_epoch=0,
            replica_nodes=[node], isr_nodes=[node], offline_replicas=[])
        for p in topic.partitions
    ]
    return MetadataResponse.MetadataResponseTopic(
        error_code=0, name=topic.name, topic_id=topic.topic_id, is_internal=topic.is_internal,
        partitions=partitions,
        topic_authorized_operations=TOPIC_OPERATIONS if include_ops else UNREQUESTED_OPERATIONS)


def _error_entry(name: str | None, topic_id: uuid.UUID, exc: KafkaError
                 ) -> MetadataResponse.MetadataResponseTopic:
    code = getattr(exc, "errno", UnknownTopicOrPartitionError.errno)
    return MetadataResponse.MetadataResponseTopic(error_code=code, name=name, topic_id=topic_id)


@handles(3, 0, 12)
def metadata(ctx: RequestContext, req: MetadataRequest) -> MetadataResponse:
    broker = ctx.broker
    if broker.cluster is not None:  # the metadata image's view of the cluster
        from server_ref.cluster.views import cluster_metadata

        return cluster_metadata(ctx, req)
    include_ops = bool(req.include_topic_authorized_operations)
    requested = req.topics
    if ctx.api_version == 0 and not requested:
        requested = None  # v0: an empty list means every topic
    topics: list[MetadataResponse.MetadataResponseTopic] = []
    if requested is None:
        topics = [topic_entry(ctx, t, include_ops) for t in broker.topics]
    else:
        may_create = bool(broker.config.get("auto.create.topics.enable")) and (
            ctx.api_version < 4 or req.allow_auto_topic_creation)
        for wanted in requested:
            topics.append(_lookup(ctx, wanted, may_create, include_ops))
    return MetadataResponse(
        brokers=broker_entries(ctx), cluster_id=broker.cluster_id,
        controller_id=broker.node_id, topics=topics,
        cluster_authorized_operations=(
            CLUSTER_OPERATIONS if req.include_cluster_authorized_operations
            else UNREQUESTED_OPERATIONS))


def _lookup(ctx: RequestContext, wanted: MetadataRequest.MetadataRequestTopic,
            may_create: bool, include_ops: bool) -> MetadataResponse.MetadataResponseTopic:
    broker = ctx.broker
    name = wanted.name
    if name is None:
        found = broker.topics.by_id(wanted.topic_id)
        if found is None:
            return _error_entry(None, wanted.topic_id,
                                UnknownTopicIdError(f"no topic with id {wanted.topic_id}"))
        return topic_entry(ctx, found, include_ops)
    topic = broker.topics.get(name)
    if topic is not None:
        return topic_entry(ctx, topic, include_ops)
    try:
        validate_topic_name(name)
    except InvalidTopicError as exc:
        return _error_entry(name, ZERO_UUID, exc)
    if not may_create:
        return _error_entry(name, ZERO_UUID, UnknownTopicOrPartitionError())
    try:
        created = broker.auto_create(name)
    except KafkaError as exc:
        return _error_entry(name, ZERO_UUID, exc)
    return topic_entry(ctx, created, include_ops)


# ---------------------------------------------------------------------------- KIP-966


@handles(75, 0, 0)
def describe_topic_partitions(ctx: RequestContext, req: DescribeTopicPartitionsRequest
                              ) -> DescribeTopicPartitionsResponse:
    """Topics in name order, paged by partitions: at most ``response_partition_limit`` per
    response, resuming from ``cursor``; ``next_cursor`` names where the next page starts."""
    broker = ctx.broker
    if broker.cluster is not None:  # the metadata image's view
        from server_ref.cluster.views import describe_topic_partitions as cluster_view

        return cluster_view(ctx, req)
    limit = max(1, req.response_partition_limit)
    names = sorted({t.name for t in req.topics}) if req.topics else sorted(
        t.name for t in broker.topics)
    start_topic, start_partition = "", 0
    if req.cursor is not None:
        start_topic, start_partition = req.cursor.topic_name, req.cursor.partition_index
    out: list[DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic] = []
    budget = limit
    next_cursor = None
    node = broker.node_id
    for name in names:
        if name < start_topic:
            continue
        topic = broker.topics.get(name)
        if topic is None:
            code = UnknownTopicOrPartitionError.errno
            try:
                validate_topic_name(name)
            except InvalidTopicError:
                code = InvalidTopicError.errno
            out.append(DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic(
                error_code=code, name=name))
            continue
        first = start_partition if name == start_topic else 0
        if budget == 0:
            next_cursor = DescribeTopicPartitionsResponse.Cursor(topic_name=name,
                                                                 partition_index=first)
            break
        indexes = list(range(first, len(topic.partitions)))
        taken, rest = indexes[:budget], indexes[budget:]
        budget -= len(taken)
        out.append(DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic(
            name=name, topic_id=topic.topic_id, is_internal=topic.is_internal,
            topic_authorized_operations=TOPIC_OPERATIONS,
            partitions=[DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition(
                partition_index=i, leader_id=node, leader_epoch=0, replica_nodes=[node],
                isr_nodes=[node], eligible_leader_replicas=[], last_known_elr=[],
                offline_replicas=[]) for i in taken]))
        if rest:
            next_cursor = DescribeTopicPartitionsResponse.Cursor(topic_name=name,
                                                                 partition_index=rest[0])
            break
    return DescribeTopicPartitionsResponse(topics=out, next_cursor=next_cursor)
