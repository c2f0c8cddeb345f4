"""Assignors: Java's results for known groups, and properties over random groups."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdk.consumer.assignors import (
    ASSIGNORS,
    CooperativeStickyAssignor,
    MemberSubscription,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    StickyAssignor,
    common_protocol,
)
from sdk.consumer.assignors.base import sorted_members
from sdk.consumer.assignors.wire import encode_sticky_user_data
from sdk.errors import ConfigError
from sdk.types import TopicPartition as TP


def subs(**topics_by_member: list[str]) -> dict[str, MemberSubscription]:
    return {m: MemberSubscription(list(ts)) for m, ts in topics_by_member.items()}


def as_lists(result) -> dict[str, list[TP]]:
    return {m: a.partitions for m, a in result.items()}


def tps(*spec: str) -> list[TP]:
    """tps("t1-0", "t2-1") -> TopicPartitions."""
    out = []
    for s in spec:
        topic, _, p = s.rpartition("-")
        out.append(TP(topic, int(p)))
    return out


# ----------------------------------------------------------- Java's known examples


def test_range_two_members_two_topics_three_partitions_each() -> None:
    # Java RangeAssignorTest.testTwoConsumersTwoTopicsSixPartitions
    result = RangeAssignor().assign({"t1": 3, "t2": 3}, subs(c1=["t1", "t2"], c2=["t1", "t2"]))
    assert as_lists(result) == {
        "c1": tps("t1-0", "t1-1", "t2-0", "t2-1"),
        "c2": tps("t1-2", "t2-2"),
    }


def test_range_mixed_subscriptions() -> None:
    # Java RangeAssignorTest.testMultipleConsumersMixedTopics
    result = RangeAssignor().assign(
        {"t1": 3, "t2": 2}, subs(c1=["t1"], c2=["t1", "t2"], c3=["t1"])
    )
    assert as_lists(result) == {
        "c1": tps("t1-0"),
        "c2": tps("t1-1", "t2-0", "t2-1"),
        "c3": tps("t1-2"),
    }


def test_range_more_members_than_partitions_and_missing_topic() -> None:
    result = RangeAssignor().assign({"t": 2}, subs(a=["t", "gone"], b=["t"], c=["t"]))
    assert as_lists(result) == {"a": tps("t-0"), "b": tps("t-1"), "c": []}


def test_roundrobin_two_members_two_topics() -> None:
    # Java RoundRobinAssignorTest.testTwoConsumersTwoTopicsSixPartitions
    result = RoundRobinAssignor().assign(
        {"t1": 3, "t2": 3}, subs(c1=["t1", "t2"], c2=["t1", "t2"])
    )
    assert as_lists(result) == {
        "c1": tps("t1-0", "t1-2", "t2-1"),
        "c2": tps("t1-1", "t2-0", "t2-2"),
    }


def test_roundrobin_mixed_subscriptions() -> None:
    # Java RoundRobinAssignorTest.testMultipleConsumersMixedTopics
    result = RoundRobinAssignor().assign(
        {"t1": 3, "t2": 2}, subs(c1=["t1"], c2=["t1", "t2"], c3=["t1"])
    )
    assert as_lists(result) == {
        "c1": tps("t1-0"),
        "c2": tps("t1-1", "t2-0", "t2-1"),
        "c3": tps("t1-2"),
    }


def test_static_members_sort_first_by_instance_id() -> None:
    group = {
        "m-a": MemberSubscription(["t"]),
        "m-b": MemberSubscription(["t"], group_instance_id="zeta"),
        "m-c": MemberSubscription(["t"], group_instance_id="alpha"),
    }
    assert sorted_members(group) == ["m-c", "m-b", "m-a"]
    # Range follows that order, so a static member keeps its range across member-id changes.
    result = RangeAssignor().assign({"t": 3}, group)
    assert as_lists(result) == {"m-c": tps("t-0"), "m-b": tps("t-1"), "m-a": tps("t-2")}


def test_sticky_keeps_previous_owners_from_java_user_data() -> None:
    # Eager sticky: members report what they had in Java's StickyAssignor user data.
    group = {
        "a": MemberSubscription(["t"], user_data=encode_sticky_user_data(tps("t-0", "t-1", "t-2"), 3)),
        "b": MemberSubscription(["t"], user_data=encode_sticky_user_data(tps("t-3", "t-4", "t-5"), 3)),
        "c": MemberSubscription(["t"]),  # new member
    }
    result = as_lists(StickyAssignor().assign({"t": 6}, group))
    assert sorted(len(v) for v in result.values()) == [2, 2, 2]
    assert set(result["a"]) <= set(tps("t-0", "t-1", "t-2"))
    assert set(result["b"]) <= set(tps("t-3", "t-4", "t-5"))


def test_sticky_higher_generation_wins_a_conflicting_claim() -> None:
    group = {
        "a": MemberSubscription(["t"], owned_partitions=tps("t-0"), generation_id=4),
        "b": MemberSubscription(["t"], owned_partitions=tps("t-0"), generation_id=5),
    }
    result = as_lists(StickyAssignor().assign({"t": 2}, group))
    assert result == {"a": tps("t-1"), "b": tps("t-0")}


def test_cooperative_withholds_a_partition_until_its_owner_revokes_it() -> None:
    assignor = CooperativeStickyAssignor()
    first = {
        "a": MemberSubscription(["t"], owned_partitions=tps("t-0", "t-1", "t-2", "t-3"), generation_id=1),
        "b": MemberSubscription(["t"]),  # joins now
    }
    round1 = as_lists(assignor.assign({"t": 4}, first))
    assert round1["b"] == []  # a still owns everything: b must wait
    assert len(round1["a"]) == 2  # a keeps two and revokes the other two
    second = {
        "a": MemberSubscription(["t"], owned_partitions=round1["a"], generation_id=2),
        "b": MemberSubscription(["t"], owned_partitions=[], generation_id=2),
    }
    round2 = as_lists(assignor.assign({"t": 4}, second))
    assert round2["a"] == round1["a"]
    assert set(round2["b"]) == set(tps("t-0", "t-1", "t-2", "t-3")) - set(round1["a"])


def test_rebalance_protocol_of_a_member() -> None:
    assert common_protocol([CooperativeStickyAssignor()]) is RebalanceProtocol.COOPERATIVE
    # Java's default [range, cooperative-sticky] stays eager, which allows rolling upgrades.
    assert common_protocol([RangeAssignor(), CooperativeStickyAssignor()]) is RebalanceProtocol.EAGER

    class CooperativeOnly(RangeAssignor):
        name = "coop-only"
        supported_protocols = (RebalanceProtocol.COOPERATIVE,)

    with pytest.raises(ConfigError, match="no rebalance protocol"):
        common_protocol([RangeAssignor(), CooperativeOnly()])


# ------------------------------------------------------------------- properties

TOPICS = ["t0", "t1", "t2", "t3"]


@st.composite
def groups(draw: st.DrawFn, same_subscription: bool = False):
    counts = {t: draw(st.integers(0, 12)) for t in TOPICS}
    n_members = draw(st.integers(1, 7))
    shared = draw(st.lists(st.sampled_from(TOPICS), min_size=1, unique=True))
    members = {}
    for i in range(n_members):
        topics = shared if same_subscription else draw(
            st.lists(st.sampled_from(TOPICS), min_size=1, unique=True)
        )
        instance = draw(st.one_of(st.none(), st.sampled_from(["s1", "s2", "s3"])))
        if instance in {m.group_instance_id for m in members.values()}:
            instance = None
        members[f"member-{i}"] = MemberSubscription(list(topics), group_instance_id=instance)
    return counts, members


def check_valid(counts: dict[str, int], members: dict[str, MemberSubscription], result) -> None:
    assert set(result) == set(members)
    owners = Counter(tp for a in result.values() for tp in a.partitions)
    assert all(n == 1 for n in owners.values()), "a partition went to two members"
    wanted = {TP(t, p) for m in members.values() for t in m.topics for p in range(counts[t])}
    assert set(owners) == wanted, "every subscribed partition is assigned"
    for member_id, a in result.items():
        assert {tp.topic for tp in a.partitions} <= set(members[member_id].topics)


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
@settings(max_examples=60, deadline=None)
@given(group=groups())
def test_every_assignor_assigns_each_partition_once(name: str, group) -> None:
    counts, members = group
    check_valid(counts, members, ASSIGNORS[name]().assign(counts, members))


@pytest.mark.parametrize("name", ["roundrobin", "sticky", "cooperative-sticky"])
@settings(max_examples=60, deadline=None)
@given(group=groups(same_subscription=True))
def test_balanced_when_subscriptions_are_equal(name: str, group) -> None:
    counts, members = group
    loads = [len(a.partitions) for a in ASSIGNORS[name]().assign(counts, members).values()]
    assert max(loads) - min(loads) <= 1


@settings(max_examples=60, deadline=None)
@given(group=groups(same_subscription=True))
def test_range_balanced_per_topic(group) -> None:
    counts, members = group
    result = RangeAssignor().assign(counts, members)
    for topic in members["member-0"].topics:
        loads = [sum(tp.topic == topic for tp in a.partitions) for a in result.values()]
        assert max(loads) - min(loads) <= 1


@settings(max_examples=80, deadline=None)
@given(data=st.data(), group=groups(same_subscription=True))
def test_sticky_keeps_ownership(data: st.DataObject, group) -> None:
    counts, members = group
    # A previous balanced assignment, then members leave, join and topics grow.
    before = {m: a.partitions for m, a in StickyAssignor().assign(counts, members).items()}
    leaving = data.draw(st.sets(st.sampled_from(sorted(members))))
    survivors = {m: s for m, s in members.items() if m not in leaving}
    joining = data.draw(st.integers(0, 3))
    for i in range(joining):
        survivors[f"new-{i}"] = MemberSubscription(list(members["member-0"].topics))
    if not survivors:
        return
    grown = {t: c + data.draw(st.integers(0, 3)) for t, c in counts.items()}
    group_now = {
        m: MemberSubscription(s.topics, owned_partitions=before.get(m, []), generation_id=1)
        for m, s in survivors.items()
    }
    after = {m: a.partitions for m, a in StickyAssignor().assign(grown, group_now).items()}
    check_valid(grown, group_now, StickyAssignor().assign(grown, group_now))
    total = sum(len(v) for v in after.values())
    floor = total // len(survivors)
    for member_id, sub in group_now.items():
        kept = set(after[member_id]) & set(sub.owned_partitions)
        assert len(kept) >= min(len(sub.owned_partitions), floor)
    loads = [len(v) for v in after.values()]
    assert max(loads) - min(loads) <= 1


def simulate_cooperative(counts: dict[str, int], owned: dict[str, list[TP]],
                         topics: dict[str, list[str]], generation: int) -> tuple[dict[str, list[TP]], int]:
    """Run rebalance rounds until no member revokes anything; check safety every round."""
    assignor = CooperativeStickyAssignor()
    for _ in range(6):
        generation += 1
        group = {
            m: MemberSubscription(topics[m], owned_partitions=owned.get(m, []),
                                  generation_id=generation - 1)
            for m in topics
        }
        result = {m: a.partitions for m, a in assignor.assign(counts, group).items()}
        for member_id, assigned in result.items():
            for other, sub in group.items():
                if other != member_id:
                    assert not set(assigned) & set(sub.owned_partitions), (
                        f"{member_id} was given partitions {other} still owns"
                    )
        revoked = any(set(owned.get(m, [])) - set(result[m]) for m in topics)
        owned = result
        if not revoked:
            return owned, generation
    raise AssertionError("cooperative rebalancing did not settle within 6 rounds")


@settings(max_examples=60, deadline=None)
@given(data=st.data(), group=groups(same_subscription=True))
def test_cooperative_never_gives_a_partition_to_two_members(data: st.DataObject, group) -> None:
    counts, members = group
    topics = {m: s.topics for m, s in members.items()}
    owned, generation = simulate_cooperative(counts, {}, topics, 0)
    for _ in range(data.draw(st.integers(1, 3))):
        leaving = data.draw(st.sets(st.sampled_from(sorted(topics)), max_size=len(topics) - 1))
        for m in leaving:
            topics.pop(m)
            owned.pop(m, None)
        for i in range(data.draw(st.integers(0, 3))):
            topics[f"new-{generation}-{i}"] = list(members["member-0"].topics)
        counts = {t: c + data.draw(st.integers(0, 2)) for t, c in counts.items()}
        owned, generation = simulate_cooperative(counts, owned, topics, generation)
        final = {m: MemberSubscription(topics[m]) for m in topics}
        assert Counter(tp for v in owned.values() for tp in v) == Counter(
            {TP(t, p): 1 for t in members["member-0"].topics for p in range(counts[t])}
        )
        assert set(owned) == set(final)
        loads = [len(v) for v in owned.values()]
        assert max(loads) - min(loads) <= 1
