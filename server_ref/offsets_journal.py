"""The group coordinator's journal, kept in the compacted ``__consumer_offsets`` topic.

Each record goes to the partition Kafka would pick for its group (Java's
``abs(groupId.hashCode()) % partitions``), so all records of one group are in one partition,
in order; replay reads the partitions one after the other. The topic is created on the
first write, with ``offsets.topic.num.partitions`` partitions and ``cleanup.policy=compact``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from sdk.errors import CoordinatorNotAvailableError, MalformedDataError, NotCoordinatorError
from sdk.records.builder import RecordBatchBuilder
from sdk.records.control import decode_control_record
from sdk.records.reader import RecordBatch, iter_batches
from server_ref.topics import Partition, Topic

if TYPE_CHECKING:
    from server_ref.broker import Broker

__all__ = ["OFFSETS_TOPIC", "OffsetsJournal", "append_as_leader", "java_string_hash",
           "partition_for_group", "replay_batches"]

OFFSETS_TOPIC = "__consumer_offsets"
REPLAY_CHUNK = 1 << 20
_INT16 = struct.Struct(">h")


def replay_batches(topic: Topic) -> Iterator[tuple[Any, int]]:
    """Every batch of an internal topic's partitions in log order, one partition after the
    other, with the first offset not seen before it (a chunk read may start inside a
    batch: records below that offset were yielded with the previous chunk)."""
    for partition in topic.partitions:
        plog = partition.log
        offset = plog.log_start_offset
        while offset < plog.log_end_offset:
            data = plog.read(offset, REPLAY_CHUNK).to_bytes()
            if not data:
                break
            for batch in iter_batches(data):
                if batch.next_offset <= offset:
                    continue
                yield batch, offset
                offset = batch.next_offset


def append_as_leader(broker: Broker, partition: Partition, builder: RecordBatchBuilder) -> None:
    """Append a coordinator's record to its internal partition. Cluster mode: only the
    partition's leader writes, stamped with its epoch; the followers copy it like any
    record (callers that must answer after the ISR wait for it themselves)."""
    cluster = broker.cluster
    if cluster is None:
        partition.log.append(bytearray(builder.build()), leader_epoch=0)
        partition.notify_appended()
        return
    replica = partition.replica
    if replica is None or not replica.is_leader:
        raise NotCoordinatorError(f"this broker does not lead {partition.name}")
    partition.log.append(bytearray(builder.build()), leader_epoch=replica.leader_epoch)
    partition.notify_appended()
    cluster.replicas.appended(partition)


def java_string_hash(text: str) -> int:
    """``String.hashCode()``: over UTF-16 code units, wrapping at 32 bits, signed."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for_group(group_id: str, partitions: int) -> int:
    h = java_string_hash(group_id)
    return 0 if h == -(1 << 31) else abs(h) % partitions


def group_of_key(key: bytes) -> str:
    """Every key layout starts with version int16 then the group id as an int16 string."""
    if len(key) < 4:
        raise MalformedDataError("journal key too short to hold a group id")
    (length,) = _INT16.unpack_from(key, 2)
    if length < 0 or 4 + length > len(key):
        raise MalformedDataError("journal key's group id is truncated")
    return key[4:4 + length].decode("utf-8")


class OffsetsJournal:
    """``GroupJournal`` over the broker's ``__consumer_offsets`` log."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def ensure_topic(self) -> Topic:
        topic = self._topic(create=True)
        assert topic is not None
        return topic

    def _topic(self, create: bool) -> Topic | None:
        topics = self.broker.topics
        topic = topics.get(OFFSETS_TOPIC)
        if topic is None and create and self.broker.cluster is not None:
            # Cluster mode: the controller creates it (FindCoordinator asks for it).
            raise CoordinatorNotAvailableError("the offsets topic does not exist yet")
        if topic is None and create:
            config = self.broker.config
            topic = topics.create(
                OFFSETS_TOPIC,
                int(config.get("offsets.topic.num.partitions")),
                1,
                {"cleanup.policy": "compact",
                 "segment.bytes": str(config.get("offsets.topic.segment.bytes"))},
                internal=True,
            )
        return topic

    def partition_for(self, group_id: str) -> Partition:
        topic = self.ensure_topic()
        return topic.partitions[partition_for_group(group_id, len(topic.partitions))]

    def append(self, key: bytes, value: bytes | None) -> None:
        partition = self.partition_for(group_of_key(key))
        builder = RecordBatchBuilder()
        builder.append(None, self.broker.now_ms(), key, value)
        append_as_leader(self.broker, partition, builder)

    def append_transactional(self, key: bytes, value: bytes | None, producer_id: int,
                             producer_epoch: int) -> None:
        """A TxnOffsetCommit record, in a transactional batch of the producer (as Kafka
        writes them): it counts only once a COMMIT marker follows it in the partition."""
        partition = self.partition_for(group_of_key(key))
        builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=producer_epoch,
                                     is_transactional=True)
        builder.append(None, self.broker.now_ms(), key, value)
        append_as_leader(self.broker, partition, builder)

    def replay(self) -> Iterator[tuple[bytes, bytes | None]]:
        """Records in log order; transactional ones at their COMMIT marker (dropped at an
        ABORT). Those of transactions still open at the end are left in
        ``open_transactional`` (producer id -> records) for the coordinator to stage."""
        self.open_transactional: dict[int, list[tuple[bytes, bytes | None]]] = {}
        pending = self.open_transactional
        topic = self._topic(create=False)
        if topic is None:
            return
        for batch, first in replay_batches(topic):
            if isinstance(batch, RecordBatch) and batch.is_control:
                held = pending.pop(batch.producer_id, [])
                marker = batch.records()[0]
                if decode_control_record(marker.offset, marker.timestamp, marker.key,
                                         marker.value).is_commit:
                    yield from held
                continue
            held_for = pending.setdefault(batch.producer_id, []) if (
                isinstance(batch, RecordBatch) and batch.is_transactional) else None
            for record in batch.records():
                if record.key is not None and record.offset >= first:
                    if held_for is not None:
                        held_for.append((record.key, record.value))
                    else:
                        yield record.key, record.value
