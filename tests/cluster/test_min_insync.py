"""Two of three replicas down under ``min.insync.replicas=2``: what each acks setting does.

One outage serves both faces (their producers run side by side), so the cluster is broken
and healed once: the partition's two followers are SIGKILLed and the test waits until the
controller has shrunk the ISR to the leader alone. Then:

* ``acks=all`` with a short ``delivery_timeout_ms`` (4 s): the broker refuses each attempt
  with NOT_ENOUGH_REPLICAS, a retriable error, so the producer retries until the delivery
  timeout and only then reports that error (not a generic timeout) to the future and the
  callback; the refused records are not in the log.
* ``acks=1``: the leader alone acknowledges at once.
* ``acks=all`` with a long delivery timeout: the records stay pending while the followers
  are down and are delivered, exactly once, after both are restarted.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest

from sdk import errors
from tools.apache_kafka import ApacheKafkaCluster

from .conftest import create_topic, describe_partitions, leader_of, read_partitions, wait_for
from .faces import Delivery, ProducerFace

FACES = ("sync", "async")
SHORT_DELIVERY_MS = 4000
PER_PHASE = 10
NOT_ENOUGH = (errors.NotEnoughReplicasError, errors.NotEnoughReplicasAfterAppendError)


def _took(delivery: Delivery, since: float) -> float:
    assert delivery.done_at is not None
    return delivery.done_at - since


@pytest.mark.timeout(300)
def test_acks_all_waits_for_min_insync_replicas_acks_1_does_not(
        kafka_cluster: ApacheKafkaCluster, failover_report: list[str]) -> None:
    cluster = kafka_cluster
    topic = create_topic(cluster, "min-isr", 1)
    leader = leader_of(cluster, topic, 0)
    followers = [n.node_id for n in cluster.brokers if n.node_id != leader]
    common: dict[str, Any] = {"bootstrap_servers": cluster.bootstrap_servers, "linger_ms": 0,
              "retry_backoff_ms": 100}
    producers: dict[tuple[str, str], ProducerFace] = {}
    try:
        for face in FACES:
            # One batch for the phase's records (linger): a batch queued behind one being
            # retried is not sent before it (idempotence keeps order), so it would expire
            # unsent, with DeliveryTimeoutError, having never met the broker's refusal.
            producers[face, "short"] = ProducerFace(
                face, acks="all", enable_idempotence=True, request_timeout_ms=2000,
                delivery_timeout_ms=SHORT_DELIVERY_MS, **{**common, "linger_ms": 500})
            producers[face, "acks1"] = ProducerFace(face, acks=1, **common)
            producers[face, "long"] = ProducerFace(
                face, acks="all", enable_idempotence=True, request_timeout_ms=5000,
                delivery_timeout_ms=180_000, **common)
        expected: list[bytes] = []
        for (face, kind), producer in producers.items():  # metadata, connections, producer ids
            value = f"warm-{face}-{kind}".encode()
            delivery = producer.send(topic, value)
            assert producer.outcome(delivery, 30) is None, f"{face} {kind} warm-up failed"
            expected.append(value)

        for follower in followers:
            cluster.kill(follower)
        wait_for(lambda: set(describe_partitions(cluster, topic)[0].isr) == {leader}, 60,
                 f"the ISR of {topic}-0 shrunk to its leader {leader}")

        # acks=all, short delivery timeout: retried until the timeout, then the broker's error.
        short: dict[str, list[tuple[bytes, Delivery]]] = {}
        for face in FACES:
            short[face] = [(value, producers[face, "short"].send(topic, value)) for value in
                           (f"short-{face}-{i}".encode() for i in range(PER_PHASE))]
        for face in FACES:
            for value, delivery in short[face]:
                error = producers[face, "short"].outcome(delivery, 60)
                assert isinstance(error, NOT_ENOUGH), f"{face} {value!r}: {error!r}"
                assert delivery.error is error or type(delivery.error) is type(error), \
                    f"{face} {value!r}: callback got {delivery.error!r}, future {error!r}"
                assert delivery.done_at is not None
                # Not refused at the first attempt: the retries went on until the timeout.
                assert delivery.done_at - delivery.sent_at >= SHORT_DELIVERY_MS / 1000 - 0.05, \
                    f"{face} {value!r} failed after {delivery.done_at - delivery.sent_at:.2f} s"
        failover_report.append(
            "min.insync: acks=all with delivery_timeout_ms=4000 failed after "
            + ", ".join(f"{face} {max(_took(d, d.sent_at) for _, d in short[face]):.2f} s "
                        f"({Counter(type(d.error).__name__ for _, d in short[face])})"
                        for face in FACES))

        # acks=1: the leader alone is enough.
        for face in FACES:
            for i in range(PER_PHASE):
                value = f"acks1-{face}-{i}".encode()
                error = producers[face, "acks1"].outcome(
                    producers[face, "acks1"].send(topic, value), 30)
                assert error is None, f"{face} acks=1 {value!r}: {error!r}"
                expected.append(value)

        # acks=all, long delivery timeout: held until the followers are back.
        stuck: dict[str, list[tuple[bytes, Delivery]]] = {}
        for face in FACES:
            stuck[face] = [(value, producers[face, "long"].send(topic, value)) for value in
                           (f"long-{face}-{i}".encode() for i in range(PER_PHASE))]
        time.sleep(2)  # retrying meanwhile; nothing can acknowledge them with one replica
        for face in FACES:
            done = [value for value, d in stuck[face] if d.future.done()]
            assert not done, f"{face}: completed with 2 of 3 replicas down: {done}"
        restarted = time.monotonic()
        for follower in followers:
            cluster.start(follower, wait=False)
        cluster.wait_ready()
        for face in FACES:
            for value, delivery in stuck[face]:
                error = producers[face, "long"].outcome(delivery, 120)
                assert error is None, f"{face} {value!r} after the restart: {error!r}"
                expected.append(value)
        failover_report.append(
            "min.insync: records stuck with 2 brokers down delivered "
            + ", ".join(f"{face} {max(_took(d, restarted) for _, d in stuck[face]):.2f} s"
                        for face in FACES)
            + " after the restart began")
    finally:
        for producer in producers.values():
            producer.close()

    stored = Counter(r.value for r in read_partitions(cluster.bootstrap_servers, topic, 1)[0])
    lost = [v for v in expected if stored[v] == 0]
    duplicated = {v: n for v, n in stored.items() if n > 1}
    refused_but_stored = [v for face in FACES for v, d in short[face]
                          if stored[v] and isinstance(d.error, errors.NotEnoughReplicasError)]
    assert not lost and not duplicated and not refused_but_stored, (
        f"lost={lost} duplicated={duplicated} refused_but_stored={refused_but_stored}")
