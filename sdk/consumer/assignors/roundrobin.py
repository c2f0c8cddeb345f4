"""The "roundrobin" assignor: all partitions dealt out one at a time, in member order.

Partitions of every subscribed topic are sorted by (topic, partition) and dealt to members
in a circle; a member not subscribed to a partition's topic is skipped for that partition.
This matches Java's ``RoundRobinAssignor``.
"""

from __future__ import annotations

from collections.abc import Mapping

from sdk.consumer.assignors.base import (
    Assignor,
    MemberAssignment,
    MemberSubscription,
    empty_assignments,
    sorted_members,
    wrap,
)
from sdk.types import TopicPartition


class RoundRobinAssignor(Assignor):
    name = "roundrobin"

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, MemberSubscription],
    ) -> dict[str, MemberAssignment]:
        assigned = empty_assignments(subscriptions)
        members = sorted_members(subscriptions)
        if not members:
            return {}
        topic_sets = {m: set(subscriptions[m].topics) for m in members}
        topics = sorted({t for ts in topic_sets.values() for t in ts if partitions_per_topic.get(t)})
        cursor = 0
        for topic in topics:
            for partition in range(partitions_per_topic[topic]):
                # Some member is subscribed to every topic in `topics`, so this loop ends.
                while topic not in topic_sets[members[cursor]]:
                    cursor = (cursor + 1) % len(members)
                assigned[members[cursor]].append(TopicPartition(topic, partition))
                cursor = (cursor + 1) % len(members)
        return wrap(assigned)
