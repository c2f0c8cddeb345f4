"""Fetch, ListOffsets and OffsetForLeaderEpoch in cluster mode: who may be read, and how far.

Only the leader serves reads. A request naming a current leader epoch older than the
leader's gets FENCED_LEADER_EPOCH (the client's metadata is stale), a newer one
UNKNOWN_LEADER_EPOCH (this broker's is); -1 skips the check. Consumers read up to the high
watermark; followers (a Fetch with a replica id) up to the log end, and their fetch
offsets tell the leader how far they are.
"""

from __future__ import annotations

from typing import Any

from sdk.errors import FencedLeaderEpochError, NotLeaderOrFollowerError, UnknownLeaderEpochError

__all__ = ["follower_fetch", "leader_error", "replica_id_of"]

NOT_LEADER = NotLeaderOrFollowerError.errno
FENCED = FencedLeaderEpochError.errno
UNKNOWN_EPOCH = UnknownLeaderEpochError.errno
REPLICA_STATE_VERSION = 15


def leader_error(partition: Any, current_leader_epoch: int) -> int:
    state = partition.replica
    if state is None or not state.is_leader:
        return NOT_LEADER
    if current_leader_epoch >= 0:
        if current_leader_epoch < state.leader_epoch:
            return FENCED
        if current_leader_epoch > state.leader_epoch:
            return UNKNOWN_EPOCH
    return 0


def replica_id_of(req: Any, version: int) -> int:
    if version >= REPLICA_STATE_VERSION:
        return int(req.replica_state.replica_id)
    return int(req.replica_id)


def follower_fetch(broker: Any, partitions: list[tuple[Any, int]], replica_id: int) -> None:
    """A follower's fetch offsets: its log end offset on each partition it asked for."""
    manager = broker.cluster.replicas
    for partition, offset in partitions:
        manager.follower_fetched(partition, replica_id, offset)
