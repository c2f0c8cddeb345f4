"""DescribeLogDirs: each broker's log directories and the size of every replica in them
(Java's ``Admin.describeLogDirs``). The reference broker with tiered storage also lists its
remote tier, as a directory named ``remote:<where>``, with each partition's bytes there."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sdk.admin.dispatch import Deadline, Dispatcher
from sdk.admin.topics import describe_cluster, error_from
from sdk.errors import KafkaError
from sdk.protocol.messages.describe_log_dirs import (
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)
from sdk.types import TopicPartition

__all__ = ["LogDirDescription", "ReplicaInfo", "describe_log_dirs"]

_DESCRIBE_LOG_DIRS = DescribeLogDirsRequest.API_KEY
REMOTE_PREFIX = "remote:"


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    size: int  # bytes of the replica's log in this directory
    offset_lag: int = 0
    is_future: bool = False


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    path: str
    replicas: dict[TopicPartition, ReplicaInfo] = field(default_factory=dict)
    total_bytes: int | None = None  # None when the broker does not say
    usable_bytes: int | None = None
    error: KafkaError | None = None

    @property
    def is_remote(self) -> bool:
        """The reference broker's remote tier (tiered storage), not a local directory."""
        return self.path.startswith(REMOTE_PREFIX)


async def describe_log_dirs(d: Dispatcher, broker_ids: Sequence[int] | None, *,
                            deadline: Deadline) -> dict[int, list[LogDirDescription]]:
    """Every log directory of the given brokers (None: all of them)."""
    if broker_ids is None:
        broker_ids = [b.node_id for b in (await describe_cluster(d, deadline=deadline)).brokers]
    out: dict[int, list[LogDirDescription]] = {}
    for node in broker_ids:
        response: DescribeLogDirsResponse = await d.request(
            node, lambda _v: DescribeLogDirsRequest(topics=None), _DESCRIBE_LOG_DIRS, deadline)
        top = error_from(response.error_code)
        if top is not None:
            raise top
        dirs = []
        for result in response.results:
            replicas = {TopicPartition(t.name, p.partition_index):
                        ReplicaInfo(p.partition_size, p.offset_lag, p.is_future_key)
                        for t in result.topics for p in t.partitions}
            dirs.append(LogDirDescription(
                result.log_dir, replicas,
                result.total_bytes if result.total_bytes >= 0 else None,
                result.usable_bytes if result.usable_bytes >= 0 else None,
                error_from(result.error_code)))
        out[node] = dirs
    return out
