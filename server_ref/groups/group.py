"""One classic consumer group: members, generation, state machine and committed offsets.

Pure state with no timers and no I/O; :mod:`server_ref.groups.coordinator` drives it. States
and the transitions allowed between them (Kafka's)::

    Empty ──join──► PreparingRebalance ──all joined / timeout──► CompletingRebalance
      ▲                 ▲    │ (no members left)                       │ leader's SyncGroup
      └─────────────────┼────┘                                         ▼
                        └──────── member joins, leaves or expires ── Stable
    any state ──delete / expiry──► Dead

A member waiting for the rebalance to finish holds an asyncio future (``join_waiter``,
``sync_waiter``) that its JoinGroup or SyncGroup handler awaits.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sdk import errors
from sdk.protocol.messages.consumer_protocol import ConsumerProtocolSubscription
from server_ref.groups.results import JoinedMember, JoinResult, Partition, Protocol, SyncResult

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int  # -1: unknown
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None  # only from OffsetCommit v2-v4 retention_time_ms


@dataclass(slots=True, eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[Protocol]  # in the member's order of preference
    assignment: bytes = b""
    join_waiter: asyncio.Future[JoinResult] | None = None
    sync_waiter: asyncio.Future[SyncResult] | None = None

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    def metadata_for(self, protocol_name: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol_name:
                return metadata
        raise errors.IllegalStateError(
            f"member {self.member_id} does not support protocol {protocol_name!r}"
        )

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise errors.IllegalStateError(f"member {self.member_id} supports no candidate protocol")

    def matches(self, protocols: Sequence[Protocol]) -> bool:
        """Same protocols, same order, same metadata: a rejoin that changes nothing."""
        return list(protocols) == self.protocols

    def answer_join(self, result: JoinResult) -> None:
        waiter, self.join_waiter = self.join_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(result)

    def answer_sync(self, result: SyncResult) -> None:
        waiter, self.sync_waiter = self.sync_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(result)


class Group:
    """Members and generation of one group, plus the offsets it has committed."""

    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.state_timestamp_ms: int | None = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}  # insertion order: the first one leads
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        # Member ids handed out with MEMBER_ID_REQUIRED that have not joined with them yet.
        self.pending_members: set[str] = set()
        # Members of the current generation that have not sent SyncGroup yet.
        self.pending_sync: set[str] = set()
        # Set when a member joins during the initial delayed rebalance, which then waits more.
        self.new_member_added = False
        self.in_initial_delay = False
        self.subscribed_topics: frozenset[str] | None = None
        self.offsets: dict[Partition, CommittedOffset] = {}
        # Transactional offset commits not yet committed or aborted, by producer id.
        self.pending_txn_offsets: dict[int, dict[Partition, CommittedOffset]] = {}

    # ------------------------------------------------------------------ state

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _PREVIOUS_STATES[state]:
            raise errors.IllegalStateError(
                f"group {self.group_id} cannot go from {self.state.value} to {state.value}"
            )
        self.state = state
        self.state_timestamp_ms = now_ms

    # ------------------------------------------------------------------ members

    @property
    def is_empty(self) -> bool:
        return not self.members

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def add_member(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove_member(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        instance = member.group_instance_id
        if instance is not None and self.static_members.get(instance) == member_id:
            del self.static_members[instance]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """Hand a static member's seat (and assignment) to its new incarnation ``new_id``.

        The old incarnation's pending JoinGroup/SyncGroup, if any, is answered with
        FENCED_INSTANCE_ID.
        """
        member = self.members.pop(old_id)
        fenced = errors.FencedInstanceIdError.errno
        member.answer_join(JoinResult(error=fenced, member_id=old_id))
        member.answer_sync(SyncResult(error=fenced))
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def validate_member(self, member_id: str, group_instance_id: str | None) -> Member:
        """The member, or FENCED_INSTANCE_ID / UNKNOWN_MEMBER_ID as Kafka decides them."""
        if group_instance_id is not None:
            current = self.static_members.get(group_instance_id)
            if current is not None and current != member_id:
                raise errors.FencedInstanceIdError(
                    f"instance {group_instance_id} is now held by member {current}"
                )
        member = self.members.get(member_id)
        if member is None:
            raise errors.UnknownMemberIdError(f"group {self.group_id} has no member {member_id}")
        return member

    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def has_all_members_joined(self) -> bool:
        return self.awaiting_join_count() == len(self.members) and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def elect_joined_leader(self) -> bool:
        """Make sure the leader is a member that rejoined; False when none rejoined."""
        leader = self.members.get(self.leader_id) if self.leader_id else None
        if leader is not None and leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    # ------------------------------------------------------------------ protocols

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        members = iter(self.members.values())
        first = next(members, None)
        if first is None:
            return set()
        common = set(first.protocol_names())
        for member in members:
            common.intersection_update(member.protocol_names())
        return common

    def supports_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        """Whether a member with these protocols may (re)join, as Kafka decides it."""
        names = list(names)
        if self.is_empty:
            return bool(protocol_type) and bool(names)
        if protocol_type != self.protocol_type:
            return False
        support: dict[str, int] = {}
        for member in self.members.values():
            for name in member.protocol_names():
                support[name] = support.get(name, 0) + 1
        return any(support.get(name, 0) == len(self.members) for name in names)

    def select_protocol(self) -> str:
        """Kafka's vote: each member names its favourite common protocol; most votes wins.

        Ties go to the protocol the leader prefers (Kafka leaves them to hash order).
        """
        candidates = self.candidate_protocols()
        if not candidates:
            raise errors.IllegalStateError(f"group {self.group_id} has no common protocol")
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        best = max(votes.values())
        leader = self.members.get(self.leader_id) if self.leader_id else None
        preference = leader.protocol_names() if leader else []
        tied = [name for name, count in votes.items() if count == best]
        return min(tied, key=lambda n: preference.index(n) if n in preference else len(preference))

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """Topics the members subscribe to, read from the consumer protocol metadata.

        None when that cannot be known (another protocol type, undecodable metadata).
        """
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            try:
                topics.update(decode_subscription_topics(member.metadata_for(self.protocol_name)))
            except (errors.MalformedDataError, errors.IllegalStateError):
                return None
        return frozenset(topics)

    def is_subscribed_to(self, topic: str) -> bool:
        return self.subscribed_topics is not None and topic in self.subscribed_topics

    def joined_members(self) -> tuple[JoinedMember, ...]:
        """Every member's metadata for the selected protocol (what the leader assigns from)."""
        assert self.protocol_name is not None
        return tuple(
            JoinedMember(m.member_id, m.group_instance_id, m.metadata_for(self.protocol_name))
            for m in self.members.values()
        )

    # ------------------------------------------------------------------ offsets

    def has_pending_txn_offset(self, partition: Partition) -> bool:
        return any(partition in staged for staged in self.pending_txn_offsets.values())


def decode_subscription_topics(metadata: bytes) -> list[str]:
    """Topics of a ConsumerProtocolSubscription (int16 version, then the struct).

    A version newer than we know is read as the newest we know: later versions only add
    fields at the end, as Kafka's own reader assumes.
    """
    if len(metadata) < 2:
        raise errors.MalformedDataError("consumer subscription shorter than its version field")
    version = int.from_bytes(metadata[:2], "big", signed=True)
    if version < ConsumerProtocolSubscription.MIN_VERSION:
        raise errors.MalformedDataError(f"consumer subscription version {version}")
    version = min(version, ConsumerProtocolSubscription.MAX_VERSION)
    subscription, _ = ConsumerProtocolSubscription.decode_from(metadata, 2, version)
    return list(subscription.topics)
