"""Misuse gets a clear error, as Java's clients give it, against the embedded broker:
polling or iterating with nothing to consume, committing before the group was joined or
without a group, a poll timeout whose unit is ambiguous, and confluent-kafka's
``send(callback=...)``."""

from __future__ import annotations

import inspect
import uuid
from datetime import timedelta
from typing import Any

import pytest

from sdk import (
    AdminClient,
    AsyncConsumer,
    AsyncProducer,
    Consumer,
    NewTopic,
    Producer,
    TopicPartition,
)
from sdk.errors import CommitFailedError, IllegalStateError

NOT_SUBSCRIBED = "not subscribed to any topics or assigned any partitions"


def _topic(embedded_broker: Any, records: int = 0) -> str:
    name = f"misuse-{uuid.uuid4().hex[:8]}"
    with AdminClient(bootstrap_servers=embedded_broker.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(name, 1, 1)])
    if records:
        with Producer(bootstrap_servers=embedded_broker.bootstrap_servers) as producer:
            for i in range(records):
                producer.send(name, b"r%d" % i)
            producer.flush(30)
    return name


# ------------------------------------------------------------------ nothing to consume


@pytest.mark.timeout(60)  # iterating used to wait for ever
def test_blocking_consumer_without_subscription_or_assignment(embedded_broker: Any) -> None:
    topic = _topic(embedded_broker, records=1)
    with Consumer(bootstrap_servers=embedded_broker.bootstrap_servers,
                  auto_offset_reset="earliest") as consumer:
        with pytest.raises(IllegalStateError, match=NOT_SUBSCRIBED):
            consumer.poll(timeout_ms=200)  # used to return {} after the timeout
        with pytest.raises(IllegalStateError, match=NOT_SUBSCRIBED):
            next(iter(consumer))
        with pytest.raises(IllegalStateError, match=NOT_SUBSCRIBED):
            for _ in consumer:
                break
        consumer.assign([TopicPartition(topic, 0)])
        record = next(iter(consumer))  # assigned: works
        assert record.value == b"r0"
        consumer.unsubscribe()
        with pytest.raises(IllegalStateError, match=NOT_SUBSCRIBED):
            consumer.poll(timeout_ms=200)


@pytest.mark.timeout(60)
async def test_async_consumer_without_subscription_or_assignment(embedded_broker: Any) -> None:
    topic = _topic(embedded_broker, records=1)
    async with AsyncConsumer(bootstrap_servers=embedded_broker.bootstrap_servers,
                             auto_offset_reset="earliest") as consumer:
        with pytest.raises(IllegalStateError, match=NOT_SUBSCRIBED):
            await consumer.getmany(timeout_ms=200)
        with pytest.raises(IllegalStateError, match=NOT_SUBSCRIBED):
            await consumer.getone()
        with pytest.raises(IllegalStateError, match=NOT_SUBSCRIBED):
            async for _ in consumer:
                break
        consumer.subscribe([topic])  # no group: every partition of the topic
        record = await consumer.getone()
        assert record.value == b"r0"


# ------------------------------------------------------------------ commits


def test_commit_before_joining_the_group_says_so(embedded_broker: Any) -> None:
    topic = _topic(embedded_broker, records=3)
    tp = TopicPartition(topic, 0)
    group = f"g-{uuid.uuid4().hex[:8]}"
    with Consumer(topic, bootstrap_servers=embedded_broker.bootstrap_servers, group_id=group,
                  auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
        # Used to reach the broker and fail with UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION,
        # "the group has rebalanced".
        with pytest.raises(CommitFailedError, match="has not joined the group yet") as info:
            consumer.commit({tp: 1})
        assert "rebalanced" not in str(info.value)
        consumer.commit()  # nothing consumed yet: nothing to commit, as in Java
        records: list[Any] = []
        while len(records) < 3:
            for batch in consumer.poll(timeout_ms=1000).values():
                records += batch
        consumer.commit()
        assert consumer.committed(tp).offset == 3  # type: ignore[union-attr]
        consumer.commit({tp: 1})
        assert consumer.committed(tp).offset == 1  # type: ignore[union-attr]


async def test_async_commit_before_joining_the_group_says_so(embedded_broker: Any) -> None:
    topic = _topic(embedded_broker)
    tp = TopicPartition(topic, 0)
    errors: list[BaseException | None] = []
    async with AsyncConsumer(topic, bootstrap_servers=embedded_broker.bootstrap_servers,
                             group_id=f"g-{uuid.uuid4().hex[:8]}",
                             enable_auto_commit=False) as consumer:
        with pytest.raises(CommitFailedError, match="has not joined the group yet"):
            await consumer.commit({tp: 1})
        await consumer.commit_async({tp: 1}, lambda offsets, err: errors.append(err))
    assert len(errors) == 1 and isinstance(errors[0], CommitFailedError)
    assert "has not joined the group yet" in str(errors[0])


def test_commit_async_without_a_group_fails_like_commit(embedded_broker: Any) -> None:
    topic = _topic(embedded_broker)
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=embedded_broker.bootstrap_servers) as consumer:
        consumer.assign([tp])
        with pytest.raises(IllegalStateError, match=r"commit\(\) needs a group_id"):
            consumer.commit({tp: 1})
        # Used to return a future holding the error, lost unless result() was asked for.
        with pytest.raises(IllegalStateError, match=r"commit_async\(\) needs a group_id"):
            consumer.commit_async({tp: 1})
        with pytest.raises(IllegalStateError, match=r"commit_async\(\) needs a group_id"):
            consumer.commit_async()
    with pytest.raises(IllegalStateError, match="closed"):
        consumer.commit_async()


# ------------------------------------------------------------------ poll timeouts


def test_poll_timeout_is_keyword_or_timedelta(embedded_broker: Any) -> None:
    topic = _topic(embedded_broker, records=2)
    with Consumer(topic, bootstrap_servers=embedded_broker.bootstrap_servers,
                  auto_offset_reset="earliest") as consumer:
        # confluent-kafka's poll(1.0) is one second; it used to mean one millisecond here.
        for bare in (1.0, 1, 500):
            with pytest.raises(TypeError, match=r"timeout_ms=.*timedelta") as info:
                consumer.poll(bare)  # type: ignore[arg-type]
            assert "confluent-kafka" in str(info.value)
        with pytest.raises(TypeError, match="not both"):
            consumer.poll(timedelta(seconds=1), timeout_ms=1000)
        with pytest.raises(ValueError, match=">= 0"):
            consumer.poll(timeout_ms=-1)
        with pytest.raises(TypeError, match="milliseconds as a number"):
            consumer.poll(timeout_ms="100")  # type: ignore[arg-type]
        seen = [r.value for b in consumer.poll(timedelta(seconds=10), max_records=1).values()
                for r in b]
        seen += [r.value for b in consumer.poll(timeout_ms=10_000).values() for r in b]
        assert seen == [b"r0", b"r1"]
        assert consumer.poll() == {}  # no timeout: what is ready now


async def test_getmany_timeout_is_keyword_or_timedelta(embedded_broker: Any) -> None:
    topic = _topic(embedded_broker, records=1)
    async with AsyncConsumer(topic, bootstrap_servers=embedded_broker.bootstrap_servers,
                             auto_offset_reset="earliest") as consumer:
        with pytest.raises(TypeError, match=r"getmany\(\) takes its timeout as timeout_ms="):
            await consumer.getmany(1.0)  # type: ignore[arg-type]
        batch = await consumer.getmany(timedelta(seconds=10))
        assert [r.value for rs in batch.values() for r in rs] == [b"r0"]


# ------------------------------------------------------------------ send(callback=...)


def test_send_callback_names_on_delivery(embedded_broker: Any) -> None:
    topic = _topic(embedded_broker)
    delivered: list[Any] = []
    with Producer(bootstrap_servers=embedded_broker.bootstrap_servers) as producer, \
            Producer(bootstrap_servers=embedded_broker.bootstrap_servers,
                     value_serializer=str.encode) as serializing:
        for face, value in ((producer, b"v"), (serializing, "v")):
            with pytest.raises(TypeError, match="on_delivery") as info:
                face.send(topic, value, callback=lambda err, meta: None)
            message = str(info.value)
            assert message.startswith("Producer.send() got an unexpected keyword argument "
                                      "'callback'")
            assert "stage" not in message  # no internal function name
            with pytest.raises(TypeError, match=r"^Producer\.send\(\) got an unexpected"):
                face.send(topic, value, on_delivry=print)  # Python's own message
            params = inspect.signature(face.send).parameters
            assert "on_delivery" in params and "callback" not in params
            assert face.send.__doc__ and "on_delivery" in face.send.__doc__
            face.send(topic, value, on_delivery=lambda err, meta: delivered.append(err))
            face.flush(30)
        with pytest.raises(TypeError, match=r"AsyncProducer\.send_threadsafe\(\).*on_delivery"):
            producer._core.send_threadsafe(topic, b"v", callback=print)
    assert delivered == [None, None]


async def test_async_send_callback_names_on_delivery(embedded_broker: Any) -> None:
    topic = _topic(embedded_broker)
    async with AsyncProducer(bootstrap_servers=embedded_broker.bootstrap_servers) as producer:
        with pytest.raises(TypeError, match=r"^AsyncProducer\.send\(\) got an unexpected "
                                            r"keyword argument 'callback'.*on_delivery"):
            await producer.send(topic, b"v", callback=print)  # type: ignore[arg-type]
        meta = await (await producer.send(topic, b"v"))
        assert meta.offset == 0
