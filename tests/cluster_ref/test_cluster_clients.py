"""Clients no one here wrote, against our broker as a 3-broker cluster (issue 17, item 5).

kafka-python, aiokafka and confluent-kafka each produce with ``acks=all`` to a topic with
replication factor 3 and ``min.insync.replicas=2`` and read it back in a consumer group
(the coordinator is the leader of the group's ``__consumer_offsets`` partition, found with
FindCoordinator); confluent-kafka's idempotent producer also keeps going while the leader of
a partition is SIGKILLed. Kafka's Java tools: kafka-topics describes the partitions (leader,
replicas, ISR across the three brokers), the console producer and the console consumer (in
a group) move records through the cluster. One cluster for the module.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest
from apache_support import require_apache_kafka
from cluster.conftest import heal, wait_for

from sdk import AdminClient, NewTopic
from sdk.admin import OffsetSpec
from sdk.types import TopicPartition
from server_ref.cluster import EmbeddedCluster
from tools.apache_kafka import java_command

COUNT = 300
PARTITIONS = 3
CONFIG = {"min.insync.replicas": "2", "default.replication.factor": "3",
          "broker.session.timeout.ms": "6000", "broker.heartbeat.interval.ms": "1000",
          "group.initial.rebalance.delay.ms": "0"}
JAVA_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(brokers=3, controllers=1, config=CONFIG) as running:
        yield running


def _topic(cluster: EmbeddedCluster, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(name, PARTITIONS, 3, {"min.insync.replicas": "2"})]
                            ).raise_if_failed()
    return name


def test_kafka_python(cluster: EmbeddedCluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic = _topic(cluster, "kafka-python")
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    futures = [producer.send(topic, key=str(i).encode(), value=f"v{i}".encode())
               for i in range(COUNT)]
    producer.flush(60)
    acked = [f.get(timeout=30) for f in futures]
    producer.close()
    assert {m.partition for m in acked} == set(range(PARTITIONS))
    consumer = KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap_servers,
                             group_id=f"g-{topic}", auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=20_000)
    values = []
    for message in consumer:
        values.append(message.value)
        if len(values) == COUNT:
            break
    consumer.commit()
    committed = {p: consumer.committed(_kp_tp(topic, p)) for p in range(PARTITIONS)}
    consumer.close()
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(COUNT))
    ends = {m.partition: 0 for m in acked}
    for m in acked:
        ends[m.partition] = max(ends[m.partition], m.offset + 1)
    assert committed == ends


def _kp_tp(topic: str, partition: int) -> object:
    from kafka import TopicPartition

    return TopicPartition(topic, partition)


def test_aiokafka(cluster: EmbeddedCluster) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic = _topic(cluster, "aiokafka")

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all",
                                    enable_idempotence=True)
        await producer.start()
        try:
            batch = [await producer.send(topic, f"v{i}".encode(), key=str(i).encode())
                     for i in range(COUNT)]
            await asyncio.gather(*batch)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=cluster.bootstrap_servers,
                                    group_id=f"g-{topic}", auto_offset_reset="earliest",
                                    enable_auto_commit=False)
        await consumer.start()
        values: list[bytes] = []
        try:
            deadline = time.monotonic() + 30
            while len(values) < COUNT and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    values.extend(r.value for r in records)
            await consumer.commit()
        finally:
            await consumer.stop()
        return values

    values = asyncio.run(run())
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(COUNT))


def test_confluent_kafka_through_a_leader_kill(cluster: EmbeddedCluster) -> None:
    from confluent_kafka import Consumer, Producer

    topic = _topic(cluster, "confluent")
    victim = wait_for(lambda: max(cluster.leader_of(topic, 0), 0), 30, "a leader")
    acked: list[tuple[int, int, bytes]] = []
    failed: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            failed.append(str(err))
        else:
            acked.append((msg.partition(), msg.offset(), msg.value()))  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})
    try:
        for i in range(COUNT):
            producer.produce(topic, f"v{i}".encode(), key=str(i).encode(),
                             on_delivery=on_delivery)
            if i == COUNT // 3:
                producer.flush(30)
                cluster.kill(victim)
            producer.poll(0)
            time.sleep(0.01)
        assert producer.flush(60) == 0
    finally:
        cluster.start(victim, wait=False)
    assert not failed and len(acked) == COUNT
    heal(cluster)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                         "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen: dict[tuple[int, int], bytes] = {}
    deadline = time.monotonic() + 60
    try:
        while len(seen) < COUNT and time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=0.5):
                assert msg.error() is None, msg.error()
                seen[(msg.partition(), msg.offset())] = msg.value()
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert seen == {(p, o): v for p, o, v in acked}  # every acknowledged record, once, in place


def _java_run(main_class: str, *args: str,
              stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(java_command(main_class, *args), input=stdin, capture_output=True,
                            text=True, timeout=JAVA_TIMEOUT_S)
    assert result.returncode == 0, (f"{main_class} exited {result.returncode}\n"
                                    f"{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    return result


def _java(main_class: str, *args: str, stdin: str | None = None) -> str:
    return _java_run(main_class, *args, stdin=stdin).stdout


def test_java_console_tools(cluster: EmbeddedCluster) -> None:
    require_apache_kafka()
    bootstrap = cluster.bootstrap_servers
    topic = f"java-{uuid.uuid4().hex[:8]}"
    _java("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap, "--create",
          "--topic", topic, "--partitions", str(PARTITIONS), "--replication-factor", "3",
          "--config", "min.insync.replicas=2")
    described = wait_for(lambda: _described(bootstrap, topic), 30, f"{topic} described")
    rows = [line for line in described.splitlines() if "Partition:" in line]
    assert len(rows) == PARTITIONS, described
    for row in rows:
        fields = dict(part.split(": ", 1) for part in row.strip().split("\t") if ": " in part)
        assert sorted(fields["Replicas"].split(",")) == ["1", "2", "3"], row
        assert sorted(fields["Isr"].split(",")) == ["1", "2", "3"], row
        assert fields["Leader"] in ("1", "2", "3"), row
    lines = [f"line-{i}" for i in range(50)]
    produced = _java_run("org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server",
                         bootstrap, "--topic", topic, "--producer-property", "acks=all",
                         stdin="\n".join(lines) + "\n")
    consumed = _java_run("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server",
                         bootstrap, "--topic", topic, "--group", f"g-{topic}", "--from-beginning",
                         "--max-messages", str(len(lines)), "--timeout-ms", "60000")
    # Kafka's tools may log a WARN line to stdout; the records are the lines of their own.
    got = [line for line in consumed.stdout.splitlines() if line.startswith("line-")]
    assert sorted(got) == sorted(lines), (
        f"producer:\n{produced.stdout[-3000:]}\n{produced.stderr[-3000:]}\n"
        f"consumer:\n{consumed.stdout[-3000:]}\n{consumed.stderr[-3000:]}")


def _described(bootstrap: str, topic: str) -> str | None:
    out = _java("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap,
                "--describe", "--topic", topic)
    return out if out.count("Partition:") >= PARTITIONS and "Isr: " in out else None


def test_topic_config_changes_go_through_the_controller(cluster: EmbeddedCluster) -> None:
    """IncrementalAlterConfigs (our admin) and the legacy AlterConfigs (kafka-python) of a
    topic reach every broker: each describes the new value, from its metadata image."""
    from kafka.admin import ConfigResource as KPResource
    from kafka.admin import ConfigResourceType as KPType
    from kafka.admin import KafkaAdminClient

    from sdk.admin.results import ConfigResource

    topic = _topic(cluster, "configs")
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.alter_configs({ConfigResource.topic(topic): {"retention.ms": "123456"}}
                            ).raise_if_failed()
    _every_broker_says(cluster, topic, "retention.ms", "123456")
    legacy = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        legacy.alter_configs([KPResource(KPType.TOPIC, topic,
                                         configs={"retention.ms": "654321"})])
    finally:
        legacy.close()
    _every_broker_says(cluster, topic, "retention.ms", "654321")
    # The whole-set form replaced the overrides: min.insync.replicas is back to the default.
    _every_broker_says(cluster, topic, "min.insync.replicas", "2")  # broker default here


def _every_broker_says(cluster: EmbeddedCluster, topic: str, name: str, value: str) -> None:
    from sdk.admin.results import ConfigResource

    for node in cluster.brokers:
        def described(address: str = cluster.address_of(node.node_id)) -> bool:
            with AdminClient(bootstrap_servers=address) as admin:
                config = admin.describe_configs([ConfigResource.topic(topic)], names=[name]
                                                )[ConfigResource.topic(topic)]
            return config.value(name) == value
        wait_for(described, 30, f"broker {node.node_id} showing {name}={value}")


def test_describe_log_dirs_lists_only_hosted_replicas(cluster: EmbeddedCluster) -> None:
    name = f"dirs-{uuid.uuid4().hex[:8]}"
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(name, replica_assignment={0: [1], 1: [2, 3]})]
                            ).raise_if_failed()
        wait_for(lambda: all(cluster.partition_states(n.node_id, name)
                             for n in cluster.brokers), 30, f"{name} known everywhere")
        hosted = {}
        for node in cluster.brokers:
            dirs = admin.describe_log_dirs([node.node_id])[node.node_id]
            hosted[node.node_id] = sorted(
                tp.partition for d in dirs for tp in d.replicas if tp.topic == name)
    assert hosted == {1: [0], 2: [1], 3: [1]}


def _twenty_records(cluster: EmbeddedCluster, prefix: str) -> tuple[str, TopicPartition]:
    """A new topic with 20 records in partition 0, written with acks=all."""
    from sdk import Producer

    topic = _topic(cluster, prefix)
    with Producer(bootstrap_servers=cluster.bootstrap_servers, acks="all") as producer:
        for i in range(20):
            producer.send(topic, f"v{i}".encode(), partition=0)
        producer.flush(30)
    return topic, TopicPartition(topic, 0)


def _earliest(admin: AdminClient, tp: TopicPartition) -> int:
    listed = admin.list_offsets({tp: OffsetSpec.EARLIEST})[tp]
    if listed.error is not None:
        raise listed.error
    return int(listed.offset)


def test_delete_records_reaches_every_replica(cluster: EmbeddedCluster) -> None:
    """DeleteRecords at the leader (-1: up to the high watermark) moves the log start of the
    followers too, and answers once they report it: the leader killed right after the
    answer, the new leader reports the same start."""
    topic, tp = _twenty_records(cluster, "delete-records")
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        deleted = admin.delete_records({tp: -1})[tp]
        assert deleted.error is None and deleted.low_watermark == 20
        victim = cluster.leader_of(topic, 0)
        cluster.kill(victim)
        try:
            wait_for(lambda: cluster.leader_of(topic, 0) not in (victim, -1), 60,
                     "a new leader")

            assert wait_for(lambda: _earliest(admin, tp) == 20, 30,
                            "log start 20 at the new leader")
        finally:
            cluster.start(victim)


def test_delete_records_does_not_wait_for_a_fenced_follower(cluster: EmbeddedCluster) -> None:
    """A follower SIGKILLed and fenced by the controller: DeleteRecords answers without it
    (Kafka's low watermark counts the replicas on live brokers only, in the ISR or not),
    and the restarted follower takes the new log start from its first fetch."""
    topic, tp = _twenty_records(cluster, "delete-fenced")
    leader = cluster.leader_of(topic, 0)
    follower = next(n.node_id for n in cluster.brokers if n.node_id != leader)
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        cluster.kill(follower)
        try:
            wait_for(lambda: follower not in {b.node_id for b in
                                              admin.describe_cluster().brokers},
                     60, "the killed follower fenced")
            deleted = admin.delete_records({tp: 10}, timeout_ms=20_000)[tp]
            assert deleted.error is None and deleted.low_watermark == 10
        finally:
            cluster.start(follower)
    heal(cluster)
    assert wait_for(lambda: follower in cluster.partition_states(follower, topic)[0][2], 60,
                    "the restarted follower back in the ISR")
    # The two others killed: the restarted follower leads, and starts the log at 10.
    others = [n.node_id for n in cluster.brokers if n.node_id != follower]
    for node in others:
        cluster.kill(node)
    try:
        with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
            wait_for(lambda: cluster.leader_of(topic, 0) == follower, 60,
                     "the restarted follower leading")
            assert wait_for(lambda: _earliest(admin, tp) == 10, 30,
                            "log start 10 at the new leader")
    finally:
        for node in others:
            cluster.start(node)
    heal(cluster)
