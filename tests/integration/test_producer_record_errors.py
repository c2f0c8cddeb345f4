"""KIP-467 record errors: a batch refused because of some of its records.

The broker checks every record (a key on a compacted topic, a CreateTime timestamp within
``message.timestamp.before/after.max.ms``), refuses the whole batch and names each bad
record's index and message in ``record_errors`` (Produce v8+). The raw tests compare our
broker's answer with Apache Kafka's, field by field; the producer tests check that only the
named records fail (with the broker's message) and that the others are written, in order.

A third-party client reads the same answer the same way on our broker and Apache Kafka:
librdkafka (confluent-kafka) fails the named records with INVALID_RECORD and the innocent
ones of their batch with its local "different record" error (it does not resend them, as
our producer does), and nothing of the batch is stored.

tansu validates neither keys on compacted topics nor timestamps: it writes every record,
which is asserted where it happens.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from sdk import AdminClient, NewTopic, Producer
from sdk.errors import InvalidRecordError, InvalidTimestampError
from sdk.protocol.messages.produce import ProduceResponse
from sdk.records.builder import RecordBatchBuilder

from .conftest import Target, consume_all, new_topic, produce_raw

HOUR_MS = 3_600_000
pytestmark = pytest.mark.timeout(180)


def _create(target: Target, prefix: str, configs: dict[str, str]) -> str:
    name = new_topic(prefix)
    with AdminClient(bootstrap_servers=target.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(name, 1, 1, configs=configs)]).raise_if_failed()
    return name


def _produce_raw(target: Target, topic: str, records: list[tuple[int, bytes | None]]
                 ) -> ProduceResponse.PartitionProduceResponse:
    """One batch of ``(timestamp, key)`` records sent as is (Produce v11, acks=all)."""
    builder = RecordBatchBuilder()
    for timestamp, key in records:
        builder.append(None, timestamp, key, b"v")
    return produce_raw(target.bootstrap_servers, topic, builder, -1)


def _listed(part: ProduceResponse.PartitionProduceResponse) -> list[tuple[int, str | None]]:
    return [(e.batch_index, e.batch_index_error_message) for e in part.record_errors]


def test_keyless_records_on_a_compacted_topic_are_all_listed(broker: Target) -> None:
    topic = _create(broker, "kip467-key", {"cleanup.policy": "compact"})
    now = int(time.time() * 1000)
    keys: list[bytes | None] = [b"k", None, b"k", None, None, None]
    part = _produce_raw(broker, topic, [(now, k) for k in keys])
    if broker.name == "tansu":  # no per-record validation: the batch is written
        assert (part.error_code, part.base_offset, part.record_errors) == (0, 0, [])
        return
    bad = f"Compacted topic cannot accept message without key in topic partition {topic}-0"
    assert part.error_code == InvalidRecordError.errno  # 87
    assert part.base_offset == -1
    assert _listed(part) == [(1, bad), (3, bad), (4, bad), (5, bad)]
    assert part.error_message == (
        "One or more records have been rejected due to 4 record errors in total, and only "
        "showing the first three errors at most: ["
        + ", ".join(f"RecordError(batchIndex={i}, message='{bad}')" for i in (1, 3, 4))
        + "]")


def test_timestamps_out_of_range_are_all_listed_and_win_the_error_code(broker: Target) -> None:
    topic = _create(broker, "kip467-ts", {"cleanup.policy": "compact",
                                          "message.timestamp.before.max.ms": str(HOUR_MS),
                                          "message.timestamp.after.max.ms": str(HOUR_MS)})
    now = int(time.time() * 1000)
    old, future = now - 10 * HOUR_MS, now + 10 * HOUR_MS
    # A keyless record, two timestamps out of range, and -1 (no timestamp: never checked).
    part = _produce_raw(broker, topic, [(now, b"k"), (now, None), (old, b"k"), (future, b"k"),
                                        (-1, b"k")])
    if broker.name == "tansu":
        assert (part.error_code, part.record_errors) == (0, [])
        return
    # Any timestamp error makes the partition's error INVALID_TIMESTAMP (32).
    assert part.error_code == InvalidTimestampError.errno
    assert part.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [i for i, _ in _listed(part)] == [1, 2, 3]
    messages = [m or "" for _, m in _listed(part)]
    assert messages[0].startswith("Compacted topic cannot accept message without key")
    for index, stamp, message in ((2, old, messages[1]), (3, future, messages[2])):
        assert message.startswith(f"Timestamp {stamp} of message with offset {index} is out "
                                  "of range. The timestamp should be within [")


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "acks1"])
def test_producer_fails_only_the_named_records_and_sends_the_others(
        broker: Target, idempotent: bool) -> None:
    topic = _create(broker, "kip467-producer", {"cleanup.policy": "compact"})
    settings = ({"acks": "all", "enable_idempotence": True} if idempotent
                else {"acks": 1, "enable_idempotence": False})
    keys = [b"k0", None, b"k2", None, b"k4", b"k5", None, b"k7"]
    with Producer(bootstrap_servers=broker.bootstrap_servers, linger_ms=1000,
                  **settings) as producer:
        # One batch: keyed records take the general path, keyless ones are staged; both
        # land in the partition's open batch in send order, then a batch behind it.
        futures = [producer.send(topic, b"v%d" % i, key=key) for i, key in enumerate(keys)]
        producer.flush(60)
        bulk = producer.send_many(topic, [b"after", (b"ka", b"after-keyed")])
        producer.flush(60)
        errors = [f.exception(0) for f in futures]
        metas = [f.result(0) if e is None else None for f, e in zip(futures, errors)]
        bulk_errors = bulk.errors(0)
    if broker.name == "tansu":  # nothing refused: every record is written
        assert errors == [None] * len(keys)
        assert [r.value() for r in consume_all(broker.bootstrap_servers, topic, 10)] == [
            b"v%d" % i for i in range(len(keys))] + [b"after", b"after-keyed"]
        return
    refused = [i for i, key in enumerate(keys) if key is None]
    assert [i for i, e in enumerate(errors) if e is not None] == refused
    for i in refused:  # several records named: InvalidRecordError with each one's message
        error = errors[i]
        assert isinstance(error, InvalidRecordError) and type(error) is InvalidRecordError
        assert (error.message or "").startswith(
            "Compacted topic cannot accept message without key")
    # The keyless record of the bulk batch is the only one named there.
    assert [i for i, _ in bulk_errors] == [0]
    assert isinstance(bulk_errors[0][1], InvalidRecordError)
    kept = [b"v%d" % i for i, key in enumerate(keys) if key is not None] + [b"after-keyed"]
    read = consume_all(broker.bootstrap_servers, topic, len(kept))
    assert [r.value() for r in read] == kept  # written once each, in send order
    offsets = [m.offset for m in metas if m is not None]
    assert offsets == [r.offset() for r in read[:len(offsets)]]


def test_producer_single_record_error_keeps_the_partition_error_class(broker: Target) -> None:
    topic = _create(broker, "kip467-one", {"message.timestamp.before.max.ms": str(HOUR_MS)})
    now = int(time.time() * 1000)
    with Producer(bootstrap_servers=broker.bootstrap_servers, linger_ms=1000) as producer:
        futures = [producer.send(topic, b"a", timestamp_ms=now),
                   producer.send(topic, b"old", timestamp_ms=now - 10 * HOUR_MS),
                   producer.send(topic, b"b", timestamp_ms=now)]
        producer.flush(60)
        errors = [f.exception(0) for f in futures]
    if broker.name == "tansu":  # timestamps are not checked
        assert errors == [None, None, None]
        return
    assert errors[0] is None and errors[2] is None
    # One record named: the partition's error class (as Java), with the record's message.
    error = errors[1]
    assert isinstance(error, InvalidTimestampError)
    assert (error.message or "").startswith(f"Timestamp {now - 10 * HOUR_MS} of message with offset 1")
    assert [r.value() for r in consume_all(broker.bootstrap_servers, topic, 2)] == [b"a", b"b"]


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "acks1"])
def test_librdkafka_tells_the_named_records_from_the_innocent_ones(
        broker: Target, idempotent: bool) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka import Producer as ConfluentProducer

    topic = _create(broker, "kip467-librdkafka", {"cleanup.policy": "compact"})
    producer = ConfluentProducer({
        "bootstrap.servers": broker.bootstrap_servers, "linger.ms": 500,
        "enable.idempotence": idempotent, "acks": "all" if idempotent else 1})
    outcomes: dict[int, Any] = {}

    def report(index: int) -> Any:
        def delivered(error: Any, message: Any) -> None:
            outcomes[index] = (error.code(), error.fatal()) if error else message.offset()
        return delivered

    keys = [b"k0", None, b"k2", None, None, b"k5"]
    for i, key in enumerate(keys):  # one batch: linger.ms holds them together
        producer.produce(topic, b"v%d" % i, key=key, on_delivery=report(i))
    assert producer.flush(60) == 0
    producer.produce(topic, b"after", key=b"ka", on_delivery=report(len(keys)))
    assert producer.flush(60) == 0
    if broker.name == "tansu":  # nothing refused: every record is written
        assert outcomes == {i: i for i in range(len(keys) + 1)}
        return
    named, innocent = (KafkaError.INVALID_RECORD, False), (
        KafkaError._INVALID_DIFFERENT_RECORD, False)  # not fatal, even when idempotent
    assert outcomes == {0: innocent, 1: named, 2: innocent, 3: named, 4: named, 5: innocent,
                        6: 0}  # the refused batch took no offset
    assert [(r.offset(), r.value()) for r in consume_all(broker.bootstrap_servers, topic, 1)] \
        == [(0, b"after")]
