"""The consumer protocol bytes: round trips, newer versions, and aiokafka's codec both ways."""

from __future__ import annotations

import struct

import pytest
from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyAssignorUserDataV1
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)
from hypothesis import given
from hypothesis import strategies as st

from sdk.consumer.assignors import MemberAssignment, MemberSubscription
from sdk.consumer.assignors.wire import (
    decode_assignment,
    decode_cooperative_user_data,
    decode_sticky_user_data,
    decode_subscription,
    encode_assignment,
    encode_cooperative_user_data,
    encode_sticky_user_data,
    encode_subscription,
)
from sdk.errors import MalformedDataError
from sdk.types import TopicPartition as TP

topic_names = st.text("abcxyz-._", min_size=1, max_size=8)
partitions = st.lists(st.builds(TP, topic_names, st.integers(0, 500)), unique=True, max_size=10)


@given(
    topics=st.lists(topic_names, min_size=1, unique=True),
    owned=partitions,
    generation=st.integers(-1, 2**31 - 1),
    user_data=st.one_of(st.none(), st.binary(max_size=20)),
    rack=st.one_of(st.none(), topic_names),
)
def test_subscription_round_trip(topics, owned, generation, user_data, rack) -> None:
    sub = MemberSubscription(topics, user_data, owned, generation, rack)
    back = decode_subscription(encode_subscription(sub))
    assert sorted(back.topics) == sorted(topics)
    assert (back.user_data, sorted(back.owned_partitions), back.generation_id, back.rack_id) == (
        user_data, sorted(owned), generation, rack,
    )


@given(assigned=partitions, user_data=st.one_of(st.none(), st.binary(max_size=20)))
def test_assignment_round_trip(assigned, user_data) -> None:
    back = decode_assignment(encode_assignment(MemberAssignment(assigned, user_data)))
    assert (sorted(back.partitions), back.user_data) == (sorted(assigned), user_data)


def test_newer_versions_decode_with_what_we_know() -> None:
    sub = MemberSubscription(["a"], None, [TP("a", 1)], 9, "rack")
    body = encode_subscription(sub, 3)[2:]
    future = struct.pack(">h", 7) + body + b"\x00\x01future-field"
    back = decode_subscription(future, group_instance_id="inst")
    assert back.topics == ["a"] and back.owned_partitions == [TP("a", 1)]
    assert back.generation_id == 9 and back.group_instance_id == "inst"
    assignment = encode_assignment(MemberAssignment([TP("a", 0)]), 3)[2:]
    assert decode_assignment(struct.pack(">h", 5) + assignment + b"junk").partitions == [TP("a", 0)]


def test_bad_bytes_raise_malformed_data() -> None:
    for data in (b"\x00", b"\xff\xff\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05ab"):
        with pytest.raises(MalformedDataError):
            decode_subscription(data)
    with pytest.raises(MalformedDataError):
        decode_assignment(b"\x00\x00\x00\x00\x00\x01\x00")
    with pytest.raises(MalformedDataError):
        decode_cooperative_user_data(b"\x00")
    with pytest.raises(MalformedDataError):
        decode_sticky_user_data(b"\x00\x00\x00\x05")


def test_empty_assignment_bytes_mean_nothing_assigned() -> None:
    assert decode_assignment(b"") == MemberAssignment()


def test_aiokafka_reads_our_subscription_and_assignment() -> None:
    ours = encode_subscription(MemberSubscription(["x", "y"], b"ud", [TP("x", 0)], 3, "r"))
    theirs = ConsumerProtocolMemberMetadata.decode(ours)
    assert (theirs.version, sorted(theirs.subscription), theirs.user_data) == (3, ["x", "y"], b"ud")
    assignment = encode_assignment(MemberAssignment([TP("x", 1), TP("y", 0), TP("x", 0)]))
    decoded = ConsumerProtocolMemberAssignment.decode(assignment)
    assert sorted(decoded.partitions()) == [("x", 0), ("x", 1), ("y", 0)]


def test_we_read_aiokafka_subscription_and_assignment() -> None:
    meta = ConsumerProtocolMemberMetadata(0, ["t1", "t2"], b"").encode()
    sub = decode_subscription(meta)
    assert (sub.topics, sub.user_data, sub.owned_partitions, sub.generation_id) == (
        ["t1", "t2"], b"", [], -1,
    )
    assignment = ConsumerProtocolMemberAssignment(0, [("t1", [0, 2]), ("t2", [1])], b"").encode()
    assert decode_assignment(assignment).partitions == [TP("t1", 0), TP("t1", 2), TP("t2", 1)]


def test_sticky_user_data_matches_java_layout_via_aiokafka() -> None:
    ours = encode_sticky_user_data([TP("t", 2), TP("t", 0), TP("u", 1)], 12)
    theirs = StickyAssignorUserDataV1.decode(ours)
    assert theirs.generation == 12
    assert sorted((t, sorted(ps)) for t, ps in theirs.previous_assignment) == [
        ("t", [0, 2]), ("u", [1]),
    ]
    encoded = StickyAssignorUserDataV1([("t", [3, 4])], 8).encode()
    assert decode_sticky_user_data(encoded) == ([TP("t", 3), TP("t", 4)], 8)
    # v0 (no generation) still reads, with generation unknown.
    assert decode_sticky_user_data(encoded[:-4]) == ([TP("t", 3), TP("t", 4)], -1)


def test_cooperative_user_data_is_the_generation() -> None:
    assert encode_cooperative_user_data(7) == b"\x00\x00\x00\x07"
    assert decode_cooperative_user_data(b"\x00\x00\x00\x07") == 7
