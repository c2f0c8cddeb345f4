"""A share group's membership and its assignment (the broker-side "simple" assignor). Pure.

Members join with ShareGroupHeartbeat at epoch 0, naming their topics; every change of
membership, subscription or subscribed partitions bumps the group epoch. The target
assignment follows at a heartbeat, at most once per ``share.assignment.interval.ms`` (the
first one at once), as Kafka's coordinator does (``can_assign``); until then members keep
the last one and a member that joined meanwhile has none. No reconciliation is needed: a
share partition may be read by several members at the same time, so nothing must be
revoked before it is given. Per topic, with P partitions and
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
        self.assignment_ms = 0  # when the target assignment was last computed (0: never)
        # the subscribed topics' (id, partition count) as of the last epoch bump
        self.partitions_of: dict[str, tuple[uuid.UUID, int]] = {}

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.topics}

    def bump(self) -> None:
        """Membership, a subscription or the subscribed partitions changed."""
        self.epoch += 1

    @property
    def assignment_stale(self) -> bool:
        return self.epoch > self.assignment_epoch

    def can_assign(self, now_ms: int, interval_ms: int) -> bool:
        """Whether a new target assignment may be computed now (Kafka's rule: never
        computed, no interval, or the interval passed since the last one)."""
        return self.assignment_ms == 0 or interval_ms == 0 \
            or now_ms >= self.assignment_ms + interval_ms

    def assign(self, partitions_of: dict[str, tuple[uuid.UUID, int]], now_ms: int) -> None:
        """Recompute every member's assignment for the current group epoch.
        ``partitions_of``: topic name -> (topic id, partition count) of the subscribed
        topics that exist."""
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
        self.assignment_epoch, self.assignment_ms = self.epoch, now_ms
        for member in self.members.values():
            member.epoch = self.epoch
