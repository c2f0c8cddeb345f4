"""kafka-python against the reference broker: produce in every codec, a two-member group,
commits that survive consumer restarts, and the admin calls kafka-python offers."""

from __future__ import annotations

from collections.abc import Callable

from interop_kit import (
    CODECS,
    BrokerProcess,
    GroupRun,
    as_sorted,
    expected_records,
)
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.structs import OffsetAndMetadata

TOPIC = "kp-orders"
PER_CODEC = 40


def produce_all(bootstrap: str) -> list:
    sent = []
    for codec in CODECS:
        producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec,
                                 acks="all", linger_ms=5)
        records = expected_records(codec, PER_CODEC)
        futures = [producer.send(TOPIC, key=k, value=v, headers=h) for k, v, h in records]
        producer.flush(30)
        for future in futures:
            meta = future.get(10)
            assert meta.offset >= 0
        producer.close()
        sent += records
    return sent


def consume_in_group(bootstrap: str, produce: Callable[[], list], members: int = 2
                     ) -> tuple[list, list]:
    """Start ``members`` consumers of one group; once they have split the partitions, call
    ``produce`` and consume until everything it sent arrived, each member committing what
    it consumed. Returns (sent, received)."""
    group = GroupRun(members)
    consumers = [KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id="kp-group",
                               auto_offset_reset="earliest", enable_auto_commit=False,
                               session_timeout_ms=6000, heartbeat_interval_ms=500)
                 for _ in range(members)]

    # Warm each consumer's metadata before it joins. Otherwise its first join happens before
    # it knows the topic, the metadata arriving right after forces a rejoin, and kafka-python
    # 3.0.12 now and then drops the leader's SyncGroup result in that window (the response is
    # in its own debug log; the member then never heartbeats again).
    for consumer in consumers:
        assert consumer.partitions_for_topic(TOPIC) == {0, 1, 2, 3}

    def run(index: int) -> None:
        consumer = consumers[index]
        while not group.done.is_set():
            batch = consumer.poll(timeout_ms=100)
            group.current[index] = set(consumer.assignment())
            with group.lock:
                for records in batch.values():
                    group.got.extend((r.key, r.value, r.headers) for r in records)
            if batch:
                consumer.commit()

    try:
        sent = group.drive(run, produce, partitions=4, receive_timeout=60)
    finally:
        for c in consumers:
            c.close()
    return sent, group.got


def test_codecs_group_commits_and_resume(broker: BrokerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(TOPIC, num_partitions=4, replication_factor=1)])
    sent, got = consume_in_group(broker.bootstrap, lambda: produce_all(broker.bootstrap))
    assert as_sorted(got) == as_sorted(sent)

    # Restart: consumers resume from the committed offsets, so only new records arrive.
    broker.restart()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    producer.send(TOPIC, key=b"after", value=b"restart").get(10)
    producer.close()
    resumed = KafkaConsumer(TOPIC, bootstrap_servers=broker.bootstrap, group_id="kp-group",
                            auto_offset_reset="earliest", enable_auto_commit=False,
                            consumer_timeout_ms=5000)
    assert [(m.key, m.value) for m in resumed] == [(b"after", b"restart")]
    resumed.close()

    assert "kp-group" in {g["group_id"] for g in admin.list_groups()}
    offsets = admin.list_group_offsets({"kp-group": None})["kp-group"]
    assert sum(o.offset for o in offsets.values()) == len(sent)
    assert admin.describe_groups(["kp-group"])["kp-group"]["group_state"] == "Empty"
    admin.close()


def test_admin_calls(broker: BrokerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    created = admin.create_topics([NewTopic("kp-admin", 2, 1,
                                            topic_configs={"retention.ms": "60000"})])
    configs = created["topics"][0]["configs"]
    assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert "kp-admin" in admin.list_topics()
    (described,) = admin.describe_topics(["kp-admin"])
    assert len(described["partitions"]) == 2
    admin.create_partitions({"kp-admin": NewPartitions(total_count=3)})
    (described,) = admin.describe_topics(["kp-admin"])
    assert len(described["partitions"]) == 3

    resource = ConfigResource(ConfigResourceType.TOPIC, "kp-admin",
                              configs={"retention.ms": "120000"})
    assert admin.alter_configs([resource]) == {"topic": {"kp-admin": "OK"}}
    response = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-admin")])
    assert response["topic"]["kp-admin"]["retention.ms"]["value"] == "120000"

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(10):
        producer.send("kp-admin", value=b"%d" % i, partition=0)
    producer.flush()
    producer.close()
    partition = TopicPartition("kp-admin", 0)
    admin.delete_records({partition: 4})
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    assert consumer.beginning_offsets([partition]) == {partition: 4}
    assert consumer.end_offsets([partition]) == {partition: 10}
    consumer.close()

    paged = admin.describe_topic_partitions(["kp-admin"], response_partition_limit=2)
    assert [p["partition_index"] for p in paged["topics"][0]["partitions"]] == [0, 1]
    assert paged["next_cursor"] is not None
    (log_dirs,) = admin.describe_log_dirs()
    sizes = {p["partition_index"]: p["partition_size"]
             for t in log_dirs["log_dirs"][0]["topics"] if t["name"] == "kp-admin"
             for p in t["partitions"]}
    assert sizes[0] > 0 and sizes[2] == 0
    producers = admin.describe_producers([partition])
    assert producers[partition].active_producers  # kafka-python producers are idempotent

    cluster = admin.describe_cluster()
    assert [b["port"] for b in cluster["brokers"]] == [broker.port]
    admin.delete_topics(["kp-admin"])
    assert "kp-admin" not in admin.list_topics()
    admin.close()


def test_manual_commit_metadata_round_trip(broker: BrokerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("kp-commit", 1, 1)])
    admin.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="kp-manual",
                             enable_auto_commit=False)
    partition = TopicPartition("kp-commit", 0)
    consumer.assign([partition])
    consumer.commit({partition: OffsetAndMetadata(7, "note", -1)})
    committed = consumer.committed(partition, metadata=True)
    assert (committed.offset, committed.metadata) == (7, "note")
    consumer.close()
