"""``auto.leader.rebalance.enable`` on our broker's cluster: a broker SIGKILLed loses its
leaderships; restarted, it rejoins the ISR and the active controller hands every partition
back to its preferred replica at the next ``leader.imbalance.check.interval.seconds`` check
(Kafka's KRaft controller does the same)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from cluster.conftest import CLUSTER_CONFIG, create_topic

from sdk import AdminClient
from server_ref.cluster import EmbeddedCluster

PARTITIONS = 6


@pytest.fixture(scope="module")
def rebalancing_cluster() -> Iterator[EmbeddedCluster]:
    config = {**CLUSTER_CONFIG, "auto.leader.rebalance.enable": "true",
              "leader.imbalance.check.interval.seconds": "2"}
    with EmbeddedCluster(brokers=3, controllers=1, config=config) as cluster:
        yield cluster


def _placement(admin: AdminClient, topic: str) -> dict[int, tuple[int, int, list[int]]]:
    """{partition: (leader, preferred replica, ISR)}."""
    description = admin.describe_topics([topic], timeout_ms=10_000)[topic]
    if description.error is not None:
        raise description.error
    return {p.partition: (p.leader if p.leader is not None else -1, p.replicas[0],
                          sorted(p.isr))
            for p in description.partitions}


def _until(check: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)


def test_leadership_returns_to_preferred_replicas(rebalancing_cluster: EmbeddedCluster
                                                  ) -> None:
    cluster = rebalancing_cluster
    topic = create_topic(cluster, "rebalance", PARTITIONS)
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        _until(lambda: all(leader == preferred for leader, preferred, _isr
                           in _placement(admin, topic).values()), 30, "preferred leaders")
        victim = _placement(admin, topic)[0][0]
        led = {p for p, (leader, _pref, _isr) in _placement(admin, topic).items()
               if leader == victim}
        cluster.kill(victim)
        _until(lambda: all(_placement(admin, topic)[p][0] not in (victim, -1) for p in led),
               60, f"leaders other than the killed broker {victim}")
        moved = _placement(admin, topic)
        assert all(moved[p][0] != moved[p][1] for p in led)  # off their preferred replica
        cluster.start(victim)
        _until(lambda: all(leader == preferred and victim in isr for leader, preferred, isr
                           in _placement(admin, topic).values()), 90,
               "every partition led by its preferred replica again")
