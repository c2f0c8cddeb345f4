"""ListOffsets and OffsetForLeaderEpoch: offsets by position, by time, and by leader epoch.

EARLIEST is the log start across both tiers of a tiered partition, EARLIEST_LOCAL its local
log start, LATEST_TIERED the last offset copied to the remote tier (-1: none); a timestamp
lookup searches the remote tier first.

Every partition has leader epoch 0 on this single broker (every stored batch carries it), so
OffsetForLeaderEpoch answers epoch 0 with the log end offset and a newer epoch with
"undefined", and a current leader epoch above 0 is UNKNOWN_LEADER_EPOCH.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Any

from sdk.errors import (
    LeaderNotAvailableError,
    OffsetNotAvailableError,
    UnknownLeaderEpochError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from sdk.protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from sdk.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from server_ref.handlers import RequestContext, handles
from server_ref.replication.reads import high_watermark_lags_epoch_start, leader_error
from server_ref.tiered import RemoteStorageError

log = logging.getLogger(__name__)

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
LEADER_EPOCH = 0
CONSUMER_REPLICA_ID = -1  # -2 is a debugging tool's: neither gets the lagging-HW error

PartitionResult = ListOffsetsResponse.ListOffsetsPartitionResponse


@handles(2, 1, 10)
def list_offsets(ctx: RequestContext, req: ListOffsetsRequest
                 ) -> ListOffsetsResponse | Awaitable[ListOffsetsResponse]:
    remote = ctx.broker.remote
    for topic in req.topics:
        for p in topic.partitions:
            partition = ctx.broker.topics.partition(topic.name, p.partition_index)
            if p.timestamp >= 0 and partition is not None and remote.remote_bytes(partition):
                return _with_remote_lookups(ctx, req)
    return _answer(ctx, req)


async def _with_remote_lookups(ctx: RequestContext, req: ListOffsetsRequest
                               ) -> ListOffsetsResponse:
    """Timestamp lookups on tiered partitions search the remote tier first (its data is
    older than the local log's), in worker threads."""
    response = _answer(ctx, req)
    remote = ctx.broker.remote
    for asked, answered in zip(req.topics, response.topics, strict=True):
        for p, result in zip(asked.partitions, answered.partitions, strict=True):
            partition = ctx.broker.topics.partition(asked.name, p.partition_index)
            if p.timestamp < 0 or result.error_code or partition is None:
                continue
            try:
                found = await remote.offset_for_timestamp(partition, p.timestamp)
            except RemoteStorageError as exc:
                log.warning("ListOffsets %s-%d by time in the remote tier: %s", asked.name,
                            p.partition_index, exc)
                result.error_code = UnknownServerError.errno
                continue
            if found is not None:
                result.offset, result.timestamp = found
                result.leader_epoch = LEADER_EPOCH
    return response


def _answer(ctx: RequestContext, req: ListOffsetsRequest) -> ListOffsetsResponse:
    client = req.replica_id == CONSUMER_REPLICA_ID
    topics = []
    for topic in req.topics:
        results = [_one(ctx, topic.name, p, req.isolation_level == 1, client,
                        ctx.api_version) for p in topic.partitions]
        topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=topic.name,
                                                                   partitions=results))
    return ListOffsetsResponse(topics=topics)


def _one(ctx: RequestContext, topic: str, p: ListOffsetsRequest.ListOffsetsPartition,
         read_committed: bool, client: bool, version: int) -> PartitionResult:
    result = PartitionResult(partition_index=p.partition_index)
    partition = ctx.broker.topics.partition(topic, p.partition_index)
    if partition is None:
        result.error_code = UnknownTopicOrPartitionError.errno
        return result
    if ctx.broker.cluster is None and p.current_leader_epoch > LEADER_EPOCH:
        result.error_code = UnknownLeaderEpochError.errno
        return result
    plog = partition.log
    ts = p.timestamp
    result.leader_epoch = LEADER_EPOCH
    if ctx.broker.cluster is not None:  # cluster mode: the leader answers, LATEST is the HW
        result.error_code = leader_error(partition, p.current_leader_epoch)
        if result.error_code:
            return result
        replica = partition.replica
        result.leader_epoch = replica.leader_epoch
        if client and (ts in (LATEST, MAX_TIMESTAMP) or ts >= 0) \
                and high_watermark_lags_epoch_start(partition):
            found = None if ts == LATEST else _by_time(plog, ts)
            if found is None or found[0] >= replica.high_watermark:
                # v0-v4 clients do not know OFFSET_NOT_AVAILABLE (Kafka sends them this)
                result.error_code = OffsetNotAvailableError.errno if version >= 5 \
                    else LeaderNotAvailableError.errno
                result.leader_epoch = -1
                return result
        if ts == LATEST:
            result.offset = min(plog.last_stable_offset if read_committed
                                else plog.log_end_offset, replica.high_watermark)
            return result
    if ts == LATEST:  # read_committed (isolation level 1): the last stable offset
        result.offset = plog.last_stable_offset if read_committed else plog.log_end_offset
    elif ts == EARLIEST:  # across both tiers
        result.offset = ctx.broker.remote.log_start_offset(partition)
    elif ts == EARLIEST_LOCAL:
        result.offset = plog.log_start_offset
    elif ts == MAX_TIMESTAMP or ts >= 0:
        found = _by_time(plog, ts)
        if found is not None:
            result.offset, result.timestamp = found
        else:
            result.leader_epoch = -1
    elif ts == LATEST_TIERED:  # -1 when nothing was copied (with epoch -1, as Kafka)
        result.offset = ctx.broker.remote.highest_tiered_offset(partition)
        if result.offset < 0:
            result.leader_epoch = -1
    else:
        result.error_code = OffsetNotAvailableError.errno
        result.leader_epoch = -1
    return result


def _by_time(plog: Any, ts: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the record with the largest timestamp (MAX_TIMESTAMP) or of
    the first at or after ``ts``; None when there is none."""
    found = plog.max_timestamp() if ts == MAX_TIMESTAMP else plog.offset_for_timestamp(ts)
    return None if found is None else (int(found[0]), int(found[1]))


@handles(23, 0, 4)
def offset_for_leader_epoch(ctx: RequestContext, req: OffsetForLeaderEpochRequest
                            ) -> OffsetForLeaderEpochResponse:
    topics = []
    for topic in req.topics:
        results = []
        for p in topic.partitions:
            r = OffsetForLeaderEpochResponse.EpochEndOffset(partition=p.partition)
            partition = ctx.broker.topics.partition(topic.topic, p.partition)
            if partition is None:
                r.error_code = UnknownTopicOrPartitionError.errno
            elif ctx.broker.cluster is not None:  # real epochs: followers truncate by them
                r.error_code = leader_error(partition, p.current_leader_epoch)
                if not r.error_code:
                    r.leader_epoch, r.end_offset = partition.log.end_offset_for_epoch(
                        p.leader_epoch)
            elif p.current_leader_epoch > LEADER_EPOCH:
                r.error_code = UnknownLeaderEpochError.errno
            elif 0 <= p.leader_epoch <= LEADER_EPOCH:
                r.leader_epoch = LEADER_EPOCH
                r.end_offset = partition.log.log_end_offset
            results.append(r)
        topics.append(OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(
            topic=topic.topic, partitions=results))
    return OffsetForLeaderEpochResponse(topics=topics)
