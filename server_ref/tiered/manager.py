"""The remote log manager: copies closed segments to the remote tier, applies retention
across both tiers, and serves reads below the local log start.

Offsets of a tiered partition:

- the *log start* (Fetch's log_start_offset, ListOffsets EARLIEST) spans both tiers: the
  first readable remote offset, not below the floor DeleteRecords or retention set;
- the *local log start* (EARLIEST_LOCAL) is the ``PartitionLog``'s own start; below it a
  fetch is served from the remote tier;
- the *highest tiered offset* (LATEST_TIERED) is the last offset of a finished copy.

One task per broker (every ``remote.log.manager.task.interval.ms``) walks the tiered
partitions: it deletes what failed copies left behind, copies each closed segment below the
last stable offset in order (COPY_SEGMENT_STARTED in the metadata log, the objects written
from a worker thread, then COPY_SEGMENT_FINISHED: a reader sees a segment only once all of
it is there; a failure leaves a STARTED entry whose objects the next run deletes before it
copies the segment again), deletes local segments that are copied and past
``local.retention.*``, and remote segments past ``retention.*`` (DELETE_SEGMENT_STARTED, then
the objects, then DELETE_SEGMENT_FINISHED). Metadata changes and state run on the broker's
loop; only store calls run in threads.
"""

from __future__ import annotations

import asyncio
import json
import logging
import struct
import threading
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sdk.errors import ConfigError, OffsetOutOfRangeError
from server_ref.producer_state import state_as_of
from server_ref.storage.transactions import AbortedTxn
from server_ref.tiered import reader
from server_ref.tiered.metadata import (
    EPOCH_CHECKPOINT,
    LOG,
    METADATA_TOPIC,
    OFFSET_INDEX,
    PRODUCER_SNAPSHOT,
    TIME_INDEX,
    TXN_INDEX,
    PartitionRemoteState,
    RemoteLogMetadataLog,
    RemoteSegment,
    SegmentState,
    hosts_replica,
)
from server_ref.tiered.settings import TopicTiering, store_location, topic_tiering
from server_ref.tiered.store import RemoteStorageError, RemoteStore, open_store

if TYPE_CHECKING:
    from server_ref.broker import Broker
    from server_ref.cluster.agent import ClusterAgent
    from server_ref.storage.segment import LogSegment
    from server_ref.topics import Partition, Topic

__all__ = ["RemoteLogManager", "RemoteRead"]

log = logging.getLogger(__name__)

_TIME_ENTRY = struct.Struct(">qi")  # the .timeindex layout: timestamp, relative offset
_Key = tuple[str, int]  # (topic id, partition)


@dataclass(slots=True)
class RemoteRead:
    """A fetch's answer from the remote tier."""

    records: bytes
    aborted: list[AbortedTxn] | None


class RemoteLogManager:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.metadata = RemoteLogMetadataLog(broker)
        self.states: dict[_Key, PartitionRemoteState] = {}
        self.store: RemoteStore | None = None
        self.cache = reader.ChunkCache(int(broker.config.get("remote.log.storage.cache.bytes")))
        self._task: asyncio.Task[None] | None = None
        self._in_flight: set[str] = set()  # segment ids being uploaded
        self._wake = asyncio.Event()
        self._closing = threading.Event()  # tells upload threads of a stopped broker to quit
        self.copied_bytes = 0  # since start, for the benchmark and logs
        # Cluster mode: log-start floors (DeleteRecords) in force here but not yet in
        # __remote_log_metadata, and the task writing each partition's floor
        self._unrecorded: dict[_Key, int] = {}
        self._floor_writers: dict[_Key, asyncio.Task[bool]] = {}

    # ------------------------------------------------------------------ lifecycle

    @property
    def system_enabled(self) -> bool:
        return bool(self.broker.config.get("remote.log.storage.system.enable"))

    def load(self) -> None:
        """Replay ``__remote_log_metadata``; open the store when tiering is on. As Kafka, a
        broker with tiering off refuses to start while a topic still has it on."""
        self.catch_up()
        if not self.system_enabled:
            tiered = [t.name for t in self.broker.topics
                      if t.overrides.get("remote.storage.enable")]
            if tiered:
                raise ConfigError(
                    "You have to delete all topics with the property remote.storage.enable=true "
                    "before disabling tiered storage cluster-wide", key=
                    "remote.log.storage.system.enable", value=False,
                    allowed=f"true while {', '.join(sorted(tiered))} have remote storage")
            return
        # Cluster mode: every broker must name the same remote.log.storage.uri (a new leader
        # reads what its predecessor copied); the default, inside each data directory, is
        # only right for a single node.
        uri = store_location(self.broker.config, self.broker.data_dir.resolve())
        self.store = open_store(uri, self.broker.config)
        log.info("tiered storage on: remote tier %s; %d partition(s) with remote data",
                 self.store.describe(), sum(1 for s in self.states.values() if s.segments))

    def start(self) -> None:
        if self.store is not None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        self._closing.set()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass  # asked for just above; an interrupted copy is cleaned up next start
            self._task = None
        for task in list(self._floor_writers.values()):
            task.cancel()
        await self.metadata.close()
        if self.store is not None:
            self.store.close()

    def wake(self) -> None:
        """Run the task now (tests, and after a config change)."""
        self._wake.set()

    async def _run(self) -> None:
        interval = int(self.broker.config.get("remote.log.manager.task.interval.ms")) / 1000
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), interval)
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self.run_once()
            except Exception:
                log.exception("remote log manager task failed")

    # ------------------------------------------------------------------ state

    def catch_up(self) -> None:
        """Apply the metadata events not seen yet (our own appends come back too: applying
        an event twice changes nothing). In cluster mode this is how a new leader learns
        what its predecessor copied."""
        for topic_id, index, doc in self.metadata.read_new():
            self._apply(topic_id, index, doc)

    async def _catch_up_from_leaders(self, cluster: ClusterAgent) -> set[_Key]:
        """Cluster mode: the events of the tiered partitions this broker leads or follows
        whose metadata partition it holds no replica of, from that partition's leader.
        Returns the partitions whose metadata could not be read up to date now."""
        needed = [(str(topic.topic_id), partition.index) for topic in self.broker.topics
                  if topic.name != METADATA_TOPIC and (
                      self.tiering(topic).enabled or "remote.storage.enable" in topic.overrides)
                  for partition in topic.partitions if hosts_replica(partition)]
        if not needed:
            return set()
        events, behind = await self.metadata.read_from_leaders(cluster, needed)
        for topic_id, index, doc in events:
            self._apply(topic_id, index, doc)
        return behind

    def _apply(self, topic_id: str, index: int, doc: dict[str, Any]) -> None:
        state = self.states.setdefault((topic_id, index), PartitionRemoteState())
        if doc.get("type") == "log_start":
            state.log_start_floor = max(state.log_start_floor, int(doc["offset"]))
        else:
            state.apply(RemoteSegment.from_json(doc))

    async def _record(self, segment: RemoteSegment) -> None:
        await self.metadata.write(segment.topic_id, segment.partition, segment.to_json())
        self._apply(segment.topic_id, segment.partition, segment.to_json())

    async def _record_floor(self, partition: Partition, offset: int) -> None:
        topic_id = str(partition.topic.topic_id)
        doc = {"type": "log_start", "offset": offset}
        self._apply(topic_id, partition.index, doc)  # in force here at once
        await self.metadata.write(topic_id, partition.index, doc)

    def _record_floor_now(self, partition: Partition, offset: int) -> None:
        """DeleteRecords' floor, in force here at once. On a single node it is appended
        before the answer; in cluster mode it is produced to the metadata partition's leader
        by a writer task the answer waits for (``floor_written``), so a new leader after a
        failover starts the log at the same offset."""
        topic_id = str(partition.topic.topic_id)
        doc = {"type": "log_start", "offset": offset}
        self._apply(topic_id, partition.index, doc)
        if getattr(self.broker, "cluster", None) is None:
            self.metadata.append(topic_id, partition.index, doc)
            return
        key = (topic_id, partition.index)
        self._unrecorded[key] = max(offset, self._unrecorded.get(key, -1))
        self._start_floor_writer(key)

    def floor_written(self, partition: Partition) -> Awaitable[bool] | None:
        """Cluster mode: resolves to whether the partition's floor is in
        ``__remote_log_metadata`` (a failed write is tried again by the next DeleteRecords
        or task run); None when no floor waits to be written."""
        key = (str(partition.topic.topic_id), partition.index)
        if key not in self._unrecorded:
            return None
        return asyncio.shield(self._start_floor_writer(key))

    def _start_floor_writer(self, key: _Key) -> asyncio.Task[bool]:
        task = self._floor_writers.get(key)
        if task is None or task.done():
            task = asyncio.get_running_loop().create_task(self._write_floors(key))
            self._floor_writers[key] = task
        return task

    async def _write_floors(self, key: _Key) -> bool:
        while key in self._unrecorded:
            offset = self._unrecorded[key]
            try:
                await self.metadata.write(key[0], key[1], {"type": "log_start",
                                                           "offset": offset})
            except RemoteStorageError as exc:
                log.warning("partition %d of topic id %s: log start %d not recorded in %s "
                            "(%s); tried again", key[1], key[0], offset, METADATA_TOPIC, exc)
                return False
            if self._unrecorded.get(key) == offset:  # (a higher one may have come meanwhile)
                del self._unrecorded[key]
        return True

    def state_of(self, partition: Partition) -> PartitionRemoteState | None:
        return self.states.get((str(partition.topic.topic_id), partition.index))

    def tiering(self, topic: Topic) -> TopicTiering:
        return topic_tiering(topic.overrides, self.broker.config)

    def manages(self, topic: Topic) -> bool:
        """Whether retention of this topic is ours (tiering on, or remote data left)."""
        if topic.name == METADATA_TOPIC:
            return False
        if self.tiering(topic).enabled:
            return True
        return any(self.state_of(p) is not None and self.state_of(p).segments  # type: ignore[union-attr]
                   for p in topic.partitions)

    # ------------------------------------------------------------------ offsets

    def log_start_offset(self, partition: Partition) -> int:
        """The log start across both tiers."""
        local = partition.log.log_start_offset
        state = self.state_of(partition)
        if state is None:
            return local
        remote = state.earliest_offset()
        start = local if remote is None else min(remote, local)
        return max(start, state.log_start_floor)

    def highest_tiered_offset(self, partition: Partition) -> int:
        state = self.state_of(partition)
        return -1 if state is None else state.highest_offset

    def remote_bytes(self, partition: Partition) -> int:
        state = self.state_of(partition)
        return 0 if state is None else state.remote_bytes

    def reads_remotely(self, partition: Partition, offset: int) -> bool:
        """Whether a fetch at ``offset`` is served from the remote tier."""
        if offset >= partition.log.log_start_offset:
            return False
        state = self.state_of(partition)
        return state is not None and offset >= self.log_start_offset(partition) \
            and state.segment_for(offset) is not None

    # ------------------------------------------------------------------ reads

    async def read(self, partition: Partition, offset: int, max_bytes: int,
                   read_committed: bool) -> RemoteRead:
        """Batches from the remote segment holding ``offset``. Raises RemoteStorageError
        when the store fails, OffsetOutOfRangeError when no segment holds the offset."""
        state = self.state_of(partition)
        segment = state.segment_for(offset) if state is not None else None
        if self.store is None or state is None or segment is None:
            raise OffsetOutOfRangeError(f"offset {offset} is in no remote segment")
        store, cache = self.store, self.cache
        later = [s for s in state.finished() if s.start_offset >= segment.start_offset]

        def work() -> RemoteRead:
            data = reader.read_batches(cache, store, segment, offset, max_bytes)
            aborted = None
            if read_committed:
                aborted = reader.aborted_in(cache, store, later, offset, segment.end_offset + 1)
            return RemoteRead(data, aborted)

        result = await asyncio.to_thread(work)
        if read_committed and result.aborted is not None:
            plog = partition.log
            if not plog.closed:  # the topic may have gone while we read
                result.aborted.extend(plog.aborted_transactions(offset, segment.end_offset + 1))
        return result

    async def offset_for_timestamp(self, partition: Partition, timestamp: int
                                   ) -> tuple[int, int] | None:
        """The first (offset, timestamp) at or after ``timestamp`` in the remote tier."""
        state = self.state_of(partition)
        if state is None or self.store is None:
            return None
        floor = self.log_start_offset(partition)
        store, cache = self.store, self.cache
        for segment in state.finished():
            if segment.end_offset < floor or segment.max_timestamp < timestamp:
                continue
            found = await asyncio.to_thread(reader.find_timestamp, cache, store, segment,
                                            timestamp, floor)
            if found is not None:
                return found
        return None

    # ------------------------------------------------------------------ DeleteRecords

    def delete_records(self, partition: Partition, before: int) -> int:
        """Move the log start (across tiers) to ``before``; returns the new log start."""
        plog = partition.log
        state = self.state_of(partition)
        if state is None or not state.segments:
            return plog.delete_records(before)
        if before == -1:
            before = plog.log_end_offset
        if not 0 <= before <= plog.log_end_offset:
            raise OffsetOutOfRangeError(
                f"cannot delete records before {before}: log ends at {plog.log_end_offset}")
        if before > self.log_start_offset(partition):
            self._record_floor_now(partition, before)
            if before > plog.log_start_offset:
                plog.delete_records(before)
            log.info("%s: log start offset moved to %d across tiers", partition.name, before)
            self.wake()  # remote segments wholly below it go at the next run
        return self.log_start_offset(partition)

    def follow_log_start(self, partition: Partition, offset: int) -> None:
        """A follower takes the leader's log start (across tiers) from each fetch answer,
        as Kafka's follower does: in force here at once, not written to the metadata log
        (the leader wrote it before answering DeleteRecords)."""
        state = self.state_of(partition)
        if state is None:
            if not self.tiering(partition.topic).enabled:
                return
            state = self.states.setdefault((str(partition.topic.topic_id), partition.index),
                                           PartitionRemoteState())
        if offset > state.log_start_floor:
            state.log_start_floor = offset

    # ------------------------------------------------------------------ the task

    async def run_once(self) -> None:
        """One pass over every partition with tiering on or remote data left."""
        if self.store is None:
            return
        self.catch_up()
        cluster = getattr(self.broker, "cluster", None)
        clustered = cluster is not None
        behind = set() if cluster is None else await self._catch_up_from_leaders(cluster)
        now = self.broker.now_ms()
        live: set[_Key] = set()
        for topic in self.broker.topics:
            if topic.name == METADATA_TOPIC:
                continue
            tiering = self.tiering(topic)
            for partition in list(topic.partitions):
                key = (str(topic.topic_id), partition.index)
                live.add(key)
                state = self.states.get(key)
                if not tiering.enabled and (state is None or not state.segments):
                    continue
                if clustered and getattr(partition, "replica", None) is None:
                    continue  # not a replica here: a placeholder of the metadata image
                if key in behind:
                    # What was copied is unknown until its metadata partition is read: a
                    # leader would copy again, a follower could drop what is not remote.
                    log.debug("%s: waiting for %s", partition.name, METADATA_TOPIC)
                    continue
                try:
                    await self._maintain(partition, tiering, now)
                except RemoteStorageError as exc:
                    log.warning("%s: remote tier %s unavailable (%s); retrying in the next run",
                                partition.name, self.store.describe(), exc)
        for key in list(self._unrecorded):  # floors whose write failed: again
            if key in live:
                self._start_floor_writer(key)
            else:
                del self._unrecorded[key]  # the topic was deleted
        for key, state in list(self.states.items()):
            if key not in live and key[0] and state.segments and self._cleans_up(key):
                # the topic was deleted
                try:
                    await self._delete_segments(list(state.segments.values()), "topic deleted")
                except RemoteStorageError as exc:
                    log.warning("remote data of deleted topic %s: %s; retrying", key[0], exc)

    def _cleans_up(self, key: _Key) -> bool:
        """Whether this broker deletes the remote data of a deleted topic: the only one on a
        single node; in cluster mode the leader of the metadata partition of its events."""
        cluster = getattr(self.broker, "cluster", None)
        if cluster is None:
            return True
        return self.metadata.leader_for(cluster, key[0], key[1]) == self.broker.node_id

    async def _maintain(self, partition: Partition, tiering: TopicTiering, now: int) -> None:
        state = self.states.setdefault((str(partition.topic.topic_id), partition.index),
                                       PartitionRemoteState())
        stale = [s for s in state.segments.values()
                 if s.segment_id not in self._in_flight and s.state in (
                     SegmentState.COPY_SEGMENT_STARTED, SegmentState.DELETE_SEGMENT_STARTED)]
        if not _leads(partition):
            # A follower: the leader copies and cleans up (a STARTED segment may be its
            # copy in flight); a follower drops only local segments already remote.
            self.apply_local_retention(partition, now)
            return
        if stale:
            await self._delete_segments(stale, "left by an interrupted copy or delete")
        if not tiering.enabled:  # turned off with remote.log.delete.on.disable=true
            await self._delete_segments(state.finished(), "remote storage disabled")
            return
        if tiering.copies:
            for segment in self._copy_candidates(partition, state):
                if partition.log.closed or not await self._copy(partition, segment):
                    break
        self.apply_local_retention(partition, now)
        await self._apply_remote_retention(partition, state, tiering, now)

    def _copy_candidates(self, partition: Partition, state: PartitionRemoteState
                         ) -> list[LogSegment]:
        plog = partition.log
        highest = state.highest_offset
        stable = plog.last_stable_offset  # (capped by the high watermark in cluster mode)
        replica = getattr(partition, "replica", None)
        if replica is not None:
            stable = min(stable, replica.high_watermark)
        return [s for s in plog.segments[:-1]
                if s.size > 0 and s.next_offset - 1 > highest and s.next_offset <= stable]

    async def _copy(self, partition: Partition, segment: LogSegment) -> bool:
        plog = partition.log
        assert self.store is not None
        segment.translate_offset(segment.base_offset)  # indexes loaded (or rebuilt)
        end = segment.next_offset - 1
        epochs = [(e, s) for e, s in plog.leader_epoch_cache.entries() if s <= end]
        first = [i for i, (_, s) in enumerate(epochs) if s <= segment.base_offset]
        epochs = epochs[first[-1]:] if first else epochs
        txns = segment.txn_index.entries()
        remote = RemoteSegment(
            segment_id=RemoteSegment.new_id(), topic=partition.topic.name,
            topic_id=str(partition.topic.topic_id), partition=partition.index,
            start_offset=segment.base_offset, end_offset=end,
            max_timestamp=segment.max_timestamp, size=segment.size,
            state=SegmentState.COPY_SEGMENT_STARTED, event_ms=self.broker.now_ms(),
            broker_id=self.broker.node_id, leader_epochs={str(e): s for e, s in epochs},
            has_txn_index=bool(txns))
        extras = {
            OFFSET_INDEX: b"".join(
                reader._INDEX_ENTRY.pack(o - segment.base_offset, p)
                for o, p in segment.offset_index.entries()),
            TIME_INDEX: b"".join(
                _TIME_ENTRY.pack(t, o - segment.base_offset)
                for t, o in segment.time_index.entries()),
            # the state as of the segment's end (the snapshot taken when it rolled)
            PRODUCER_SNAPSHOT: json.dumps(state_as_of(plog, segment.next_offset,
                                                      self.broker.now_ms())).encode(),
            EPOCH_CHECKPOINT: _epoch_checkpoint(epochs),
        }
        if txns:
            extras[TXN_INDEX] = b"".join(reader._TXN_ENTRY.pack(0, t.producer_id, t.first_offset,
                                                                t.last_offset, t.last_stable_offset)
                                         for t in txns)
        await self._record(remote)
        source = open(segment.log_path, "rb")  # stays readable even if the file is deleted
        self._in_flight.add(remote.segment_id)
        store = self.store
        try:
            def upload() -> None:
                for suffix, data in extras.items():
                    if self._closing.is_set():
                        raise RemoteStorageError("the broker is stopping")
                    store.put_bytes(remote.key(suffix), data)
                if self._closing.is_set():
                    raise RemoteStorageError("the broker is stopping")
                store.put_file(remote.key(LOG), source, remote.size)  # the log last

            await asyncio.to_thread(upload)
        except RemoteStorageError as exc:
            log.warning("%s: copying segment %d-%d failed (%s); it stays local and is copied "
                        "again at the next run", partition.name, remote.start_offset, end, exc)
            return False
        finally:
            self._in_flight.discard(remote.segment_id)
            source.close()
        await self._record(remote.with_state(SegmentState.COPY_SEGMENT_FINISHED,
                                             self.broker.now_ms()))
        self.copied_bytes += remote.size
        log.info("%s: copied segment %d-%d (%d bytes) to %s", partition.name,
                 remote.start_offset, end, remote.size, store.describe())
        return True

    async def _delete_segments(self, segments: list[RemoteSegment], why: str) -> None:
        """Metadata first (the segments stop being readable), then the objects."""
        assert self.store is not None
        store = self.store
        for segment in segments:
            if segment.state is not SegmentState.DELETE_SEGMENT_STARTED:
                segment = segment.with_state(SegmentState.DELETE_SEGMENT_STARTED,
                                             self.broker.now_ms())
                await self._record(segment)
            await asyncio.to_thread(store.delete, segment.keys())
            await self._record(segment.with_state(SegmentState.DELETE_SEGMENT_FINISHED,
                                            self.broker.now_ms()))
            log.info("%s-%d: deleted remote segment %d-%d (%s)", segment.topic,
                     segment.partition, segment.start_offset, segment.end_offset, why)

    def apply_local_retention(self, partition: Partition, now: int) -> int:
        """Delete leading local segments that are copied and past local.retention.*; also
        those below the log start. Returns how many went."""
        plog = partition.log
        if plog.closed:
            return 0
        tiering = self.tiering(partition.topic)
        state = self.state_of(partition)
        highest = -1 if state is None else state.highest_offset
        segments = plog.segments[:-1]
        count = 0
        if tiering.enabled:
            # With remote.log.copy.disable local.retention.* equals retention.* (checked) and
            # applies to every closed segment, copied or not, as in Kafka.
            copied = segments if tiering.copy_disabled else \
                [s for s in segments if s.next_offset - 1 <= highest]
            if tiering.local_retention_ms >= 0:
                while count < len(copied) and now - _newest(copied[count]) > \
                        tiering.local_retention_ms:
                    count += 1
            if tiering.local_retention_bytes >= 0:
                excess = plog.size_in_bytes() - tiering.local_retention_bytes
                for s in copied[:count]:
                    excess -= s.size
                while count < len(copied) and excess - copied[count].size >= 0:
                    excess -= copied[count].size
                    count += 1
        start = self.log_start_offset(partition)
        while count < len(segments) and segments[count].next_offset <= start:
            count += 1
        if not count:
            return 0
        plog.delete_records(segments[count].base_offset if count < len(segments)
                            else plog.active_segment.base_offset)
        log.info("%s: deleted %d local segment(s) already in the remote tier; local log "
                 "start offset %d", partition.name, count, plog.log_start_offset)
        return count

    async def _apply_remote_retention(self, partition: Partition, state: PartitionRemoteState,
                                      tiering: TopicTiering, now: int) -> None:
        finished = state.finished()
        count = 0
        if tiering.retention_ms >= 0:
            while count < len(finished) and now - finished[count].max_timestamp > \
                    tiering.retention_ms:
                count += 1
        if tiering.retention_bytes >= 0:
            highest = state.highest_offset
            local_only = sum(s.size for s in partition.log.segments if s.base_offset > highest)
            excess = sum(s.size for s in finished[count:]) + local_only - tiering.retention_bytes
            while count < len(finished) and excess - finished[count].size >= 0:
                excess -= finished[count].size
                count += 1
        floor = state.log_start_floor
        while count < len(finished) and finished[count].end_offset < floor:
            count += 1
        doomed = finished[:count]
        if not doomed:
            return
        new_start = doomed[-1].end_offset + 1
        if new_start > floor:
            await self._record_floor(partition, new_start)
            if new_start > partition.log.log_start_offset:
                partition.log.delete_records(min(new_start, partition.log.log_end_offset))
        await self._delete_segments(doomed, "retention")
        partition.notify_appended()

    # ------------------------------------------------------------------ visibility

    def describe_store(self) -> str | None:
        return None if self.store is None else self.store.describe()


def _leads(partition: Partition) -> bool:
    """This broker leads the partition (always on a single node)."""
    replica = getattr(partition, "replica", None)
    return replica is None or bool(replica.is_leader)


def _newest(segment: LogSegment) -> int:
    newest = segment.max_timestamp
    return newest if newest >= 0 else segment.last_modified_ms()


def _epoch_checkpoint(epochs: list[tuple[int, int]]) -> bytes:
    """Kafka's leader-epoch-checkpoint text for the epochs of the segment."""
    lines = ["0", str(len(epochs))] + [f"{e} {s}" for e, s in epochs]
    return ("\n".join(lines) + "\n").encode()
