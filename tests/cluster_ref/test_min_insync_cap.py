"""``min.insync.replicas`` above the replica count in a cluster: capped, as Apache Kafka does.

Two brokers, one controller; the brokers' ``min.insync.replicas`` and
``transaction.state.log.min.isr`` are 3, one more than any partition can have (every
internal topic gets replication factor 2). A topic with RF=2 and ``min.insync.replicas=3``:

1. both replicas in the ISR: a raw acks=all Produce is taken (the cap is 2, the ISR 2), and
   a group's offset commit (its ``__consumer_offsets`` write waits for the ISR under the
   broker's 3) succeeds;
2. the follower is SIGKILLed and dropped from the ISR: acks=all is refused with
   NOT_ENOUGH_REPLICAS before the append (cap 2 > ISR 1), acks=1 is taken;
3. the follower restarted and back in the ISR: acks=all is taken again, and a transaction
   (``__transaction_state`` writes and the commit marker, each waiting for the ISR)
   commits and becomes readable under read_committed.

The transaction comes last: Kafka's coordinator writes the marker after answering EndTxn,
and a marker still pending at the kill would wait out the ISR-1 step (acks=-1) and land
after its acks=1 record, at a time no test can name.

The same scenario runs on our cluster (``EmbeddedCluster``) and on Apache Kafka 4.3.1; the
outcomes must be the expected ones on both. Our broker refused every acks=all write of
step 1 (and timed the coordinators' writes out) before the cap.
"""

from __future__ import annotations

from typing import Any

import pytest
from apache_support import apache_cluster
from cluster.conftest import CLUSTER_CONFIG, describe_partitions, leader_of, wait_for

from sdk import AdminClient, NewTopic, Producer
from sdk.admin import OffsetSpec
from sdk.errors import for_code
from sdk.records.builder import RecordBatchBuilder
from sdk.types import OffsetAndMetadata, TopicPartition
from server_ref.cluster import EmbeddedCluster
from tests.integration.conftest import produce_raw

TOPIC = "capped"
CONFIG = {
    **CLUSTER_CONFIG,
    "min.insync.replicas": "3",
    "transaction.state.log.min.isr": "3",
    "offsets.topic.replication.factor": "2",
    "transaction.state.log.replication.factor": "2",
    "offsets.topic.num.partitions": "2",  # few internal partitions: a quicker start
    "transaction.state.log.num.partitions": "2",
}
EXPECTED = {
    "acks=all, ISR 2": 0,
    "acks=1, ISR 2": 1,
    "offset commit, ISR 2": 2,
    "acks=all, ISR 1": "NOT_ENOUGH_REPLICAS",
    "acks=1, ISR 1": 2,
    "acks=all, ISR 2 again": "accepted",
    "transaction committed, ISR 2": True,
}


def _produce_raw(bootstrap: str, acks: int, value: bytes) -> tuple[int | str, str | None]:
    """One record to partition 0 of the topic: (its offset or Kafka's error name, the
    answer's message)."""
    builder = RecordBatchBuilder()
    builder.append(None, 0, None, value)
    part = produce_raw(bootstrap, TOPIC, builder, acks)
    if part.error_code:
        return for_code(part.error_code).name, part.error_message
    return part.base_offset, part.error_message


def _isr(cluster: Any) -> list[int]:
    return sorted(describe_partitions(cluster, TOPIC)[0].isr)


def scenario(cluster: Any) -> tuple[dict[str, Any], str | None]:
    """The outcomes, and the message of the NOT_ENOUGH_REPLICAS answer."""
    bootstrap = cluster.bootstrap_servers
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, 2, {"min.insync.replicas": "3"})]
                            ).raise_if_failed()
    wait_for(lambda: _isr(cluster) == [1, 2], 60, "both replicas in sync")
    outcome: dict[str, Any] = {}
    outcome["acks=all, ISR 2"] = _produce_raw(bootstrap, -1, b"all-1")[0]
    outcome["acks=1, ISR 2"] = _produce_raw(bootstrap, 1, b"one-1")[0]

    tp = TopicPartition(TOPIC, 0)
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.alter_consumer_group_offsets("capped-group", {tp: OffsetAndMetadata(2)},
                                           timeout_ms=30_000).raise_if_failed()
        committed = admin.list_consumer_group_offsets("capped-group", [tp]
                                                      ).raise_if_failed()[tp]
    outcome["offset commit, ISR 2"] = committed.offset

    leader = leader_of(cluster, TOPIC, 0)
    follower = next(n.node_id for n in cluster.brokers if n.node_id != leader)
    cluster.kill(follower)
    wait_for(lambda: _isr(cluster) == [leader], 60, "the ISR shrunk to the leader")
    outcome["acks=all, ISR 1"], message = _produce_raw(bootstrap, -1, b"refused")
    outcome["acks=1, ISR 1"] = _produce_raw(bootstrap, 1, b"one-2")[0]

    cluster.start(follower)
    wait_for(lambda: _isr(cluster) == [1, 2], 60, "the follower back in sync")
    again = _produce_raw(bootstrap, -1, b"all-2")[0]
    # Accepted, at offset 3 or later: in one CI run on Apache Kafka it landed one further
    # (what took the offset before was not kept; likely a first attempt that timed out
    # while the restarted follower caught up, sent again by the client).
    outcome["acks=all, ISR 2 again"] = "accepted" if isinstance(again, int) and again >= 3 \
        else again

    with Producer(bootstrap_servers=bootstrap, transactional_id="capped-txn",
                  transaction_timeout_ms=60_000) as producer:
        producer.init_transactions(60)
        with producer.transaction(60):
            producer.send(TOPIC, b"txn-1", partition=0)
    outcome["transaction committed, ISR 2"] = _marker_replicated(bootstrap, tp)
    return outcome, message


def _marker_replicated(bootstrap: str, tp: TopicPartition) -> bool:
    """The last stable offset reaches the high watermark: the commit marker is written and
    in the ISR (Kafka's coordinator writes it after answering EndTxn; the acks=all record
    before it is in the high watermark once the commit returned)."""
    seen: list[tuple[int, int]] = []

    def stable() -> bool:
        ends = [admin.list_offsets({tp: OffsetSpec.LATEST}, isolation_level=level
                                   ).raise_if_failed()[tp].offset
                for level in ("read_committed", "read_uncommitted")]
        seen.append((ends[0], ends[1]))
        return ends[0] == ends[1]

    with AdminClient(bootstrap_servers=bootstrap) as admin:
        try:
            wait_for(stable, 120, "the commit marker replicated")
        except TimeoutError as exc:
            raise AssertionError(f"{exc}; (committed, uncommitted) ends seen last: "
                                 f"{seen[-3:]}") from exc
    return True


@pytest.mark.timeout(300)
def test_capped_min_insync_replicas_on_our_cluster() -> None:
    with EmbeddedCluster(brokers=2, controllers=1, config=CONFIG) as cluster:
        outcome, message = scenario(cluster)
    assert outcome == EXPECTED
    assert message == ("min.insync.replicas of capped is 3 (2 effective: the partition has "
                       "2 replicas); the in-sync replicas are 1")


@pytest.mark.timeout(300)
def test_capped_min_insync_replicas_on_apache_kafka() -> None:
    with apache_cluster(brokers=2, controllers=1, config=CONFIG) as cluster:
        outcome, _message = scenario(cluster)
    assert outcome == EXPECTED
