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

__all__ = ["epoch_start_offset", "follower_fetch", "high_watermark_lags_epoch_start",
           "leader_error", "replica_id_of", "replica_log_starts_reached"]

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


def epoch_start_offset(partition: Any) -> int:
    """The first offset of the leader's current epoch (0 when the log has no entry for it)."""
    epoch = partition.replica.leader_epoch
    for entry_epoch, start in reversed(partition.log.leader_epoch_cache.entries()):
        if entry_epoch == epoch:
            return int(start)
    return 0


def high_watermark_lags_epoch_start(partition: Any) -> bool:
    """Whether a new leader's high watermark is still below the start of its epoch: until
    the followers' fetches move it there, the leader cannot say where the committed log
    ends, so a consumer's ListOffsets for the latest offset (or a timestamp lookup landing
    at or past the high watermark) gets OFFSET_NOT_AVAILABLE, a retriable error, as Kafka's
    Partition.fetchOffsetForTimestamp answers. Answering the lagging high watermark instead
    told a client the log ended below records it had already seen acknowledged."""
    return epoch_start_offset(partition) > partition.replica.high_watermark


def replica_id_of(req: Any, version: int) -> int:
    if version >= REPLICA_STATE_VERSION:
        return int(req.replica_state.replica_id)
    return int(req.replica_id)


def follower_fetch(broker: Any, partitions: list[tuple[Any, int, int]],
                   replica_id: int) -> None:
    """A follower's fetch offsets: its log end offset on each partition it asked for, and
    its log start offset (-1: not sent, e.g. in a fetch session's unchanged partition)."""
    manager = broker.cluster.replicas
    for partition, offset, log_start in partitions:
        manager.follower_fetched(partition, replica_id, offset)
        state = partition.replica
        progress = state.followers.get(replica_id) if state is not None else None
        if progress is not None and log_start >= 0:
            progress.log_start_offset = log_start


def replica_log_starts_reached(partition: Any, offset: int, live: set[int]) -> bool:
    """Whether every other replica on a live broker (``live``: registered and unfenced)
    reports a log start (from its fetches) at ``offset`` or past it: a DeleteRecords is
    answered then, so any broker that may lead next starts the log there. Kafka's
    DelayedDeleteRecords waits the same way, on Partition.lowWatermarkIfLeader: the smallest
    log start of the leader and of every replica whose broker is alive, in the ISR or not
    (an unclean election may pick one that is not). A replica that never fetched counts as
    behind."""
    state = partition.replica
    for broker in state.replicas:
        if broker == state.leader or broker not in live:
            continue
        progress = state.followers.get(broker)
        if progress is None or progress.log_start_offset < offset:
            return False
    return True
