"""Remote log metadata: which segments of which partition are in the remote tier, kept in
the ``__remote_log_metadata`` topic as Kafka keeps it, so it survives restarts and a new
leader (which replays the topic) can serve the remote data without asking anyone.

Each event is one record, keyed ``<topic id>:<partition>`` and placed in the metadata topic's
partition chosen from that key, so one partition's events stay in order. Values are our own
JSON encoding (Kafka's is its own serde; nothing outside the broker reads them):

- a segment in Kafka's states: COPY_SEGMENT_STARTED (objects being written: never read),
  COPY_SEGMENT_FINISHED (readable), DELETE_SEGMENT_STARTED (no longer readable, objects
  being deleted), DELETE_SEGMENT_FINISHED (gone);
- ``log_start``: the partition's log start offset moved into the remote tier (DeleteRecords,
  retention), so offsets below it are not served even while their segment still exists.
"""

from __future__ import annotations

import enum
import json
import logging
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from sdk.records.builder import RecordBatchBuilder
from sdk.records.reader import RecordBatch, iter_batches

if TYPE_CHECKING:
    from server_ref.broker import Broker
    from server_ref.topics import Topic

__all__ = ["METADATA_TOPIC", "PartitionRemoteState", "RemoteLogMetadataLog", "RemoteSegment",
           "SegmentState"]

log = logging.getLogger(__name__)

METADATA_TOPIC = "__remote_log_metadata"
METADATA_PARTITIONS = 50  # Kafka's remote.log.metadata.topic.num.partitions default
_READ_CHUNK = 1 << 20


class SegmentState(enum.Enum):
    COPY_SEGMENT_STARTED = "COPY_SEGMENT_STARTED"
    COPY_SEGMENT_FINISHED = "COPY_SEGMENT_FINISHED"
    DELETE_SEGMENT_STARTED = "DELETE_SEGMENT_STARTED"
    DELETE_SEGMENT_FINISHED = "DELETE_SEGMENT_FINISHED"


# The objects of one segment, by suffix (Kafka's RemoteLogSegmentFileset names).
LOG, OFFSET_INDEX, TIME_INDEX, TXN_INDEX = ".log", ".index", ".timeindex", ".txnindex"
PRODUCER_SNAPSHOT, EPOCH_CHECKPOINT = ".snapshot", ".leader_epoch_checkpoint"


@dataclass(frozen=True, slots=True)
class RemoteSegment:
    """One segment in (or on its way to or from) the remote tier."""

    segment_id: str
    topic: str
    topic_id: str
    partition: int
    start_offset: int  # the segment's base offset
    end_offset: int  # its last offset
    max_timestamp: int
    size: int  # bytes of its .log object
    state: SegmentState
    event_ms: int
    broker_id: int = 0
    leader_epochs: dict[str, int] = field(default_factory=dict)  # epoch -> first offset
    has_txn_index: bool = False

    @property
    def folder(self) -> str:
        return f"{self.topic}-{self.topic_id}/{self.partition}"

    def key(self, suffix: str) -> str:
        return f"{self.folder}/{self.start_offset:020d}-{self.segment_id}{suffix}"

    def keys(self) -> list[str]:
        suffixes = [LOG, OFFSET_INDEX, TIME_INDEX, PRODUCER_SNAPSHOT, EPOCH_CHECKPOINT]
        if self.has_txn_index:
            suffixes.append(TXN_INDEX)
        return [self.key(s) for s in suffixes]

    def with_state(self, state: SegmentState, now_ms: int) -> RemoteSegment:
        return replace(self, state=state, event_ms=now_ms)

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["state"] = self.state.value
        doc["type"] = "segment"
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> RemoteSegment:
        doc = {k: v for k, v in doc.items() if k != "type"}
        doc["state"] = SegmentState(doc["state"])
        return cls(**doc)

    @staticmethod
    def new_id() -> str:
        return str(uuid.uuid4())


@dataclass(slots=True)
class PartitionRemoteState:
    """What the metadata log says about one partition's remote tier."""

    segments: dict[str, RemoteSegment] = field(default_factory=dict)  # by segment id
    log_start_floor: int = -1  # the log start moved into the remote tier; -1 none
    _finished: list[RemoteSegment] | None = None  # sorted view, rebuilt after a change

    def apply(self, segment: RemoteSegment) -> None:
        if segment.state is SegmentState.DELETE_SEGMENT_FINISHED:
            self.segments.pop(segment.segment_id, None)
        else:
            self.segments[segment.segment_id] = segment
        self._finished = None

    def finished(self) -> list[RemoteSegment]:
        """The readable segments (COPY_SEGMENT_FINISHED), by start offset."""
        if self._finished is None:
            self._finished = sorted(
                (s for s in self.segments.values()
                 if s.state is SegmentState.COPY_SEGMENT_FINISHED),
                key=lambda s: s.start_offset)
        return self._finished

    def in_state(self, state: SegmentState) -> list[RemoteSegment]:
        return [s for s in self.segments.values() if s.state is state]

    @property
    def highest_offset(self) -> int:
        """The last offset in the remote tier (Kafka's highestOffsetInRemoteStorage), -1."""
        done = self.finished()
        return max(s.end_offset for s in done) if done else -1

    @property
    def remote_bytes(self) -> int:
        return sum(s.size for s in self.finished())

    def earliest_offset(self) -> int | None:
        """Where the readable remote data starts (after the floor), None without any."""
        done = [s for s in self.finished() if s.end_offset >= self.log_start_floor]
        if not done:
            return None
        return max(done[0].start_offset, self.log_start_floor)

    def segment_for(self, offset: int) -> RemoteSegment | None:
        for segment in self.finished():
            if segment.start_offset <= offset <= segment.end_offset:
                return segment
        return None


def _key(topic_id: str, partition: int) -> bytes:
    return f"{topic_id}:{partition}".encode()


class RemoteLogMetadataLog:
    """Appends metadata events to ``__remote_log_metadata`` and replays them at start."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._positions: dict[int, int] = {}  # metadata partition -> next offset to read

    def _topic(self, create: bool) -> Topic | None:
        topics = self.broker.topics
        topic = topics.get(METADATA_TOPIC)
        if topic is None and create:
            topic = topics.create(METADATA_TOPIC, METADATA_PARTITIONS, 1,
                                  {"cleanup.policy": "delete", "retention.ms": "-1",
                                   "retention.bytes": "-1"})
        return topic

    def append(self, topic_id: str, partition: int, doc: dict[str, Any]) -> None:
        """Write one event, flushed before the caller goes on (the object writes or
        deletes it announces come after it)."""
        topic = self._topic(create=True)
        assert topic is not None
        key = _key(topic_id, partition)
        target = topic.partitions[zlib.crc32(key) % len(topic.partitions)]
        builder = RecordBatchBuilder()
        builder.append(None, self.broker.now_ms(), key,
                       json.dumps(doc, separators=(",", ":")).encode())
        target.log.append(bytearray(builder.build()), leader_epoch=0)
        target.log.flush()
        target.notify_appended()

    def read_new(self) -> Iterator[tuple[str, int, dict[str, Any]]]:
        """(topic id, partition, event) of every event not read before, in order per
        partition: all of them at start, then what was appended since (by this broker, or,
        in cluster mode, replicated from the leader of a metadata partition)."""
        topic = self._topic(create=False)
        if topic is None:
            return
        for partition in topic.partitions:
            plog = partition.log
            replica = getattr(partition, "replica", None)
            end = plog.log_end_offset if replica is None else replica.high_watermark
            offset = max(self._positions.get(partition.index, 0), plog.log_start_offset)
            while offset < end:
                data = plog.read(offset, _READ_CHUNK, max_offset=end).to_bytes()
                if not data:
                    break
                for batch in iter_batches(data):
                    if batch.next_offset <= offset:
                        continue
                    first, offset = offset, batch.next_offset
                    if not isinstance(batch, RecordBatch) or batch.is_control:
                        continue
                    yield from _events(batch, first)
            self._positions[partition.index] = offset


def _events(batch: RecordBatch, first: int) -> Iterator[tuple[str, int, dict[str, Any]]]:
    for record in batch.records():
        if record.key is None or record.value is None or record.offset < first:
            continue
        topic_id, _, index = record.key.decode().rpartition(":")
        try:
            yield topic_id, int(index), json.loads(record.value)
        except ValueError:
            log.warning("skipping an unreadable remote log metadata record at %d",
                        record.offset)
