"""Committed offsets APIs: OffsetCommit v0-v9, OffsetFetch v0-v9 (multi-group from v8) and
OffsetDelete v0, over the :class:`~server_ref.groups.GroupCoordinator`.

As in Kafka, a partition the broker does not have is answered UNKNOWN_TOPIC_OR_PARTITION on
commit and delete, before the group is consulted; a fetch simply finds nothing (-1).
"""

from __future__ import annotations

from collections.abc import Coroutine, Iterable, Mapping
from typing import Any

from sdk import errors
from sdk.protocol.api import ApiKey
from sdk.protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from sdk.protocol.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from sdk.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from server_ref.groups import FetchedOffset, GroupCoordinator, OffsetFetchResult, OffsetToCommit
from server_ref.groups.results import Partition
from server_ref.handlers import RequestContext, handles


def _coordinator(ctx: RequestContext) -> GroupCoordinator:
    coordinator = ctx.broker.groups
    if coordinator is None:  # set by Broker.start(), before any request is served
        raise RuntimeError("the broker's group coordinator is not started")
    return coordinator


def _by_topic(partitions: Iterable[Partition]) -> dict[str, list[int]]:
    """Group partitions by topic, keeping first-seen order (and dropping repeats)."""
    topics: dict[str, list[int]] = {}
    for topic, index in dict.fromkeys(partitions):
        topics.setdefault(topic, []).append(index)
    return topics


def _error_topics(requested: Iterable[Partition], results: Mapping[Partition, int],
                  topic_cls: Any, partition_cls: Any) -> list[Any]:
    """The response's topics: each requested partition with its error code."""
    return [
        topic_cls(name=topic, partitions=[
            partition_cls(partition_index=index, error_code=results[(topic, index)])
            for index in indexes
        ])
        for topic, indexes in _by_topic(requested).items()
    ]


# ---------------------------------------------------------------------------- OffsetCommit


@handles(ApiKey.OFFSET_COMMIT, 0, 9)
def offset_commit(ctx: RequestContext, req: OffsetCommitRequest
                  ) -> OffsetCommitResponse | Coroutine[Any, Any, OffsetCommitResponse]:
    v = ctx.api_version
    requested: list[Partition] = []
    results: dict[Partition, int] = {}
    to_commit: dict[Partition, OffsetToCommit] = {}
    for topic in req.topics or ():
        for p in topic.partitions or ():
            key = (topic.name, p.partition_index)
            requested.append(key)
            if not ctx.broker.partition_exists(*key):
                results[key] = errors.UnknownTopicOrPartitionError.errno
                continue
            to_commit[key] = OffsetToCommit(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch if v >= 6 else -1,
                metadata=p.committed_metadata,
                commit_timestamp_ms=p.commit_timestamp if v == 1 else -1,
            )
    if to_commit:
        outcome = _coordinator(ctx).commit_offsets(
            req.group_id, to_commit,
            generation_id=req.generation_id_or_member_epoch if v >= 1 else -1,
            member_id=req.member_id if v >= 1 else "",
            group_instance_id=req.group_instance_id if v >= 7 else None,
            retention_ms=req.retention_time_ms if 2 <= v <= 4 else -1,
        )
        if v < 9:
            # Before v9 a member commit to an unknown group is ILLEGAL_GENERATION (KIP-848).
            missing = errors.GroupIdNotFoundError.errno
            illegal = errors.IllegalGenerationError.errno
            outcome = {k: illegal if e == missing else e for k, e in outcome.items()}
        results.update(outcome)
        if ctx.broker.cluster is not None and 0 in outcome.values():
            # Cluster mode: answered once the ISR has the journal record (acks=-1).
            return _after_replication(ctx, req.group_id, requested, results)
    return _commit_response(requested, results)


def _commit_response(requested: list[Partition], results: dict[Partition, int]
                     ) -> OffsetCommitResponse:
    return OffsetCommitResponse(topics=_error_topics(
        requested, results, OffsetCommitResponse.OffsetCommitResponseTopic,
        OffsetCommitResponse.OffsetCommitResponsePartition))


async def _after_replication(ctx: RequestContext, group_id: str, requested: list[Partition],
                             results: dict[Partition, int]) -> OffsetCommitResponse:
    from server_ref.cluster.coordinators import replicated  # cluster mode only

    partition = ctx.broker.offsets_journal.partition_for(group_id)
    return _commit_response(requested, await replicated(ctx.broker, partition, results))


# ---------------------------------------------------------------------------- OffsetFetch


def _requested(topics: Iterable[Any] | None) -> list[Partition] | None:
    if topics is None:
        return None
    return [(t.name, index) for t in topics for index in t.partition_indexes or ()]


def _topics_of(offsets: Mapping[Partition, FetchedOffset], topic_cls: Any,
               partition_cls: Any) -> list[Any]:
    return [
        topic_cls(name=topic, partitions=[
            partition_cls(partition_index=index, committed_offset=found.offset,
                          committed_leader_epoch=found.leader_epoch, metadata=found.metadata,
                          error_code=found.error)
            for index in indexes
            for found in (offsets[(topic, index)],)
        ])
        for topic, indexes in _by_topic(offsets).items()
    ]


@handles(ApiKey.OFFSET_FETCH, 0, 9)
def offset_fetch(ctx: RequestContext, req: OffsetFetchRequest) -> OffsetFetchResponse:
    v = ctx.api_version
    coordinator = _coordinator(ctx)
    require_stable = req.require_stable if v >= 7 else False
    if v >= 8:
        groups = []
        for group in req.groups or ():
            result = coordinator.fetch_offsets(
                group.group_id, _requested(group.topics), require_stable=require_stable,
                # v9 (KIP-848): a consumer-protocol member names itself and its epoch
                member_id=group.member_id if v >= 9 else None,
                member_epoch=group.member_epoch if v >= 9 else -1)
            groups.append(OffsetFetchResponse.OffsetFetchResponseGroup(
                group_id=group.group_id, error_code=result.error,
                topics=_topics_of(result.offsets, OffsetFetchResponse.OffsetFetchResponseTopics,
                                  OffsetFetchResponse.OffsetFetchResponsePartitions),
            ))
        return OffsetFetchResponse(groups=groups)
    # v0-v1 have no null "all topics" and no top-level error.
    requested = _requested(req.topics) if v >= 2 else _requested(req.topics or ())
    result = coordinator.fetch_offsets(req.group_id, requested, require_stable=require_stable)
    if result.error and v < 2:
        result = OffsetFetchResult(offsets={
            p: FetchedOffset(-1, error=result.error) for p in requested or ()
        })
    return OffsetFetchResponse(
        error_code=result.error,
        topics=_topics_of(result.offsets, OffsetFetchResponse.OffsetFetchResponseTopic,
                          OffsetFetchResponse.OffsetFetchResponsePartition),
    )


# ---------------------------------------------------------------------------- OffsetDelete


@handles(ApiKey.OFFSET_DELETE, 0, 0)
def offset_delete(ctx: RequestContext, req: OffsetDeleteRequest) -> OffsetDeleteResponse:
    requested: list[Partition] = []
    results: dict[Partition, int] = {}
    existing: list[Partition] = []
    for topic in req.topics or ():
        for p in topic.partitions or ():
            key = (topic.name, p.partition_index)
            requested.append(key)
            if ctx.broker.partition_exists(*key):
                existing.append(key)
            else:
                results[key] = errors.UnknownTopicOrPartitionError.errno
    error, deleted = _coordinator(ctx).delete_offsets(req.group_id, existing)
    if error:
        return OffsetDeleteResponse(error_code=error)
    results.update(deleted)
    return OffsetDeleteResponse(topics=_error_topics(
        requested, results, OffsetDeleteResponse.OffsetDeleteResponseTopic,
        OffsetDeleteResponse.OffsetDeleteResponsePartition))
