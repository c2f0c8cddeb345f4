"""One KIP-848 consumer group: epochs, members, target assignment, reconciliation.

Pure state, no timers and no I/O (:mod:`server_ref.groups.consumer_coordinator` drives it).
The three epochs, as Kafka keeps them:

* the **group epoch** grows whenever what the assignment depends on changes (a member joins,
  leaves or changes its subscription; a subscribed topic appears or gains partitions);
* the **assignment epoch** is the group epoch the current *target* assignment was computed
  for (computed at once here: no assignment interval);
* each **member epoch** says which target the member has reached. A member moves to the
  target epoch only after it stopped owning every partition it must give up
  (UNREVOKED_PARTITIONS until its heartbeat no longer lists them), and it is given a
  partition only when no other member still owns it (UNRELEASED_PARTITIONS meanwhile). So a
  partition never has two owners, and every move is acknowledged by the member that lost it.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from server_ref.groups.assignors import Assignment


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class ClassicInfo:
    """A classic member (JoinGroup/SyncGroup) of a consumer group: what only it has."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # (name, subscription), in its preference


@dataclass(eq=False)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    server_assignor: str | None = None
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    classic: ClassicInfo | None = None  # set for members using the classic protocol

    def owned(self) -> Iterable[tuple[uuid.UUID, int]]:
        """Partitions this member holds (assigned or still to revoke)."""
        for part in (self.assigned, self.pending_revocation):
            for topic_id, partitions in part.items():
                for p in partitions:
                    yield topic_id, p


@dataclass(eq=False)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Assignment] = field(default_factory=dict)  # member id -> partitions
    # (topic id, partition) -> the epoch of the member holding it (assigned or revoking)
    partition_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    subscription_metadata: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    assignor: str | None = None
    deleted: bool = False

    @property
    def state(self) -> ConsumerGroupState:
        if self.deleted:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    # ------------------------------------------------------------------ ownership

    def add_ownership(self, member: ConsumerMember) -> None:
        for tp in member.owned():
            self.partition_epochs[tp] = member.member_epoch

    def remove_ownership(self, member: ConsumerMember) -> None:
        for tp in member.owned():
            self.partition_epochs.pop(tp, None)

    def owner_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def remove_member(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self.remove_ownership(member)
        self.target.pop(member_id, None)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        return member

    # ------------------------------------------------------------------ reconciliation

    def reconcile(self, member: ConsumerMember,
                  owned: Mapping[uuid.UUID, set[int]] | None) -> ConsumerMember:
        """Move ``member`` as far towards its target as the rules allow (module docstring).
        ``owned`` is what its heartbeat reported (None: not reported, assume unchanged)."""
        self.remove_ownership(member)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if not _owns_any(owned, member.pending_revocation):
                self._next(member, member.member_epoch + 1, owned)
        elif (member.state is MemberState.UNRELEASED_PARTITIONS
              or member.member_epoch != self.assignment_epoch):
            self._next(member, member.member_epoch, owned)
        self.add_ownership(member)
        return member

    def _next(self, member: ConsumerMember, epoch: int,
              owned: Mapping[uuid.UUID, set[int]] | None) -> None:
        target = self.target.get(member.member_id, {})
        assigned: Assignment = {}
        revoking: Assignment = {}
        pending: Assignment = {}
        unreleased = False
        for topic_id in set(target) | set(member.assigned):
            want = target.get(topic_id, set())
            have = member.assigned.get(topic_id, set())
            keep = have & want
            if keep:
                assigned[topic_id] = set(keep)
            if have - keep:
                revoking[topic_id] = have - keep
            new = {p for p in want - keep if self.owner_epoch(topic_id, p) == -1}
            if len(new) < len(want - keep):
                unreleased = True
            if new:
                pending[topic_id] = new
        previous = member.member_epoch
        if revoking and _owns_any(owned, revoking):
            member.state = MemberState.UNREVOKED_PARTITIONS
            member.assigned, member.pending_revocation = assigned, revoking
            if epoch != previous:
                member.previous_member_epoch, member.member_epoch = previous, epoch
            return
        for topic_id, partitions in pending.items():
            assigned.setdefault(topic_id, set()).update(partitions)
        member.state = (MemberState.UNRELEASED_PARTITIONS if unreleased
                        else MemberState.STABLE)
        member.assigned, member.pending_revocation = assigned, {}
        if self.assignment_epoch != previous:
            member.previous_member_epoch, member.member_epoch = previous, self.assignment_epoch


def _owns_any(owned: Mapping[uuid.UUID, set[int]] | None, partitions: Assignment) -> bool:
    if owned is None:  # not reported: the member may still hold them
        return bool(partitions)
    return any(owned.get(t, set()) & ps for t, ps in partitions.items())
