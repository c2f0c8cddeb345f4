"""One partition's replica state on one broker in cluster mode (``Partition.replica``).

The leader tracks each follower's log end offset (the offset of its last Fetch) and when it
was last caught up; the high watermark is the smallest log end offset of the ISR (the
leader's own included), so a record below it is on every ISR member. Producers with
``acks=all`` wait on it. A follower's high watermark is what its leader last told it,
capped by its own log end.

Kafka's "caught up" rule: a follower is caught up at a fetch when it asked for the leader's
log end offset as of that fetch, or at least the log end offset of its previous fetch (then
it was caught up at that previous fetch).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

__all__ = ["FollowerProgress", "ReplicaState"]

LEADER, FOLLOWER, OFFLINE = "leader", "follower", "offline"


@dataclass(slots=True)
class FollowerProgress:
    log_end_offset: int = -1  # unknown until its first fetch in this epoch
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    leader_end_at_last_fetch: int = 0
    log_start_offset: int = -1  # (across tiers) from its fetches: DeleteRecords waits on it


@dataclass(eq=False)
class ReplicaState:
    role: str
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: list[int]
    isr: list[int]
    high_watermark: int
    followers: dict[int, FollowerProgress] = field(default_factory=dict)
    # acks=all appends waiting for the high watermark: (offset it must pass, future)
    waiters: list[tuple[int, asyncio.Future[None]]] = field(default_factory=list)
    alter_in_flight: bool = False

    @property
    def is_leader(self) -> bool:
        return self.role == LEADER

    def follower_fetched(self, broker: int, offset: int, leader_end: int, now_ms: int) -> None:
        progress = self.followers.get(broker)
        if progress is None:
            progress = self.followers[broker] = FollowerProgress(last_caught_up_ms=now_ms)
        if offset >= leader_end:
            progress.last_caught_up_ms = now_ms
        elif offset >= progress.leader_end_at_last_fetch:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms,
                                             progress.last_fetch_ms)
        progress.log_end_offset = offset
        progress.last_fetch_ms = now_ms
        progress.leader_end_at_last_fetch = leader_end

    def new_high_watermark(self, own_end: int) -> int:
        """The smallest log end offset among the ISR (never below the current one)."""
        low = own_end
        for broker in self.isr:
            if broker == self.leader:
                continue
            progress = self.followers.get(broker)
            end = progress.log_end_offset if progress is not None else -1
            if end < low:
                low = end
        return max(self.high_watermark, min(low, own_end))

    def release(self, error: BaseException | None = None) -> None:
        """Complete waiters the high watermark has passed (or all, with ``error``)."""
        if not self.waiters:
            return
        keep = []
        for offset, future in self.waiters:
            if future.done():
                continue
            if error is not None:
                future.set_exception(error)
            elif offset < self.high_watermark:
                future.set_result(None)
            else:
                keep.append((offset, future))
        self.waiters = keep
