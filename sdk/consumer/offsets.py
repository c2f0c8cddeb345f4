"""Offset requests: ListOffsets (reset, beginning/end, offsets for times), OffsetCommit and
OffsetFetch (a group's committed positions).

Plain async functions over a :class:`sdk.net.NetClient`; they hold no state. ListOffsets goes
to each partition's leader (one request per leader, in parallel) and retries partitions whose
leader moved after a metadata refresh; commits and committed-offset lookups go to the group
coordinator through ``NetClient.call``, which retries coordinator moves and lost connections.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence

from sdk.consumer.errors import CommitFailedError
from sdk.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    for_code,
)
from sdk.net import Coordinator, NetClient
from sdk.net.retry import Backoff
from sdk.protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from sdk.protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from sdk.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from sdk.types import OffsetAndMetadata, OffsetAndTimestamp, TopicPartition

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1

_LIST_OFFSETS_MIN_VERSION = 1  # v0 answers with a list of "old style" offsets
_OFFSET_FETCH_GROUPS_VERSION = 8  # v8+ asks per group
# Commit errors meaning "this member's generation is over": the partitions may have moved.
_GENERATION_ERRORS = (22, 25, 27, 82, 110, 113)  # ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
#   REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID; KIP-848: FENCED_MEMBER_EPOCH, STALE_MEMBER_EPOCH
_UNSTABLE_OFFSET_COMMIT = 88


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[TopicPartition]]:
    grouped: dict[str, list[TopicPartition]] = {}
    for tp in sorted(partitions):
        grouped.setdefault(tp.topic, []).append(tp)
    return grouped


# ------------------------------------------------------------------------- ListOffsets


async def list_offsets(
    client: NetClient,
    timestamps: Mapping[TopicPartition, int],
    *,
    read_committed: bool = False,
    timeout_s: float,
) -> dict[TopicPartition, OffsetAndTimestamp | None]:
    """Look up offsets by timestamp (or EARLIEST_TIMESTAMP / LATEST_TIMESTAMP).

    The result holds every asked partition; None where no record has a timestamp at or after
    the one asked for. Raises the broker's error for a partition that cannot be answered
    (e.g. an unknown topic once ``timeout_s`` runs out: KafkaTimeoutError naming it).
    """
    deadline = time.monotonic() + timeout_s
    backoff = Backoff(client.config.retry_backoff_ms, client.config.retry_backoff_max_ms)
    pending = dict(timestamps)
    result: dict[TopicPartition, OffsetAndTimestamp | None] = {}
    failures = 0
    last_error: BaseException | None = None
    while pending:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            names = ", ".join(str(tp) for tp in sorted(pending))
            raise KafkaTimeoutError(
                f"offsets of {names} not found within {timeout_s:g} s"
                + (f"; last error: {last_error}" if last_error else ""),
                cause=last_error,
            )
        by_leader: dict[int, dict[TopicPartition, int]] = {}
        for tp, ts in pending.items():
            leader = client.metadata.leader_for(tp.topic, tp.partition)
            if leader is None:
                try:
                    await client.wait_for_topic(tp.topic, max(remaining, 0.001))
                except KafkaTimeoutError as exc:
                    last_error = exc
                    continue
                leader = client.metadata.leader_for(tp.topic, tp.partition)
                if leader is None:
                    client.request_refresh()
                    continue
            by_leader.setdefault(leader, {})[tp] = ts
        outcomes = await asyncio.gather(*(
            _list_offsets_from(client, node, parts, read_committed, deadline)
            for node, parts in by_leader.items()
        ), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                if isinstance(outcome, KafkaConnectionError | KafkaTimeoutError):
                    last_error = outcome
                    continue
                raise outcome
            answered, retry_error = outcome
            for tp, value in answered.items():
                result[tp] = value
                pending.pop(tp, None)
            if retry_error is not None:
                last_error = retry_error
                client.request_refresh()
        if pending:
            failures += 1
            await asyncio.sleep(min(backoff.delay(failures), max(0.0, deadline - time.monotonic())))
    return result


async def _list_offsets_from(
    client: NetClient, node: int, parts: Mapping[TopicPartition, int], read_committed: bool,
    deadline: float,
) -> tuple[dict[TopicPartition, OffsetAndTimestamp | None], BaseException | None]:
    """One ListOffsets to one leader: the answered partitions, and a retriable error if some
    partitions must be asked again (after a metadata refresh)."""
    request = ListOffsetsRequest(
        replica_id=-1,  # a consumer, not a follower
        isolation_level=1 if read_committed else 0,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name=topic,
                partitions=[
                    ListOffsetsRequest.ListOffsetsPartition(
                        partition_index=tp.partition, timestamp=parts[tp]
                    )
                    for tp in tps
                ],
            )
            for topic, tps in _by_topic(parts).items()
        ],
    )
    conn = await client.connection(node, timeout_s=max(0.001, deadline - time.monotonic()))
    version = conn.version_for(ListOffsetsRequest.API_KEY, min_version=_LIST_OFFSETS_MIN_VERSION)
    if read_committed and version < 2:
        raise KafkaError(f"broker {conn.address} is too old for read_committed (ListOffsets v2+)")
    response: ListOffsetsResponse = await conn.send(
        request, version, timeout_s=max(0.001, deadline - time.monotonic())
    )
    answered: dict[TopicPartition, OffsetAndTimestamp | None] = {}
    retry: BaseException | None = None
    for topic in response.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if tp not in parts:
                continue
            if p.error_code:
                error = for_code(p.error_code)(f"ListOffsets for {tp}")
                if error.retriable:
                    retry = error
                    if error.invalid_metadata:
                        client.metadata.mark_leader_unknown(tp.topic, tp.partition)
                    continue
                raise error
            if p.offset < 0:
                answered[tp] = None
            else:
                epoch = p.leader_epoch if p.leader_epoch >= 0 else None
                answered[tp] = OffsetAndTimestamp(p.offset, p.timestamp, epoch)
    return answered, retry


# ------------------------------------------------------------------------ OffsetCommit


async def commit_offsets(
    client: NetClient,
    group_id: str,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
    *,
    generation_id: int = -1,
    member_id: str = "",
    group_instance_id: str | None = None,
    timeout_s: float,
) -> None:
    """Commit ``offsets`` for the group.

    Raises CommitFailedError when the group moved on (new generation, member gone): the
    partitions may belong to someone else now. Other broker errors are raised as they are;
    coordinator moves and lost connections are retried until ``timeout_s``.
    """
    if not offsets:
        return
    for tp, om in offsets.items():
        if not isinstance(om, OffsetAndMetadata) or om.offset < 0:
            raise ValueError(f"commit offsets must be OffsetAndMetadata with offset >= 0; {tp}: {om!r}")

    def build(version: int) -> OffsetCommitRequest:
        return OffsetCommitRequest(
            group_id=group_id,
            generation_id_or_member_epoch=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(
                    name=topic,
                    partitions=[
                        OffsetCommitRequest.OffsetCommitRequestPartition(
                            partition_index=tp.partition,
                            committed_offset=offsets[tp].offset,
                            committed_leader_epoch=(
                                -1 if (epoch := offsets[tp].leader_epoch) is None else epoch
                            ),
                            committed_metadata=offsets[tp].metadata,
                        )
                        for tp in tps
                    ],
                )
                for topic, tps in _by_topic(offsets).items()
            ],
        )

    def check(response: OffsetCommitResponse) -> None:
        for topic in response.topics:
            for p in topic.partitions:
                if p.error_code:
                    error = for_code(p.error_code)(
                        f"committing {topic.name}-{p.partition_index} for group {group_id!r}"
                    )
                    if p.error_code in _GENERATION_ERRORS:
                        raise CommitFailedError(
                            f"commit for group {group_id!r} failed: {error}; the group has "
                            "rebalanced, so the partitions may be another member's now",
                            cause=error,
                        )
                    raise error

    await client.call(build, Coordinator(group_id), check=check, timeout_s=timeout_s)


# ------------------------------------------------------------------------- OffsetFetch


async def fetch_committed(
    client: NetClient,
    group_id: str,
    partitions: Iterable[TopicPartition],
    *,
    require_stable: bool = True,
    timeout_s: float,
) -> dict[TopicPartition, OffsetAndMetadata | None]:
    """The group's committed offsets (None where nothing is committed)."""
    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    grouped = _by_topic(wanted)

    def build(version: int) -> OffsetFetchRequest:
        if version >= _OFFSET_FETCH_GROUPS_VERSION:
            return OffsetFetchRequest(
                groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id=group_id,
                    topics=[
                        OffsetFetchRequest.OffsetFetchRequestTopics(
                            name=t, partition_indexes=[tp.partition for tp in tps])
                        for t, tps in grouped.items()
                    ],
                )],
                require_stable=require_stable,
            )
        return OffsetFetchRequest(
            group_id=group_id,
            topics=[
                OffsetFetchRequest.OffsetFetchRequestTopic(
                    name=t, partition_indexes=[tp.partition for tp in tps])
                for t, tps in grouped.items()
            ],
            require_stable=require_stable,
        )

    found: dict[TopicPartition, OffsetAndMetadata | None] = {}

    def check(response: OffsetFetchResponse) -> None:
        found.clear()
        # v8+ nests the topics per group, in classes of the same shape as the top-level ones.
        topics: Sequence[OffsetFetchResponse.OffsetFetchResponseTopic
                         | OffsetFetchResponse.OffsetFetchResponseTopics]
        if response.groups:
            group = response.groups[0]
            error_code, topics = group.error_code, group.topics
        else:
            error_code, topics = response.error_code, response.topics
        if error_code:
            raise for_code(error_code)(f"fetching committed offsets of group {group_id!r}")
        for topic in topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if p.error_code == _UNSTABLE_OFFSET_COMMIT:
                    # A transaction is committing offsets for it; ask again shortly.
                    raise for_code(p.error_code)(f"committed offset of {tp}")
                if p.error_code:
                    raise for_code(p.error_code)(f"committed offset of {tp} in {group_id!r}")
                if p.committed_offset < 0:
                    found[tp] = None
                else:
                    epoch = p.committed_leader_epoch
                    found[tp] = OffsetAndMetadata(
                        p.committed_offset, p.metadata or "", epoch if epoch >= 0 else None
                    )

    await client.call(build, Coordinator(group_id), check=check, timeout_s=timeout_s)
    return {tp: found.get(tp) for tp in wanted}


__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "commit_offsets",
    "fetch_committed",
    "list_offsets",
]
