"""Share groups without a network: the broker's share-partition state machine and
assignor, the SDK's acknowledgement batches, share sessions and config."""

from __future__ import annotations

import uuid

import pytest

from sdk.errors import ConfigError
from sdk.share.acknowledgements import Acknowledgements, AcknowledgeType, to_batches
from sdk.share.config import ShareConsumerConfig
from sdk.share.session import ShareSession
from sdk.types import TopicPartition
from server_ref.share.group import ShareGroup, ShareMember
from server_ref.share.partition import InvalidAcknowledgement, RecordState, SharePartition

LOCK = 1000
LIMIT = 3


def partition(start: int = 0) -> SharePartition:
    return SharePartition("g", uuid.uuid4(), 0, start)


def test_acquire_new_records_up_to_the_limit_and_the_log_end() -> None:
    sp = partition()
    assert sp.acquire("a", 0, 10, 4, LOCK, 2000, now=0) == [(0, 3, 1)]
    assert sp.acquire("b", 0, 10, 100, LOCK, 2000, now=0) == [(4, 9, 1)]
    assert sp.acquire("c", 0, 10, 100, LOCK, 2000, now=0) == []  # all locked
    assert (sp.start, sp.end) == (0, 10)


def test_in_flight_records_are_capped_by_max_record_locks() -> None:
    sp = partition()
    assert sp.acquire("a", 0, 1000, 500, LOCK, 100, now=0) == [(0, 99, 1)]
    assert sp.acquire("b", 0, 1000, 500, LOCK, 100, now=0) == []
    sp.acknowledge("a", 0, 9, [1], LIMIT)  # settled at the front: the window moves
    assert sp.start == 10
    assert sp.acquire("b", 0, 1000, 500, LOCK, 100, now=0) == [(100, 109, 1)]


def test_accept_release_reject_and_the_start_offset() -> None:
    sp = partition()
    sp.acquire("a", 0, 5, 10, LOCK, 2000, now=0)
    assert sp.acknowledge("a", 0, 4, [1, 2, 3, 1, 0], LIMIT)  # 1 released: a waiter may go
    assert sp.start == 1  # 0 accepted; 1 is available again
    assert sp.records[1].state is RecordState.AVAILABLE
    assert sp.records[2].state is RecordState.ARCHIVED
    assert sp.acquire("b", 0, 5, 10, LOCK, 2000, now=0) == [(1, 1, 2)]
    sp.acknowledge("b", 1, 1, [1], LIMIT)
    assert sp.start == 5 and not sp.records


def test_only_the_holder_may_acknowledge_and_only_once() -> None:
    sp = partition()
    sp.acquire("a", 0, 3, 10, LOCK, 2000, now=0)
    with pytest.raises(InvalidAcknowledgement):
        sp.acknowledge("b", 0, 0, [1], LIMIT)
    sp.acknowledge("a", 0, 0, [1], LIMIT)
    with pytest.raises(InvalidAcknowledgement):
        sp.acknowledge("a", 0, 0, [1], LIMIT)
    with pytest.raises(InvalidAcknowledgement) as bad:
        sp.acknowledge("a", 1, 2, [1, 1, 1], LIMIT)  # three types for two offsets
    assert bad.value.invalid_request
    with pytest.raises(InvalidAcknowledgement):  # all or nothing: 1 is not changed either
        sp.acknowledge("a", 1, 3, [1], LIMIT)
    assert sp.records[1].state is RecordState.ACQUIRED


def test_lock_timeout_redelivers_until_the_delivery_limit_then_archives() -> None:
    sp = partition()
    now = 0
    counts = []
    for _ in range(LIMIT):
        got = sp.acquire("a", 0, 1, 10, LOCK, 2000, now=now)
        counts.append(got[0][2])
        now += LOCK
        assert sp.expire(now, LIMIT)
    assert counts == [1, 2, 3]
    assert sp.start == 1  # archived at the limit: never delivered again
    assert sp.acquire("a", 0, 1, 10, LOCK, 2000, now=now) == []


def test_a_member_leaving_releases_its_records() -> None:
    sp = partition()
    sp.acquire("a", 0, 2, 1, LOCK, 2000, now=0)
    sp.acquire("b", 0, 2, 1, LOCK, 2000, now=0)
    assert sp.release_member("a", LIMIT)
    assert sp.records[0].state is RecordState.AVAILABLE
    assert sp.records[1].state is RecordState.ACQUIRED


def test_snapshot_and_restore_keep_counts_and_free_the_locks() -> None:
    sp = partition(start=10)
    sp.acquire("a", 0, 20, 10, LOCK, 2000, now=0)
    sp.acknowledge("a", 12, 13, [3], LIMIT)
    sp.acknowledge("a", 10, 10, [1], LIMIT)
    again = partition()
    again.restore(sp.snapshot())
    assert again.start == 11 and again.end == 20
    assert again.records[12].state is RecordState.ARCHIVED
    assert again.records[11].state is RecordState.AVAILABLE  # its lock did not survive
    assert again.acquire("b", 0, 20, 1, LOCK, 2000, now=0) == [(11, 11, 2)]


def test_assignor_shares_partitions_only_when_members_outnumber_them() -> None:
    tid = uuid.uuid4()
    group = ShareGroup("g")
    for m in ("m1", "m2", "m3"):
        group.members[m] = ShareMember(m, "c", "/h", None, ["t"])
    group.bump()
    group.assign({"t": (tid, 1)}, now_ms=1000)
    assert all(m.assignment == {tid: [0]} for m in group.members.values())  # one partition
    group.bump()
    group.assign({"t": (tid, 6)}, now_ms=2000)
    assert sorted(p for m in group.members.values() for p in m.assignment[tid]) == \
        list(range(6))  # enough partitions: each has one reader
    assert group.epoch == 2 and all(m.epoch == 2 for m in group.members.values())


def test_assignment_interval_rule() -> None:
    """Kafka's rule: the first assignment at once, then one per interval (0: each time)."""
    group = ShareGroup("g")
    assert group.can_assign(now_ms=5, interval_ms=3600000)  # never assigned
    group.bump()
    group.assign({}, now_ms=1000)
    assert not group.assignment_stale
    group.bump()
    assert group.assignment_stale and group.assignment_epoch == 1 and group.epoch == 2
    assert not group.can_assign(now_ms=1999, interval_ms=1000)
    assert group.can_assign(now_ms=2000, interval_ms=1000)
    assert group.can_assign(now_ms=1000, interval_ms=0)


def test_acknowledgement_batches() -> None:
    assert to_batches([(5, 1), (1, 1), (2, 1), (3, 2), (6, 1)]) == \
        [(1, 3, [1, 1, 2]), (5, 6, [1])]
    acks = Acknowledgements()
    tp = TopicPartition("t", 0)
    acks.hand_out(tp, [1, 2, 3])
    acks.acknowledge(tp, 2, AcknowledgeType.REJECT)
    with pytest.raises(ValueError):
        acks.acknowledge(tp, 2, AcknowledgeType.ACCEPT)  # settled already
    acks.gap(tp, [4])
    assert acks.unacknowledged() == 2
    acks.accept_all()
    assert acks.take() == {tp: [(1, 4, [1, 3, 1, 0])]}
    assert acks.take() == {}


def test_share_session_epochs() -> None:
    s = ShareSession(1)
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    assert s.plan({a, b}) == ([a, b], [])
    s.sent([a, b], [])
    assert s.epoch == 1 and s.is_open
    assert s.plan({b}) == ([], [a])
    s.sent([], [a])
    assert s.partitions == {b} and s.epoch == 2
    s.reset()
    assert s.epoch == 0 and s.plan({b}) == ([b], [])


def test_config_names_and_refusals() -> None:
    cfg = ShareConsumerConfig.build({"group.id": "g", "share.acknowledgement.mode": "EXPLICIT"},
                                    bootstrap_servers="h:9092")
    assert cfg.share_acknowledgement_mode == "explicit"
    with pytest.raises(ConfigError, match=r"share\.auto\.offset\.reset"):
        ShareConsumerConfig.build({"group.id": "g", "auto.offset.reset": "earliest"},
                                  bootstrap_servers="h:9092")
    with pytest.raises(ConfigError, match=r"share\.acknowledgement\.mode"):
        ShareConsumerConfig.build({"group.id": "g", "share.acknowledgement.mode": "auto"},
                                  bootstrap_servers="h:9092")
    with pytest.raises(ConfigError, match="group"):
        ShareConsumerConfig.build({"group.id": " "}, bootstrap_servers="h:9092")
