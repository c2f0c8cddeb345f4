"""The "sticky" and "cooperative-sticky" assignors: balanced, and moving as little as possible.

Both compute the same assignment (:func:`sticky_assign`):

1. Each member keeps the partitions it owned, if it is still subscribed to their topic. When
   two members claim a partition, the claim with the higher generation wins.
2. Partitions nobody keeps go to the least-loaded member subscribed to them; partitions with
   fewer possible owners are placed first.
3. While some member has at least two partitions more than another member that could take
   one of them, the most-loaded member gives one away, new partitions before owned ones.

When every member has the same subscription this ends balanced (loads differ by at most
one), and a member that owned ``k`` partitions keeps at least ``min(k, partitions //
members)`` of them: a member only gives partitions away while it is the most loaded.

"sticky" works with eager rebalancing: members revoke everything before joining, so they
remember what they had and send it in Java's ``StickyAssignor`` user-data layout.
"cooperative-sticky" (KIP-429) relies on the owned partitions in the subscription and then
withholds every partition that still belongs to another member: that member revokes it after
this rebalance and rejoins, and the follow-up rebalance hands it over. So no partition is ever
given to a member while another one still owns it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from sdk.consumer.assignors.base import (
    Assignor,
    MemberAssignment,
    MemberSubscription,
    RebalanceProtocol,
    sorted_members,
    wrap,
)
from sdk.consumer.assignors.wire import (
    decode_cooperative_user_data,
    decode_sticky_user_data,
    encode_cooperative_user_data,
    encode_sticky_user_data,
)
from sdk.errors import MalformedDataError
from sdk.types import TopicPartition

log = logging.getLogger(__name__)


def resolve_ownership(
    subscriptions: Mapping[str, MemberSubscription],
    claims: Mapping[str, tuple[Iterable[TopicPartition], int]],
    partitions_per_topic: Mapping[str, int],
) -> dict[str, list[TopicPartition]]:
    """Which member may keep each claimed partition.

    ``claims`` maps a member to (partitions it says it owns, its generation). A claim counts
    only if the partition exists and the member is still subscribed to its topic; among
    several claims the highest generation wins, then member order.
    """
    order = {m: i for i, m in enumerate(sorted_members(subscriptions))}
    best: dict[TopicPartition, tuple[int, int, str]] = {}
    for member_id, (owned, generation) in claims.items():
        topics = set(subscriptions[member_id].topics)
        for tp in owned:
            if tp.topic not in topics or not 0 <= tp.partition < partitions_per_topic.get(tp.topic, 0):
                continue
            rank = (-generation, order[member_id], member_id)
            previous = best.get(tp)
            if previous is not None and previous[0] == rank[0]:
                log.warning("%s is claimed by %s and %s in the same generation %d; keeping %s",
                            tp, previous[2], member_id, generation, min(previous, rank)[2])
            if previous is None or rank < previous:
                best[tp] = rank
    kept: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
    for tp, (_, _, member_id) in best.items():
        kept[member_id].append(tp)
    return kept


def sticky_assign(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, MemberSubscription],
    kept: Mapping[str, list[TopicPartition]],
) -> dict[str, list[TopicPartition]]:
    """Balanced assignment that starts from ``kept`` (see :func:`resolve_ownership`)."""
    members = sorted_members(subscriptions)
    order = {m: i for i, m in enumerate(members)}
    eligible: dict[TopicPartition, list[str]] = {}
    for topic in sorted({t for s in subscriptions.values() for t in s.topics}):
        subscribers = [m for m in members if topic in subscriptions[m].topics]
        for p in range(partitions_per_topic.get(topic, 0)):
            eligible[TopicPartition(topic, p)] = subscribers

    current: dict[str, set[TopicPartition]] = {m: set(kept.get(m, ())) for m in members}
    previously_owned = {m: frozenset(current[m]) for m in members}
    taken = {tp for tps in current.values() for tp in tps}

    def least_loaded(candidates: list[str]) -> str:
        return min(candidates, key=lambda m: (len(current[m]), order[m]))

    # Place free partitions, the most constrained (fewest possible owners) first.
    free = sorted((tp for tp in eligible if tp not in taken), key=lambda tp: (len(eligible[tp]), tp))
    for tp in free:
        current[least_loaded(eligible[tp])].add(tp)

    def give_away_order(member_id: str) -> list[TopicPartition]:
        # New partitions first (moving them costs nothing), then owned ones, highest first.
        mine = current[member_id]
        fresh = sorted(tp for tp in mine if tp not in previously_owned[member_id])
        owned = sorted((tp for tp in mine if tp in previously_owned[member_id]), reverse=True)
        return fresh + owned

    # Each move lowers the sum of squared loads by at least 2, so this terminates.
    moved = True
    while moved:
        moved = False
        for giver in sorted(members, key=lambda m: (-len(current[m]), order[m])):
            for tp in give_away_order(giver):
                taker = least_loaded(eligible[tp])
                if len(current[giver]) - len(current[taker]) >= 2:
                    current[giver].discard(tp)
                    current[taker].add(tp)
                    moved = True
                    break
            if moved:
                break
    return {m: sorted(current[m]) for m in members}


class StickyAssignor(Assignor):
    """Java's "sticky" assignor, eager protocol: it remembers its last assignment itself."""

    name = "sticky"

    def __init__(self) -> None:
        self._last_assignment: list[TopicPartition] = []
        self._generation = -1

    def subscription_user_data(
        self, topics: Iterable[str], owned: Iterable[TopicPartition], generation: int
    ) -> bytes | None:
        # Under eager rebalancing `owned` is empty by the time we join; send what we had.
        return encode_sticky_user_data(self._last_assignment, self._generation)

    def on_assignment(self, assignment: MemberAssignment, generation: int) -> None:
        self._last_assignment = list(assignment.partitions)
        self._generation = generation

    @staticmethod
    def _claim(sub: MemberSubscription) -> tuple[list[TopicPartition], int]:
        if sub.user_data:
            try:
                owned, generation = decode_sticky_user_data(sub.user_data)
                return owned, generation
            except MalformedDataError as exc:
                log.warning("ignoring undecodable sticky user data: %s", exc)
        return list(sub.owned_partitions), sub.generation_id

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, MemberSubscription],
    ) -> dict[str, MemberAssignment]:
        claims = {m: self._claim(sub) for m, sub in subscriptions.items()}
        kept = resolve_ownership(subscriptions, claims, partitions_per_topic)
        return wrap(sticky_assign(partitions_per_topic, subscriptions, kept))


class CooperativeStickyAssignor(Assignor):
    """Java's "cooperative-sticky" assignor (incremental, two-phase hand-over)."""

    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def subscription_user_data(
        self, topics: Iterable[str], owned: Iterable[TopicPartition], generation: int
    ) -> bytes | None:
        # Subscription v2+ carries the generation itself; older readers find it here.
        return encode_cooperative_user_data(generation)

    @staticmethod
    def _claim(sub: MemberSubscription) -> tuple[list[TopicPartition], int]:
        generation = sub.generation_id
        if generation < 0 and sub.user_data:
            try:
                generation = decode_cooperative_user_data(sub.user_data)
            except MalformedDataError as exc:
                log.warning("ignoring undecodable cooperative-sticky user data: %s", exc)
        return list(sub.owned_partitions), generation

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, MemberSubscription],
    ) -> dict[str, MemberAssignment]:
        claims = {m: self._claim(sub) for m, sub in subscriptions.items()}
        kept = resolve_ownership(subscriptions, claims, partitions_per_topic)
        assigned = sticky_assign(partitions_per_topic, subscriptions, kept)
        return wrap(withhold_owned_elsewhere(assigned, subscriptions))


def withhold_owned_elsewhere(
    assigned: Mapping[str, list[TopicPartition]],
    subscriptions: Mapping[str, MemberSubscription],
) -> dict[str, list[TopicPartition]]:
    """Drop from each member's assignment the partitions only other members claim.

    A member keeps a partition it claims itself (a conflict from earlier generations is not
    made worse). The other claimant revokes them once it sees they are not in its own assignment, then rejoins;
    only the next rebalance gives them to their new owner.
    """
    claimed_by: dict[TopicPartition, set[str]] = {}
    for member_id, sub in subscriptions.items():
        for tp in sub.owned_partitions:
            claimed_by.setdefault(tp, set()).add(member_id)
    result: dict[str, list[TopicPartition]] = {}
    for member_id, tps in assigned.items():
        result[member_id] = [
            tp for tp in tps if member_id in claimed_by.get(tp, (member_id,))
        ]
    return result
