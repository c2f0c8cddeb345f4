"""The quorum controller: the state machine over the Raft metadata log.

Every controller replays committed records into its ``MetadataImage``; the Raft leader is the
*active* controller and the only one that writes. A write is a decision taken on the image
under ``_lock`` (one at a time, so no decision reads a state another has not committed yet),
appended as one batch, and returned once committed — by then the listener has applied it.
A controller that is not the leader refuses with NOT_CONTROLLER (``RaftNotLeaderError``).

Brokers register (fenced), heartbeat, and are unfenced once their metadata has caught up
with their registration; a broker silent for ``broker.session.timeout.ms`` is fenced, which
takes it out of every ISR and moves its leaderships (``election.py``). A new active
controller gives every broker a full session before fencing it (it cannot know when they
last heartbeated the old one).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from sdk.errors import (
    BrokerIdNotRegisteredError,
    InconsistentClusterIdError,
    KafkaError,
    StaleBrokerEpochError,
)
from server_ref.controller import records
from server_ref.controller.election import (
    leaderless_after_unfence,
    with_leader,
    without_broker,
)
from server_ref.controller.image import MetadataImage, PartitionImage
from server_ref.raft.api import CommittedBatch, LeaderAndEpoch, RaftNotLeaderError

log = logging.getLogger(__name__)

__all__ = ["QuorumController"]

SNAPSHOT_EVERY_RECORDS = 2000  # also bounds a restarted node's replay of the log
SNAPSHOT_EVERY_BYTES = 20 * 1024 * 1024  # metadata.log.max.record.bytes.between.snapshots
FENCE_CHECK_S = 0.2


class QuorumController:
    def __init__(self, node: Any, *, cluster_id: str, session_timeout_ms: int,
                 topic_default: Callable[[str], Any],
                 snapshot_bytes: int = SNAPSHOT_EVERY_BYTES) -> None:
        self.node = node
        self.cluster_id = cluster_id
        self.session_timeout_s = session_timeout_ms / 1000
        self.topic_default = topic_default  # broker-level default of a topic config
        self.image = MetadataImage()
        self._lock = asyncio.Lock()
        self._heartbeats: dict[int, float] = {}  # broker -> monotonic time of the last one
        self._since_snapshot = 0
        self._bytes_since_snapshot = 0
        self.snapshot_bytes = snapshot_bytes
        self._fencer: asyncio.Task[None] | None = None
        self._next_start = 0  # round-robin start of replica assignment
        node.register_listener(self._on_commit, self._on_snapshot, self._on_leader_change)

    # ------------------------------------------------------------------ replay

    def _on_commit(self, batch: CommittedBatch) -> None:
        for value in batch.records:
            try:
                self.image.apply(records.decode(value))
            except (ValueError, KeyError) as exc:
                log.error("metadata record at %d skipped: %s", batch.last_offset, exc)
        self.image.offset = batch.last_offset
        self._since_snapshot += len(batch.records)
        self._bytes_since_snapshot += sum(len(value) for value in batch.records)
        if self._since_snapshot >= SNAPSHOT_EVERY_RECORDS or \
                self._bytes_since_snapshot >= self.snapshot_bytes:
            self._since_snapshot = self._bytes_since_snapshot = 0
            self.node.snapshot(batch.last_offset, self.image.to_snapshot())

    def _on_snapshot(self, payload: bytes, offset: int) -> None:
        self.image = MetadataImage.from_snapshot(payload, offset)

    def _on_leader_change(self, leader: LeaderAndEpoch) -> None:
        if leader.leader_id == self.node.node_id:
            now = time.monotonic()
            self._heartbeats = {b: now for b in self.image.brokers}
            if self._fencer is None or self._fencer.done():
                self._fencer = asyncio.get_running_loop().create_task(self._fence_silent())
        elif self._fencer is not None:
            self._fencer.cancel()
            self._fencer = None

    async def close(self) -> None:
        if self._fencer is not None:
            self._fencer.cancel()
            self._fencer = None

    @property
    def active(self) -> bool:
        return bool(self.node.is_leader)

    def check_active(self) -> None:
        if not self.active:
            raise RaftNotLeaderError(self.node.leader(), self.node.leader_endpoint())

    async def write(self, decide: Callable[[], tuple[list[dict[str, Any]], Any]]) -> Any:
        """Run ``decide`` on the current image under the lock; append the records it returns
        and return its result once they are committed (and applied)."""
        async with self._lock:
            self.check_active()
            batch, result = decide()
            if batch:
                await self.node.append([records.encode(r) for r in batch])
            return result

    # ------------------------------------------------------------------ brokers

    def alive(self, broker: int) -> bool:
        b = self.image.brokers.get(broker)
        return b is not None and not b.fenced

    def unclean(self, topic: str) -> bool:
        found = self.image.topics.get(topic)
        value = (found.configs.get("unclean.leader.election.enable") if found else None)
        if value is None:
            value = self.image.broker_configs.get("", {}).get("unclean.leader.election.enable")
        if value is None:
            return bool(self.topic_default("unclean.leader.election.enable"))
        return str(value).lower() == "true"

    async def register(self, broker_id: int, cluster_id: str | None, incarnation: str,
                       host: str, port: int, rack: str | None,
                       listeners: dict[str, list[Any]] | None = None) -> int:
        if cluster_id and cluster_id != self.cluster_id:
            raise InconsistentClusterIdError(
                f"broker {broker_id} belongs to cluster {cluster_id}, not {self.cluster_id}")

        def decide() -> tuple[list[dict[str, Any]], int]:
            existing = self.image.brokers.get(broker_id)
            if existing is not None and existing.incarnation == incarnation:
                return [], existing.epoch  # a retried registration
            epoch = self.image.offset + 1  # grows with every commit: unique per registration
            self._heartbeats[broker_id] = time.monotonic()
            # A re-registering broker is fenced first: its partitions lose it as a leader
            # until it has caught up (a restarted broker may have lost its tail).
            batch = self._fence_records(broker_id) if existing is not None and \
                not existing.fenced else []
            batch.append({"type": "register_broker", "id": broker_id, "epoch": epoch,
                          "incarnation": incarnation, "host": host, "port": port,
                          "rack": rack, "listeners": listeners or {}})
            return batch, epoch

        return await self.write(decide)

    async def heartbeat(self, broker_id: int, epoch: int, metadata_offset: int,
                        want_fence: bool, want_shut_down: bool) -> tuple[bool, bool, bool]:
        """Returns (caught up, fenced, should shut down)."""
        def decide() -> tuple[list[dict[str, Any]], tuple[bool, bool, bool]]:
            broker = self.image.brokers.get(broker_id)
            if broker is None:
                raise BrokerIdNotRegisteredError(f"broker {broker_id} is not registered")
            if broker.epoch != epoch:
                raise StaleBrokerEpochError(
                    f"broker {broker_id} epoch {epoch} is not the registered {broker.epoch}")
            self._heartbeats[broker_id] = time.monotonic()
            caught_up = metadata_offset >= broker.epoch
            if want_shut_down:
                batch = self._fence_records(broker_id) if not broker.fenced else []
                return batch, (caught_up, True, True)
            if want_fence and not broker.fenced:
                return self._fence_records(broker_id), (caught_up, True, False)
            if broker.fenced and caught_up and not want_fence:
                return self._unfence_records(broker_id), (True, False, False)
            return [], (caught_up, broker.fenced, False)

        return await self.write(decide)

    def _fence_records(self, broker_id: int) -> list[dict[str, Any]]:
        broker = self.image.brokers[broker_id]
        batch: list[dict[str, Any]] = [{"type": "broker_state", "id": broker_id,
                                        "epoch": broker.epoch, "fenced": True}]

        def alive(b: int) -> bool:
            return b != broker_id and self.alive(b)

        for topic in self.image.topics.values():
            unclean = self.unclean(topic.name)
            for index, p in topic.partitions.items():
                new = without_broker(p, broker_id, alive, unclean)
                if new is not None:
                    batch.append(records.partition_record(topic.topic_id, index, new))
        return batch

    def _unfence_records(self, broker_id: int) -> list[dict[str, Any]]:
        broker = self.image.brokers[broker_id]
        batch: list[dict[str, Any]] = [{"type": "broker_state", "id": broker_id,
                                        "epoch": broker.epoch, "fenced": False}]

        def alive(b: int) -> bool:
            return b == broker_id or self.alive(b)

        for topic in self.image.topics.values():
            unclean = self.unclean(topic.name)
            for index, p in topic.partitions.items():
                new = leaderless_after_unfence(p, alive, unclean)
                if new is not None:
                    batch.append(records.partition_record(topic.topic_id, index, new))
        return batch

    async def _fence_silent(self) -> None:
        while True:
            await asyncio.sleep(FENCE_CHECK_S)
            now = time.monotonic()
            for broker in list(self.image.brokers.values()):
                last = self._heartbeats.setdefault(broker.node_id, now)
                if not broker.fenced and now - last > self.session_timeout_s:
                    log.info("fencing broker %d: no heartbeat for %.1f s", broker.node_id,
                             now - last)
                    try:
                        await self.write(self._fence_decision(broker.node_id))
                    except KafkaError as exc:
                        log.info("fencing broker %d failed: %s", broker.node_id, exc)
                        return

    def _fence_decision(self, broker_id: int
                        ) -> Callable[[], tuple[list[dict[str, Any]], None]]:
        def decide() -> tuple[list[dict[str, Any]], None]:
            return (self._fence_records(broker_id) if self.alive(broker_id) else []), None
        return decide

    # ------------------------------------------------------------------ partitions

    def new_topic_id(self) -> str:
        return str(uuid.uuid4())

    def next_start(self) -> int:
        self._next_start += 1
        return self._next_start

    def partition_change(self, topic: str, index: int, new: PartitionImage
                         ) -> dict[str, Any]:
        return records.partition_record(self.image.topics[topic].topic_id, index, new)

    def reelect(self, p: PartitionImage, leader: int) -> PartitionImage:
        return with_leader(p, leader)
