"""What a broker in cluster mode answers from its metadata image, and what it forwards.

Metadata, DescribeTopicPartitions-style topic entries and DescribeCluster list the
registered, unfenced brokers and each partition's leader, leader epoch, replicas, ISR and
offline replicas as the metadata log says. Admin requests that change metadata
(CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders, topic config changes) are
forwarded to the active controller unchanged and its answer is returned once this broker's
image shows the change (so a client's next Metadata here sees it), as Kafka 4 brokers
forward to their controller.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Any

from sdk.errors import (
    InvalidTopicError,
    KafkaError,
    LeaderNotAvailableError,
    RequestTimedOutError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from sdk.protocol.messages.create_topics import CreateTopicsRequest
from sdk.protocol.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse
from sdk.protocol.messages.metadata import MetadataRequest, MetadataResponse
from sdk.protocol.primitives import ZERO_UUID
from server_ref.controller.image import NO_LEADER, MetadataImage, TopicImage
from server_ref.topics import INTERNAL_TOPICS, validate_topic_name

if TYPE_CHECKING:
    from server_ref.cluster.agent import ClusterAgent
    from server_ref.handlers import RequestContext

log = logging.getLogger(__name__)

__all__ = ["cluster_metadata", "describe_cluster", "forward"]

TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
UNREQUESTED = -(1 << 31)
FORWARD_TIMEOUT_S = 30.0
SEEN_TIMEOUT_S = 5.0


def _brokers(image: MetadataImage, listener: str
             ) -> list[MetadataResponse.MetadataResponseBroker]:
    """The live brokers at their endpoints on the client's listener (as Kafka, a broker
    without that listener is left out)."""
    out = []
    for b in image.live_brokers():
        endpoint = b.endpoint(listener)
        if endpoint is not None:
            out.append(MetadataResponse.MetadataResponseBroker(
                node_id=b.node_id, host=endpoint[0], port=endpoint[1], rack=b.rack))
    return out


def topic_entry(image: MetadataImage, t: TopicImage, include_ops: bool
                ) -> MetadataResponse.MetadataResponseTopic:
    partitions = []
    for index in sorted(t.partitions):
        p = t.partitions[index]
        offline = [r for r in p.replicas
                   if r not in image.brokers or image.brokers[r].fenced]
        partitions.append(MetadataResponse.MetadataResponsePartition(
            error_code=LeaderNotAvailableError.errno if p.leader == NO_LEADER else 0,
            partition_index=index, leader_id=p.leader, leader_epoch=p.leader_epoch,
            replica_nodes=list(p.replicas), isr_nodes=list(p.isr), offline_replicas=offline))
    return MetadataResponse.MetadataResponseTopic(
        error_code=0, name=t.name, topic_id=uuid.UUID(t.topic_id),
        is_internal=t.name in INTERNAL_TOPICS, partitions=partitions,
        topic_authorized_operations=TOPIC_OPERATIONS if include_ops else UNREQUESTED)


def cluster_metadata(ctx: RequestContext, req: MetadataRequest) -> MetadataResponse:
    agent: ClusterAgent = ctx.broker.cluster
    image = agent.image
    include_ops = bool(req.include_topic_authorized_operations)
    requested = req.topics
    if ctx.api_version == 0 and not requested:
        requested = None
    topics = []
    if requested is None:
        topics = [topic_entry(image, t, include_ops) for t in image.topics.values()]
    else:
        may_create = bool(ctx.broker.config.get("auto.create.topics.enable")) and (
            ctx.api_version < 4 or req.allow_auto_topic_creation)
        for wanted in requested:
            topics.append(_lookup(ctx, agent, wanted, may_create, include_ops))
    return MetadataResponse(
        brokers=_brokers(image, ctx.listener), cluster_id=ctx.broker.cluster_id,
        controller_id=ctx.broker.node_id, topics=topics,
        cluster_authorized_operations=(CLUSTER_OPERATIONS
                                       if req.include_cluster_authorized_operations
                                       else UNREQUESTED))


def _lookup(ctx: RequestContext, agent: ClusterAgent,
            wanted: MetadataRequest.MetadataRequestTopic, may_create: bool,
            include_ops: bool) -> MetadataResponse.MetadataResponseTopic:
    image = agent.image
    if wanted.name is None:
        name = image.topic_ids.get(str(wanted.topic_id))
        if name is None:
            return MetadataResponse.MetadataResponseTopic(
                error_code=UnknownTopicIdError.errno, name=None, topic_id=wanted.topic_id)
        return topic_entry(image, image.topics[name], include_ops)
    found = image.topics.get(wanted.name)
    if found is not None:
        return topic_entry(image, found, include_ops)
    try:
        validate_topic_name(wanted.name)
    except InvalidTopicError as exc:
        return MetadataResponse.MetadataResponseTopic(error_code=exc.errno, name=wanted.name,
                                                      topic_id=ZERO_UUID)
    if not may_create or wanted.name in INTERNAL_TOPICS:
        return MetadataResponse.MetadataResponseTopic(
            error_code=UnknownTopicOrPartitionError.errno, name=wanted.name,
            topic_id=ZERO_UUID)
    # Auto-creation goes through the controller; the client asks again meanwhile.
    asyncio.get_running_loop().create_task(create_topic(agent, wanted.name, -1, -1))
    return MetadataResponse.MetadataResponseTopic(
        error_code=LeaderNotAvailableError.errno, name=wanted.name, topic_id=ZERO_UUID)


async def create_topic(agent: ClusterAgent, name: str, partitions: int, replication: int,
                       configs: dict[str, str] | None = None) -> None:
    """Ask the controller for a topic (auto-creation, internal topics); errors are logged:
    the caller's client retries."""
    request = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication,
        configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                 for k, v in (configs or {}).items()])], timeout_ms=30_000)
    try:
        response = await agent.controller_request(request, 7)
        code = response.topics[0].error_code  # type: ignore[attr-defined]
        if code and code != 36:  # TOPIC_ALREADY_EXISTS: someone else created it
            log.info("creating %s failed with error %d", name, code)
    except KafkaError as exc:
        log.info("creating %s failed: %s", name, exc)


def describe_cluster(ctx: RequestContext, req: DescribeClusterRequest
                     ) -> DescribeClusterResponse:
    image = ctx.broker.cluster.image
    return DescribeClusterResponse(
        cluster_id=ctx.broker.cluster_id, controller_id=ctx.broker.node_id, endpoint_type=1,
        brokers=[DescribeClusterResponse.DescribeClusterBroker(  # live: none fenced
            broker_id=e.node_id, host=e.host, port=e.port, rack=e.rack, is_fenced=False)
            for e in _brokers(image, ctx.listener)],
        cluster_authorized_operations=(CLUSTER_OPERATIONS
                                       if req.include_cluster_authorized_operations
                                       else UNREQUESTED))


async def forward(ctx: RequestContext, req: Any, response_type: type[Any],
                  seen: Any = None, version: int | None = None) -> Any:
    """``req`` answered by the active controller; with ``seen(image) -> bool`` the answer
    waits (a few seconds at most) until this broker's image shows the change."""
    agent: ClusterAgent = ctx.broker.cluster
    try:
        response = await agent.controller_request(
            req, ctx.api_version if version is None else version, FORWARD_TIMEOUT_S)
    except RequestTimedOutError as exc:
        log.info("forwarding %s failed: %s", type(req).__name__, exc)
        raise
    if seen is not None:
        await agent.wait_for(lambda image: seen(image, response), SEEN_TIMEOUT_S)
    return response


def describe_topic_partitions(ctx: RequestContext, req: Any) -> Any:
    """DescribeTopicPartitions (KIP-966) from the image: topics in name order, paged by
    partitions (``response_partition_limit`` per answer, resuming at ``cursor``)."""
    from sdk.protocol.messages.describe_topic_partitions import (
        DescribeTopicPartitionsResponse as Response,
    )

    image = ctx.broker.cluster.image
    limit = max(1, req.response_partition_limit)
    names = sorted({t.name for t in req.topics}) if req.topics else sorted(image.topics)
    start_topic, start_partition = ("", 0) if req.cursor is None else (
        req.cursor.topic_name, req.cursor.partition_index)
    out = []
    budget, next_cursor = limit, None
    for name in names:
        if name < start_topic:
            continue
        topic = image.topics.get(name)
        if topic is None:
            code = UnknownTopicOrPartitionError.errno
            try:
                validate_topic_name(name)
            except InvalidTopicError:
                code = InvalidTopicError.errno
            out.append(Response.DescribeTopicPartitionsResponseTopic(error_code=code, name=name))
            continue
        first = start_partition if name == start_topic else 0
        if budget == 0:
            next_cursor = Response.Cursor(topic_name=name, partition_index=first)
            break
        indexes = [i for i in sorted(topic.partitions) if i >= first]
        taken, rest = indexes[:budget], indexes[budget:]
        budget -= len(taken)
        entries = []
        for i in taken:
            p = topic.partitions[i]
            entries.append(Response.DescribeTopicPartitionsResponsePartition(
                error_code=LeaderNotAvailableError.errno if p.leader == NO_LEADER else 0,
                partition_index=i, leader_id=p.leader, leader_epoch=p.leader_epoch,
                replica_nodes=list(p.replicas), isr_nodes=list(p.isr),
                eligible_leader_replicas=[], last_known_elr=[],
                offline_replicas=[r for r in p.replicas
                                  if r not in image.brokers or image.brokers[r].fenced]))
        out.append(Response.DescribeTopicPartitionsResponseTopic(
            name=name, topic_id=uuid.UUID(topic.topic_id), is_internal=name in INTERNAL_TOPICS,
            topic_authorized_operations=TOPIC_OPERATIONS, partitions=entries))
        if rest:
            next_cursor = Response.Cursor(topic_name=name, partition_index=rest[0])
            break
    return Response(topics=out, next_cursor=next_cursor)
