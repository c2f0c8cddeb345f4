"""The idempotent producer (acks=all) while the leader of a partition is SIGKILLed or
SIGSTOPped mid-stream, for both faces.

A paced keyed stream (:mod:`.workload`) runs over 6 partitions; the test kills or pauses the
leader of partition 0 (and so of every partition that broker leads) once a quarter of the
records are sent, waits until every such partition acknowledges again, then restarts or
resumes the broker while records still flow. The checker (:mod:`.checker`) then compares the
producer's history with the log read back by confluent-kafka: nothing acknowledged is lost
or stored twice, order per partition holds, every record's outcome was reported exactly
once. The time from the fault to the first acknowledgement of a record sent after it, per
partition the broker led, is printed in the terminal summary (not asserted).

The cluster fences a silent broker after ``broker.session.timeout.ms`` = 6 s (conftest), so
that is the floor of both figures; the producer's ``request_timeout_ms`` is 5 s, so requests
stuck in a paused broker are given up (outcome unknown, resent with the same sequence).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tools.apache_kafka import ApacheKafkaCluster

from .checker import check
from .conftest import (
    SESSION_TIMEOUT_MS,
    create_topic,
    describe_partitions,
    leader_of,
    read_partitions,
    wait_for,
)
from .workload import ProducerWorkload

PARTITIONS = 6
COUNT = 4000
RATE = 250.0  # records per second: the stream lasts ~16 s, the fault lands at ~4 s
PRODUCER: dict[str, Any] = {"acks": "all", "enable_idempotence": True, "linger_ms": 5,
            "request_timeout_ms": 5000, "retry_backoff_ms": 100}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("face", ["sync", "async"])
@pytest.mark.parametrize("fault", ["kill", "pause"])
def test_idempotent_producer_survives_leader_failure(
        kafka_cluster: ApacheKafkaCluster, failover_report: list[str], face: str,
        fault: str) -> None:
    cluster = kafka_cluster
    topic = create_topic(cluster, f"failover-{fault}", PARTITIONS)
    victim = leader_of(cluster, topic, 0)
    led = sorted(p for p, d in describe_partitions(cluster, topic).items() if d.leader == victim)
    workload = ProducerWorkload(face, cluster.bootstrap_servers, topic, count=COUNT,
                                rate=RATE, **PRODUCER).start()
    workload.wait_sent(COUNT // 4)

    t_fault = time.monotonic()
    if fault == "kill":
        cluster.kill(victim)
    else:
        cluster.pause(victim)
    history = workload.history
    try:
        wait_for(lambda: all(history.first_ack_after(p, t_fault) is not None for p in led),
                 60, f"acknowledgements on partitions {led} after broker {victim}'s {fault}")
    finally:
        resumed = {p: history.first_ack_after(p, t_fault) for p in led}
        failover_report.append(
            f"producer {face:5} {fault:5} broker {victim} (leader of {led}): first ack after "
            + ", ".join(f"p{p} {s:.2f} s" if s is not None else f"p{p} never"
                        for p, s in resumed.items())
            + f" (broker.session.timeout.ms={SESSION_TIMEOUT_MS})")
    now_led = describe_partitions(cluster, topic)
    assert all(now_led[p].leader != victim for p in led), \
        f"leadership of {led} did not move from broker {victim}: {now_led}"

    # Bring the broker back while the stream still runs.
    if fault == "kill":
        cluster.start(victim, wait=False)
    else:
        cluster.resume(victim)
    workload.join(180)
    assert workload.flush_error is None, f"flush: {workload.flush_error!r}"
    cluster.wait_ready()

    verdict = check(history, read_partitions(cluster.bootstrap_servers, topic, PARTITIONS))
    assert verdict.ok, verdict.summary()
    # The delivery timeout (120 s) outlasts the failover: nothing had to fail.
    assert not verdict.failed, verdict.summary()
    assert verdict.acknowledged == COUNT
