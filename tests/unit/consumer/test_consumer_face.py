"""The consumer faces' argument checks and state rules (no broker is contacted)."""

from __future__ import annotations

import pytest

from sdk import AsyncConsumer, Consumer, OffsetAndMetadata, TopicPartition
from sdk.consumer.consumer import _adapt_listener, _as_offsets
from sdk.errors import ConfigError, ConsumerClosedError, IllegalStateError

NOWHERE = "127.0.0.1:9"  # nothing listens there; these tests never need an answer
TP = TopicPartition("t", 0)


def test_bad_settings_fail_before_anything_starts() -> None:
    with pytest.raises(ConfigError, match="bootstrap_servers"):
        Consumer("orders")
    with pytest.raises(ConfigError, match=r"max\.poll\.records"):
        Consumer("orders", bootstrap_servers=NOWHERE, config={"max.poll.records": 0})


async def test_calls_before_start_and_after_close() -> None:
    consumer = AsyncConsumer(bootstrap_servers=NOWHERE, group_id="g")
    with pytest.raises(IllegalStateError, match="start the consumer first"):
        await consumer.getmany()
    await consumer.start()
    await consumer.close()
    with pytest.raises(ConsumerClosedError):
        await consumer.getmany()
    with pytest.raises(ConsumerClosedError):
        await consumer.start()


async def test_subscription_rules() -> None:
    consumer = AsyncConsumer(bootstrap_servers=NOWHERE, group_id="g")
    with pytest.raises(ValueError, match="not both"):
        consumer.subscribe(["a"], pattern="b.*")
    with pytest.raises(ValueError, match="needs topics or a pattern"):
        consumer.subscribe([])
    consumer.subscribe(["a", "b"])
    assert consumer.subscription() == {"a", "b"}
    with pytest.raises(IllegalStateError, match="mutually exclusive"):
        consumer.assign([TP])
    with pytest.raises(TypeError, match="listener"):
        consumer.subscribe(["a"], listener=object())
    consumer.unsubscribe()
    consumer.assign([TP])
    assert consumer.assignment() == {TP}
    with pytest.raises(IllegalStateError, match="not assigned"):
        consumer.seek(TopicPartition("other", 0), 3)


async def test_commit_needs_a_group_and_valid_offsets() -> None:
    consumer = AsyncConsumer(bootstrap_servers=NOWHERE)
    await consumer.start()
    try:
        consumer.assign([TP])
        with pytest.raises(IllegalStateError, match="group_id"):
            await consumer.commit()
        with pytest.raises(IllegalStateError, match="group_id"):
            await consumer.committed(TP)
        with pytest.raises(ValueError, match="max_records"):
            await consumer.getmany(max_records=0)
        with pytest.raises(ValueError, match="timestamps"):
            await consumer.offsets_for_times({TP: -5})
    finally:
        await consumer.close()


def test_commit_offsets_accept_ints_and_offset_and_metadata() -> None:
    assert _as_offsets({TP: 5}) == {TP: OffsetAndMetadata(5)}
    assert _as_offsets({TP: OffsetAndMetadata(7, "m")}) == {TP: OffsetAndMetadata(7, "m")}
    with pytest.raises(ValueError, match="int >= 0"):
        _as_offsets({TP: -1})
    with pytest.raises(TypeError, match="TopicPartition"):
        _as_offsets({("t", 0): 1})  # type: ignore[dict-item]


def test_listener_objects_need_only_the_methods_they_use() -> None:
    calls = []

    class OnlyAssigned:
        def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
            calls.append(("assigned", assigned))

    listener = _adapt_listener(OnlyAssigned())
    listener.on_partitions_assigned({TP})
    listener.on_partitions_revoked({TP})  # missing: nothing happens
    listener.on_partitions_lost({TP})
    assert calls == [("assigned", {TP})]
