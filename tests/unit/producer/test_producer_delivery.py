"""Producer delivery against the reference broker with injected faults: retries, failures,
lost responses (idempotent dedup), back-pressure, timeouts, bad input, threads."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from sdk import errors
from sdk.producer import AsyncProducer, Producer
from sdk.protocol.api import ApiKey

NOT_LEADER = errors.NotLeaderOrFollowerError.errno
INVALID_RECORD = errors.InvalidRecordError.errno


@pytest.fixture
def producer(embedded_broker: Any) -> Any:
    p = Producer(bootstrap_servers=embedded_broker.bootstrap_servers, linger_ms=1,
                 retry_backoff_ms=10, reconnect_backoff_ms=10)
    yield p
    p.close(timeout=5)


def test_retriable_error_is_retried_transparently(producer: Producer, control: Any,
                                                  topic: str) -> None:
    producer.send(topic, b"warm-up").result(timeout=10)
    before = control.seen(ApiKey.PRODUCE)
    control.fail_next(ApiKey.PRODUCE, NOT_LEADER, times=2)
    meta = producer.send(topic, b"retried").result(timeout=10)
    assert meta.offset == 1
    assert control.seen(ApiKey.PRODUCE) - before == 3  # two refusals, then written


def test_non_retriable_error_fails_only_that_batch(producer: Producer, control: Any,
                                                   topic: str, embedded_broker: Any, read_values: Any) -> None:
    producer.send(topic, b"first", partition=0).result(timeout=10)
    control.fail_next(ApiKey.PRODUCE, INVALID_RECORD)
    with pytest.raises(errors.InvalidRecordError):
        producer.send(topic, b"refused", partition=0).result(timeout=10)
    # Idempotence: the refused batch's sequence numbers are reused, so the next batch is
    # not out of order.
    assert producer.send(topic, b"after", partition=0).result(timeout=10).offset == 1
    assert read_values(embedded_broker.bootstrap_servers, topic, 2) == [b"first", b"after"]


def test_lost_response_is_resent_and_deduplicated(embedded_broker: Any, control: Any,
                                                  topic: str, read_values: Any) -> None:
    with Producer(bootstrap_servers=embedded_broker.bootstrap_servers, linger_ms=0,
                  request_timeout_ms=400, delivery_timeout_ms=20_000, retry_backoff_ms=10,
                  reconnect_backoff_ms=10) as p:
        p.send(topic, b"zero").result(timeout=10)
        control.drop_next(ApiKey.PRODUCE, handle=True)  # written, but the answer is lost
        meta = p.send(topic, b"once").result(timeout=15)
        assert meta.offset == 1  # the resend was recognised as a duplicate
    assert read_values(embedded_broker.bootstrap_servers, topic, 2) == [b"zero", b"once"]


def test_without_idempotence_a_lost_response_may_duplicate(embedded_broker: Any, control: Any,
                                                           topic: str, read_values: Any) -> None:
    """At-least-once, as in Kafka: the contrast that shows what idempotence buys."""
    with Producer(bootstrap_servers=embedded_broker.bootstrap_servers, linger_ms=0,
                  enable_idempotence=False, request_timeout_ms=400,
                  delivery_timeout_ms=20_000, retry_backoff_ms=10) as p:
        p.send(topic, b"zero").result(timeout=10)
        control.drop_next(ApiKey.PRODUCE, handle=True)
        p.send(topic, b"twice").result(timeout=15)
    assert read_values(embedded_broker.bootstrap_servers, topic, 3) == [b"zero", b"twice",
                                                                        b"twice"]


def test_buffer_full_blocks_send_for_max_block_ms(embedded_broker: Any, control: Any,
                                                  topic: str) -> None:
    with Producer(bootstrap_servers=embedded_broker.bootstrap_servers, linger_ms=0,
                  batch_size=1024, buffer_memory=4096, max_block_ms=200,
                  max_in_flight_requests_per_connection=1) as p:
        p.send(topic, b"w").result(timeout=10)
        control.delay_next(ApiKey.PRODUCE, 0.6, times=4)
        with pytest.raises(errors.KafkaTimeoutError, match="buffer_memory=4096"):
            for i in range(100):
                p.send(topic, b"x" * 900, partition=0, key=str(i).encode())
        p.flush(timeout=30)  # once the broker answers, the buffer drains


def test_flush_timeout_and_close_failing_the_rest(embedded_broker: Any, control: Any,
                                                  topic: str) -> None:
    p = Producer(bootstrap_servers=embedded_broker.bootstrap_servers, linger_ms=0)
    p.send(topic, b"w").result(timeout=10)
    control.delay_next(ApiKey.PRODUCE, 3.0)
    fut = p.send(topic, b"slow")
    with pytest.raises(errors.KafkaTimeoutError, match="flush did not finish"):
        p.flush(timeout=0.1)
    p.close(timeout=0.1)
    assert isinstance(fut.exception(timeout=5), errors.ProducerClosedError)
    with pytest.raises(errors.ProducerClosedError):
        p.send(topic, b"after close")
    p.close()  # twice is fine


def test_bad_input_is_refused_with_typed_errors(producer: Producer, topic: str) -> None:
    producer.send(topic, b"ok").result(timeout=10)
    with pytest.raises(TypeError, match="value_serializer"):
        producer.send(topic, "text")
    with pytest.raises(TypeError, match="topic"):
        producer.send("", b"v")
    with pytest.raises(TypeError) as refused:
        producer.send(topic, b"v", headers=[("h", "not bytes")])
    # the real fix: no serializer applies to headers (none exists to configure)
    assert "serializer" not in str(refused.value)
    assert str(refused.value).endswith("not str; encode it: ('h', 'not bytes'.encode())")
    with pytest.raises(TypeError, match=r"not a mapping; pass list\(headers.items\(\)\)"):
        producer.send(topic, b"v", headers={"h": b"v"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="header keys"):
        producer.send(topic, b"v", headers=[(b"h", b"v")])
    with pytest.raises(ValueError, match="timestamp_ms"):
        producer.send(topic, b"v", timestamp_ms=-5)
    with pytest.raises(ValueError, match="not one of them"):
        producer.send(topic, b"v", partition=99)
    with pytest.raises(errors.MessageTooLargeError):
        producer.send(topic, b"x" * 2_000_000)
    assert errors.RecordTooLargeError is errors.MessageTooLargeError
    # bytes-like values are accepted
    assert producer.send(topic, bytearray(b"ba"), key=memoryview(b"mv")).result(10).offset >= 0


def test_acks_zero_and_callbacks(embedded_broker: Any, topic: str) -> None:
    got: list[tuple[Any, Any]] = []
    done = threading.Event()

    def on_delivery(err: Any, meta: Any) -> None:
        got.append((err, meta))
        done.set()

    with Producer(bootstrap_servers=embedded_broker.bootstrap_servers, acks=0) as p:
        p.send(topic, b"v", on_delivery=on_delivery)
        assert done.wait(10)
    assert got[0][0] is None and got[0][1].offset == -1 and got[0][1].topic == topic


def test_one_producer_shared_by_threads(embedded_broker: Any, topic: str, read_values: Any) -> None:
    per_thread, threads = 1500, 4
    with Producer(bootstrap_servers=embedded_broker.bootstrap_servers, batch_size=2048) as p:
        p.send(topic, b"w").result(timeout=10)

        def work(n: int) -> None:
            futures = [p.send(topic, f"{n}:{i}".encode(), key=str(n).encode())
                       for i in range(per_thread)]
            assert all(f.result(timeout=30).offset >= 0 for f in futures)

        workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
    values = read_values(embedded_broker.bootstrap_servers, topic, per_thread * threads + 1)
    assert len(values) == per_thread * threads + 1
    for n in range(threads):  # each thread's records kept their order (one key each)
        mine = [int(v.split(b":")[1]) for v in values if v.startswith(f"{n}:".encode())]
        assert mine == list(range(per_thread))


async def test_async_producer_back_pressure_and_send_many(embedded_broker: Any, control: Any,
                                                          topic: str) -> None:
    async with AsyncProducer(bootstrap_servers=embedded_broker.bootstrap_servers,
                             batch_size=1024, buffer_memory=3072, max_block_ms=150,
                             linger_ms=0) as ap:
        await ap.send_and_wait(topic, b"w")
        assert await ap.partitions_for(topic) == [0]
        control.delay_next(ApiKey.PRODUCE, 1.5, times=5)
        with pytest.raises(errors.KafkaTimeoutError):
            for _ in range(50):
                await ap.send(topic, b"y" * 900)
        await ap.flush(timeout=30)  # once the broker answers, the buffer drains
        bulk = await ap.send_many(topic, [b"a", (b"k", b"b")])
        await ap.flush(timeout=30)
        metas = await bulk
        assert [m.serialized_value_size for m in metas] == [1, 1]
        assert [m.serialized_key_size for m in metas] == [-1, 1]
        assert metas[1].offset == metas[0].offset + 1


def test_send_many_metadata_reports_serialized_sizes(embedded_broker: Any, topic: str) -> None:
    """Sizes as Java's RecordMetadata gives them: after serialization, -1 for a null key or
    value; a key first seen in a later chunk (1024 records a chunk) leaves the earlier ones -1."""
    records: list[Any] = [str(i) for i in range(1100)]
    records += [("k" * (i % 3), None if i % 2 else "v" * i) for i in range(7)]
    records.append(("key", "last"))
    with Producer(bootstrap_servers=embedded_broker.bootstrap_servers, linger_ms=1,
                  key_serializer=str.encode, value_serializer=str.encode) as p:
        metas = p.send_many(topic, records).result(timeout=15)
    assert [m.serialized_value_size for m in metas[:1100]] == [len(str(i)) for i in range(1100)]
    assert {m.serialized_key_size for m in metas[:1100]} == {-1}
    assert [(m.serialized_key_size, m.serialized_value_size) for m in metas[1100:]] == [
        (0, 0), (1, -1), (2, 2), (0, -1), (1, 4), (2, -1), (0, 6), (3, 4)]
    assert [m.offset for m in metas] == list(range(len(records)))


def test_send_many_of_a_list_takes_plain_slices_whole_and_keeps_order_and_sizes(
        embedded_broker: Any, topic: str, read_values: Any) -> None:
    """A list is cut into 1024-record slices; a slice of bytes values goes in as it is, any
    other slice record by record: same records, order, keys and sizes either way."""
    records: list[Any] = [b"p%d" % i for i in range(2048)]  # two plain slices
    records += [b"m%d" % i if i % 5 else (b"k%d" % i, b"m%d" % i) for i in range(1024)]
    records += [b"q%d" % i for i in range(1000)] + [None, bytearray(b"ba")]  # tail: mixed
    with Producer(bootstrap_servers=embedded_broker.bootstrap_servers, linger_ms=1) as p:
        metas = p.send_many(topic, records).result(timeout=30)
    assert [m.offset for m in metas] == list(range(len(records)))
    sizes = [(m.serialized_key_size, m.serialized_value_size) for m in metas]
    expected = []
    for r in records:
        key, value = r if type(r) is tuple else (None, r)
        expected.append((-1 if key is None else len(key), -1 if value is None else len(value)))
    assert sizes == expected
    values = read_values(embedded_broker.bootstrap_servers, topic, len(records))
    assert values == [bytes(r[1] if type(r) is tuple else r) if r is not None else None
                      for r in records]


@pytest.mark.parametrize(("code", "new_ids"), [
    (errors.UnknownProducerIdError.errno, 0),
    (errors.OutOfOrderSequenceNumberError.errno, 0),
    (errors.InvalidProducerEpochError.errno, 1),
    (errors.ProducerFencedError.errno, 1),
])
def test_lost_producer_state_resets_the_producer_state_and_delivers(
        embedded_broker: Any, control: Any, topic: str, read_values: Any, code: int,
        new_ids: int) -> None:
    """The broker lost or replaced our state for the next expected batch: the batch was not
    written, so it is resent under a bumped epoch (lost state: no InitProducerId) or a new
    producer id (fenced) - rule 5 in sdk.producer.idempotence."""
    with Producer(bootstrap_servers=embedded_broker.bootstrap_servers, linger_ms=0,
                  retry_backoff_ms=10) as p:
        p.send(topic, b"one").result(timeout=10)
        inits = control.seen(ApiKey.INIT_PRODUCER_ID)
        control.fail_next(ApiKey.PRODUCE, code)
        assert p.send(topic, b"two").result(timeout=15).offset == 1
        assert control.seen(ApiKey.INIT_PRODUCER_ID) == inits + new_ids
        assert p.send(topic, b"three").result(timeout=10).offset == 2
    assert read_values(embedded_broker.bootstrap_servers, topic, 3) == [b"one", b"two", b"three"]


def test_refused_until_the_delivery_timeout_fails_with_the_brokers_error(
        embedded_broker: Any, control: Any, topic: str, read_values: Any) -> None:
    """Every attempt answered NOT_ENOUGH_REPLICAS (checked before the append: nothing was
    written): retried until delivery_timeout_ms, then that error, not a bare timeout (rule 2
    in sdk.producer.idempotence); the next record takes the refused one's sequence."""
    with Producer(bootstrap_servers=embedded_broker.bootstrap_servers, linger_ms=0,
                  request_timeout_ms=1000, delivery_timeout_ms=1500,
                  retry_backoff_ms=20, retry_backoff_max_ms=100) as p:
        p.send(topic, b"one", partition=0).result(timeout=10)
        before = control.seen(ApiKey.PRODUCE)
        control.fail_next(ApiKey.PRODUCE, errors.NotEnoughReplicasError.errno, times=10_000)
        error = p.send(topic, b"refused", partition=0).exception(timeout=10)
        assert isinstance(error, errors.NotEnoughReplicasError), repr(error)
        assert "delivery_timeout_ms" in str(error)
        assert control.seen(ApiKey.PRODUCE) - before > 1, "not retried"
        control.clear()
        assert p.send(topic, b"two", partition=0).result(timeout=10).offset == 1
    assert read_values(embedded_broker.bootstrap_servers, topic, 2) == [b"one", b"two"]


def test_an_answer_after_the_append_leaves_the_outcome_unknown(
        embedded_broker: Any, control: Any, topic: str, read_values: Any) -> None:
    """The leader appends the batch, then answers NOT_ENOUGH_REPLICAS_AFTER_APPEND (its
    followers did not follow), and every retry is refused the same way until the delivery
    timeout. The records are in the log, so the record fails with DeliveryTimeoutError and
    the producer state is reset (rule 3): were its sequence numbers handed to the next
    batch, the broker would take that batch for a duplicate of this one and it would be
    acknowledged without being written."""
    from server_ref.handlers.produce import produce

    after_append = errors.NotEnoughReplicasAfterAppendError.errno

    def append_then_refuse(ctx: Any, request: Any) -> Any:
        response = produce(ctx, request)
        for topic_response in response.responses:
            for part in topic_response.partition_responses:
                part.error_code, part.base_offset = after_append, -1
        return response

    with Producer(bootstrap_servers=embedded_broker.bootstrap_servers, linger_ms=0,
                  request_timeout_ms=1000, delivery_timeout_ms=1500,
                  retry_backoff_ms=20, retry_backoff_max_ms=100) as p:
        p.send(topic, b"one", partition=0).result(timeout=10)
        control.answer_next(ApiKey.PRODUCE, append_then_refuse)
        control.fail_next(ApiKey.PRODUCE, after_append, times=10_000)
        error = p.send(topic, b"maybe", partition=0).exception(timeout=10)
        assert isinstance(error, errors.DeliveryTimeoutError), repr(error)
        assert isinstance(error.__cause__, errors.NotEnoughReplicasAfterAppendError)
        control.clear()
        assert p.send(topic, b"two", partition=0).result(timeout=10).offset == 2
    assert read_values(embedded_broker.bootstrap_servers, topic, 3) == [b"one", b"maybe", b"two"]
