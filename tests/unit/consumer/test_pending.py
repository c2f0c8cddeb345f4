"""PendingRecords: order, slicing across partitions, drops and first offsets."""

from __future__ import annotations

from sdk.consumer.pending import PendingRecords
from sdk.types import ConsumerRecord, TimestampType, TopicPartition

A, B = TopicPartition("a", 0), TopicPartition("b", 1)


def recs(tp: TopicPartition, start: int, n: int) -> list[ConsumerRecord]:
    return [ConsumerRecord(tp.topic, tp.partition, o, None, b"v", [], 0,
                           TimestampType.CREATE_TIME) for o in range(start, start + n)]


def offsets(records: list[ConsumerRecord]) -> list[int]:
    return [r.offset for r in records]


def test_batches_keep_order_and_group_by_partition() -> None:
    p = PendingRecords()
    assert not p and len(p) == 0 and p.pop_one() is None and p.pop_batch(5) == {}
    p.extend({A: recs(A, 0, 3), B: recs(B, 10, 2)})
    p.extend({A: recs(A, 3, 4), B: []})
    assert len(p) == 9
    first = p.pop_batch(4)
    assert {tp: offsets(r) for tp, r in first.items()} == {A: [0, 1, 2], B: [10]}
    assert p.count(B) == 1 and p.count(A) == 4
    assert offsets([p.pop_one(), p.pop_one()]) == [11, 3]  # type: ignore[list-item]
    rest = p.pop_batch(100)
    assert {tp: offsets(r) for tp, r in rest.items()} == {A: [4, 5, 6]}
    assert not p and len(p) == 0


def test_whole_lists_are_handed_over_and_partial_ones_sliced() -> None:
    p = PendingRecords()
    a = recs(A, 0, 5)
    p.extend({A: a})
    assert p.pop_batch(5)[A] is a  # no copy when a list goes out whole
    a2 = recs(A, 5, 5)
    p.extend({A: a2})
    assert offsets(p.pop_batch(2)[A]) == [5, 6]
    assert offsets(a2) == [5, 6, 7, 8, 9]  # slicing leaves the held list alone


def test_drop_returns_the_first_removed_record_and_first_offsets() -> None:
    p = PendingRecords()
    p.extend({A: recs(A, 0, 3), B: recs(B, 10, 3)})
    p.extend({A: recs(A, 3, 2)})
    p.pop_one()
    assert {tp: r.offset for tp, r in p.first_offsets().items()} == {A: 1, B: 10}
    dropped = p.drop(lambda tp: tp == A)
    assert {tp: r.offset for tp, r in dropped.items()} == {A: 1}
    assert len(p) == 3 and p.count(A) == 0
    assert offsets(p.pop_batch(10)[B]) == [10, 11, 12]
    p.extend({A: recs(A, 0, 2)})
    p.clear()
    assert not p and p.drop(lambda tp: True) == {}
