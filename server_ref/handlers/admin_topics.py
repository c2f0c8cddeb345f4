"""CreateTopics, DeleteTopics and CreatePartitions."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sdk.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    InvalidTopicError,
    KafkaError,
    TopicDeletionDisabledError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from sdk.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
)
from sdk.protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from sdk.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from sdk.protocol.primitives import ZERO_UUID
from server_ref.handlers import RequestContext, handles
from server_ref.handlers.configs import topic_config_entries
from server_ref.tiered.settings import validate_topic

TopicResult = CreateTopicsResponse.CreatableTopicResult


def _check_assignment(ctx: RequestContext, broker_ids: list[int]) -> None:
    node = ctx.broker.node_id
    if len(broker_ids) != 1 or broker_ids[0] != node:
        raise InvalidReplicaAssignmentError(
            f"replica assignment {broker_ids} names brokers other than the only one, {node}")


def _num_partitions(ctx: RequestContext, t: CreateTopicsRequest.CreatableTopic) -> tuple[int, int]:
    if not t.assignments:
        return t.num_partitions, t.replication_factor
    if t.num_partitions != -1 or t.replication_factor != -1:
        raise InvalidRequestError(
            "Both numPartitions or replicationFactor and replicasAssignments were set. "
            "Both cannot be used at the same time.")
    indexes = sorted(a.partition_index for a in t.assignments)
    if indexes != list(range(len(indexes))):
        raise InvalidReplicaAssignmentError(
            "partitions should be a consecutive 0-based integer sequence")
    for a in t.assignments:
        _check_assignment(ctx, a.broker_ids)
    return len(indexes), 1


@handles(19, 0, 7)
def create_topics(ctx: RequestContext, req: CreateTopicsRequest) -> Any:
    if ctx.broker.cluster is not None:  # the active controller decides
        from server_ref.cluster import forwarding

        return forwarding.create_topics(ctx, req)
    topics = ctx.broker.topics
    counts = Counter(t.name for t in req.topics)
    results = []
    for t in req.topics:
        result = TopicResult(name=t.name, error_message=None)
        try:
            if counts[t.name] > 1:
                raise InvalidRequestError(
                    "Create topics request from client contains multiple topics with the "
                    "same name")
            configs = {c.name: c.value for c in t.configs}
            if len(configs) != len(t.configs):
                raise InvalidRequestError(f"duplicate config keys for topic {t.name}")
            partitions, replication = _num_partitions(ctx, t)
            count, overrides = topics.check_new_topic(t.name, partitions, replication, configs)
            validate_topic({}, overrides, ctx.broker.config)  # remote.storage.enable's rules
            if not req.validate_only:
                created = topics.create(t.name, count, 1, configs)
                result.topic_id = created.topic_id
            result.num_partitions = count
            result.replication_factor = 1
            result.configs = [
                CreateTopicsResponse.CreatableTopicConfigs(
                    name=e.name, value=e.value, read_only=e.read_only,
                    config_source=e.config_source, is_sensitive=e.is_sensitive)
                for e in topic_config_entries(ctx.broker.config, overrides)
            ]
        except KafkaError as exc:
            result.error_code = getattr(exc, "errno", InvalidRequestError.errno)
            result.error_message = exc.message
            result.configs = None if ctx.api_version >= 5 else []
        results.append(result)
    return CreateTopicsResponse(topics=results)


@handles(20, 0, 6)
def delete_topics(ctx: RequestContext, req: DeleteTopicsRequest) -> Any:
    if ctx.broker.cluster is not None:
        from server_ref.cluster import forwarding

        return forwarding.delete_topics(ctx, req)
    broker = ctx.broker
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in req.topic_names]
    results = []
    for name, topic_id in wanted:
        result = DeleteTopicsResponse.DeletableTopicResult(name=name, topic_id=topic_id)
        try:
            result.name, result.topic_id = _delete_one(ctx, name, topic_id)
        except KafkaError as exc:
            result.error_code = getattr(exc, "errno", InvalidRequestError.errno)
            result.error_message = exc.message
        results.append(result)
    deleted = [r.name for r in results if r.error_code == 0 and r.name]
    if deleted and broker.groups is not None:
        broker.groups.on_topics_deleted(deleted)  # their committed offsets go too
    return DeleteTopicsResponse(responses=results)


def _delete_one(ctx: RequestContext, name: str | None, topic_id: Any) -> tuple[str, Any]:
    broker = ctx.broker
    if name is not None and topic_id != ZERO_UUID:
        raise InvalidRequestError("give a topic name or a topic id, not both")
    if name is None:
        topic = broker.topics.by_id(topic_id)
        if topic is None:
            raise UnknownTopicIdError(f"no topic with id {topic_id}")
    else:
        topic = broker.topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"topic {name} does not exist")
    if not broker.config.get("delete.topic.enable"):
        raise TopicDeletionDisabledError("delete.topic.enable is false on this broker")
    if topic.is_internal:
        raise InvalidTopicError(f"internal topic {topic.name} cannot be deleted")
    broker.delete_topic(topic.name)
    return topic.name, topic.topic_id


@handles(37, 0, 3)
def create_partitions(ctx: RequestContext, req: CreatePartitionsRequest) -> Any:
    if ctx.broker.cluster is not None:
        from server_ref.cluster import forwarding

        return forwarding.create_partitions(ctx, req)
    counts = Counter(t.name for t in req.topics)
    results = []
    for t in req.topics:
        result = CreatePartitionsResponse.CreatePartitionsTopicResult(name=t.name)
        try:
            if counts[t.name] > 1:
                raise InvalidRequestError(f"topic {t.name} appears more than once")
            topic = ctx.broker.topics.get(t.name)
            if topic is None:
                raise UnknownTopicOrPartitionError(f"The topic '{t.name}' does not exist.")
            if topic.is_internal:
                raise InvalidPartitionsError(
                    f"partitions of internal topic {t.name} cannot be added")
            ctx.broker.topics.add_partitions(t.name, t.count, validate_only=True)
            if t.assignments is not None:
                added = t.count - len(topic.partitions)
                if len(t.assignments) != added:
                    raise InvalidReplicaAssignmentError(
                        f"Increasing the number of partitions by {added} but "
                        f"{len(t.assignments)} assignments provided.")
                for a in t.assignments:
                    _check_assignment(ctx, a.broker_ids)
            ctx.broker.topics.add_partitions(t.name, t.count, validate_only=req.validate_only)
        except KafkaError as exc:
            result.error_code = getattr(exc, "errno", InvalidRequestError.errno)
            result.error_message = exc.message
        results.append(result)
    return CreatePartitionsResponse(results=results)
