"""The bytes of the standard "consumer" protocol inside JoinGroup and SyncGroup.

A subscription (JoinGroup member metadata) and an assignment (SyncGroup member assignment)
are each an int16 version followed by the generated ``ConsumerProtocolSubscription`` /
``ConsumerProtocolAssignment`` struct of that version. Every Kafka client speaks this, which
is what lets our members share a group with Java, librdkafka, kafka-python or aiokafka ones.

Readers accept versions above the ones we know: newer versions only append fields, so the
prefix we understand decodes with our highest version and the rest is ignored (Java does the
same). Also here: the user-data layouts of Java's sticky assignors, which carry a member's
previous assignment and generation for members that send older subscription versions.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from sdk.consumer.assignors.base import MemberAssignment, MemberSubscription
from sdk.errors import MalformedDataError
from sdk.protocol.messages.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from sdk.protocol.primitives import (
    read_array_length,
    read_string,
    write_array_length,
    write_string,
)
from sdk.types import TopicPartition

SUBSCRIPTION_VERSION = ConsumerProtocolSubscription.MAX_VERSION  # 3: owned, generation, rack
ASSIGNMENT_VERSION = ConsumerProtocolAssignment.MAX_VERSION

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def _group_by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return grouped


def _read_version(data: bytes, what: str) -> int:
    if len(data) < 2:
        raise MalformedDataError(f"{what}: {len(data)} bytes, too short for a version")
    (version,) = _INT16.unpack_from(data, 0)
    if version < 0:
        raise MalformedDataError(f"{what}: negative version {version}")
    return version


def encode_subscription(sub: MemberSubscription, version: int = SUBSCRIPTION_VERSION) -> bytes:
    msg = ConsumerProtocolSubscription(
        topics=sorted(set(sub.topics)),
        user_data=sub.user_data,
        owned_partitions=[
            ConsumerProtocolSubscription.TopicPartition(topic, parts)
            for topic, parts in _group_by_topic(sub.owned_partitions).items()
        ],
        generation_id=sub.generation_id,
        rack_id=sub.rack_id,
    )
    return _INT16.pack(version) + msg.encode(version)


def decode_subscription(data: bytes, group_instance_id: str | None = None) -> MemberSubscription:
    """Decode JoinGroup member metadata; raises MalformedDataError on bad bytes."""
    version = _read_version(data, "consumer subscription")
    msg, _ = ConsumerProtocolSubscription.decode_from(
        data, 2, min(version, ConsumerProtocolSubscription.MAX_VERSION)
    )
    return MemberSubscription(
        topics=[t for t in msg.topics or () if t is not None],
        user_data=msg.user_data,
        owned_partitions=[
            TopicPartition(tp.topic, p) for tp in msg.owned_partitions or () for p in tp.partitions
        ],
        generation_id=msg.generation_id,
        rack_id=msg.rack_id,
        group_instance_id=group_instance_id,
    )


def encode_assignment(assignment: MemberAssignment, version: int = ASSIGNMENT_VERSION) -> bytes:
    msg = ConsumerProtocolAssignment(
        assigned_partitions=[
            ConsumerProtocolAssignment.TopicPartition(topic, parts)
            for topic, parts in _group_by_topic(assignment.partitions).items()
        ],
        user_data=assignment.user_data,
    )
    return _INT16.pack(version) + msg.encode(version)


def decode_assignment(data: bytes) -> MemberAssignment:
    """Decode a SyncGroup member assignment. Empty bytes mean "nothing assigned" (the broker
    sends them to a member the leader left out, e.g. one that joined late)."""
    if not data:
        return MemberAssignment()
    version = _read_version(data, "consumer assignment")
    msg, _ = ConsumerProtocolAssignment.decode_from(
        data, 2, min(version, ConsumerProtocolAssignment.MAX_VERSION)
    )
    return MemberAssignment(
        partitions=[
            TopicPartition(tp.topic, p)
            for tp in msg.assigned_partitions or ()
            for p in tp.partitions or ()
        ],
        user_data=msg.user_data,
    )


# ------------------------------------------------------------ sticky assignors' user data


def encode_sticky_user_data(owned: Iterable[TopicPartition], generation: int) -> bytes:
    """Java ``StickyAssignor`` user data v1: [topic, [partition]] then int32 generation.

    It has no version prefix; v0 is the same without the generation.
    """
    w = bytearray()
    grouped = _group_by_topic(owned)
    write_array_length(w, list(grouped))
    for topic, parts in grouped.items():
        write_string(w, topic)
        write_array_length(w, parts)
        w += struct.pack(f">{len(parts)}i", *parts)
    w += _INT32.pack(generation)
    return bytes(w)


def decode_sticky_user_data(data: bytes) -> tuple[list[TopicPartition], int]:
    """Previous assignment and generation (-1 if absent, i.e. v0) from sticky user data."""
    try:
        count, pos = read_array_length(data, 0)
        owned: list[TopicPartition] = []
        for _ in range(max(count, 0)):
            topic, pos = read_string(data, pos)
            n, pos = read_array_length(data, pos)
            n = max(n, 0)
            owned.extend(TopicPartition(topic, p) for p in struct.unpack_from(f">{n}i", data, pos))
            pos += 4 * n
        generation = _INT32.unpack_from(data, pos)[0] if len(data) >= pos + 4 else -1
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise MalformedDataError(f"sticky assignor user data: {exc}") from None
    return owned, generation


def encode_cooperative_user_data(generation: int) -> bytes:
    """Java ``CooperativeStickyAssignor`` user data: just the int32 generation."""
    return _INT32.pack(generation)


def decode_cooperative_user_data(data: bytes) -> int:
    if len(data) < 4:
        raise MalformedDataError(f"cooperative-sticky user data: {len(data)} bytes, need 4")
    return _INT32.unpack_from(data, 0)[0]
