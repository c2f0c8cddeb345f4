"""What every partition assignor sees and returns, and the interface it implements.

The group leader runs one assignor over every member's subscription. The inputs are plain
values (topic partition counts and decoded member subscriptions), so assignors are pure
functions of their arguments and can be tested without a broker.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from sdk.types import TopicPartition


class RebalanceProtocol(enum.Enum):
    """How members give up partitions during a rebalance.

    EAGER: every member revokes everything before joining. COOPERATIVE: members keep what
    they own; only partitions that move are revoked, and a follow-up rebalance hands them to
    their new owner (KIP-429).
    """

    EAGER = "eager"
    COOPERATIVE = "cooperative"


@dataclass(slots=True)
class MemberSubscription:
    """One member's subscription as the leader sees it in the JoinGroup response."""

    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int = -1  # -1: unknown (older clients do not send it)
    rack_id: str | None = None
    group_instance_id: str | None = None  # from the JoinGroup member entry, not the bytes


@dataclass(slots=True)
class MemberAssignment:
    """The partitions the leader gives one member, plus assignor-specific user data."""

    partitions: list[TopicPartition] = field(default_factory=list)
    user_data: bytes | None = None


class Assignor(ABC):
    """A partition assignment strategy, named as Kafka names it on the wire.

    Subclasses set ``name`` (the protocol name members vote on, e.g. ``"range"``) and
    ``supported_protocols``; the first entry of that tuple is the protocol a group uses when
    every member's chosen assignor supports it.
    """

    name: ClassVar[str]
    supported_protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)

    @abstractmethod
    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, MemberSubscription],
    ) -> dict[str, MemberAssignment]:
        """Assign partitions to members.

        ``partitions_per_topic`` holds the partition count of every subscribed topic that
        exists (topics missing from it are skipped); ``subscriptions`` is keyed by member id.
        Every member id gets an entry in the result, possibly empty.
        """

    def subscription_user_data(
        self, topics: Iterable[str], owned: Iterable[TopicPartition], generation: int
    ) -> bytes | None:
        """Extra bytes this assignor sends in the member's subscription (default: none)."""
        return None

    def on_assignment(self, assignment: MemberAssignment, generation: int) -> None:  # noqa: B027
        """Called on every member after SyncGroup; stateful assignors remember what they got."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def sorted_members(subscriptions: Mapping[str, MemberSubscription]) -> list[str]:
    """Member ids in the order Java's assignors use.

    Static members (with a group instance id) come first, ordered by instance id; dynamic
    members follow, ordered by member id. Keeping this order makes our leader's results equal
    to a Java leader's for the same group.
    """

    def key(member_id: str) -> tuple[int, str, str]:
        instance = subscriptions[member_id].group_instance_id
        return (0, instance, member_id) if instance is not None else (1, member_id, "")

    return sorted(subscriptions, key=key)


def empty_assignments(subscriptions: Mapping[str, MemberSubscription]) -> dict[str, list[TopicPartition]]:
    return {member_id: [] for member_id in subscriptions}


def wrap(assigned: Mapping[str, list[TopicPartition]]) -> dict[str, MemberAssignment]:
    return {member_id: MemberAssignment(sorted(tps)) for member_id, tps in assigned.items()}
