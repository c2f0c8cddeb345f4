"""Follower fetchers: one task per leader broker, copying the partitions it leads here.

A partition joins its leader's fetcher when this broker becomes its follower. Before
fetching it is *truncated*: OffsetForLeaderEpoch asks the leader where this replica's
latest epoch ends in the leader's log, and anything past that (a suffix the old leader
wrote that the new one never had) is cut, as Kafka's follower does. Then Fetch (v12, with
this broker's replica id) from the local log end; batches are appended as the leader
stored them (offsets and leader epochs kept) and the local high watermark follows the
leader's. The leader learns this replica's log end offset from the fetch offsets.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sdk.errors import OffsetOutOfRangeError
from sdk.protocol.messages.fetch import FetchRequest, FetchResponse
from sdk.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from server_ref.cluster.peer import PeerConnection
from server_ref.producer_state import producers_at_end
from server_ref.storage.results import headers_in

if TYPE_CHECKING:
    from server_ref.replication.manager import ReplicaManager
    from server_ref.topics import Partition

log = logging.getLogger(__name__)

__all__ = ["ReplicaFetcher"]

FETCH_VERSION = 12  # replica id in the request, topics by name
EPOCH_VERSION = 4
RETRY_S = 0.1
MAX_PARTITION_BYTES = 8 * 1024 * 1024


@dataclass(eq=False)
class _Fetched:
    partition: Partition
    leader_epoch: int
    truncated: bool = False


class ReplicaFetcher:
    def __init__(self, manager: ReplicaManager, leader: int) -> None:
        self.manager = manager
        self.leader = leader
        self.partitions: dict[tuple[str, int], _Fetched] = {}
        self._peer: PeerConnection | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    def add(self, partition: Partition, leader_epoch: int) -> None:
        self.partitions[(partition.topic.name, partition.index)] = _Fetched(partition,
                                                                            leader_epoch)
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    def remove(self, partition: Partition) -> None:
        self.partitions.pop((partition.topic.name, partition.index), None)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass  # the cancellation asked for, or a failure already logged
        if self._peer is not None:
            await self._peer.close()
            self._peer = None

    def _connection(self) -> PeerConnection | None:
        endpoint = self.manager.endpoint_of(self.leader)
        if endpoint is None:
            return None
        if self._peer is None:
            self._peer = PeerConnection(endpoint[0], endpoint[1],
                                        f"replica-fetcher-{self.manager.node_id}")
        else:
            self._peer.retarget(*endpoint)
        return self._peer

    async def _run(self) -> None:
        while self.partitions:
            peer = self._connection()
            try:
                if peer is None:
                    raise ConnectionError(f"leader {self.leader} has no known endpoint")
                pending = [f for f in self.partitions.values() if not f.truncated]
                if pending:
                    await self._truncate(peer, pending)
                ready = [f for f in self.partitions.values() if f.truncated]
                if ready:
                    await self._fetch(peer, ready)
                else:
                    await asyncio.sleep(RETRY_S)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the leader died or moved: the metadata will tell
                log.debug("fetcher for leader %d: %s", self.leader, exc)
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), RETRY_S * 5)
                except TimeoutError:
                    pass

    async def _truncate(self, peer: PeerConnection, pending: list[_Fetched]) -> None:
        by_topic: dict[str, list[OffsetForLeaderEpochRequest.OffsetForLeaderPartition]] = {}
        for f in pending:
            plog = f.partition.log
            latest = plog.leader_epoch_cache.latest_epoch
            if latest < 0:  # nothing with an epoch here: nothing can have diverged
                f.truncated = True
                continue
            by_topic.setdefault(f.partition.topic.name, []).append(
                OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                    partition=f.partition.index, current_leader_epoch=f.leader_epoch,
                    leader_epoch=latest))
        if not by_topic:
            return
        request = OffsetForLeaderEpochRequest(replica_id=self.manager.node_id, topics=[
            OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=t, partitions=ps)
            for t, ps in by_topic.items()])
        response = await peer.request(request, EPOCH_VERSION, self.manager.request_timeout_s)
        assert isinstance(response, OffsetForLeaderEpochResponse)
        for topic in response.topics:
            for r in topic.partitions:
                found = self.partitions.get((topic.topic, r.partition))
                if found is None or found.truncated or r.error_code:
                    continue
                f = found
                plog = f.partition.log
                if r.end_offset < 0:
                    continue  # the leader does not know the epoch yet: ask again
                cut = min(r.end_offset, plog.log_end_offset)
                if r.leader_epoch < plog.leader_epoch_cache.latest_epoch:
                    # Our epoch is unknown to the leader: cut where its largest epoch
                    # below ours ends in our own log too.
                    cut = min(cut, plog.end_offset_for_epoch(r.leader_epoch)[1]
                              if r.leader_epoch >= 0 else cut)
                if cut < plog.log_end_offset:
                    log.info("%s: truncating %d -> %d after leader change", f.partition.name,
                             plog.log_end_offset, cut)
                    self.manager.truncate(f.partition, cut)
                    # the producer state of the suffix cut goes with it
                    f.partition.producers = producers_at_end(
                        plog, time.time_ns() // 1_000_000)
                f.truncated = True

    async def _fetch(self, peer: PeerConnection, ready: list[_Fetched]) -> None:
        by_topic: dict[str, list[FetchRequest.FetchPartition]] = {}
        for f in ready:
            plog = f.partition.log
            by_topic.setdefault(f.partition.topic.name, []).append(FetchRequest.FetchPartition(
                partition=f.partition.index, current_leader_epoch=f.leader_epoch,
                fetch_offset=plog.log_end_offset,
                # across both tiers: the leader answers DeleteRecords once it is past the cut
                log_start_offset=self.manager.agent.broker.remote.log_start_offset(f.partition),
                partition_max_bytes=MAX_PARTITION_BYTES))
        request = FetchRequest(
            replica_id=self.manager.node_id, max_wait_ms=self.manager.fetch_wait_ms,
            min_bytes=1, max_bytes=64 * 1024 * 1024, isolation_level=0, session_id=0,
            session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=t, partitions=ps)
                                      for t, ps in by_topic.items()])
        timeout = self.manager.request_timeout_s + self.manager.fetch_wait_ms / 1000
        response = await peer.request(request, FETCH_VERSION, timeout)
        assert isinstance(response, FetchResponse)
        if response.error_code:
            raise ConnectionError(f"fetch refused with error {response.error_code}")
        now = time.time_ns() // 1_000_000
        for topic in response.responses:
            for data in topic.partitions:
                fetched = self.partitions.get((topic.topic, data.partition_index))
                if fetched is not None:
                    self._apply(fetched, data, now)

    def _apply(self, f: _Fetched, data: FetchResponse.PartitionData, now: int) -> None:
        partition = f.partition
        plog = partition.log
        if data.error_code == OffsetOutOfRangeError.errno:
            if 0 <= plog.log_end_offset < data.log_start_offset:
                # Behind the leader's log start (retention there): start over at it.
                self.manager.restart_at(partition, data.log_start_offset)
            else:
                # Past the leader's end: this replica has a suffix the leader lacks (or the
                # leader is not the one the metadata will name). Never wipe a replica for
                # that — it may be in the ISR; find the divergence by epochs again.
                f.truncated = False
            return
        if data.error_code:
            return  # not the leader any more, or a newer epoch: the metadata will tell
        records = data.records
        if records:
            end = plog.log_end_offset
            self.manager.append_replicated(partition, records, now)
            # Producer state follows the appends, as on Kafka's followers: a roll here
            # snapshots it as of the sealed segment's end (uploaded with the segment if this
            # replica leads and copies it later). The headers come from the fetched bytes
            # (what was just appended, unchanged): reading them back from the log cost
            # 14 us per batch, nearly as much as the append.
            partition.producers.replay(headers_in(records, end), now, plog)
        # The leader's log start is this replica's too (Kafka's follower applies it from
        # every answer), so a follower that becomes leader never serves below it: locally,
        # and for a tiered partition across both tiers (a DeleteRecords into the remote
        # tier is below this replica's local log start; the metadata log would tell this
        # broker only at its remote log manager's next run).
        leader_start = data.log_start_offset
        if leader_start > plog.log_start_offset:
            plog.delete_records(min(leader_start, plog.log_end_offset))
        self.manager.agent.broker.remote.follow_log_start(partition, leader_start)
        self.manager.follower_high_watermark(partition, data.high_watermark)
