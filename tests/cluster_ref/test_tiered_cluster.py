"""Tiered storage on our 3-broker cluster: a topic with RF=3 whose remote tier is one
directory all brokers share (``remote.log.storage.uri``). The leader copies closed segments
below the high watermark and records each copy in ``__remote_log_metadata`` (created through
the controller, replicated, events produced at each metadata partition's leader); followers
learn the copies from their replicas of it and drop local segments only once remote. After
the leader is SIGKILLed the new leader serves offset 0 from the remote tier and goes on
copying. The controller runs the tiered config rules on CreateTopics and config changes.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cluster_ref.conftest import REF_CONFIG

from sdk import AdminClient, ConfigResource
from sdk.errors import InvalidConfigError
from sdk.types import NewTopic
from server_ref.cluster import EmbeddedCluster
from tests.integration.tiered_kit import (
    EARLIEST,
    EARLIEST_LOCAL,
    LATEST_TIERED,
    list_offset,
    make_records,
    produce,
    read_confluent,
    read_sdk,
    tiered_topic_configs,
    wait_until,
)

COUNT = 3000
MORE = 1500


@pytest.fixture(scope="module")
def tiered_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    remote = tmp_path_factory.mktemp("remote-tier")
    config = {**REF_CONFIG,
              "remote.log.storage.system.enable": "true",
              "remote.log.storage.uri": f"file://{remote}",
              "remote.log.manager.task.interval.ms": "200",
              "log.retention.check.interval.ms": "200"}
    with EmbeddedCluster(brokers=3, controllers=1, config=config) as cluster:
        yield cluster


def _local_starts(cluster: EmbeddedCluster, topic: str) -> dict[int, int]:
    """Each live broker's first local offset of partition 0 (its oldest segment file)."""
    out = {}
    for node in cluster.brokers:
        if not node.running:
            continue
        logs = sorted((node.directory / "data" / f"{topic}-0").glob("*.log"))
        if logs:
            out[node.node_id] = int(logs[0].stem)
    return out


def test_controller_runs_the_tiered_config_rules(tiered_cluster: EmbeddedCluster) -> None:
    with AdminClient(bootstrap_servers=tiered_cluster.bootstrap_servers) as admin:
        compacted = admin.create_topics([NewTopic("tiered-compact", 1, 3, {
            "remote.storage.enable": "true", "cleanup.policy": "compact"})])["tiered-compact"]
        assert isinstance(compacted.error, InvalidConfigError)
        assert "Remote log storage is unsupported for the compacted topics" in \
            str(compacted.error)
        admin.create_topics([NewTopic("tiered-rules", 1, 3, tiered_topic_configs())])
        resource = ConfigResource.topic("tiered-rules")
        refused = admin.alter_configs({resource: {"remote.storage.enable": "false"}})
        assert isinstance(refused[resource].error, InvalidConfigError)
        assert "It is invalid to disable remote storage without deleting remote data" in \
            str(refused[resource].error)
        unequal = admin.alter_configs({resource: {"remote.log.copy.disable": "true"}})
        assert "must be set to the identical value" in str(unequal[resource].error)

def test_failover_reads_the_remote_tier_from_the_new_leader(
        tiered_cluster: EmbeddedCluster) -> None:
    cluster, topic = tiered_cluster, "tiered-failover"
    bootstrap = cluster.bootstrap_servers
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 3, tiered_topic_configs())])
    records = make_records(COUNT)
    produce(bootstrap, topic, records)

    def mostly_remote() -> bool:
        code, tiered = list_offset(bootstrap, topic, LATEST_TIERED)
        starts = _local_starts(cluster, topic)
        return (code == 0 and tiered > COUNT // 2 and len(starts) == 3
                and min(starts.values()) > COUNT // 2)

    wait_until(mostly_remote, "most of the topic copied and every replica's local log "
               "starting late", timeout_s=90)
    assert list_offset(bootstrap, topic, EARLIEST) == (0, 0)
    code, local_start = list_offset(bootstrap, topic, EARLIEST_LOCAL)
    assert code == 0 and local_start > COUNT // 2
    starts = _local_starts(cluster, topic)
    _, tiered_before = list_offset(bootstrap, topic, LATEST_TIERED)
    # no replica dropped a local segment that is not in the remote tier
    assert all(start <= tiered_before + 1 for start in starts.values()), (starts, tiered_before)

    old = cluster.leader_of(topic, 0)
    cluster.kill(old)
    wait_until(lambda: cluster.leader_of(topic, 0) not in (-1, old), "a new leader",
               timeout_s=60)
    # the new leader serves offset 0 from the remote tier, byte for byte, to both clients
    assert read_sdk(bootstrap, topic, COUNT) == records
    assert read_confluent(bootstrap, topic, COUNT) == records
    assert list_offset(bootstrap, topic, EARLIEST) == (0, 0)

    # it goes on copying what is produced now
    more = make_records(MORE, seed="more")
    produce(bootstrap, topic, more)
    wait_until(lambda: list_offset(bootstrap, topic, LATEST_TIERED)[1] > tiered_before + 500,
               "the new leader copying", timeout_s=90)
    everything = read_sdk(bootstrap, topic, COUNT + MORE)
    assert everything == records + more
    cluster.start(old)

