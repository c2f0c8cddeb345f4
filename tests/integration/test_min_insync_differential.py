"""``min.insync.replicas`` above a partition's replica count, asked of each broker raw.

Apache Kafka caps the setting at the replica count when it decides (its Partition's
``effectiveMinIsr``): a one-replica topic with ``min.insync.replicas=2``, or raised to 3
later, takes acks=all writes, and the topic's config still says what was set. Our broker
does the same (``server_ref/replication/min_isr.py``); it used to refuse such writes with
NOT_ENOUGH_REPLICAS. tansu, whose partitions have no replicas of their own (its storage
is the durable copy), takes the writes too and keeps the setting as given: the same answers.

The cluster-mode side (a cap of 2 on an RF=2 topic still refusing once the ISR is 1) is in
tests/cluster_ref/test_min_insync_cap.py.
"""

from __future__ import annotations

import pytest

from sdk import AdminClient, NewTopic
from sdk.admin import ConfigResource
from sdk.protocol.messages.produce import ProduceResponse
from sdk.records.builder import RecordBatchBuilder

from .conftest import Target, consume_all, new_topic, produce_raw

pytestmark = pytest.mark.timeout(180)


def _produce_raw(target: Target, topic: str, acks: int, value: bytes
                 ) -> ProduceResponse.PartitionProduceResponse:
    """One single-record batch to partition 0 (Produce v11)."""
    builder = RecordBatchBuilder()
    builder.append(None, 0, None, value)
    return produce_raw(target.bootstrap_servers, topic, builder, acks)


def _min_isr(admin: AdminClient, topic: str) -> str | None:
    resource = ConfigResource.topic(topic)
    found = admin.describe_configs([resource], names=["min.insync.replicas"]
                                   ).raise_if_failed()[resource]
    return found.value("min.insync.replicas")


def test_acks_all_on_one_replica_with_min_insync_above_it_is_accepted(broker: Target) -> None:
    topic = new_topic("minisr")
    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, configs={"min.insync.replicas": "2"})]
                            ).raise_if_failed()
        described = _min_isr(admin, topic)
    assert described == "2"  # kept as given: Kafka caps only when it decides

    answers = [(p.error_code, p.base_offset) for p in
               (_produce_raw(broker, topic, -1, b"all-1"), _produce_raw(broker, topic, 1, b"one"))]
    assert answers == [(0, 0), (0, 1)]

    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.alter_configs({ConfigResource.topic(topic): {"min.insync.replicas": "3"}}
                            ).raise_if_failed()
        raised = _min_isr(admin, topic)
    assert raised == "3"
    later = _produce_raw(broker, topic, -1, b"all-2")
    assert (later.error_code, later.base_offset) == (0, 2)

    stored = consume_all(broker.bootstrap_servers, topic, 3)
    assert [r.value() for r in stored] == [b"all-1", b"one", b"all-2"]
