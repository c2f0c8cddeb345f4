"""confluent-kafka (librdkafka) against the reference broker: idempotent produce in every
codec, a two-member group, commits that survive a broker restart, and admin calls."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)
from interop_kit import (
    CODECS,
    BrokerProcess,
    GroupRun,
    as_sorted,
    expected_records,
    wait_until,
)

TOPIC = "ck-orders"
PER_CODEC = 40


def admin_for(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def produce_all(bootstrap: str) -> list:
    sent = []
    for codec in CODECS:
        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                             "enable.idempotence": True, "linger.ms": 5,
                             "partitioner": "murmur2_random"})
        failures: list = []

        def on_delivery(err: object, _msg: object, failures: list = failures) -> None:
            if err is not None:
                failures.append(err)

        records = expected_records(codec, PER_CODEC)
        for key, value, headers in records:
            producer.produce(TOPIC, value, key=key, headers=headers, on_delivery=on_delivery)
        assert producer.flush(30) == 0
        assert failures == []
        sent += records
    return sent


def consume_group(bootstrap: str, produce: Callable[[], list]) -> tuple[list, list]:
    """Two members of one group; once they split the partitions, ``produce`` runs and they
    consume (committing each record) until all it sent arrived. Returns (sent, received)."""
    group = GroupRun(2)

    def run(index: int) -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ck-group",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
        consumer.subscribe([TOPIC])
        try:
            while not group.done.is_set():
                msg = consumer.poll(0.1)
                group.current[index] = {p.partition for p in consumer.assignment()}
                if msg is None:
                    continue
                assert msg.error() is None, msg.error()
                consumer.commit(message=msg, asynchronous=False)
                with group.lock:
                    group.got.append((msg.key(), msg.value(), msg.headers()))
        finally:
            consumer.close()

    sent = group.drive(run, produce, partitions=4, receive_timeout=90)
    return sent, group.got


def test_codecs_group_commits_and_resume(broker: BrokerProcess) -> None:
    admin = admin_for(broker)
    admin.create_topics([NewTopic(TOPIC, 4, 1)])[TOPIC].result(30)
    sent, got = consume_group(broker.bootstrap, lambda: produce_all(broker.bootstrap))
    assert as_sorted(got) == as_sorted(sent)

    broker.restart()
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(TOPIC, b"restart", key=b"after")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ck-group",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    try:
        deadline = time.monotonic() + 30
        msg = None
        while msg is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
        assert msg is not None and (msg.key(), msg.value()) == (b"after", b"restart")
        assert consumer.poll(1.0) is None
    finally:
        consumer.close()


def test_admin_calls(broker: BrokerProcess) -> None:
    admin = admin_for(broker)
    admin.create_topics([NewTopic("ck-admin", 2, 1, config={"retention.ms": "90000"})]
                        )["ck-admin"].result(30)
    metadata = admin.list_topics(timeout=10)
    assert len(metadata.topics["ck-admin"].partitions) == 2
    admin.create_partitions([NewPartitions("ck-admin", 5)])["ck-admin"].result(30)
    wait_until(lambda: len(admin.list_topics(timeout=10).topics["ck-admin"].partitions) == 5)

    resource = ConfigResource(ConfigResource.Type.TOPIC, "ck-admin")
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["retention.ms"].value == "90000"
    incremental = ConfigResource(ConfigResource.Type.TOPIC, "ck-admin", incremental_configs=[
        ConfigEntry("retention.ms", "45000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([incremental])[incremental].result(30)
    assert admin.describe_configs([resource])[resource].result(30)["retention.ms"].value == \
        "45000"

    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(8):
        producer.produce("ck-admin", b"v%d" % i, partition=0, timestamp=1_000_000 + i * 1000)
    assert producer.flush(30) == 0
    partition = TopicPartition("ck-admin", 0)
    offsets = admin.list_offsets({partition: OffsetSpec.latest()})[partition].result(30)
    assert offsets.offset == 8
    by_time = admin.list_offsets({partition: OffsetSpec.for_timestamp(1_003_500)}
                                 )[partition].result(30)
    assert by_time.offset == 4
    deleted = admin.delete_records([TopicPartition("ck-admin", 0, 3)])
    assert deleted[partition].result(30).low_watermark == 3
    earliest = admin.list_offsets({partition: OffsetSpec.earliest()})[partition].result(30)
    assert earliest.offset == 3

    cluster = admin.describe_cluster().result(30)
    assert [n.port for n in cluster.nodes] == [broker.port]

    group = f"ck-admin-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition("ck-admin", 0, 6)], asynchronous=False)
    consumer.close()
    listed = admin.list_consumer_groups().result(30)
    assert group in {g.group_id for g in listed.valid}
    described = admin.describe_consumer_groups([group])[group].result(30)
    assert described.group_id == group
    fetched = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)])[group].result(30)
    assert [(tp.partition, tp.offset) for tp in fetched.topic_partitions] == [(0, 6)]
    admin.delete_consumer_groups([group])[group].result(30)

    admin.delete_topics(["ck-admin"])["ck-admin"].result(30)
    wait_until(lambda: "ck-admin" not in admin.list_topics(timeout=10).topics)
