"""Our broker's Prometheus metrics in cluster mode (issue 19, broker metrics), scraped over
HTTP from every node while a follower is killed and restarted:

* the replica gauges of each broker (partitions hosted and led, under-replicated ones) and
  the controller's (the active controller, topics, partitions, offline partitions,
  active and fenced brokers), summed over the nodes as a dashboard does;
* ``isrshrinks`` / ``isrexpands`` counted on the leader when the controller commits the
  ISR change it asked for: a SIGKILLed follower falls out after
  ``replica.lag.time.max.ms`` (2 s here, before the controller's 6 s session timeout) and
  comes back once restarted and caught up;
* ``python -m server_ref --brokers N --metrics-port 0`` prints each node's metrics URL.

Apache Kafka serves these over JMX only, so only our broker is scraped here.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from cluster.conftest import CLUSTER_CONFIG, wait_for
from prometheus_client.parser import text_string_to_metric_families

from sdk import AdminClient, NewTopic, Producer
from server_ref.cluster import EmbeddedCluster

ROOT = Path(__file__).resolve().parents[2]


def scrape(url: str) -> dict[str, float]:
    """The unlabelled samples of one node's endpoint, by name."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        assert answer.status == 200
        text = answer.read().decode()
    return {s.name: s.value for family in text_string_to_metric_families(text)
            for s in family.samples if not s.labels}


def test_replica_and_controller_metrics_through_a_follower_kill_and_restart() -> None:
    config = {**CLUSTER_CONFIG, "replica.lag.time.max.ms": "2000"}
    with EmbeddedCluster(brokers=3, controllers=1, config=config, metrics_port=0) as cluster:
        brokers = [n.node_id for n in cluster.brokers]
        urls = {node_id: cluster.metrics_url(node_id) for node_id in cluster.nodes}

        def broker_sum(name: str) -> float:
            return sum(scrape(urls[b])[name] for b in brokers)

        with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("metered", 2, 3)]).raise_if_failed()
        controller = scrape(urls[101])
        assert controller["kafka_controller_kafkacontroller_activecontrollercount"] == 1
        assert controller["kafka_controller_kafkacontroller_activebrokercount"] == 3
        assert controller["kafka_controller_kafkacontroller_fencedbrokercount"] == 0
        assert controller["kafka_controller_kafkacontroller_offlinepartitionscount"] == 0
        total = controller["kafka_controller_kafkacontroller_globalpartitioncount"]
        assert total >= 2
        # One active controller across the cluster; each partition led once and hosted
        # three times (every topic here has 3 replicas).
        assert broker_sum("kafka_controller_kafkacontroller_activecontrollercount") == 0
        wait_for(lambda: broker_sum("kafka_server_replicamanager_leadercount") == total, 30,
                 "every partition led by one broker")
        assert broker_sum("kafka_server_replicamanager_partitioncount") == 3 * total
        wait_for(lambda: broker_sum("kafka_server_replicamanager_underreplicatedpartitions")
                 == 0, 30, "every replica in sync")

        leader = cluster.leader_of("metered", 0)
        follower = next(b for b in brokers if b != leader)
        before = scrape(urls[leader])
        with Producer(bootstrap_servers=cluster.bootstrap_servers, acks=1) as producer:
            producer.send("metered", b"before", partition=0).result(30)
            cluster.kill(follower)
            # The follower is behind only once the leader has a record it lacks.
            producer.send("metered", b"after", partition=0).result(30)
            wait_for(lambda: scrape(urls[leader])["kafka_server_replicamanager_isrshrinks_total"]
                     > before["kafka_server_replicamanager_isrshrinks_total"], 30,
                     "the leader shrank the ISR of metered-0")
            assert scrape(urls[leader])[
                "kafka_server_replicamanager_underreplicatedpartitions"] >= 1
            cluster.start(follower)
            wait_for(lambda: scrape(urls[leader])["kafka_server_replicamanager_isrexpands_total"]
                     > before["kafka_server_replicamanager_isrexpands_total"], 60,
                     "the restarted follower back in the ISR")
        wait_for(lambda: broker_sum("kafka_server_replicamanager_underreplicatedpartitions")
                 == 0, 60, "every replica in sync again")
        controller = scrape(urls[101])
        assert controller["kafka_controller_kafkacontroller_activebrokercount"] == 3
        assert controller["kafka_controller_kafkacontroller_offlinepartitionscount"] == 0


def test_command_line_cluster_prints_each_nodes_metrics_url(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "server_ref", "--brokers", "1", "--controllers", "1",
         "--metrics-port", "0", "--data-dir", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("server_ref ready bootstrap_servers=")
        lines = [proc.stdout.readline().strip() for _ in range(4)]
        found = [re.fullmatch(r"metrics node=(\d+) url=(http://\S+/metrics)", line)
                 for line in lines[2:]]
        assert all(found), lines
        urls = {int(m[1]): m[2] for m in found if m}
        assert set(urls) == {101, 1}
        assert scrape(urls[101])["kafka_controller_kafkacontroller_activecontrollercount"] == 1
        assert scrape(urls[1])["kafka_controller_kafkacontroller_activecontrollercount"] == 0
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
