"""Closing clients while a broker is stopped (SIGSTOP): the broker that leads the topic's
partition and coordinates the group hangs with its sockets open, so nothing it was asked
ever answers. Every face must still close within its timeout (a hung close is the failure;
each close runs in a thread watched by a generous deadline, so a hang fails with the
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


def _timed_close(name: str, close: Callable[[], Any]) -> float:
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            close()
            outcome.append(None)
        except BaseException as exc:  # reported below with the face's name
            outcome.append(exc)

    started = time.monotonic()
    thread = threading.Thread(target=run, name=f"close-{name}", daemon=True)
    thread.start()
    thread.join(HANG_S)
    assert not thread.is_alive(), f"{name}.close() hung with a stopped broker"
    assert outcome == [None], f"{name}.close() raised {outcome[0]!r}"
    return time.monotonic() - started


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

    consumer_settings = {"bootstrap_servers": cluster.bootstrap_servers, "group_id": group,
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
        # Both members joined (one of them holds the partition) and committed once.
        deadline = time.monotonic() + 60
        read = 0
        while read < 2 and time.monotonic() < deadline:
            for records in sync_consumer.poll(timeout_ms=200).values():
                read += len(records)
            for records in runner.run(async_consumer.getmany(timeout_ms=200)).values():
                read += len(records)
        assert read == 2, f"read {read} of the 2 warm-up records"
        sync_consumer.commit()
        runner.run(async_consumer.commit())

        cluster.pause(victim)
        pending = {face: [p.send(topic, f"pending-{face}-{i}".encode()) for i in range(10)]
                   for face, p in producers.items()}
        # Consumers first, while their connections to the coordinator are still open
        # (a heartbeat timing out later would close them and make leaving fail fast).
        times = {"sync consumer": _timed_close(
            "sync consumer", lambda: sync_consumer.close(timeout_ms=int(CLOSE_TIMEOUT_S * 1000)))}
        times["async consumer"] = _timed_close(
            "async consumer", lambda: runner.run(
                async_consumer.close(timeout_ms=int(CLOSE_TIMEOUT_S * 1000))))
        for face, producer in producers.items():
            times[f"{face} producer"] = _timed_close(
                f"{face} producer", lambda p=producer: p.close(CLOSE_TIMEOUT_S))  # type: ignore[misc]
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
