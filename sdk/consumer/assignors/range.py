"""The "range" assignor: per topic, contiguous partition ranges in member order.

For each topic on its own, the members subscribed to it are ordered (see
:func:`~sdk.consumer.assignors.base.sorted_members`) and the partitions are split into
contiguous ranges; the first ``partitions % members`` members get one extra partition. With
topics of equal size this co-partitions them: member *i* gets the same partition numbers of
every topic. This matches Java's ``RangeAssignor`` when no rack information is used.
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


class RangeAssignor(Assignor):
    name = "range"

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, MemberSubscription],
    ) -> dict[str, MemberAssignment]:
        assigned = empty_assignments(subscriptions)
        ordered = sorted_members(subscriptions)
        topics = {t for sub in subscriptions.values() for t in sub.topics}
        for topic in sorted(topics):
            count = partitions_per_topic.get(topic)
            if not count:
                continue
            members = [m for m in ordered if topic in subscriptions[m].topics]
            per_member, extra = divmod(count, len(members))
            for index, member_id in enumerate(members):
                start = per_member * index + min(index, extra)
                length = per_member + (1 if index < extra else 0)
                assigned[member_id].extend(
                    TopicPartition(topic, p) for p in range(start, start + length)
                )
        return wrap(assigned)
