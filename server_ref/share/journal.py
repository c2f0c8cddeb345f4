"""Share-partition state kept in the compacted ``__share_group_state`` topic.

Our own record layout (Kafka's share coordinator writes ShareSnapshot/ShareUpdate records
there; this broker writes one snapshot record per change instead, which compaction keeps
to the last one per key):

* key: version int16 (our 100), group id (int16-length string), topic id (16 bytes),
  partition int32;
* value: JSON ``{"start": SPSO, "runs": [[first, last, state, delivery count], ...]}``
  (:meth:`SharePartition.snapshot`); a null value forgets the share-partition.

A key goes to partition ``abs(hashCode("group:topicId:partition")) % partitions``, the key
Kafka's share coordinator uses, so the state of one share-partition lives in one place and
can follow a coordinator that moves (cluster mode) without touching other partitions.
"""

from __future__ import annotations

import json
import struct
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from sdk.errors import MalformedDataError
from sdk.records.builder import RecordBatchBuilder
from server_ref.offsets_journal import partition_for_group, replay_batches
from server_ref.topics import Topic

if TYPE_CHECKING:
    from server_ref.broker import Broker
    from server_ref.share.cluster_state import StateWriter

__all__ = ["STATE_TOPIC", "ShareStateJournal", "StateKey"]

STATE_TOPIC = "__share_group_state"
KEY_VERSION = 100
_HEAD = struct.Struct(">hh")
_PARTITION = struct.Struct(">i")

StateKey = tuple[str, uuid.UUID, int]  # group id, topic id, partition


def encode_key(key: StateKey) -> bytes:
    group = key[0].encode("utf-8")
    return _HEAD.pack(KEY_VERSION, len(group)) + group + key[1].bytes + _PARTITION.pack(key[2])


def decode_key(data: bytes) -> StateKey | None:
    """None for a key of another layout (Kafka's own records, if a log came from Kafka)."""
    if len(data) < 4:
        raise MalformedDataError("share state key too short")
    version, length = _HEAD.unpack_from(data, 0)
    if version != KEY_VERSION:
        return None
    end = 4 + length
    if length < 0 or end + 20 != len(data):
        raise MalformedDataError("share state key has the wrong length")
    group = data[4:end].decode("utf-8")
    topic_id = uuid.UUID(bytes=bytes(data[end:end + 16]))
    (partition,) = _PARTITION.unpack_from(data, end + 16)
    return group, topic_id, partition


class ShareStateJournal:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.writer: StateWriter | None = None  # cluster mode: produced to the leaders

    def _topic(self, create: bool) -> Topic | None:
        topics = self.broker.topics
        topic = topics.get(STATE_TOPIC)
        if topic is None and create and getattr(self.broker, "cluster", None) is None:
            config = self.broker.config
            topic = topics.create(
                STATE_TOPIC, int(config.get("share.coordinator.state.topic.num.partitions")), 1,
                {"cleanup.policy": "compact",
                 "segment.bytes": str(config.get("share.coordinator.state.topic.segment.bytes"))},
                internal=True)
        return topic

    def write(self, key: StateKey, value: dict[str, Any] | None) -> None:
        if getattr(self.broker, "cluster", None) is not None:
            from server_ref.share.cluster_state import StateWriter

            if self.writer is None:
                self.writer = StateWriter(self.broker)
            body = None if value is None else json.dumps(value, separators=(",", ":")).encode()
            self.writer.send(f"{key[0]}:{key[1]}:{key[2]}", encode_key(key), body)
            return
        topic = self._topic(create=True)
        assert topic is not None
        index = partition_for_group(f"{key[0]}:{key[1]}:{key[2]}", len(topic.partitions))
        partition = topic.partitions[index]
        builder = RecordBatchBuilder()
        body = None if value is None else json.dumps(value, separators=(",", ":")).encode()
        builder.append(None, self.broker.now_ms(), encode_key(key), body)
        partition.log.append(bytearray(builder.build()), leader_epoch=0)
        partition.notify_appended()

    def replay(self) -> Iterator[tuple[StateKey, dict[str, Any] | None]]:
        """Every record in log order (later ones replace earlier ones of the same key)."""
        topic = self._topic(create=False)
        if topic is None:
            return
        for batch, first in replay_batches(topic):
            for record in batch.records():
                if record.key is None or record.offset < first:
                    continue
                key = decode_key(record.key)
                if key is None:
                    continue
                yield key, None if record.value is None else json.loads(record.value)
