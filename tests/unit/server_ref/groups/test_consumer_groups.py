"""The reference broker's KIP-848 coordinator without sockets: assignors, epochs and the
rule that a partition gets a new owner only after the old one revoked it."""

from __future__ import annotations

import uuid

import pytest

from sdk import errors
from server_ref.groups.assignors import range_, uniform
from server_ref.groups.consumer_coordinator import ConsumerGroupCoordinator
from server_ref.groups.timers import Timers

T1, T2 = uuid.uuid4(), uuid.uuid4()


def coordinator() -> ConsumerGroupCoordinator:
    return ConsumerGroupCoordinator(lambda: [("a", T1, 4, False), ("b", T2, 2, False)],
                                    Timers(), heartbeat_interval_ms=100)


def beat(c: ConsumerGroupCoordinator, member: str, epoch: int, owned=None, **kw):
    kw.setdefault("subscribed_topic_names", ["a"])
    return c.heartbeat("g", member, epoch, instance_id=kw.pop("instance_id", None),
                       rack_id=None, rebalance_timeout_ms=kw.pop("rebalance_timeout_ms", 30_000),
                       subscribed_topic_regex=kw.pop("subscribed_topic_regex", None),
                       server_assignor=kw.pop("server_assignor", None),
                       owned=owned, client_id="c", client_host="/h", **kw)


def test_uniform_is_balanced_and_sticky() -> None:
    subs = {m: frozenset({T1, T2}) for m in ("m1", "m2", "m3")}
    first = uniform(subs, {T1: 4, T2: 2}, {})
    assert sorted(sum(len(p) for p in a.values()) for a in first.values()) == [2, 2, 2]
    subs["m4"] = frozenset({T1, T2})
    second = uniform(subs, {T1: 4, T2: 2}, first)
    moved = sum(len(first[m].get(t, set()) - second[m].get(t, set()))
                for m in first for t in (T1, T2))
    assert moved == 1  # the newcomer takes one partition; nothing else moves
    assert sorted(sum(len(p) for p in a.values()) for a in second.values()) == [1, 1, 2, 2]


def test_range_gives_contiguous_ranges() -> None:
    result = range_({"m1": frozenset({T1}), "m2": frozenset({T1})}, {T1: 5}, {})
    assert result == {"m1": {T1: {0, 1, 2}}, "m2": {T1: {3, 4}}}


def test_a_partition_moves_only_after_its_owner_revoked_it() -> None:
    c = coordinator()
    r1 = beat(c, "m1", 0)
    assert r1.member_epoch == 1 and r1.assignment == {T1: {0, 1, 2, 3}}
    r2 = beat(c, "m2", 0)
    assert r2.member_epoch == 2 and r2.assignment == {}  # m1 still owns them
    # m1 still reports all four: it keeps epoch 1 and is told to keep two.
    r1 = beat(c, "m1", 1, owned={T1: {0, 1, 2, 3}})
    assert r1.member_epoch == 1 and sum(len(p) for p in r1.assignment.values()) == 2
    kept = r1.assignment[T1]
    assert beat(c, "m2", 2, owned={}).assignment in ({}, None)
    # m1 acknowledges: it moves to epoch 2 and m2 gets the released ones.
    r1 = beat(c, "m1", 1, owned={T1: kept})
    assert r1.member_epoch == 2
    r2 = beat(c, "m2", 2, owned={})
    assert r2.assignment == {T1: {0, 1, 2, 3} - kept}
    assert c.group("g").state.value == "Stable"


def test_epoch_checks_and_commits() -> None:
    c = coordinator()
    beat(c, "m1", 0)
    with pytest.raises(errors.FencedMemberEpochError):
        beat(c, "m1", 5, owned={})
    with pytest.raises(errors.UnknownMemberIdError):
        beat(c, "nobody", 1, owned={})
    with pytest.raises(errors.StaleMemberEpochError):
        c.validate_commit("g", "m1", 7)
    c.validate_commit("g", "m1", 1)
    with pytest.raises(errors.UnsupportedAssignorError):
        beat(c, "m2", 0, server_assignor="sticky")
    with pytest.raises(errors.InvalidRequestError, match="TopicPartitions must be empty"):
        beat(c, "m3", 0, owned={T1: {0}})


def test_static_member_leaves_temporarily_and_comes_back_with_its_partitions() -> None:
    c = coordinator()
    r = beat(c, "s1", 0, instance_id="i1")
    beat(c, "s1", r.member_epoch, owned={T1: {0, 1, 2, 3}}, instance_id="i1")
    beat(c, "s1", -2, instance_id="i1")
    back = beat(c, "s1-new", 0, instance_id="i1")
    assert back.member_id == "s1-new" and back.assignment == {T1: {0, 1, 2, 3}}
    with pytest.raises(errors.UnreleasedInstanceIdError):
        beat(c, "s1-other", 0, instance_id="i1")


def test_regex_subscriptions_follow_new_topics() -> None:
    topics = [("orders-1", T1, 2, False)]
    c = ConsumerGroupCoordinator(lambda: list(topics), Timers())
    r = beat(c, "m1", 0, subscribed_topic_names=None, subscribed_topic_regex="orders-.*")
    assert r.assignment == {T1: {0, 1}}
    topics.append(("orders-2", T2, 1, False))
    r = beat(c, "m1", r.member_epoch, owned={T1: {0, 1}}, subscribed_topic_names=None)
    assert r.assignment == {T1: {0, 1}, T2: {0}}


def test_the_journal_record_round_trips_the_group() -> None:
    from server_ref.groups.consumer_journal import (
        consumer_group_key,
        decode_consumer_group_key,
        decode_group,
        encode_group,
    )

    c = coordinator()
    r = beat(c, "m1", 0, instance_id="i1")
    beat(c, "m2", 0)
    beat(c, "m1", r.member_epoch, owned={T1: {0, 1, 2, 3}}, instance_id="i1")
    group = c.group("g")
    restored = decode_group("g", encode_group(group))
    assert encode_group(restored) == encode_group(group)
    assert restored.partition_epochs == group.partition_epochs
    assert restored.static_members == {"i1": "m1"}
    assert decode_consumer_group_key(consumer_group_key("g")) == "g"
    assert decode_consumer_group_key(b"\x00\x02\x00\x01g") is None  # a classic group key


def test_offset_fetch_by_a_member_checks_its_epoch() -> None:
    c = coordinator()
    r = beat(c, "m1", 0)
    c.validate_fetch("g", "", -1)  # an admin's fetch
    c.validate_fetch("g", "m1", r.member_epoch)
    with pytest.raises(errors.StaleMemberEpochError):
        c.validate_fetch("g", "m1", r.member_epoch + 3)
    with pytest.raises(errors.UnknownMemberIdError):
        c.validate_fetch("g", "ghost", 1)


class RecordingTimers(Timers):
    """Timers that remember the delay each key was last scheduled with."""

    def __init__(self) -> None:
        super().__init__()
        self.delays: dict[object, int] = {}

    def schedule(self, key, delay_ms, callback, *args) -> None:  # type: ignore[override]
        self.delays[key] = delay_ms
        super().schedule(key, delay_ms, callback, *args)


def test_group_configs_set_the_session_timeout_and_heartbeat_interval() -> None:
    """consumer.session.timeout.ms / consumer.heartbeat.interval.ms of the GROUP config
    resource, read at each heartbeat (Kafka's GroupConfigManager); a group without them,
    or a coordinator with no store bound, runs with the broker's values."""
    from server_ref.config import BrokerConfig
    from server_ref.share.group_configs import GroupConfigStore

    timers = RecordingTimers()
    c = ConsumerGroupCoordinator(lambda: [("a", T1, 4, False)], timers,
                                 session_timeout_ms=45_000, heartbeat_interval_ms=5_000)
    session = ("consumer-session", "g", "m1")
    r = beat(c, "m1", 0)
    assert r.interval_ms == 5_000 and timers.delays[session] == 45_000  # nothing bound
    store = GroupConfigStore(None, BrokerConfig(properties={
        "group.consumer.session.timeout.ms": 45_000,
        "group.consumer.min.session.timeout.ms": 6_000,
        "group.consumer.heartbeat.interval.ms": 5_000,
        "group.consumer.min.heartbeat.interval.ms": 500}))
    c.bind_group_configs(store.value)
    r = beat(c, "m1", r.member_epoch, owned={T1: {0, 1, 2, 3}})
    assert r.interval_ms == 5_000 and timers.delays[session] == 45_000  # no override yet
    store.apply("g", {"consumer.session.timeout.ms": store.parse(
        "consumer.session.timeout.ms", "6000"), "consumer.heartbeat.interval.ms":
        store.parse("consumer.heartbeat.interval.ms", "800")})
    store.apply("other", {"consumer.heartbeat.interval.ms": 9_000})
    r = beat(c, "m1", r.member_epoch, owned={T1: {0, 1, 2, 3}})
    assert r.interval_ms == 800 and timers.delays[session] == 6_000
    store.apply("g", {"consumer.heartbeat.interval.ms": None})  # removed: the broker's again
    assert beat(c, "m1", r.member_epoch, owned={T1: {0, 1, 2, 3}}).interval_ms == 5_000
