"""DeleteRecords (move a partition's log start offset forward) and DescribeLogDirs."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Awaitable
from typing import Any

from sdk.errors import (
    KafkaError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from sdk.protocol.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from sdk.protocol.messages.describe_log_dirs import (
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)
from server_ref.handlers import RequestContext, handles
from server_ref.replication.reads import replica_log_starts_reached

HIGH_WATERMARK = -1
FOLLOWERS_POLL_S = 0.01  # how often an answer waiting for the followers' log starts looks again


@handles(21, 0, 2)
def delete_records(ctx: RequestContext, req: DeleteRecordsRequest
                   ) -> DeleteRecordsResponse | Awaitable[DeleteRecordsResponse]:
    topics = []
    # Cluster mode, tiered partitions: a log start moved into the remote tier is answered
    # once it is in __remote_log_metadata (a new leader reads it there: its local log
    # starts later and cannot carry it); see also the wait for the followers below.
    floors: list[tuple[DeleteRecordsResponse.DeleteRecordsPartitionResult,
                       Awaitable[bool]]] = []
    # Cluster mode: answered once the log start of every follower on a live broker (in the
    # ISR or not) reached the new one (its next fetch after the answer that carried it), so
    # a leader SIGKILLed right after the answer leaves it to any successor, as Kafka's
    # DelayedDeleteRecords.
    replicated: list[tuple[DeleteRecordsResponse.DeleteRecordsPartitionResult, Any]] = []
    for topic in req.topics:
        results = []
        for p in topic.partitions:
            result = DeleteRecordsResponse.DeleteRecordsPartitionResult(
                partition_index=p.partition_index, low_watermark=-1)
            partition = ctx.broker.topics.partition(topic.name, p.partition_index)
            offset = p.offset
            if partition is not None and ctx.broker.cluster is not None:
                # Cluster mode: the leader deletes, up to the high watermark; followers
                # take its log start offset from their next fetch.
                from server_ref.replication.reads import leader_error

                replica = partition.replica
                result.error_code = leader_error(partition, -1)
                if not result.error_code and offset == HIGH_WATERMARK:
                    offset = replica.high_watermark
                elif not result.error_code and offset > replica.high_watermark:
                    result.error_code = OffsetOutOfRangeError.errno
            if result.error_code:  # refused above: not the leader, or past the high watermark
                results.append(result)
                continue
            if partition is None:
                result.error_code = UnknownTopicOrPartitionError.errno
            elif offset < HIGH_WATERMARK or offset > partition.log.log_end_offset:
                result.error_code = OffsetOutOfRangeError.errno
            else:
                try:
                    # across both tiers for a tiered partition
                    result.low_watermark = ctx.broker.remote.delete_records(partition,
                                                                            offset)
                except KafkaError as exc:
                    result.error_code = getattr(exc, "errno", OffsetOutOfRangeError.errno)
                else:
                    partition.notify_appended()  # long polls re-check their offsets
                    written = ctx.broker.remote.floor_written(partition)
                    if written is not None:
                        floors.append((result, written))
                    if ctx.broker.cluster is not None:
                        replicated.append((result, partition))
            results.append(result)
        topics.append(DeleteRecordsResponse.DeleteRecordsTopicResult(name=topic.name,
                                                                     partitions=results))
    response = DeleteRecordsResponse(topics=topics)
    if not floors and not replicated:
        return response

    async def recorded() -> DeleteRecordsResponse:
        deadline = time.monotonic() + max(req.timeout_ms, 0) / 1000
        for result, written in floors:
            if not await written:  # in force here, not durable: the client retries
                result.error_code = RequestTimedOutError.errno
                result.low_watermark = -1
        waiting = [(r, p) for r, p in replicated if not r.error_code]
        while waiting:
            for result, partition in waiting:
                if partition.replica is None or not partition.replica.is_leader:
                    result.error_code = NotLeaderOrFollowerError.errno  # moved meanwhile
                    result.low_watermark = -1
            live = {b.node_id for b in ctx.broker.cluster.image.live_brokers()}
            waiting = [(r, p) for r, p in waiting if not r.error_code
                       and not replica_log_starts_reached(p, r.low_watermark, live)]
            if waiting and time.monotonic() >= deadline:
                for result, _ in waiting:  # in force at the leader; the client retries
                    result.error_code = RequestTimedOutError.errno
                    result.low_watermark = -1
                break
            if waiting:
                await asyncio.sleep(FOLLOWERS_POLL_S)
        return response
    return recorded()


def _hosted(broker: Any, partition: Any) -> bool:
    """Cluster mode: only the partitions this broker is a replica of (its other logs are
    placeholders of the metadata image)."""
    if broker.cluster is None:
        return True
    replica = partition.replica
    return replica is not None and replica.role != "offline"


@handles(35, 1, 4)
def describe_log_dirs(ctx: RequestContext, req: DescribeLogDirsRequest
                      ) -> DescribeLogDirsResponse:
    """The single data directory, with the size of each requested (null: every) partition."""
    broker = ctx.broker
    wanted: dict[str, list[int] | None]
    if req.topics is None:
        wanted = {t.name: None for t in broker.topics}
    else:
        wanted = {t.topic: list(t.partitions) for t in req.topics}
    topics = []
    for name, indexes in wanted.items():
        topic = broker.topics.get(name)
        if topic is None:
            continue  # as Kafka: partitions this broker does not hold are left out
        chosen = range(len(topic.partitions)) if indexes is None else indexes
        parts = [DescribeLogDirsResponse.DescribeLogDirsPartition(
            partition_index=i, partition_size=topic.partitions[i].log.size_in_bytes())
            for i in chosen if 0 <= i < len(topic.partitions)
            and _hosted(broker, topic.partitions[i])]
        topics.append(DescribeLogDirsResponse.DescribeLogDirsTopic(name=name, partitions=parts))
    usage = shutil.disk_usage(broker.data_dir)
    results = [DescribeLogDirsResponse.DescribeLogDirsResult(
        log_dir=str(broker.data_dir.resolve()), topics=topics, total_bytes=usage.total,
        usable_bytes=usage.free)]
    store = broker.remote.describe_store()
    if store is not None:
        # Not in Kafka's answer: the remote tier as one more directory named "remote:<uri>"
        # (no credentials), with each tiered partition's bytes there.
        remote_topics = []
        for entry in topics:
            topic = broker.topics.get(entry.name)
            assert topic is not None
            parts = [DescribeLogDirsResponse.DescribeLogDirsPartition(
                partition_index=p.partition_index,
                partition_size=broker.remote.remote_bytes(topic.partitions[p.partition_index]))
                for p in entry.partitions
                if broker.remote.state_of(topic.partitions[p.partition_index]) is not None]
            if parts:
                remote_topics.append(DescribeLogDirsResponse.DescribeLogDirsTopic(
                    name=entry.name, partitions=parts))
        results.append(DescribeLogDirsResponse.DescribeLogDirsResult(
            log_dir=f"remote:{store}", topics=remote_topics, total_bytes=-1,
            usable_bytes=-1))
    return DescribeLogDirsResponse(results=results)
