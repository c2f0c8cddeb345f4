"""Partition state changes the controller decides: leader election, ISR changes on fencing.

Pure functions over the image (no I/O), so every rule can be tested alone. A change returns
a new ``PartitionImage`` (or None when nothing changes); the leader epoch moves on every
leader change, the partition epoch on every change (AlterPartition requests carry it, so a
leader acting on stale state is refused).
"""

from __future__ import annotations

from collections.abc import Callable

from server_ref.controller.image import NO_LEADER, PartitionImage

__all__ = ["elect", "assign_replicas", "without_broker", "with_leader"]


def with_leader(p: PartitionImage, leader: int, isr: list[int] | None = None) -> PartitionImage:
    new = p.copy()
    if leader != p.leader:
        new.leader_epoch += 1
    new.leader = leader
    if isr is not None:
        new.isr = isr
    new.partition_epoch += 1
    return new


def elect(p: PartitionImage, alive: Callable[[int], bool], unclean: bool) -> int:
    """The new leader: the first live ISR member in replica order (the preferred replica
    first); with ``unclean``, any live replica when the ISR has none (data the old ISR had
    and it lacks is lost, as in Kafka); NO_LEADER otherwise."""
    for replica in p.replicas:
        if replica in p.isr and alive(replica):
            return replica
    if unclean:
        for replica in p.replicas:
            if alive(replica):
                return replica
    return NO_LEADER


def without_broker(p: PartitionImage, broker: int, alive: Callable[[int], bool],
                   unclean: bool) -> PartitionImage | None:
    """The partition after ``broker`` was fenced: out of the ISR (unless it is the last
    member: Kafka keeps the last one, so it can lead again when it returns), and a new
    leader if it led."""
    if broker not in p.replicas:
        return None
    isr = [r for r in p.isr if r != broker] or list(p.isr)
    if p.leader != broker and isr == p.isr:
        return None
    trial = p.copy()
    trial.isr = isr
    leader = p.leader
    if p.leader == broker or p.leader == NO_LEADER:
        leader = elect(trial, alive, unclean)
        if leader != NO_LEADER and leader not in isr:  # an unclean election
            isr = [leader]
    return with_leader(p, leader, isr)


def leaderless_after_unfence(p: PartitionImage, alive: Callable[[int], bool], unclean: bool
                             ) -> PartitionImage | None:
    """A partition without a leader gets one when a broker that can lead comes back."""
    if p.leader != NO_LEADER:
        return None
    leader = elect(p, alive, unclean)
    if leader == NO_LEADER:
        return None
    isr = p.isr if leader in p.isr else [leader]
    return with_leader(p, leader, isr)


def assign_replicas(brokers: list[int], partitions: int, replication: int, start: int,
                    first_index: int = 0) -> list[list[int]]:
    """Round-robin replica lists, each partition's leader on the next broker, followers
    shifted so leaders and followers spread evenly (Kafka's rack-unaware idea)."""
    n = len(brokers)
    out = []
    for i in range(first_index, first_index + partitions):
        first = (start + i) % n
        out.append([brokers[(first + j) % n] for j in range(replication)])
    return out
