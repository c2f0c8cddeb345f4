"""Batches the broker refuses as MESSAGE_TOO_LARGE are split and sent again (as Java does).

The reference broker and Apache Kafka enforce a topic's ``max.message.bytes``; here it is
far below the producer's batches, so every batch is refused at first and split (again and
again) until its parts fit. tansu does not enforce the setting, so it is not a target here.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from sdk import AdminClient, NewTopic, Producer, RecordMetadata
from sdk.errors import MessageTooLargeError

from .conftest import Target, consume_all, new_topic, start_target

LIMIT = 2500  # the topic's max.message.bytes: a batch of ~10 of the records below


@pytest.fixture(scope="module", params=["ref", "kafka"])
def ref(request: pytest.FixtureRequest) -> Iterator[Target]:
    with start_target(request.param) as target:
        yield target


def _small_batches_topic(ref: Target, partitions: int = 1) -> str:
    name = new_topic("split")
    with AdminClient(bootstrap_servers=ref.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(name, partitions, 1, configs={
            "max.message.bytes": str(LIMIT)})]).raise_if_failed()
    return name


@pytest.mark.timeout(120)
@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "acks1"])
@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_refused_batches_are_split_and_every_record_arrives_once_in_order(
        ref: Target, idempotent: bool, codec: str) -> None:
    topic = _small_batches_topic(ref)
    settings = {"acks": "all", "enable_idempotence": True} if idempotent else {
        "acks": 1, "enable_idempotence": False}
    delivered: list[tuple[int, RecordMetadata]] = []
    lock = threading.Lock()

    def on_delivery(i: int):  # type: ignore[no-untyped-def]
        def record(err: BaseException | None, meta: RecordMetadata) -> None:
            assert err is None, err
            with lock:
                delivered.append((i, meta))
        return record

    # Values that do not compress away, so lz4 batches are refused too.
    values = [(b"%06d-" % i) + bytes((i * 7 + k) % 251 for k in range(200)) for i in range(300)]
    with Producer(bootstrap_servers=ref.bootstrap_servers, linger_ms=200,
                  compression_type=codec, **settings) as producer:
        futures = [producer.send(topic, value) for value in values[:100]]  # staged sends
        for i, value in enumerate(values[100:200], start=100):  # general path, callbacks
            futures.append(producer.send(topic, value, key=b"k", headers=[("i", b"%d" % i)],
                                         on_delivery=on_delivery(i)))
        bulk = producer.send_many(topic, values[200:])
        producer.flush(60)
        metas = [f.result(0) for f in futures] + bulk.result(0)
    assert sorted(delivered) == [(i, metas[i]) for i in range(100, 200)]
    assert bulk.errors() == []
    read = consume_all(ref.bootstrap_servers, topic, 300)
    by_offset = {r.offset(): r for r in read}
    assert sorted(by_offset) == list(range(300))  # none lost, none written twice
    # Each record's metadata names the offset it was written at.
    assert [by_offset[m.offset].value() for m in metas] == values
    assert [by_offset[m.offset].headers() for m in metas[100:200]] == [
        [("i", b"%d" % i)] for i in range(100, 200)]
    if idempotent:  # order kept (without idempotence, batches behind a split overtake it)
        assert [m.offset for m in metas] == list(range(300))
        assert [r.value() for r in read] == values


@pytest.mark.timeout(60)
def test_a_record_over_the_topic_limit_fails_alone(ref: Target) -> None:
    topic = _small_batches_topic(ref)
    with Producer(bootstrap_servers=ref.bootstrap_servers, linger_ms=200) as producer:
        small = [producer.send(topic, b"small-%d" % i) for i in range(5)]
        big = producer.send(topic, b"B" * (LIMIT * 2))  # under max_request_size: sent
        after = [producer.send(topic, b"after-%d" % i) for i in range(5)]
        producer.flush(30)
        with pytest.raises(MessageTooLargeError):
            big.result(0)
        assert isinstance(big.exception(0), MessageTooLargeError)
        offsets = [f.result(0).offset for f in small + after]
    assert offsets == list(range(10))  # the others are written, in order, without a gap
    read = consume_all(ref.bootstrap_servers, topic, 10)
    assert [r.value() for r in read] == [b"small-%d" % i for i in range(5)] + [
        b"after-%d" % i for i in range(5)]
