"""Closing clients while a broker is stopped (SIGSTOP): the broker that leads the topic's
partition and coordinates the group hangs with its sockets open, so nothing it was asked
ever answers. Every face must still close within its timeout (a hung close is the failure;
the four closes run at once, each in a thread watched by a generous deadline, so a hang fails with the
face's name instead of the suite's timeout), and the records it was holding must fail with
ProducerClosedError instead of staying pending. The close times are printed in the summary.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from sdk import AdminClient, AsyncConsumer, Consumer, NewTopic, errors
from tools.apache_kafka import ApacheKafkaCluster

from .conftest import describe_partitions, new_topic, wait_for
from .faces import LoopRunner, ProducerFace

CLOSE_TIMEOUT_S = 2.0
HANG_S = 30.0  # a close that has not returned by then is hung


def _close_all(closers: dict[str, Callable[[], Any]]) -> dict[str, float]:
    """Run every close at once, each in a thread (so all meet the stopped broker before the
    controller fences it); returns how long each took."""
    outcome: dict[str, BaseException | None] = {}
    took: dict[str, float] = {}

    def run(name: str, close: Callable[[], Any]) -> None:
        started = time.monotonic()
        try:
            close()
            outcome[name] = None
        except BaseException as exc:  # reported below with the face's name
            outcome[name] = exc
        took[name] = time.monotonic() - started

    threads = [threading.Thread(target=run, args=item, name=f"close-{item[0]}", daemon=True)
               for item in closers.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HANG_S)
    hung = [name for name in closers if name not in took]
    assert not hung, f"close() hung with a stopped broker: {hung}"
    failed = {name: exc for name, exc in outcome.items() if exc is not None}
    assert not failed, f"close() raised: {failed}"
    return took


def _closer(producer: ProducerFace) -> Callable[[], None]:
    return lambda: producer.close(CLOSE_TIMEOUT_S)


@pytest.mark.timeout(240)
def test_every_face_closes_with_its_broker_stopped(
        kafka_cluster: ApacheKafkaCluster, failover_report: list[str]) -> None:
    cluster = kafka_cluster
    group = new_topic("g-close")
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        coordinator = admin.describe_consumer_groups([group], timeout_ms=10_000)[group]
        assert coordinator.coordinator is not None, coordinator
        victim = coordinator.coordinator.node_id
        topic = new_topic("close")
        others = [n.node_id for n in cluster.brokers if n.node_id != victim]
        admin.create_topics([NewTopic(topic, replica_assignment={0: [victim, *others]},
                                      configs={"min.insync.replicas": "2"})]).raise_if_failed()
    wait_for(lambda: describe_partitions(cluster, topic)[0].leader == victim, 30,
             f"broker {victim} leading {topic}-0")

    common = {"bootstrap_servers": cluster.bootstrap_servers, "linger_ms": 0,
              "request_timeout_ms": 5000}
    producers = {face: ProducerFace(face, **common) for face in ("sync", "async")}
    for face, producer in producers.items():
        assert producer.outcome(producer.send(topic, f"warm-{face}".encode()), 30) is None

    consumer_settings: dict[str, Any] = {"bootstrap_servers": cluster.bootstrap_servers, "group_id": group,
                         "auto_offset_reset": "earliest", "enable_auto_commit": False,
                         "request_timeout_ms": 5000}
    sync_consumer = Consumer(topic, **consumer_settings)
    runner = LoopRunner()

    async def start_async() -> AsyncConsumer:
        consumer = AsyncConsumer(topic, **consumer_settings)
        await consumer.start()
        return consumer

    async_consumer = runner.run(start_async(), 30)
    try:
        # Both members joined (one of them holds the partition) and committed once; polls
        # drive the joins. A member may read the records again after a rebalance (nothing
        # is committed yet), so the distinct values count.
        deadline = time.monotonic() + 60
        read: set[bytes] = set()
        members = 0
        with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
            while (len(read) < 2 or members < 2) and time.monotonic() < deadline:
                for records in sync_consumer.poll(timeout_ms=200).values():
                    read.update(bytes(r.value or b"") for r in records)
                for records in runner.run(async_consumer.getmany(timeout_ms=200)).values():
                    read.update(bytes(r.value or b"") for r in records)
                description = admin.describe_consumer_groups([group], timeout_ms=10_000)[group]
                stable = description.error is None and description.state == "Stable"
                members = len(description.members) if stable else 0
        assert read == {b"warm-sync", b"warm-async"}, f"read {read}"
        assert members == 2, f"{members} stable members, expected 2"
        sync_consumer.commit()
        runner.run(async_consumer.commit())

        cluster.pause(victim)
        pending = {face: [p.send(topic, f"pending-{face}-{i}".encode()) for i in range(10)]
                   for face, p in producers.items()}
        times = _close_all({
            "sync consumer": lambda: sync_consumer.close(timeout_ms=int(CLOSE_TIMEOUT_S * 1000)),
            "async consumer": lambda: runner.run(
                async_consumer.close(timeout_ms=int(CLOSE_TIMEOUT_S * 1000))),
            **{f"{face} producer": _closer(producer) for face, producer in producers.items()},
        })
        failover_report.append(
            f"close with broker {victim} stopped (timeout {CLOSE_TIMEOUT_S:g} s): "
            + ", ".join(f"{name} {s:.2f} s" for name, s in times.items()))
        for face, deliveries in pending.items():
            outcomes = [d.future.exception(0) if d.future.done() else None for d in deliveries]
            assert all(d.future.done() for d in deliveries), f"{face}: records left pending"
            assert all(isinstance(e, errors.ProducerClosedError) for e in outcomes), \
                f"{face}: {outcomes}"
    finally:
        runner.close()
