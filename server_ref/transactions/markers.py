"""Transaction markers: the COMMIT/ABORT control batch each partition of a transaction gets.

One append path for both callers: the coordinator writing its own transaction's markers
(every partition is local on a single node) and the WriteTxnMarkers handler (in cluster
mode at the partition's leader only, stamped with its leader epoch). A marker on a
``__consumer_offsets`` partition also decides the offsets the producer staged there with
TxnOffsetCommit (applied on COMMIT, dropped on ABORT), as Kafka's group coordinator does
when it sees the marker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sdk.errors import (
    KafkaStorageError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
)
from sdk.records.builder import build_control_batch
from sdk.records.control import ControlType
from server_ref.offsets_journal import OFFSETS_TOPIC

if TYPE_CHECKING:
    from server_ref.broker import Broker

__all__ = ["write_marker"]


def write_marker(broker: Broker, topic: str, index: int, producer_id: int, epoch: int,
                 committed: bool, coordinator_epoch: int) -> None:
    """Append the marker to ``topic``-``index``; raises the Kafka error when it cannot."""
    partition = broker.topics.partition(topic, index)
    if partition is None:
        raise UnknownTopicOrPartitionError(f"topic {topic} has no partition {index}")
    # As Kafka's ProducerStateManager: INVALID_PRODUCER_EPOCH for an epoch older than the
    # partition's, TRANSACTION_COORDINATOR_FENCED for a coordinator epoch older than the last
    # marker's (a coordinator that lost its __transaction_state partition); nothing written.
    partition.producers.check_marker(producer_id, epoch, coordinator_epoch)
    now = broker.now_ms()
    batch = build_control_batch(ControlType.COMMIT if committed else ControlType.ABORT,
                                producer_id, epoch, coordinator_epoch, timestamp_ms=now)
    leader_epoch = 0
    if broker.cluster is not None:  # only the leader appends; followers copy the marker
        replica = partition.replica
        if replica is None or not replica.is_leader:
            raise NotLeaderOrFollowerError(f"this broker does not lead {partition.name}")
        leader_epoch = replica.leader_epoch
    try:
        partition.log.append(bytearray(batch), now_ms=now, leader_epoch=leader_epoch)
    except OSError as exc:
        raise KafkaStorageError(f"writing a marker to {partition.name} failed: {exc}") from exc
    # The marker's epoch becomes the producer's on this partition (a bumped epoch fences
    # the old one's late writes; sequences restart after a bump), its coordinator epoch the
    # partition's for this producer.
    partition.producers.record_marker(producer_id, epoch, coordinator_epoch, now)
    partition.notify_appended()
    if broker.cluster is not None:
        broker.cluster.replicas.appended(partition)
        if broker.transactions is not None:  # a batch verified before it ended is refused
            broker.transactions.produce_guards.pop((topic, index, producer_id), None)
    if topic == OFFSETS_TOPIC and broker.groups is not None:
        broker.groups.complete_transaction(producer_id, committed)

