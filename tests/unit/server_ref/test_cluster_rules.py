"""The pure rules of cluster mode: leader election and ISR changes on fencing, partition
reassignment steps, the metadata image (replay and snapshots), and the leader's high
watermark and "caught up" bookkeeping (server_ref/controller, server_ref/replication)."""

from __future__ import annotations

from server_ref.controller import records
from server_ref.controller.election import (
    assign_replicas,
    elect,
    leaderless_after_unfence,
    without_broker,
)
from server_ref.controller.image import MetadataImage, PartitionImage
from server_ref.controller.reassign import cancel, complete_if_caught_up, start
from server_ref.replication.state import LEADER, ReplicaState


def alive_except(*dead: int):  # type: ignore[no-untyped-def]
    return lambda broker: broker not in dead


def test_election_prefers_the_first_live_isr_replica() -> None:
    p = PartitionImage([3, 1, 2], [1, 2, 3], leader=3)
    assert elect(p, alive_except(3), unclean=False) == 1
    assert elect(p, alive_except(3, 1), unclean=False) == 2
    out_of_sync = PartitionImage([1, 2], [1], leader=1)
    assert elect(out_of_sync, alive_except(1), unclean=False) == -1
    assert elect(out_of_sync, alive_except(1), unclean=True) == 2


def test_fencing_the_leader_moves_leadership_and_bumps_epochs() -> None:
    p = PartitionImage([1, 2, 3], [1, 2, 3], leader=1, leader_epoch=4, partition_epoch=7)
    new = without_broker(p, 1, alive_except(1), unclean=False)
    assert new is not None
    assert (new.leader, new.isr, new.leader_epoch, new.partition_epoch) == (2, [2, 3], 5, 8)
    follower = without_broker(p, 3, alive_except(3), unclean=False)
    assert follower is not None
    assert (follower.leader, follower.isr, follower.leader_epoch) == (1, [1, 2], 4)
    assert without_broker(p, 9, alive_except(9), unclean=False) is None  # not a replica


def test_the_last_isr_member_stays_and_leads_again_when_back() -> None:
    p = PartitionImage([1, 2], [1], leader=1)
    gone = without_broker(p, 1, alive_except(1, 2), unclean=False)
    assert gone is not None and (gone.leader, gone.isr) == (-1, [1])
    assert leaderless_after_unfence(gone, alive_except(1), unclean=False) is None
    back = leaderless_after_unfence(gone, alive_except(2), unclean=False)
    assert back is not None and (back.leader, back.isr) == (1, [1])
    unclean = leaderless_after_unfence(gone, alive_except(1), unclean=True)
    assert unclean is not None and (unclean.leader, unclean.isr) == (2, [2])


def test_replica_assignment_spreads_leaders() -> None:
    assert assign_replicas([1, 2, 3], 3, 2, start=0) == [[1, 2], [2, 3], [3, 1]]
    assert assign_replicas([1, 2, 3], 2, 3, start=1, first_index=3) == [[2, 3, 1], [3, 1, 2]]


def test_reassignment_start_cancel_complete() -> None:
    p = PartitionImage([1, 2], [1, 2], leader=1)
    moving = start(p, [2, 3])
    assert (moving.replicas, moving.adding, moving.removing) == ([2, 3, 1], [3], [1])
    assert complete_if_caught_up(moving, alive_except()) is None  # 3 not in sync yet
    reverted = cancel(moving, alive_except())
    # The old replicas, in the order of the reassigning list (as Kafka reverts them).
    assert (reverted.replicas, reverted.adding, reverted.removing) == ([2, 1], [], [])
    moving.isr = [1, 2, 3]
    done = complete_if_caught_up(moving, alive_except())
    assert done is not None
    assert (done.replicas, done.isr, done.leader) == ([2, 3], [2, 3], 2)  # 1 handed over


def test_image_replay_and_snapshot_round_trip() -> None:
    image = MetadataImage()
    for record in (
            {"type": "register_broker", "id": 1, "epoch": 5, "incarnation": "a",
             "host": "h", "port": 9},
            {"type": "broker_state", "id": 1, "epoch": 5, "fenced": False},
            {"type": "topic", "name": "t", "id": "00000000-0000-0000-0000-000000000001",
             "configs": {"retention.ms": "5"}},
            records.partition_record("00000000-0000-0000-0000-000000000001", 0,
                                     PartitionImage([1], [1], 1)),
            {"type": "topic", "name": "gone", "id": "00000000-0000-0000-0000-000000000002"},
            {"type": "remove_topic", "id": "00000000-0000-0000-0000-000000000002"},
            {"type": "broker_state", "id": 1, "epoch": 4, "fenced": True},  # stale epoch
            {"type": "a kind from a newer controller"}):
        image.apply(records.decode(records.encode(record)))
    assert [b.node_id for b in image.live_brokers()] == [1]
    assert set(image.topics) == {"t"}
    assert image.removed_topic_ids == {"00000000-0000-0000-0000-000000000002"}
    copy = MetadataImage.from_snapshot(image.to_snapshot(), 42)
    assert copy.offset == 42
    assert copy.to_snapshot().replace(b'"offset":42', b'"offset":-1') == image.to_snapshot()
    assert copy.partition("t", 0) == image.partition("t", 0)


def test_high_watermark_is_the_smallest_isr_log_end() -> None:
    state = ReplicaState(LEADER, 1, 0, 0, [1, 2, 3], [1, 2, 3], high_watermark=0)
    assert state.new_high_watermark(10) == 0  # followers not heard from yet
    state.follower_fetched(2, 10, 10, now_ms=100)
    state.follower_fetched(3, 6, 10, now_ms=100)
    assert state.new_high_watermark(10) == 6
    state.isr = [1, 2]  # 3 left the ISR
    assert state.new_high_watermark(10) == 10


def test_caught_up_time_follows_kafkas_rule() -> None:
    state = ReplicaState(LEADER, 1, 0, 0, [1, 2], [1, 2], high_watermark=0)
    state.follower_fetched(2, 10, 10, now_ms=100)  # at the leader's end: caught up now
    assert state.followers[2].last_caught_up_ms == 100
    state.follower_fetched(2, 10, 20, now_ms=200)  # reached the end of its last fetch
    assert state.followers[2].last_caught_up_ms == 100
    state.follower_fetched(2, 20, 30, now_ms=300)  # the end as of the fetch at 200
    assert state.followers[2].last_caught_up_ms == 200
    state.follower_fetched(2, 21, 40, now_ms=400)  # behind its previous fetch's end
    assert state.followers[2].last_caught_up_ms == 200
