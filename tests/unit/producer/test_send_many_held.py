"""send_many to a topic whose metadata is missing returns at once (issue 21.4): its records
are held until the metadata arrives (sdk.producer.held), ``result(timeout=...)`` honours its
timeout, the records fail with the topic's error after ``max_block_ms``, and records sent by
one caller keep their order within a partition when the topic appears late.

The broker does not create topics on first use. A max_block_ms of 60 s and pytest-timeout's
20 s make "returns promptly" a matter of structure, not of measured time: a send_many that
waited for the metadata would hit the test's timeout.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from sdk.admin import AdminClient
from sdk.errors import (
    KafkaTimeoutError,
    MessageTooLargeError,
    ProducerClosedError,
    UnknownTopicOrPartitionError,
)
from sdk.producer import AsyncProducer, Producer
from sdk.types import NewTopic, RecordMetadata
from server_ref import EmbeddedBroker

MINUTE_MS = 60_000
pytestmark = pytest.mark.timeout(20)


@pytest.fixture(scope="module")
def no_auto_create() -> Iterator[EmbeddedBroker]:
    broker = EmbeddedBroker(data_dir=None, port=0, auto_create_topics_enable=False).start()
    try:
        yield broker
    finally:
        broker.close()


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)]).raise_if_failed()


def _assert_in_order(sent: list[RecordMetadata]) -> None:
    """Within each partition, offsets grow in the order the records were sent."""
    last: dict[int, int] = {}
    for meta in sent:
        assert meta.offset > last.get(meta.partition, -1), (meta, last)
        last[meta.partition] = meta.offset


def test_result_timeout_is_honoured_while_the_metadata_is_missing(
        no_auto_create: EmbeddedBroker, topic: str) -> None:
    p = Producer(bootstrap_servers=no_auto_create.bootstrap_servers, max_block_ms=MINUTE_MS)
    try:
        bulk = p.send_many(topic, [b"a", (b"k", b"b")])
        with pytest.raises(KafkaTimeoutError) as waited:
            bulk.result(timeout=0.2)
        assert "still wait for the metadata" in str(waited.value)
        assert not bulk.done() and len(bulk) == 2
    finally:
        p.close(0)  # closing fails what is still held, with the reason
    error = bulk.exception(timeout=5)
    assert isinstance(error, ProducerClosedError)
    assert f"metadata of topic {topic!r}" in str(error)
    assert [i for i, _ in bulk.errors()] == [0, 1]


def test_held_records_fail_with_the_topic_error_after_max_block_ms(
        no_auto_create: EmbeddedBroker, topic: str) -> None:
    # 4 s: a loaded machine answers the first Metadata well within it (an error after no
    # answer at all would have no cause and leave nothing remembered).
    with Producer(bootstrap_servers=no_auto_create.bootstrap_servers, max_block_ms=4000,
                  retry_backoff_ms=10) as p:
        bulk = p.send_many(topic, [b"a", b"b", b"c"])
        with pytest.raises(KafkaTimeoutError):
            bulk.result(timeout=0.05)
        error = bulk.exception(timeout=15)
        assert isinstance(error, KafkaTimeoutError)
        assert isinstance(error.__cause__, UnknownTopicOrPartitionError)
        assert "auto.create.topics.enable" in str(error)
        with pytest.raises(KafkaTimeoutError):
            bulk.result()
        # The cluster's answer is remembered: the next call's records fail at once with it.
        again = p.send_many(topic, [b"d"])
        assert isinstance(again.exception(timeout=15), UnknownTopicOrPartitionError)


def test_bad_input_is_refused_by_the_call_even_when_held(
        no_auto_create: EmbeddedBroker, topic: str) -> None:
    with Producer(bootstrap_servers=no_auto_create.bootstrap_servers,
                  max_block_ms=MINUTE_MS, max_request_size=2000) as p:
        with pytest.raises(MessageTooLargeError):
            p.send_many(topic, [b"ok", b"x" * 5000])
        with pytest.raises(ValueError):
            p.send_many(topic, [b"ok"], partition=-1)
        with pytest.raises(TypeError):
            p.send_many(topic, ["not bytes"])  # type: ignore[list-item]
        p.close(0)


def test_order_is_kept_when_the_topic_appears_late(
        no_auto_create: EmbeddedBroker, topic: str) -> None:
    bootstrap = no_auto_create.bootstrap_servers
    keys = [b"k%d" % (i % 7) for i in range(3000)]
    with Producer(bootstrap_servers=bootstrap, max_block_ms=MINUTE_MS, linger_ms=1) as p:
        first = p.send_many(topic, [(k, b"first-%d" % i) for i, k in enumerate(keys)])
        second = p.send_many(topic, [(k, b"second-%d" % i) for i, k in enumerate(keys)])
        assert not first.done() and not second.done()
        # The topic appears while this thread is blocked in send (waiting for the metadata
        # and for the held records, which go first).
        creator = threading.Timer(0.3, _create, (bootstrap, topic, 3))
        creator.start()
        try:
            futures = [p.send(topic, b"after-%d" % i, key=k) for i, k in enumerate(keys[:50])]
            futures.append(p.send(topic, b"with-headers", key=keys[0], headers=[("h", b"1")]))
        finally:
            creator.join()
        third = p.send_many(topic, [(k, b"third") for k in keys[:50]])
        p.flush(timeout=15)
        sent = first.result(0) + second.result(0) + [f.result(0) for f in futures]
        sent += third.result(0)
    assert len({m.partition for m in sent}) == 3
    _assert_in_order(sent)


def test_a_partition_the_topic_turns_out_not_to_have_fails_the_held_records(
        no_auto_create: EmbeddedBroker, topic: str) -> None:
    """Known only once the metadata arrives: the error reaches the future, and the records
    held after it are appended as usual."""
    bootstrap = no_auto_create.bootstrap_servers
    with Producer(bootstrap_servers=bootstrap, max_block_ms=MINUTE_MS) as p:
        wrong = p.send_many(topic, [b"a", b"b"], partition=5)
        right = p.send_many(topic, [b"c"], partition=0)
        _create(bootstrap, topic, 1)
        error = wrong.exception(timeout=15)
        assert isinstance(error, ValueError) and "5 is not one of them" in str(error)
        assert [i for i, _ in wrong.errors()] == [0, 1]
        assert [(m.partition, m.offset) for m in right.result(timeout=15)] == [(0, 0)]


def test_flush_waits_for_held_records(no_auto_create: EmbeddedBroker, topic: str) -> None:
    bootstrap = no_auto_create.bootstrap_servers
    with Producer(bootstrap_servers=bootstrap, max_block_ms=MINUTE_MS) as p:
        bulk = p.send_many(topic, [b"a", b"b"])
        with pytest.raises(KafkaTimeoutError) as timed_out:
            p.flush(timeout=0.1)
        assert "wait for their topic's metadata" in str(timed_out.value)
        creator = threading.Timer(0.2, _create, (bootstrap, topic, 1))
        creator.start()
        try:
            p.flush(timeout=15)
        finally:
            creator.join()
        assert bulk.done()
        assert [m.offset for m in bulk.result(0)] == [0, 1]


def test_the_async_face_returns_at_once_and_keeps_order(
        no_auto_create: EmbeddedBroker, topic: str) -> None:
    async def scenario() -> list[RecordMetadata]:
        async with AsyncProducer(bootstrap_servers=no_auto_create.bootstrap_servers,
                                 max_block_ms=MINUTE_MS) as ap:
            bulk = await ap.send_many(topic, [b"v%d" % i for i in range(500)])
            done: list[Any] = []
            bulk.add_done_callback(done.append)
            waiter = asyncio.ensure_future(_wait(bulk))
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(asyncio.shield(waiter), 0.2)
            later = asyncio.ensure_future(ap.send(topic, b"later"))  # waits behind the bulk
            await asyncio.sleep(0.05)
            assert not later.done()
            await asyncio.to_thread(_create, no_auto_create.bootstrap_servers, topic, 1)
            metas = await waiter
            last = await (await later)
            await ap.flush(timeout=15)
            assert done == [bulk]
            return [*metas, last]

    sent = asyncio.run(scenario())
    assert [m.offset for m in sent] == list(range(501))


async def _wait(bulk: Any) -> list[RecordMetadata]:
    return await bulk
