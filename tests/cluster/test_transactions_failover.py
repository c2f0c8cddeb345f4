"""Transactions on a 3-broker cluster — Apache Kafka here, our broker's cluster through
tests/cluster_ref/test_transactions_cluster.py, which imports these tests unchanged: the
transaction coordinator's broker is killed (SIGKILL) mid-transaction. The coordinator moves with the leadership of its
``__transaction_state`` partition; the producer finds the new one (FindCoordinator again
after NOT_COORDINATOR or a lost connection) and the transaction commits (or aborts) as a
whole: read_committed readers see every record of a committed transaction once, and
none of an aborted one."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from sdk.consumer import Consumer
from sdk.net.client import NetClient
from sdk.net.config import CommonConfig
from sdk.net.targets import CoordinatorType
from sdk.producer import Producer
from sdk.types import TopicPartition
from tools.apache_kafka import ApacheKafkaCluster

from .conftest import create_topic

PARTITIONS = 3


def _coordinator_of(bootstrap: str, transactional_id: str) -> int:
    async def find() -> int:
        client = NetClient(CommonConfig.build(bootstrap_servers=bootstrap))
        try:
            await client.start()
            return await client.find_coordinator(transactional_id, CoordinatorType.TRANSACTION,
                                                 timeout_s=30)
        finally:
            await client.close()

    return asyncio.run(find())


def _read_committed(bootstrap: str, topic: str) -> list[bytes]:
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    out: list[bytes] = []
    with Consumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                  auto_offset_reset="earliest") as c:
        c.assign(tps)
        ends = c.end_offsets(tps)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=300).values():
                out.extend(r.value for r in recs if r.value is not None)
            if all(c.position(tp) >= ends[tp] for tp in tps):
                break
    return out


def _run(kafka_cluster: ApacheKafkaCluster, commit: bool, failover_report: list[str]) -> None:
    topic = create_topic(kafka_cluster, "txn-failover", PARTITIONS)
    bootstrap = kafka_cluster.bootstrap_servers
    txn_id = f"failover-{uuid.uuid4().hex[:8]}"
    settings: dict[str, Any] = {"bootstrap_servers": bootstrap, "transactional_id": txn_id,
                                "linger_ms": 2}
    with Producer(**settings) as p:
        p.init_transactions(timeout=60)
        with p.transaction(timeout=60):
            p.send(topic, b"before", partition=0)
        coordinator = _coordinator_of(bootstrap, txn_id)
        p.begin_transaction()
        for i in range(30):
            p.send(topic, f"in-flight-{i}".encode(), partition=i % PARTITIONS)
        p.flush(timeout=60)
        kafka_cluster.kill(coordinator)
        started = time.monotonic()
        for i in range(30, 40):  # more records after the kill, into the same transaction
            p.send(topic, f"in-flight-{i}".encode(), partition=i % PARTITIONS)
        if commit:
            p.commit_transaction(timeout=120)
        else:
            p.abort_transaction(timeout=120)
        took = time.monotonic() - started
        moved_to = _coordinator_of(bootstrap, txn_id)
        failover_report.append(f"transaction {'commit' if commit else 'abort'} with the "
                               f"coordinator (node {coordinator}) killed: {took:.1f} s "
                               f"(new coordinator: node {moved_to})")
        assert moved_to != coordinator
        with p.transaction(timeout=60):  # the producer goes on with the new coordinator
            p.send(topic, b"after", partition=1)
    seen = _read_committed(bootstrap, topic)
    middle = sorted(v.decode() for v in seen if v.startswith(b"in-flight-"))
    assert middle == (sorted(f"in-flight-{i}" for i in range(40)) if commit else [])
    assert seen.count(b"before") == 1 and seen.count(b"after") == 1


def test_commit_with_the_coordinator_killed(kafka_cluster: ApacheKafkaCluster,
                                            failover_report: list[str]) -> None:
    _run(kafka_cluster, True, failover_report)


def test_abort_with_the_coordinator_killed(kafka_cluster: ApacheKafkaCluster,
                                           failover_report: list[str]) -> None:
    _run(kafka_cluster, False, failover_report)
