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

In cluster mode the topic is created through the controller (replicated like the other
internal topics) and an event is produced, acks=all, to the leader of its metadata partition
over a broker-to-broker connection (as Kafka's topic-based metadata manager produces with a
client); every broker replays the replicas it holds up to their high watermark, and fetches
from their leaders the metadata partitions it needs but does not hold (with more brokers than
the topic's 3 replicas: ``metadata_fetch.py``), so a new leader of a tiered partition knows
what its predecessor copied.
"""

from __future__ import annotations

import asyncio
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
from server_ref.cluster.peer import LeaderWriter
from server_ref.replication.state import OFFLINE
from server_ref.tiered.metadata_fetch import MetadataFetcher
from server_ref.tiered.store import RemoteStorageError

if TYPE_CHECKING:
    from server_ref.broker import Broker
    from server_ref.cluster.agent import ClusterAgent
    from server_ref.topics import Partition, Topic

__all__ = ["METADATA_TOPIC", "PartitionRemoteState", "RemoteLogMetadataLog", "RemoteSegment",
           "SegmentState"]

log = logging.getLogger(__name__)

METADATA_TOPIC = "__remote_log_metadata"
METADATA_PARTITIONS = 50  # Kafka's remote.log.metadata.topic.num.partitions default
# In cluster mode each partition is a replica set to keep in sync: fewer of them, as the
# launcher's defaults give __consumer_offsets 10 (tools/apache_kafka.py does the same).
CLUSTER_METADATA_PARTITIONS = 10
PRODUCE_TIMEOUT_S = 10.0
PRODUCE_ATTEMPTS = 5
_READ_CHUNK = 1 << 20
_FETCHES_PER_RUN = 64  # per metadata partition and run, 1 MB each: the rest comes next run
_Event = tuple[str, int, dict[str, Any]]  # (topic id, partition, event)


class SegmentState(enum.Enum):
    COPY_SEGMENT_STARTED = "COPY_SEGMENT_STARTED"
    COPY_SEGMENT_FINISHED = "COPY_SEGMENT_FINISHED"
    DELETE_SEGMENT_STARTED = "DELETE_SEGMENT_STARTED"
    DELETE_SEGMENT_FINISHED = "DELETE_SEGMENT_FINISHED"


_RANK = {state: rank for rank, state in enumerate(SegmentState)}

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
    _gone: set[str] = field(default_factory=set)  # ids of deleted segments

    def apply(self, segment: RemoteSegment) -> None:
        """A segment's states only move forward: an event replayed from the metadata log
        after a later one was applied (in cluster mode a broker applies its own writes at
        once and reads them back from its replica later) changes nothing."""
        sid = segment.segment_id
        if sid in self._gone:
            return
        if segment.state is SegmentState.DELETE_SEGMENT_FINISHED:
            self.segments.pop(sid, None)
            self._gone.add(sid)
        else:
            current = self.segments.get(sid)
            if current is not None and _RANK[current.state] >= _RANK[segment.state]:
                return
            self.segments[sid] = segment
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
        # Events appended at their partition's leader, acks=all (cluster mode).
        self._writer = LeaderWriter(f"remote-log-metadata-{broker.node_id}")
        # Metadata partitions needed but not hosted, read from their leaders (cluster mode).
        self._fetcher = MetadataFetcher(f"remote-log-metadata-reader-{broker.node_id}")
        self._creating: asyncio.Task[None] | None = None

    def _topic(self, create: bool) -> Topic | None:
        topics = self.broker.topics
        topic = topics.get(METADATA_TOPIC)
        if topic is None and create:
            topic = topics.create(METADATA_TOPIC, METADATA_PARTITIONS, 1,
                                  {"cleanup.policy": "delete", "retention.ms": "-1",
                                   "retention.bytes": "-1"})
        return topic

    async def write(self, topic_id: str, partition: int, doc: dict[str, Any]) -> None:
        """Write one event durably before the caller goes on (the object writes or deletes
        it announces come after it): appended and flushed on a single node, acknowledged by
        the metadata partition's ISR in cluster mode. Raises RemoteStorageError when the
        event could not be written (the manager's next run tries again)."""
        cluster = getattr(self.broker, "cluster", None)
        if cluster is None:
            self.append(topic_id, partition, doc)
        else:
            await self._produce(cluster, topic_id, partition, doc)

    def _event(self, topic_id: str, partition: int, doc: dict[str, Any]) -> bytes:
        builder = RecordBatchBuilder()
        builder.append(None, self.broker.now_ms(), _key(topic_id, partition),
                       json.dumps(doc, separators=(",", ":")).encode())
        return bytes(builder.build())

    def _create_topic(self, cluster: ClusterAgent) -> None:
        from server_ref.cluster.views import create_topic

        if self._creating is not None and not self._creating.done():
            return
        replication = max(1, min(3, len(cluster.image.live_brokers())))
        self._creating = asyncio.get_running_loop().create_task(create_topic(
            cluster, METADATA_TOPIC, CLUSTER_METADATA_PARTITIONS, replication,
            {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"}))

    def leader_for(self, cluster: ClusterAgent, topic_id: str, partition: int) -> int:
        """The leader of the metadata partition holding a partition's events, -1."""
        topic = cluster.image.topics.get(METADATA_TOPIC)
        if topic is None or not topic.partitions:
            return -1
        found = topic.partitions.get(index_of(topic_id, partition, len(topic.partitions)))
        return -1 if found is None else found.leader

    async def _produce(self, cluster: ClusterAgent, topic_id: str, partition: int,
                       doc: dict[str, Any]) -> None:
        key = _key(topic_id, partition)
        records = self._event(topic_id, partition, doc)
        problem = "no attempt"
        for attempt in range(PRODUCE_ATTEMPTS):
            if attempt:
                await asyncio.sleep(0.2 * attempt)  # a leader election in progress
            topic = cluster.image.topics.get(METADATA_TOPIC)
            if topic is None or not topic.partitions:
                self._create_topic(cluster)
                problem = f"{METADATA_TOPIC} is being created"
                continue
            index = zlib.crc32(key) % len(topic.partitions)
            leader = self.leader_for(cluster, topic_id, partition)
            endpoint = cluster.endpoint_of(leader) if leader >= 0 else None
            if endpoint is None:
                problem = f"{METADATA_TOPIC}-{index} has no leader"
                continue
            outcome = await self._writer.produce(leader, endpoint, METADATA_TOPIC, index,
                                                 records, PRODUCE_TIMEOUT_S)
            if outcome is None:
                return
            problem = outcome
        raise RemoteStorageError(f"remote log metadata event not written: {problem}")

    async def close(self) -> None:
        await self._writer.close()
        await self._fetcher.close()

    def append(self, topic_id: str, partition: int, doc: dict[str, Any]) -> None:
        """Write one event on a single node, flushed before the caller goes on."""
        topic = self._topic(create=True)
        assert topic is not None
        key = _key(topic_id, partition)
        target = topic.partitions[zlib.crc32(key) % len(topic.partitions)]
        target.log.append(bytearray(self._event(topic_id, partition, doc)), leader_epoch=0)
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
                events, after = _decode(data, offset)
                yield from events
                if after == offset:
                    break
                offset = after
            self._positions[partition.index] = offset

    async def read_from_leaders(self, cluster: ClusterAgent, needed: list[tuple[str, int]]
                                ) -> tuple[list[_Event], set[tuple[str, int]]]:
        """Cluster mode: the new events of the metadata partitions holding the events of
        ``needed`` (the (topic id, partition) this broker leads or follows) that this broker
        hosts no replica of, fetched from their leaders up to the high watermark (as Kafka's
        topic-based metadata manager consumes them). Returns the events and the keys of
        ``needed`` whose metadata partition could not be read up to date now."""
        image = cluster.image.topics.get(METADATA_TOPIC)
        if image is None or not image.partitions:
            return [], set()
        count = len(image.partitions)
        local = self._topic(create=False)
        hosted = {p.index for p in (local.partitions if local is not None else ())
                  if hosts_replica(p)}
        wanted: dict[int, list[tuple[str, int]]] = {}
        for key in needed:
            index = index_of(key[0], key[1], count)
            if index not in hosted:
                wanted.setdefault(index, []).append(key)
        events: list[_Event] = []
        behind: set[tuple[str, int]] = set()
        for index, keys in sorted(wanted.items()):
            offset = self._positions.get(index, 0)
            up_to_date = False
            for _ in range(_FETCHES_PER_RUN):
                got = await self._fetcher.fetch(cluster, METADATA_TOPIC, index, offset)
                if got is None:
                    break
                data, next_offset = got
                new, after = _decode(data, max(offset, next_offset))
                events.extend(new)
                if after == max(offset, next_offset):  # nothing more below the watermark
                    offset, up_to_date = after, True
                    break
                offset = after
            self._positions[index] = offset
            if not up_to_date:
                behind.update(keys)
        return events, behind


def hosts_replica(partition: Partition) -> bool:
    """Cluster mode: this broker holds a replica of ``partition`` (the metadata image gives
    every broker every partition; the others are OFFLINE placeholders)."""
    replica = getattr(partition, "replica", None)
    return replica is not None and replica.role != OFFLINE


def index_of(topic_id: str, partition: int, partitions: int) -> int:
    """The metadata partition holding the events of ``topic_id``'s ``partition``."""
    return zlib.crc32(_key(topic_id, partition)) % partitions


def _decode(data: bytes, offset: int) -> tuple[list[_Event], int]:
    """The events in ``data`` at or after ``offset``, and the offset after its last complete
    batch (``offset`` when it holds none)."""
    events: list[_Event] = []
    for batch in iter_batches(data):
        if batch.next_offset <= offset:
            continue
        first, offset = offset, batch.next_offset
        if not isinstance(batch, RecordBatch) or batch.is_control:
            continue
        events.extend(_events(batch, first))
    return events, offset


def _events(batch: RecordBatch, first: int) -> Iterator[_Event]:
    for record in batch.records():
        if record.key is None or record.value is None or record.offset < first:
            continue
        topic_id, _, index = record.key.decode().rpartition(":")
        try:
            yield topic_id, int(index), json.loads(record.value)
        except ValueError:
            log.warning("skipping an unreadable remote log metadata record at %d",
                        record.offset)
