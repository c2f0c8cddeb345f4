"""Server-side assignors of KIP-848 consumer groups: ``uniform`` and ``range``.

Both are pure functions from the members' subscriptions (resolved to topic ids), the
partition counts and the current target assignment, to the new target assignment. Kafka's
names and defaults: ``group.consumer.assignors=uniform,range``, the first is the default.

* ``uniform`` spreads all partitions as evenly as possible (counts differ by at most one
  among members subscribed to the same topics) and keeps every partition where it is when
  that does not break the balance: a member joining takes partitions from the busiest
  members only, so the fewest partitions move.
* ``range`` gives each member a contiguous range of each topic's partitions, members in
  member-id order, the first ``partitions % members`` members one more (the classic range
  rule, applied by the broker).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

Assignment = dict[uuid.UUID, set[int]]  # topic id -> partitions
Assignor = Callable[
    [Mapping[str, frozenset[uuid.UUID]], Mapping[uuid.UUID, int], Mapping[str, Assignment]],
    dict[str, Assignment],
]


def uniform(subscriptions: Mapping[str, frozenset[uuid.UUID]],
            partition_counts: Mapping[uuid.UUID, int],
            current: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Balanced and sticky; see the module docstring."""
    members = sorted(subscriptions)
    result: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in members}
    owner: dict[tuple[uuid.UUID, int], str] = {}
    # Keep what is still valid (the member is subscribed, the partition exists).
    for member in members:
        for topic_id, partitions in current.get(member, {}).items():
            if topic_id not in subscriptions[member]:
                continue
            for p in partitions:
                tp = (topic_id, p)
                if p < partition_counts.get(topic_id, 0) and tp not in owner:
                    owner[tp] = member
                    result[member].add(tp)
    # Place the rest on the least-loaded subscribed member (ties: member id order).
    for topic_id in sorted(partition_counts, key=str):
        eligible = [m for m in members if topic_id in subscriptions[m]]
        if not eligible:
            continue
        for p in range(partition_counts[topic_id]):
            tp = (topic_id, p)
            if tp in owner:
                continue
            target = min(eligible, key=lambda m: (len(result[m]), m))
            owner[tp] = target
            result[target].add(tp)
    # Balance: move partitions from the busiest to the idlest member that may take them,
    # until no move lowers the spread (each move strictly narrows it, so this ends).
    moved = True
    while moved:
        moved = False
        for giver in sorted(members, key=lambda m: (-len(result[m]), m)):
            for tp in sorted(result[giver], key=lambda x: (str(x[0]), -x[1])):
                takers = [m for m in members if tp[0] in subscriptions[m]
                          and len(result[m]) + 1 < len(result[giver])]
                if not takers:
                    continue
                taker = min(takers, key=lambda m: (len(result[m]), m))
                result[giver].discard(tp)
                result[taker].add(tp)
                owner[tp] = taker
                moved = True
                break
            if moved:
                break
    return {m: _by_topic(tps) for m, tps in result.items()}


def range_(subscriptions: Mapping[str, frozenset[uuid.UUID]],
           partition_counts: Mapping[uuid.UUID, int],
           current: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Contiguous ranges per topic; see the module docstring."""
    result: dict[str, Assignment] = {m: {} for m in subscriptions}
    for topic_id, count in partition_counts.items():
        members = sorted(m for m, topics in subscriptions.items() if topic_id in topics)
        if not members:
            continue
        per, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            size = per + (1 if i < extra else 0)
            if size:
                result[member][topic_id] = set(range(start, start + size))
            start += size
    return result


def _by_topic(partitions: set[tuple[uuid.UUID, int]]) -> Assignment:
    out: Assignment = {}
    for topic_id, p in partitions:
        out.setdefault(topic_id, set()).add(p)
    return out


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}
DEFAULT_ASSIGNOR = "uniform"
