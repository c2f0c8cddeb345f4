"""Whom a cluster-mode DeleteRecords answer waits for: the log start of every replica on a
live broker, in the ISR or not (Kafka's Partition.lowWatermarkIfLeader), never a fenced
or unregistered broker's."""

from __future__ import annotations

from types import SimpleNamespace

from server_ref.replication.reads import replica_log_starts_reached
from server_ref.replication.state import LEADER, FollowerProgress, ReplicaState


def _partition(starts: dict[int, int]) -> SimpleNamespace:
    """Leader 1 of replicas 1, 2, 3 with ISR 1, 2; ``starts``: followers' reported log
    starts (a follower absent never fetched)."""
    state = ReplicaState(LEADER, 1, 4, 9, [1, 2, 3], [1, 2], high_watermark=50)
    for broker, start in starts.items():
        state.followers[broker] = FollowerProgress(log_start_offset=start)
    return SimpleNamespace(replica=state)


def test_every_live_follower_counts_in_the_isr_or_not() -> None:
    live = {1, 2, 3}
    assert replica_log_starts_reached(_partition({2: 20, 3: 20}), 20, live)
    assert not replica_log_starts_reached(_partition({2: 20, 3: 12}), 20, live)  # 3: out of ISR
    assert not replica_log_starts_reached(_partition({2: 20}), 20, live)  # 3 never fetched


def test_followers_on_fenced_brokers_are_not_waited_for() -> None:
    assert replica_log_starts_reached(_partition({2: 20, 3: 12}), 20, {1, 2})
    assert replica_log_starts_reached(_partition({}), 20, {1})
    assert not replica_log_starts_reached(_partition({2: 19}), 20, {1, 2})
