"""Offset commits on our broker's cluster are answered only once the ISR of the group's
``__consumer_offsets`` partition has them (as Kafka's coordinator appends with acks=-1):
the group coordinator's broker SIGKILLed right after a commit returned loses no offset,
the new leader of that partition serves the last commit."""

from __future__ import annotations

import time

from cluster.conftest import create_topic, new_topic

from sdk import AdminClient, TopicPartition
from server_ref.cluster import EmbeddedCluster

PARTITIONS = 3
ROUNDS = 20


def _coordinator(admin: AdminClient, group: str) -> int:
    description = admin.describe_consumer_groups([group], timeout_ms=10_000)[group]
    if description.error is not None:
        raise description.error
    assert description.coordinator is not None
    return description.coordinator.node_id


def test_commit_survives_coordinator_kill(kafka_cluster: EmbeddedCluster,
                                          failover_report: list[str]) -> None:
    topic = create_topic(kafka_cluster, "offsets-kill", PARTITIONS)
    group = new_topic("offsets-kill-group")
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    with AdminClient(bootstrap_servers=kafka_cluster.bootstrap_servers) as admin:
        admin.alter_consumer_group_offsets(group, dict.fromkeys(tps, 0), timeout_ms=30_000)
        coordinator = _coordinator(admin, group)
        last: dict[TopicPartition, int] = {}
        for i in range(1, ROUNDS + 1):
            last = {tp: i * 10 + tp.partition for tp in tps}
            results = admin.alter_consumer_group_offsets(group, last, timeout_ms=30_000)
            assert {tp: results[tp].offset for tp in tps} == last
        # The commit has returned: the broker that answered it dies at once.
        kafka_cluster.kill(coordinator)
        killed_at = time.monotonic()
        committed = admin.list_consumer_group_offsets(group, tps, timeout_ms=60_000)
        failover_report.append(
            f"offsets readable {time.monotonic() - killed_at:.2f}s after the group "
            f"coordinator (broker {coordinator}) was SIGKILLed")
        assert {tp: committed[tp].offset for tp in tps} == last
        assert _coordinator(admin, group) != coordinator
