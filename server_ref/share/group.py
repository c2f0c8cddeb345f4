"""A share group's membership and its assignment (the broker-side "simple" assignor). Pure.

Members join with ShareGroupHeartbeat at epoch 0, naming their topics; every change of
membership or subscription bumps the group epoch and recomputes the target assignment at
once (no reconciliation is needed: a share partition may be read by several members at the
same time, so nothing must be revoked before it is given). Per topic, with P partitions and
M subscribed members (sorted by id): when M <= P partition i goes to member i mod M, so each
partition has one reader; when M > P member j reads partition j mod P, so every member
has work and a partition is shared by about M/P members. That is how a share group scales
past its partition count.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

__all__ = ["ShareGroup", "ShareMember"]

Assignment = dict[uuid.UUID, list[int]]


@dataclass(slots=True)
class ShareMember:
    member_id: str
    client_id: str
    client_host: str
    rack: str | None
    topics: list[str]
    epoch: int = 0
    last_seen_ms: int = 0
    assignment: Assignment = field(default_factory=dict)
    sent_epoch: int = -1  # the member epoch whose assignment this member was last told


class ShareGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.members: dict[str, ShareMember] = {}
        self.epoch = 0  # group epoch
        self.assignment_epoch = 0

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.topics}

    def assign(self, partitions_of: dict[str, tuple[uuid.UUID, int]]) -> None:
        """Recompute every member's assignment. ``partitions_of``: topic name -> (topic id,
        partition count) of the subscribed topics that exist."""
        self.epoch += 1
        for member in self.members.values():
            member.assignment = {}
        for topic, (topic_id, count) in sorted(partitions_of.items()):
            readers = sorted(m for m, member in self.members.items() if topic in member.topics)
            if not readers or count <= 0:
                continue
            if len(readers) <= count:
                for p in range(count):
                    self.members[readers[p % len(readers)]].assignment.setdefault(
                        topic_id, []).append(p)
            else:
                for j, member_id in enumerate(readers):
                    self.members[member_id].assignment.setdefault(topic_id, []).append(j % count)
        self.assignment_epoch = self.epoch
        for member in self.members.values():
            member.epoch = self.epoch
