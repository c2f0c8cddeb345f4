"""Tiered storage on our 4-broker cluster: topics whose remote tier is one directory all
brokers share (``remote.log.storage.uri``). The leader copies closed segments
below the high watermark and records each copy in ``__remote_log_metadata`` (created through
the controller, replicated, events produced at each metadata partition's leader); followers
learn the copies from their replicas of it and drop local segments only once remote. After
the leader is SIGKILLed the new leader serves offset 0 from the remote tier and goes on
copying. The controller runs the tiered config rules on CreateTopics and config changes.

With 4 brokers each partition of ``__remote_log_metadata`` (3 replicas) leaves one broker
out: that broker, following or leading a tiered partition whose events live there, reads
them from the metadata partition's leader over the network (as Kafka's topic-based metadata
manager consumes them): as a follower it drops local segments once remote, and as the new
leader after a SIGKILL it serves offset 0 from the remote tier and copies on.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cluster_ref.conftest import REF_CONFIG

from sdk import AdminClient, ConfigResource, ElectionType
from sdk.errors import InvalidConfigError
from sdk.types import NewTopic, TopicPartition
from server_ref.cluster import EmbeddedCluster
from server_ref.tiered.metadata import METADATA_TOPIC, index_of
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
    with EmbeddedCluster(brokers=4, controllers=1, config=config) as cluster:
        yield cluster


def _local_starts(cluster: EmbeddedCluster, topic: str) -> dict[int, int]:
    """Each live replica's first local offset of partition 0 (its oldest segment file; a
    broker holding no replica may keep an empty log of it, left out)."""
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        replicas = set(_replicas(admin, topic)[1][0])
    out = {}
    for node in cluster.brokers:
        if not node.running or node.node_id not in replicas:
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


def _replicas(admin: AdminClient, topic: str) -> tuple[str, dict[int, tuple[int, ...]]]:
    """(topic id, {partition: replicas}) as the cluster describes the topic."""
    description = admin.describe_topics([topic])[topic]
    assert description.error is None, description.error
    return str(description.topic_id), {p.partition: p.replicas
                                       for p in description.partitions}


def test_a_broker_without_a_metadata_replica_reads_it_from_the_leader(
        tiered_cluster: EmbeddedCluster) -> None:
    cluster, topic = tiered_cluster, "tiered-far"
    bootstrap, tp = cluster.bootstrap_servers, TopicPartition(topic, 0)
    everyone = sorted(n.node_id for n in cluster.brokers)
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 4, tiered_topic_configs())]).raise_if_failed()
        first = make_records(COUNT // 3, seed="far")
        produce(bootstrap, topic, first)  # the first copy creates the metadata topic if new
        wait_until(lambda: METADATA_TOPIC in admin.list_topics(), f"{METADATA_TOPIC} created",
                   timeout_s=60)
        topic_id, _ = _replicas(admin, topic)
        metadata_partitions = _replicas(admin, METADATA_TOPIC)[1]
        hosts = set(metadata_partitions[index_of(topic_id, 0, len(metadata_partitions))])
        assert len(hosts) == 3
        (far,) = set(everyone) - hosts  # holds no replica of this topic's metadata partition
        near = sorted(hosts)

        # a broker with a metadata replica leads; ``far`` follows
        admin.alter_partition_reassignments({tp: [*near, far]}).raise_if_failed()
        admin.elect_leaders(ElectionType.PREFERRED, [tp])
        wait_until(lambda: cluster.leader_of(topic, 0) == near[0], f"broker {near[0]} leading",
                   timeout_s=60)
        second = make_records(COUNT, seed="far-2")
        produce(bootstrap, topic, second)
        total = len(first) + len(second)

        def copied_and_dropped_everywhere() -> bool:
            code, tiered = list_offset(bootstrap, topic, LATEST_TIERED)
            starts = _local_starts(cluster, topic)
            return (code == 0 and tiered > total - COUNT // 2 and len(starts) == 4
                    and min(starts.values()) > total - COUNT // 2)

        # ``far`` learns the leader's copies (it deletes only local segments known remote)
        wait_until(copied_and_dropped_everywhere, "the leader copying and every replica, "
                   f"{far} too, dropping local segments", timeout_s=90)
        _, tiered_before = list_offset(bootstrap, topic, LATEST_TIERED)

        # ``far`` first in line, the leader SIGKILLed: ``far`` leads
        admin.alter_partition_reassignments({tp: [far, *near]}).raise_if_failed()
    old = cluster.leader_of(topic, 0)
    assert old == near[0]
    cluster.kill(old)
    try:
        wait_until(lambda: cluster.leader_of(topic, 0) == far, f"broker {far} leading",
                   timeout_s=60)
        # offset 0 from the remote tier through ``far``, byte for byte
        assert read_sdk(bootstrap, topic, total) == first + second
        assert list_offset(bootstrap, topic, EARLIEST) == (0, 0)
        # and it copies on from where the old leader stopped
        more = make_records(MORE, seed="far-3")
        produce(bootstrap, topic, more)
        wait_until(lambda: list_offset(bootstrap, topic, LATEST_TIERED)[1]
                   > tiered_before + MORE // 3, f"broker {far} copying", timeout_s=90)
        assert read_sdk(bootstrap, topic, total + MORE) == first + second + more
    finally:
        cluster.start(old)
