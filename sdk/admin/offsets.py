"""Partition offsets: look up offsets (earliest, latest, by time) and delete records.

Both requests go to each partition's leader. The leaders come from a Metadata response
fetched at the start of every round of the retry loop, so a partition whose leader moved
is sent to the new one on the next round.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sdk.admin.dispatch import Deadline, Dispatcher
from sdk.admin.results import DeletedRecords, ListedOffset, OffsetSpec, ResultSet
from sdk.admin.topics import error_from, fetch_metadata
from sdk.errors import (
    KafkaError,
    LeaderNotAvailableError,
    UnknownTopicOrPartitionError,
    for_code,
)
from sdk.net import Target
from sdk.protocol.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from sdk.protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from sdk.protocol.messages.metadata import MetadataResponse
from sdk.types import TopicPartition

__all__ = ["LeaderMap", "delete_records", "list_offsets"]

_LIST_OFFSETS = ListOffsetsRequest.API_KEY
_DELETE_RECORDS = DeleteRecordsRequest.API_KEY
_CONSUMER_REPLICA_ID = -1
_MAX_TIMESTAMP_VERSION = 7  # ListOffsets v7 added the max-timestamp lookup (KIP-734)
_READ_COMMITTED_VERSION = 2
ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}


class LeaderMap:
    """Partition leaders from a fresh Metadata response; refreshed with :meth:`load`."""

    def __init__(self, d: Dispatcher, deadline: Deadline) -> None:
        self._d = d
        self._deadline = deadline
        self._topics: dict[str, MetadataResponse.MetadataResponseTopic] = {}

    async def load(self, partitions: Sequence[TopicPartition]) -> None:
        topics = sorted({tp.topic for tp in partitions})
        response = await fetch_metadata(self._d, topics, self._deadline)
        self._topics = {t.name: t for t in response.topics if t.name is not None}

    def partitions_of(self, topic: str) -> list[int] | None:
        t = self._topics.get(topic)
        if t is None or t.error_code:
            return None
        return sorted(p.partition_index for p in t.partitions)

    def route(self, tp: TopicPartition) -> Target | KafkaError:
        t = self._topics.get(tp.topic)
        if t is None:
            return UnknownTopicOrPartitionError(f"topic {tp.topic!r} does not exist")
        if t.error_code:
            return for_code(t.error_code)(f"topic {tp.topic!r}")
        for p in t.partitions:
            if p.partition_index == tp.partition:
                if p.leader_id is None or p.leader_id < 0:
                    return LeaderNotAvailableError(f"{tp} has no leader")
                return p.leader_id
        return UnknownTopicOrPartitionError(
            f"topic {tp.topic!r} has no partition {tp.partition}")


def _by_topic(partitions: Sequence[TopicPartition]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for tp in partitions:
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return grouped


def _check_partitions(keys: Sequence[object], what: str) -> list[TopicPartition]:
    out: list[TopicPartition] = []
    for key in keys:
        if not isinstance(key, TopicPartition):
            raise TypeError(f"{what} is keyed by TopicPartition, not {key!r}")
        out.append(key)
    return out


# ============================================================================ list offsets


def _spec_value(spec: OffsetSpec | int, tp: TopicPartition) -> int:
    if isinstance(spec, bool) or not isinstance(spec, int):
        raise TypeError(f"the offset spec of {tp} must be an OffsetSpec or a timestamp, "
                        f"not {spec!r}")
    if spec < 0 and spec not in tuple(OffsetSpec):
        raise ValueError(f"the offset spec of {tp} is {spec}: timestamps are >= 0")
    return int(spec)


async def list_offsets(d: Dispatcher, specs: Mapping[TopicPartition, OffsetSpec | int], *,
                       isolation_level: str,
                       deadline: Deadline) -> ResultSet[TopicPartition, ListedOffset]:
    partitions = _check_partitions(list(specs), "list_offsets")
    wanted = {tp: _spec_value(specs[tp], tp) for tp in partitions}
    if isolation_level not in ISOLATION_LEVELS:
        raise ValueError(f"isolation_level must be one of {sorted(ISOLATION_LEVELS)}, "
                         f"not {isolation_level!r}")
    isolation = ISOLATION_LEVELS[isolation_level]
    leaders = LeaderMap(d, deadline)

    async def send(node: int, batch: list[TopicPartition]) -> dict[TopicPartition, ListedOffset]:
        def build(version: int) -> ListOffsetsRequest:
            return ListOffsetsRequest(
                replica_id=_CONSUMER_REPLICA_ID,
                isolation_level=isolation,
                topics=[ListOffsetsRequest.ListOffsetsTopic(
                    name=topic,
                    partitions=[ListOffsetsRequest.ListOffsetsPartition(
                        partition_index=p, timestamp=wanted[TopicPartition(topic, p)])
                        for p in parts])
                    for topic, parts in _by_topic(batch).items()],
                timeout_ms=d.operation_timeout_ms(deadline),
            )

        min_version = 0
        if any(wanted[tp] == OffsetSpec.MAX_TIMESTAMP for tp in batch):
            min_version = _MAX_TIMESTAMP_VERSION
        elif isolation:
            min_version = _READ_COMMITTED_VERSION
        response: ListOffsetsResponse = await d.request(node, build, _LIST_OFFSETS, deadline,
                                                        min_version=min_version)
        out: dict[TopicPartition, ListedOffset] = {}
        for t in response.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                offset = p.offset
                if p.old_style_offsets and offset < 0:  # v0 answers with a list
                    offset = p.old_style_offsets[0]
                out[tp] = ListedOffset(
                    tp, offset, p.timestamp,
                    p.leader_epoch if p.leader_epoch >= 0 else None,
                    error_from(p.error_code))
        return out

    results = await d.run_items(
        partitions, what="list offsets", deadline=deadline, prepare=leaders.load,
        route=leaders.route, send=send, fail=lambda tp, exc: ListedOffset(tp, error=exc),
        error_of=lambda r: r.error,
    )
    return ResultSet(results, "list offsets")


# ============================================================================ delete records


async def delete_records(d: Dispatcher, before: Mapping[TopicPartition, int], *,
                         deadline: Deadline) -> ResultSet[TopicPartition, DeletedRecords]:
    partitions = _check_partitions(list(before), "delete_records")
    for tp in partitions:
        offset = before[tp]
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < -1:
            raise ValueError(f"delete_records: the offset for {tp} must be an int >= 0 "
                             f"(or -1 for the high watermark), not {offset!r}")
    leaders = LeaderMap(d, deadline)

    async def send(node: int,
                   batch: list[TopicPartition]) -> dict[TopicPartition, DeletedRecords]:
        def build(_version: int) -> DeleteRecordsRequest:
            return DeleteRecordsRequest(
                topics=[DeleteRecordsRequest.DeleteRecordsTopic(
                    name=topic,
                    partitions=[DeleteRecordsRequest.DeleteRecordsPartition(
                        partition_index=p, offset=before[TopicPartition(topic, p)])
                        for p in parts])
                    for topic, parts in _by_topic(batch).items()],
                timeout_ms=d.operation_timeout_ms(deadline),
            )

        response: DeleteRecordsResponse = await d.request(node, build, _DELETE_RECORDS,
                                                          deadline)
        return {
            TopicPartition(t.name, p.partition_index): DeletedRecords(
                TopicPartition(t.name, p.partition_index), p.low_watermark,
                error_from(p.error_code))
            for t in response.topics for p in t.partitions
        }

    results = await d.run_items(
        partitions, what="delete records", deadline=deadline, prepare=leaders.load,
        route=leaders.route, send=send, fail=lambda tp, exc: DeletedRecords(tp, error=exc),
        error_of=lambda r: r.error,
    )
    return ResultSet(results, "delete records")
