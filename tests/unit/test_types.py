"""Value types: hashing, ordering, immutability, defaults, pickling."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from sdk.types import (
    ConsumerRecord,
    Header,
    NewTopic,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    RecordMetadata,
    TimestampType,
    TopicPartition,
)


def test_topic_partition_is_a_hashable_ordered_value() -> None:
    a0, a1, b0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
    assert TopicPartition("a", 0) == a0 and hash(TopicPartition("a", 0)) == hash(a0)
    assert sorted([b0, a1, a0]) == [a0, a1, b0]
    assert a1 < b0 and a0 < a1
    assert {a0: 1}[TopicPartition("a", 0)] == 1
    assert str(a1) == "a-1"
    with pytest.raises(dataclasses.FrozenInstanceError):
        a0.partition = 5  # type: ignore[misc]
    assert not hasattr(a0, "__dict__")  # slots


def test_record_metadata() -> None:
    m = RecordMetadata("orders", 2, 41, 1_700_000_000_000)
    assert (m.serialized_key_size, m.serialized_value_size) == (-1, -1)
    assert m.topic_partition == TopicPartition("orders", 2)
    assert m == RecordMetadata("orders", 2, 41, 1_700_000_000_000, -1, -1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.offset = 0  # type: ignore[misc]


def test_consumer_record_fields_and_defaults() -> None:
    headers: list[Header] = [("trace", b"abc"), ("empty", None)]
    r = ConsumerRecord("orders", 1, 7, b"k", b"v", headers, 123, TimestampType.LOG_APPEND_TIME)
    assert [f.name for f in dataclasses.fields(ConsumerRecord)] == [
        "topic",
        "partition",
        "offset",
        "key",
        "value",
        "headers",
        "timestamp",
        "timestamp_type",
        "serialized_key_size",
        "serialized_value_size",
        "leader_epoch",
    ]
    assert (r.serialized_key_size, r.serialized_value_size, r.leader_epoch) == (-1, -1, None)
    assert r.topic_partition == TopicPartition("orders", 1)
    assert r.timestamp_type == 1 and r.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert r == ConsumerRecord("orders", 1, 7, b"k", b"v", list(headers), 123, r.timestamp_type)
    assert "offset=7" in repr(r)
    assert not hasattr(r, "__dict__")


def test_timestamp_type_values() -> None:
    assert [int(t) for t in TimestampType] == [-1, 0, 1]
    assert TimestampType(0) is TimestampType.CREATE_TIME
    assert TimestampType.NO_TIMESTAMP_TYPE == -1


def test_offset_types() -> None:
    o = OffsetAndMetadata(10)
    assert (o.metadata, o.leader_epoch) == ("", None)
    assert OffsetAndMetadata(10, "m", 3) != o
    assert hash(OffsetAndMetadata(10)) == hash(o)
    t = OffsetAndTimestamp(5, 1000)
    assert (t.offset, t.timestamp, t.leader_epoch) == (5, 1000, None)


def test_new_topic() -> None:
    t = NewTopic("orders", num_partitions=6, replication_factor=1)
    assert t.configs is None and t.replica_assignment is None
    assert NewTopic("defaults").num_partitions == -1
    manual = NewTopic("m", replica_assignment={0: [1, 2], 1: [2, 3]}, configs={"a": "b"})
    assert manual.replication_factor == -1
    with pytest.raises(ValueError):
        NewTopic("")
    with pytest.raises(ValueError):
        NewTopic("x", num_partitions=0)
    with pytest.raises(ValueError):
        NewTopic("x", replication_factor=-2)
    with pytest.raises(ValueError):
        NewTopic("x", num_partitions=2, replica_assignment={0: [1]})


@pytest.mark.parametrize(
    "value",
    [
        TopicPartition("t", 3),
        RecordMetadata("t", 0, 1, 2, 3, 4),
        ConsumerRecord("t", 0, 1, None, b"v", [], 5, TimestampType.CREATE_TIME, 0, 1, 2),
        OffsetAndMetadata(1, "x", 2),
        OffsetAndTimestamp(1, 2),
        NewTopic("t", 1, 1, {"cleanup.policy": "compact"}),
    ],
)
def test_pickle_round_trip(value: object) -> None:
    assert pickle.loads(pickle.dumps(value)) == value
