"""One failover scenario on our cluster and on Apache Kafka's, outcomes compared.

Both clusters: 3 brokers, 1 controller, ``broker.session.timeout.ms=6000``, no automatic
leader rebalancing. A topic with one partition, RF=3, ``min.insync.replicas=2``:

1. records produced with ``acks=all``; the leader is SIGKILLed; more records produced;
2. observed: the leader moved to another broker, the ISR is the two survivors;
3. the killed broker restarts: the ISR is all three again, the leader stays where failover
   put it;
4. both followers of the new leader are SIGKILLed: ``acks=all`` fails with
   NOT_ENOUGH_REPLICAS once the ISR is the leader alone, ``acks=1`` succeeds;
5. everything restarted: every acknowledged record is in the log, once, at its offset.

The outcomes (booleans and the error names the producer reported) must be equal; the
scenario runs on each cluster in turn (each started and stopped inside the test).
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from typing import Any

import pytest
from apache_support import apache_cluster
from cluster.conftest import (
    CLUSTER_CONFIG,
    describe_partitions,
    heal,
    leader_of,
    read_partitions,
    wait_for,
)

from sdk import AdminClient, NewTopic, Producer
from server_ref.cluster import EmbeddedCluster

from .conftest import REF_CONFIG

TOPIC = "differential"


def _isr(cluster: Any) -> list[int]:
    return sorted(describe_partitions(cluster, TOPIC)[0].isr)


def _send(bootstrap: str, values: list[bytes], **settings: Any) -> list[Any]:
    """(offset or the error's class name) per value."""
    out: list[Any] = []
    with Producer(bootstrap_servers=bootstrap, linger_ms=0, **settings) as producer:
        futures = [producer.send(TOPIC, v, partition=0) for v in values]
        producer.flush(timeout=60)
        for future in futures:
            error = future.exception()
            out.append(type(error).__name__ if error is not None else future.result().offset)
    return out


def scenario(cluster: Any) -> dict[str, Any]:
    bootstrap = cluster.bootstrap_servers
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, 3, {"min.insync.replicas": "2"})]
                            ).raise_if_failed()
    heal(cluster)
    outcome: dict[str, Any] = {}
    acked: dict[bytes, int] = {}
    strong = {"acks": "all", "enable_idempotence": True, "request_timeout_ms": 5000}

    def produce(prefix: str, n: int) -> None:
        values = [f"{prefix}-{i}".encode() for i in range(n)]
        for value, result in zip(values, _send(bootstrap, values, **strong), strict=True):
            assert isinstance(result, int), f"{value!r}: {result}"
            acked[value] = result

    produce("before", 50)
    victim = leader_of(cluster, TOPIC, 0)
    cluster.kill(victim)
    produce("after-kill", 50)
    survivors = sorted(n.node_id for n in cluster.brokers if n.node_id != victim)
    new_leader = wait_for(lambda: (lambda lead: lead if lead not in (victim, -1) else 0)(
        cluster.leader_of(TOPIC, 0)), 60, "a new leader")
    outcome["leader moved to a survivor"] = new_leader in survivors
    outcome["ISR after the kill is the survivors"] = wait_for(
        lambda: _isr(cluster) == survivors, 60, "ISR without the victim")

    cluster.start(victim)
    outcome["ISR after the restart is all three"] = wait_for(
        lambda: _isr(cluster) == [1, 2, 3], 60, "ISR back")
    outcome["leader stays after the restart"] = cluster.leader_of(TOPIC, 0) == new_leader
    produce("after-restart", 20)

    followers = [n for n in [*survivors, victim] if n != new_leader]
    for node in followers:
        cluster.kill(node)
    wait_for(lambda: _isr(cluster) == [new_leader], 60, "ISR shrunk to the leader")
    refused = _send(bootstrap, [b"refused-0", b"refused-1"],
                    **{**strong, "request_timeout_ms": 2000}, delivery_timeout_ms=4000)
    outcome["acks=all with one in-sync replica"] = sorted(set(map(str, refused)))
    single = _send(bootstrap, [b"acks1-0", b"acks1-1"], acks=1)
    outcome["acks=1 with one in-sync replica succeeds"] = all(
        isinstance(r, int) for r in single)
    acked.update({f"acks1-{i}".encode(): r for i, r in enumerate(single) if isinstance(r, int)})
    for node in followers:
        cluster.start(node, wait=False)
    heal(cluster)

    stored = {r.value: r.offset for r in read_partitions(bootstrap, TOPIC, 1)[0]}
    counts: dict[bytes, int] = {}
    for r in read_partitions(bootstrap, TOPIC, 1)[0]:
        counts[r.value] = counts.get(r.value, 0) + 1
    outcome["every acknowledged record stored at its offset"] = all(
        stored.get(v) == o for v, o in acked.items())
    outcome["nothing stored twice"] = all(n == 1 for n in counts.values())
    outcome["refused records not stored"] = not any(
        v in stored for v in (b"refused-0", b"refused-1"))
    return outcome


@pytest.mark.timeout(600)
def test_same_outcomes_on_our_cluster_and_apache_kafka() -> None:
    outcomes: dict[str, dict[str, Any]] = {}
    clusters: dict[str, AbstractContextManager[Any]] = {
        "server_ref": EmbeddedCluster(brokers=3, controllers=1, config=REF_CONFIG),
        "apache": apache_cluster(brokers=3, controllers=1, config=CLUSTER_CONFIG),
    }
    for name, manager in clusters.items():
        started = time.monotonic()
        with manager as cluster:
            outcomes[name] = scenario(cluster)
        print(f"\n{name}: {outcomes[name]} ({time.monotonic() - started:.0f} s)")
    ours, theirs = outcomes["server_ref"], outcomes["apache"]
    assert ours == theirs
    assert all(v for k, v in ours.items() if k != "acks=all with one in-sync replica")
    assert ours["acks=all with one in-sync replica"] == ["NotEnoughReplicasError"]
