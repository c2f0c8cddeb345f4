"""A 3-broker Apache Kafka cluster (1 dedicated controller) for failover tests.

The ``kafka_cluster`` fixture starts one cluster per test module (a start costs ~15 s of
JVM time on 2 cores; module scope, so a module with a cluster of its own never runs next to
this one) with ``min.insync.replicas=2`` and replicated internal topics, and
``broker.session.timeout.ms=6000`` (Kafka's default is 9000): the controller fences a
broker that stopped heartbeating after that long, so a killed or SIGSTOPped leader loses
its partitions ~6 s after the fault. The autouse ``healed`` fixture brings every broker
back (start / SIGCONT) after each test and waits until every replica is in sync again, so
a test never inherits the previous one's damage.

Helpers: :func:`create_topic` (replication factor 3), :func:`wait_for` (poll a condition
with a deadline), :func:`describe_partitions`, :func:`read_partitions` (reads a topic back
with confluent-kafka, an independent client). Every test here gets the ``cluster`` mark.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from apache_support import apache_cluster

from sdk import AdminClient, NewTopic
from tools.apache_kafka import ApacheKafkaCluster

from .checker import StoredRecord

T = TypeVar("T")

SESSION_TIMEOUT_MS = 6000
CLUSTER_CONFIG = {
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    # Fence a silent broker after 6 s (default 9 s); heartbeats must come more often.
    "broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "broker.heartbeat.interval.ms": "1000",
    # Leadership stays where failover put it: a preferred-leader election in the middle
    # of a test would be a second fault the test did not ask for.
    "auto.leader.rebalance.enable": "false",
    "group.initial.rebalance.delay.ms": "0",  # a group's first join is not held for 3 s
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.cluster)


REPORT_PROPERTY = "failover_timing"


class FailoverReport(list[str]):
    """Lines appended also become the test's ``user_properties``: those travel with its
    report, so ``make test``'s xdist workers hand them to the controller's summary (a
    worker's own ``config.stash`` never reaches it)."""

    def __init__(self, node: pytest.Item) -> None:
        super().__init__()
        self._node = node

    def append(self, line: str) -> None:
        super().append(line)
        self._node.user_properties.append((REPORT_PROPERTY, line))


@pytest.fixture
def failover_report(request: pytest.FixtureRequest) -> list[str]:
    """Lines (measured failover times) printed in the terminal summary, not asserted."""
    assert isinstance(request.node, pytest.Item)
    return FailoverReport(request.node)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config
                            ) -> None:
    lines = [value for reports in terminalreporter.stats.values() for report in reports
             if getattr(report, "when", None) == "call"
             for name, value in getattr(report, "user_properties", ())
             if name == REPORT_PROPERTY]
    if lines:
        terminalreporter.section("failover timings (Apache Kafka, 3 brokers)")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture(scope="module")
def kafka_cluster() -> Iterator[ApacheKafkaCluster]:
    with apache_cluster(brokers=3, controllers=1, config=CLUSTER_CONFIG) as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def healed(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test that used the cluster: every broker running and every replica in sync."""
    yield
    if "kafka_cluster" not in request.fixturenames:
        return
    cluster: ApacheKafkaCluster = request.getfixturevalue("kafka_cluster")
    heal(cluster)


def heal(cluster: ApacheKafkaCluster, timeout_s: float = 120.0) -> None:
    for node in cluster.brokers:
        if node.paused:
            cluster.resume(node.node_id)
    for node in cluster.brokers:
        if not node.running:
            cluster.start(node.node_id, wait=False)
    cluster.wait_ready(timeout_s)
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        wait_for(lambda: _all_in_sync(admin), timeout_s, "every replica back in sync")


def _all_in_sync(admin: AdminClient) -> bool:
    topics = admin.describe_topics(None, timeout_ms=10_000)
    for name in topics:
        description = topics[name]
        if description.error is not None:
            return False
        for p in description.partitions:
            if p.leader is None or set(p.isr) != set(p.replicas):
                return False
    return True


# ----------------------------------------------------------------------------- helpers


def new_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(cluster: ApacheKafkaCluster, prefix: str, partitions: int) -> str:
    """A topic with replication factor 3 and min.insync.replicas=2, every leader elected."""
    name = new_topic(prefix)
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(name, partitions, 3, {"min.insync.replicas": "2"})]
                            ).raise_if_failed()
        wait_for(lambda: len(_leaders(admin, name)) == partitions, 30, f"leaders of {name}")
    return name


def _leaders(admin: AdminClient, topic: str) -> dict[int, int]:
    description = admin.describe_topics([topic], timeout_ms=10_000)[topic]
    if description.error is not None:
        return {}
    return {p.partition: p.leader for p in description.partitions
            if p.leader is not None and p.leader >= 0}


def describe_partitions(cluster: ApacheKafkaCluster, topic: str, timeout_s: float = 30.0
                        ) -> dict[int, Any]:
    """{partition: PartitionDescription} as the cluster reports it now (retried while the
    answering broker does not know the topic yet: brokers learn new topics one by one)."""
    def describe() -> dict[int, Any]:
        with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
            description = admin.describe_topics([topic], timeout_ms=10_000)[topic]
        if description.error is not None:
            raise description.error
        return {p.partition: p for p in description.partitions}

    return wait_for(describe, timeout_s, f"a description of {topic}")


def leader_of(cluster: ApacheKafkaCluster, topic: str, partition: int,
              timeout_s: float = 30.0) -> int:
    """The partition's leader, waiting while it has none (or a broker does not know it)."""
    return wait_for(lambda: max(cluster.leader_of(topic, partition), 0), timeout_s,
                    f"a leader of {topic}-{partition}")


def wait_for(condition: Callable[[], T], timeout_s: float, what: str,
             interval_s: float = 0.2) -> T:
    """Poll ``condition`` until it returns something true; its errors count as 'not yet'."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except Exception as exc:  # a cluster in failover answers with errors
            last_error = exc
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not reached after {timeout_s} s "
                               f"(last error: {last_error!r})")
        time.sleep(interval_s)


def read_partitions(bootstrap: str, topic: str, partitions: int,
                    timeout_s: float = 60.0) -> dict[int, list[StoredRecord]]:
    """Everything stored in ``topic`` up to its current end offsets, per partition, read with
    confluent-kafka (an independent client, read_committed off)."""
    from confluent_kafka import Consumer as CKConsumer
    from confluent_kafka import TopicPartition as CKTopicPartition

    consumer = CKConsumer({"bootstrap.servers": bootstrap, "group.id": new_topic("reader"),
                           "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        ends = {p: consumer.get_watermark_offsets(CKTopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)}
        consumer.assign([CKTopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[StoredRecord]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + timeout_s
        positions = {p: 0 for p in range(partitions)}
        while any(positions[p] < ends[p] for p in range(partitions)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {positions} of {ends} in {timeout_s} s")
            for msg in consumer.consume(1000, timeout=1.0):
                if msg.error() is not None:
                    raise RuntimeError(f"confluent-kafka: {msg.error()}")
                p, offset, value = msg.partition(), msg.offset(), msg.value()
                assert p is not None and offset is not None and value is not None
                if offset < ends[p]:
                    out[p].append(StoredRecord(p, offset, msg.key(), value))
                positions[p] = max(positions[p], offset + 1)
        return out
    finally:
        consumer.close()
