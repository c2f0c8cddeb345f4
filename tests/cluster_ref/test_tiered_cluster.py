"""Tiered storage on our 4-broker cluster: topics whose remote tier is one directory all
brokers share (``remote.log.storage.uri``). The leader copies closed segments
below the high watermark and records each copy in ``__remote_log_metadata`` (created through
the controller, replicated, events produced at each metadata partition's leader); followers
learn the copies from their replicas of it and drop local segments only once remote. After
the leader is SIGKILLed the new leader serves offset 0 from the remote tier and goes on
copying. The controller runs the tiered config rules on CreateTopics and config changes.
DeleteRecords into the remote tier answers once its new log start is in the metadata topic,
so a leader SIGKILLed right after answering leaves it to the next one. Followers take the
leader's log start from every fetch answer (across both tiers), so with a remote log manager
task every 60 s the new leader starts the log at the cut before its task reads the metadata
topic; every uploaded producer snapshot, of segments the new leader rolled while following
too, is the producer state at its segment's last offset.

With 4 brokers each partition of ``__remote_log_metadata`` (3 replicas) leaves one broker
out: that broker, following or leading a tiered partition whose events live there, reads
them from the metadata partition's leader over the network (as Kafka's topic-based metadata
manager consumes them): as a follower it drops local segments once remote, and as the new
leader after a SIGKILL it serves offset 0 from the remote tier and copies on.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_ref.conftest import tiered_ref_config

from sdk import AdminClient, ConfigResource, ElectionType
from sdk.errors import InvalidConfigError, OffsetNotAvailableError, OffsetOutOfRangeError
from sdk.types import NewTopic, TopicPartition
from server_ref.cluster import EmbeddedCluster
from server_ref.tiered.metadata import METADATA_TOPIC, index_of
from tests.integration.tiered_kit import (
    EARLIEST,
    EARLIEST_LOCAL,
    LATEST_TIERED,
    fetch_once,
    list_offset,
    make_records,
    produce,
    produce_idempotent_raw,
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
    with EmbeddedCluster(brokers=4, controllers=1, config=tiered_ref_config(remote)) as cluster:
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
    # Every uploaded producer snapshot, the old leader's and the new one's (whose segments
    # were rolled while it followed), is the state at its segment's last offset.
    _check_uploaded_producer_snapshots(cluster, topic)
    cluster.start(old)


def _check_uploaded_producer_snapshots(cluster: EmbeddedCluster, topic: str) -> None:
    """Each ``.snapshot`` object in the remote tier holds exactly the producers (id ->
    epoch, last sequence) of the batches up to the last offset of the ``.log`` object
    uploaded with it, as those log objects hold them."""
    from sdk.records.reader import RecordBatch, iter_batches

    root = Path(cluster.config["remote.log.storage.uri"].removeprefix("file://"))
    (folder,) = root.glob(f"{topic}-*/0")
    segments: list[tuple[int, dict[int, tuple[int, int]]]] = []  # (last offset, snapshot)
    batches: dict[int, RecordBatch] = {}  # by last offset, from every log object
    for snapshot in sorted(folder.glob("*.snapshot")):
        log_object = snapshot.with_suffix(".log")
        if not log_object.exists():
            continue  # a copy under way (its log object is written last)
        data = log_object.read_bytes()
        found = [b for b in iter_batches(data) if isinstance(b, RecordBatch)]
        batches.update((b.last_offset, b) for b in found)
        producers = json.loads(snapshot.read_bytes())
        segments.append((found[-1].last_offset, {
            int(pid): (e["epoch"], e["batches"][-1][1]) for pid, e in producers.items()}))
    assert len(segments) > 4
    for last, producers in segments:
        expected: dict[int, tuple[int, int]] = {}
        for offset in sorted(o for o in batches if o <= last):
            b = batches[offset]
            if b.producer_id >= 0 and not b.is_control:
                expected[b.producer_id] = (b.producer_epoch,
                                           b.base_sequence + b.last_offset_delta)
        assert producers == expected, last


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


def test_delete_records_into_the_remote_tier_holds_after_a_leader_change(
        tiered_cluster: EmbeddedCluster) -> None:
    """DeleteRecords below the local log start moves the log start across both tiers; the
    leader is SIGKILLed right after answering, and the new leader starts the log at the
    same offset (the floor is in __remote_log_metadata, not only in the old leader)."""
    cluster, topic = tiered_cluster, "tiered-delete-records"
    bootstrap, tp = cluster.bootstrap_servers, TopicPartition(topic, 0)
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 3, tiered_topic_configs())]).raise_if_failed()
        records = make_records(COUNT, seed="cut")
        produce(bootstrap, topic, records)
        wait_until(lambda: _only_remote_below_half(cluster, topic),
                   "most of the topic only remote on every replica", timeout_s=90)
        cut = list_offset(bootstrap, topic, EARLIEST_LOCAL)[1] // 2  # inside the remote tier
        assert admin.delete_records({tp: cut})[tp].low_watermark == cut
    _kill_leader_and_check_start(cluster, topic, cut, records[cut:])


# ----------------------------------------------------------------- the leader's log start
# A follower takes the leader's log start from every fetch answer (as Kafka's follower
# does), so the broker that leads after a SIGKILL starts the log where the old leader did
# without waiting for anything else. These tests run with a remote log manager task every
# 60 s: the new leader's task cannot have read the DeleteRecords floor from
# __remote_log_metadata before the assertions.

SLOW_TASK_MS = 60_000


@pytest.fixture(scope="module")
def slow_task_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    remote = tmp_path_factory.mktemp("remote-tier-slow")
    with EmbeddedCluster(brokers=3, controllers=1,
                         config=tiered_ref_config(remote, SLOW_TASK_MS)) as cluster:
        yield cluster


def _first_offset_after_reset(bootstrap: str, topic: str) -> int:
    """A consumer positioned at offset 0 with auto.offset.reset=earliest: the offset of the
    first record it gets (OFFSET_OUT_OF_RANGE at 0 resets it to the log start)."""
    from sdk import Consumer

    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                  auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        for _ in range(120):
            for records in consumer.poll(timeout_ms=500).values():
                if records:
                    return int(records[0].offset)
    raise AssertionError(f"no record of {topic} read after a reset")


def _only_remote_below_half(cluster: EmbeddedCluster, topic: str) -> bool:
    """Every replica's local log starts past the topic's first half (it is only remote)."""
    starts = _local_starts(cluster, topic)
    return len(starts) == 3 and min(starts.values()) > COUNT // 2


def _kill_leader_and_check_start(cluster: EmbeddedCluster, topic: str, cut: int,
                                 expected: list[tuple[bytes | None, bytes,
                                                      list[tuple[str, bytes]]]]) -> None:
    bootstrap = cluster.bootstrap_servers
    old = cluster.leader_of(topic, 0)
    cluster.kill(old)
    try:
        wait_until(lambda: cluster.leader_of(topic, 0) not in (-1, old), "a new leader",
                   timeout_s=60)
        assert list_offset(bootstrap, topic, EARLIEST) == (0, cut)
        assert fetch_once(bootstrap, topic, 0)[0] == OffsetOutOfRangeError.errno
        assert fetch_once(bootstrap, topic, cut - 1)[0] == OffsetOutOfRangeError.errno
        assert fetch_once(bootstrap, topic, cut)[0] == 0
        assert _first_offset_after_reset(bootstrap, topic) == cut
        assert read_sdk(bootstrap, topic, len(expected), cut) == expected
    finally:
        cluster.start(old)


def test_a_followers_log_start_follows_the_leaders(slow_task_cluster: EmbeddedCluster
                                                   ) -> None:
    """Plain topic: DeleteRecords at the leader, the leader SIGKILLed right after the
    answer: the new leader answers EARLIEST at the cut and refuses offsets below it. The
    answer waits until every live follower's fetches report the new log start (Kafka's
    DelayedDeleteRecords), so whichever follower leads next has it."""
    cluster, topic = slow_task_cluster, "plain-log-start"
    bootstrap, tp = cluster.bootstrap_servers, TopicPartition(topic, 0)
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 3, {"segment.bytes": "16384"})]
                            ).raise_if_failed()
        records = make_records(COUNT // 2, seed="plain")
        produce(bootstrap, topic, records)
        cut = len(records) // 2
        assert admin.delete_records({tp: cut})[tp].low_watermark == cut
    _kill_leader_and_check_start(cluster, topic, cut, records[cut:])


def test_a_new_leader_never_serves_below_a_delete_records_into_the_remote_tier(
        slow_task_cluster: EmbeddedCluster) -> None:
    """Tiered topic, most of it only remote on every replica: DeleteRecords at an offset
    below every replica's local log start (a floor in the remote tier), answered once every
    live follower reports it as its log start across tiers. The leader is SIGKILLed right
    after the answer and its successor, whose remote log manager task has not run since, starts
    the log at the cut at once: EARLIEST, Fetch at 0 and below the cut
    OFFSET_OUT_OF_RANGE, a consumer at 0 reset to the cut, every record from it byte for
    byte. Before, the follower ignored a leader's log start below its own local start, and
    the new leader answered EARLIEST 0 and served the deleted records from the remote tier
    until its task read the floor from __remote_log_metadata (up to 60 s here)."""
    cluster, topic = slow_task_cluster, "tiered-slow-floor"
    bootstrap, tp = cluster.bootstrap_servers, TopicPartition(topic, 0)
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 3, tiered_topic_configs())]).raise_if_failed()
        records = make_records(COUNT, seed="slow")
        produce(bootstrap, topic, records)
        # copies and local deletions happen at the task's runs: one or two of them
        wait_until(lambda: _only_remote_below_half(cluster, topic),
                   "most of the topic only remote on every replica",
                   timeout_s=3 * SLOW_TASK_MS / 1000 + 30)
        cut = min(_local_starts(cluster, topic).values()) // 2
        assert cut > 0 and list_offset(bootstrap, topic, LATEST_TIERED)[1] >= cut
        assert admin.delete_records({tp: cut})[tp].low_watermark == cut
    _kill_leader_and_check_start(cluster, topic, cut, records[cut:])


def test_a_new_leader_remembers_producers_whose_batches_are_only_remote(
        tiered_cluster: EmbeddedCluster) -> None:
    """A producer wrote one batch, then other producers' records pushed it out of every
    replica's local log into the remote tier. The leader is SIGKILLed and the producer
    retries its batch on the new leader: it is answered as the duplicate it is (its first
    offset, nothing appended), as Kafka's leader does from its producer snapshots (the log
    start across tiers keeps the producer). Rebuilding from the local log alone forgot the
    producer and appended the batch a second time."""
    cluster, topic = tiered_cluster, "tiered-producers"
    bootstrap, producer_id = cluster.bootstrap_servers, 7_000_001
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 3, tiered_topic_configs())]).raise_if_failed()
    wait_until(lambda: cluster.leader_of(topic, 0) > 0, "a leader", timeout_s=30)
    stamp = int(time.time() * 1000)
    assert produce_idempotent_raw(bootstrap, topic, producer_id, 5, stamp) == (0, 0)
    produce(bootstrap, topic, make_records(COUNT, seed="push"))

    def only_remote() -> bool:
        starts = _local_starts(cluster, topic)
        return len(starts) == 3 and min(starts.values()) > COUNT // 2

    wait_until(only_remote, "the first batch only in the remote tier", timeout_s=90)
    _, end_before = list_offset(bootstrap, topic, -1)
    old = cluster.leader_of(topic, 0)
    cluster.kill(old)
    wait_until(lambda: cluster.leader_of(topic, 0) not in (-1, old), "a new leader",
               timeout_s=60)
    assert produce_idempotent_raw(bootstrap, topic, producer_id, 5, stamp) == (0, 0)
    # Until the new leader's high watermark reaches the start of its epoch it answers
    # OFFSET_NOT_AVAILABLE (as Kafka does), never an end below what was acknowledged.
    answers: list[tuple[int, int]] = []
    wait_until(lambda: answers.append(list_offset(bootstrap, topic, -1)) or answers[-1][0] == 0,
               "the new leader's end offset", timeout_s=30)
    assert {code for code, _ in answers} <= {0, OffsetNotAvailableError.errno}
    assert answers[-1] == (0, end_before)
    cluster.start(old)
