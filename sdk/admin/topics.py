"""Topic administration: create, delete, list, describe, add partitions; describe the cluster.

Create, delete and add-partitions requests go to the controller (brokers forward them in
KRaft clusters; a NOT_CONTROLLER answer refreshes the metadata and retries that topic).
Listing and describing read a fresh Metadata response from any broker.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sdk.admin.dispatch import Deadline, Dispatcher
from sdk.admin.results import (
    BrokerNode,
    ClusterDescription,
    CreateTopicResult,
    PartitionDescription,
    ResultSet,
    TopicDescription,
    TopicListing,
    TopicResult,
)
from sdk.errors import KafkaError, TopicAlreadyExistsError, UnsupportedVersionError, for_code
from sdk.net import CONTROLLER
from sdk.net.topic_problems import topics_created
from sdk.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
)
from sdk.protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from sdk.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from sdk.protocol.messages.describe_cluster import DescribeClusterRequest
from sdk.protocol.messages.metadata import MetadataRequest, MetadataResponse
from sdk.types import NewTopic

__all__ = [
    "NewPartitions",
    "create_partitions",
    "create_topics",
    "delete_topics",
    "describe_cluster",
    "describe_topics",
    "error_from",
    "fetch_metadata",
    "list_topics",
]

_CREATE_TOPICS = CreateTopicsRequest.API_KEY
_DELETE_TOPICS = DeleteTopicsRequest.API_KEY
_CREATE_PARTITIONS = CreatePartitionsRequest.API_KEY
_METADATA = MetadataRequest.API_KEY
_DESCRIBE_CLUSTER = DescribeClusterRequest.API_KEY
_DELETE_TOPICS_BY_STATE = 6  # v6+ names topics in DeleteTopicState structs


def error_from(code: int, message: str | None = None) -> KafkaError | None:
    """The exception for a response's error code (None for 0), with the broker's message."""
    return for_code(code)(message or None) if code else None


def _topic_id(value: uuid.UUID | None) -> uuid.UUID | None:
    return value if value is not None and value.int else None


@dataclass(frozen=True, slots=True)
class NewPartitions:
    """Grow a topic to ``total_count`` partitions; ``assignments`` optionally lists the
    replica broker ids of each new partition."""

    total_count: int
    assignments: list[list[int]] | None = None

    def __post_init__(self) -> None:
        if self.total_count < 1:
            raise ValueError(f"total_count must be >= 1, not {self.total_count}")


def _unique(names: Sequence[str], what: str) -> list[str]:
    if isinstance(names, str):
        raise TypeError(f"{what} takes a list of names, not one string")
    out = list(names)
    if len(set(out)) != len(out):
        raise ValueError(f"{what}: a name is given twice")
    for name in out:
        if not isinstance(name, str) or not name:
            raise ValueError(f"{what}: every name must be a non-empty string, not {name!r}")
    return out


# ============================================================================ create


async def create_topics(d: Dispatcher, new_topics: Sequence[NewTopic], *, validate_only: bool,
                        deadline: Deadline) -> ResultSet[str, CreateTopicResult]:
    by_name: dict[str, NewTopic] = {}
    for topic in new_topics:
        if not isinstance(topic, NewTopic):
            raise TypeError(f"create_topics takes NewTopic objects, not {topic!r}")
        if topic.name in by_name:
            raise ValueError(f"create_topics: topic {topic.name!r} is given twice")
        by_name[topic.name] = topic

    def build(version: int, names: list[str]) -> CreateTopicsRequest:
        if validate_only and version < 1:
            raise UnsupportedVersionError("validate_only needs CreateTopics v1+")
        return CreateTopicsRequest(
            topics=[_creatable(by_name[n]) for n in names],
            timeout_ms=d.operation_timeout_ms(deadline),
            validate_only=validate_only,
        )

    async def send(node: int, names: list[str]) -> dict[str, CreateTopicResult]:
        response: CreateTopicsResponse = await d.request(
            node, lambda v: build(v, names), _CREATE_TOPICS, deadline)
        return {
            t.name: CreateTopicResult(
                name=t.name,
                error=error_from(t.error_code, t.error_message),
                topic_id=_topic_id(t.topic_id),
                num_partitions=t.num_partitions,
                replication_factor=t.replication_factor,
                configs={c.name: c.value for c in t.configs or ()},
            )
            for t in response.topics
        }

    results = await d.run_items(
        list(by_name), what="create topic", deadline=deadline,
        route=lambda _name: CONTROLLER, send=send,
        fail=lambda name, exc: CreateTopicResult(name, exc),
        error_of=lambda r: r.error,
    )
    if not validate_only:  # clients of this process stop remembering them as missing
        topics_created(name for name, r in results.items()
                       if r.error is None or isinstance(r.error, TopicAlreadyExistsError))
    return ResultSet(results, "create topics")


def _creatable(topic: NewTopic) -> CreateTopicsRequest.CreatableTopic:
    assignments = [
        CreateTopicsRequest.CreatableReplicaAssignment(partition_index=p, broker_ids=list(ids))
        for p, ids in sorted((topic.replica_assignment or {}).items())
    ]
    return CreateTopicsRequest.CreatableTopic(
        name=topic.name,
        num_partitions=topic.num_partitions,
        replication_factor=topic.replication_factor,
        assignments=assignments,
        configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                 for k, v in (topic.configs or {}).items()],
    )


# ============================================================================ delete


async def delete_topics(d: Dispatcher, topics: Sequence[str], *,
                        deadline: Deadline) -> ResultSet[str, TopicResult]:
    names = _unique(topics, "delete_topics")

    def build(version: int, batch: list[str]) -> DeleteTopicsRequest:
        timeout_ms = d.operation_timeout_ms(deadline)
        if version >= _DELETE_TOPICS_BY_STATE:
            return DeleteTopicsRequest(
                topics=[DeleteTopicsRequest.DeleteTopicState(name=n) for n in batch],
                timeout_ms=timeout_ms)
        return DeleteTopicsRequest(topic_names=batch, timeout_ms=timeout_ms)

    async def send(node: int, batch: list[str]) -> dict[str, TopicResult]:
        response: DeleteTopicsResponse = await d.request(
            node, lambda v: build(v, batch), _DELETE_TOPICS, deadline)
        return {
            r.name: TopicResult(r.name, error_from(r.error_code, r.error_message),
                                _topic_id(r.topic_id))
            for r in response.responses if r.name is not None
        }

    results = await d.run_items(
        names, what="delete topic", deadline=deadline, route=lambda _n: CONTROLLER, send=send,
        fail=lambda name, exc: TopicResult(name, exc), error_of=lambda r: r.error,
    )
    return ResultSet(results, "delete topics")


# ============================================================================ partitions


async def create_partitions(d: Dispatcher, new_partitions: Mapping[str, int | NewPartitions], *,
                            validate_only: bool,
                            deadline: Deadline) -> ResultSet[str, TopicResult]:
    wanted: dict[str, NewPartitions] = {}
    for name, spec in new_partitions.items():
        wanted[name] = spec if isinstance(spec, NewPartitions) else NewPartitions(int(spec))
    _unique(list(wanted), "create_partitions")

    def build(_version: int, batch: list[str]) -> CreatePartitionsRequest:
        return CreatePartitionsRequest(
            topics=[
                CreatePartitionsRequest.CreatePartitionsTopic(
                    name=n, count=wanted[n].total_count,
                    assignments=None if wanted[n].assignments is None else [
                        CreatePartitionsRequest.CreatePartitionsAssignment(broker_ids=list(ids))
                        for ids in wanted[n].assignments or ()
                    ],
                )
                for n in batch
            ],
            timeout_ms=d.operation_timeout_ms(deadline),
            validate_only=validate_only,
        )

    async def send(node: int, batch: list[str]) -> dict[str, TopicResult]:
        response: CreatePartitionsResponse = await d.request(
            node, lambda v: build(v, batch), _CREATE_PARTITIONS, deadline)
        return {r.name: TopicResult(r.name, error_from(r.error_code, r.error_message))
                for r in response.results}

    results = await d.run_items(
        list(wanted), what="create partitions", deadline=deadline,
        route=lambda _n: CONTROLLER, send=send,
        fail=lambda name, exc: TopicResult(name, exc), error_of=lambda r: r.error,
    )
    return ResultSet(results, "create partitions")


# ============================================================================ metadata


async def fetch_metadata(d: Dispatcher, topics: Sequence[str] | None,
                         deadline: Deadline) -> MetadataResponse:
    """A fresh Metadata response for ``topics`` (None: every topic), never auto-creating."""

    def build(version: int) -> MetadataRequest:
        if topics is None:
            return MetadataRequest(topics=None if version >= 1 else [],
                                   allow_auto_topic_creation=False)
        return MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=False)

    response: MetadataResponse = await d.call(build, _METADATA, deadline)
    return response


async def list_topics(d: Dispatcher, *, include_internal: bool,
                      deadline: Deadline) -> dict[str, TopicListing]:
    response = await fetch_metadata(d, None, deadline)
    listings = [
        TopicListing(t.name, _topic_id(t.topic_id), t.is_internal, len(t.partitions))
        for t in response.topics
        if t.name is not None and not t.error_code and (include_internal or not t.is_internal)
    ]
    return {t.name: t for t in sorted(listings, key=lambda t: t.name)}


async def describe_topics(d: Dispatcher, topics: Sequence[str] | None, *,
                          deadline: Deadline) -> ResultSet[str, TopicDescription]:
    names = None if topics is None else _unique(topics, "describe_topics")
    response = await fetch_metadata(d, names, deadline)
    found = {t.name: t for t in response.topics if t.name is not None}
    wanted = names if names is not None else sorted(found)
    out: dict[str, TopicDescription] = {}
    for name in wanted:
        t = found.get(name)
        if t is None:
            out[name] = TopicDescription(name, for_code(3)("the broker did not list it"))
            continue
        out[name] = TopicDescription(
            name=name,
            error=error_from(t.error_code),
            topic_id=_topic_id(t.topic_id),
            is_internal=t.is_internal,
            partitions=tuple(sorted((_partition(p) for p in t.partitions),
                                    key=lambda p: p.partition)),
        )
    return ResultSet(out, "describe topics")


def _partition(p: MetadataResponse.MetadataResponsePartition) -> PartitionDescription:
    return PartitionDescription(
        partition=p.partition_index,
        leader=p.leader_id if p.leader_id >= 0 else None,
        leader_epoch=p.leader_epoch,
        replicas=tuple(p.replica_nodes),
        isr=tuple(p.isr_nodes),
        offline_replicas=tuple(p.offline_replicas),
        error=error_from(p.error_code),
    )


async def describe_cluster(d: Dispatcher, *, deadline: Deadline) -> ClusterDescription:
    """DescribeCluster when the broker has it (KIP-700), else the Metadata response."""

    def check(response: Any) -> None:
        error = error_from(response.error_code, response.error_message)
        if error is not None:
            raise error

    try:
        response = await d.call(lambda _v: DescribeClusterRequest(), _DESCRIBE_CLUSTER, deadline,
                                check=check)
    except UnsupportedVersionError:
        meta = await fetch_metadata(d, [], deadline)
        return ClusterDescription(
            cluster_id=meta.cluster_id,
            controller_id=meta.controller_id if meta.controller_id >= 0 else None,
            brokers=tuple(sorted((BrokerNode(b.node_id, b.host, b.port, b.rack)
                                  for b in meta.brokers), key=lambda b: b.node_id)),
        )
    return ClusterDescription(
        cluster_id=response.cluster_id or None,
        controller_id=response.controller_id if response.controller_id >= 0 else None,
        brokers=tuple(sorted((BrokerNode(b.broker_id, b.host, b.port, b.rack)
                              for b in response.brokers), key=lambda b: b.node_id)),
    )
