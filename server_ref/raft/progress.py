"""The leader's view of its replicas: who has fetched up to where, and the high watermark.

Pure bookkeeping (unit-tested alone). A voter's log end offset is the offset of its last
Fetch that passed the divergence check; the high watermark is the largest offset a majority
of voters (the leader included) hold, and it may only move once it covers an entry of the
leader's own epoch (Raft never commits an older term's entry by counting replicas).
"""

from __future__ import annotations

from dataclasses import dataclass

from server_ref.raft.api import ReplicaInfo


@dataclass(slots=True)
class ReplicaProgress:
    end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1


class LeaderProgress:
    def __init__(self, leader_id: int, voters: set[int], epoch_start_offset: int,
                 high_watermark: int) -> None:
        self.leader_id = leader_id
        self.voters = {v: ReplicaProgress() for v in voters}
        self.observers: dict[int, ReplicaProgress] = {}
        self.epoch_start_offset = epoch_start_offset
        self.high_watermark = high_watermark

    def update_leader(self, end_offset: int, now_ms: int) -> bool:
        me = self.voters[self.leader_id]
        me.end_offset, me.last_fetch_ms, me.last_caught_up_ms = end_offset, now_ms, now_ms
        return self._advance()

    def record_fetch(self, replica_id: int, fetch_offset: int, leader_end_offset: int,
                     now_ms: int) -> bool:
        """A replica fetched from ``fetch_offset`` (its log end). True if the HW moved."""
        table = self.voters if replica_id in self.voters else self.observers
        state = table.setdefault(replica_id, ReplicaProgress())
        state.end_offset = fetch_offset
        state.last_fetch_ms = now_ms
        if fetch_offset >= leader_end_offset:
            state.last_caught_up_ms = now_ms
        return replica_id in self.voters and self._advance()

    def _advance(self) -> bool:
        ends = sorted((p.end_offset for p in self.voters.values()), reverse=True)
        majority_end = ends[len(ends) // 2]
        if majority_end > self.high_watermark and majority_end > self.epoch_start_offset:
            self.high_watermark = majority_end
            return True
        return False

    def fetched_within(self, since_ms: int) -> int:
        """Voters (the leader included) that fetched at or after ``since_ms``."""
        return sum(1 for v, p in self.voters.items()
                   if v == self.leader_id or p.last_fetch_ms >= since_ms)

    def describe(self) -> tuple[list[ReplicaInfo], list[ReplicaInfo]]:
        def info(table: dict[int, ReplicaProgress]) -> list[ReplicaInfo]:
            return [ReplicaInfo(rid, p.end_offset, p.last_fetch_ms, p.last_caught_up_ms)
                    for rid, p in sorted(table.items())]
        return info(self.voters), info(self.observers)
