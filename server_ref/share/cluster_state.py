"""Share-partition state in cluster mode.

Design (after Kafka's SharePartitionManager and share coordinator, simplified):

* the share group's membership and assignment live with the group coordinator (the leader
  of the group's ``__consumer_offsets`` partition: FindCoordinator places it), as in Kafka;
* the delivery state of a share-partition lives on the leader of its topic partition, which
  serves ShareFetch/ShareAcknowledge (followers answer NOT_LEADER_OR_FOLLOWER, and clients
  move to the new leader);
* that leader persists each change to ``__share_group_state`` (created through the
  controller, replicated), produced acks=all to the leader of the state partition that
  ``group:topicId:partition`` hashes to — Kafka's leader sends WriteShareGroupState to the
  share coordinator there, which appends it; here the partition leader appends it itself;
* a broker that becomes leader of a partition drops what it held for it and replays the
  share-partitions of that partition from its replica of ``__share_group_state``: records
  acquired but not acknowledged come back available (their delivery counts kept), records
  acknowledged stay settled. Writes go in order from one task; one not yet acknowledged
  when the leader dies is lost, so those records are delivered again (at least once).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Any

from sdk.records.builder import RecordBatchBuilder
from server_ref.cluster.peer import LeaderWriter
from server_ref.offsets_journal import partition_for_group

if TYPE_CHECKING:
    from server_ref.broker import Broker

log = logging.getLogger(__name__)

__all__ = ["StateWriter", "state_partition_count"]

TIMEOUT_S = 10.0
RETRY_S = 0.2
ATTEMPTS = 50  # ~10 s of elections and topic creation before a write is given up


def state_partition_count(broker: Broker) -> int:
    topic = broker.cluster.image.topics.get(_topic_name())
    return 0 if topic is None else len(topic.partitions)


def _topic_name() -> str:
    from server_ref.share.journal import STATE_TOPIC

    return STATE_TOPIC


class StateWriter:
    """Produces journal records to the leaders of ``__share_group_state``, in order."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._queue: asyncio.Queue[tuple[str, bytes, bytes | None]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._creating: asyncio.Task[None] | None = None
        self._writer = LeaderWriter(f"share-state-{broker.node_id}")  # acks=all at leaders

    def send(self, hash_key: str, key: bytes, value: bytes | None) -> None:
        self._queue.put_nowait((hash_key, key, value))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._drain(),
                                                                name="share-state-writer")

    async def _drain(self) -> None:
        while self.broker.opened:
            hash_key, key, value = await self._queue.get()
            try:
                await self._write(hash_key, key, value)
            except Exception as exc:
                log.warning("share state %s not written: %s", hash_key, exc)

    def _create_topic(self) -> None:
        from server_ref.cluster.views import create_topic

        if self._creating is not None and not self._creating.done():
            return
        agent = self.broker.cluster
        cfg = self.broker.config
        # Kafka's share.coordinator.state.topic.* configs; the replication factor capped by
        # the live brokers, as for __consumer_offsets (Kafka refuses to create the topic
        # until enough brokers are up); min.isr as configured, as Kafka writes it (acks=all
        # never needs more than the replica count: replication/min_isr.py)
        replication = max(1, min(int(cfg.get("share.coordinator.state.topic.replication."
                                             "factor")), len(agent.image.live_brokers())))
        self._creating = asyncio.get_running_loop().create_task(create_topic(
            agent, _topic_name(), int(cfg.get("share.coordinator.state.topic.num.partitions")),
            replication, {"cleanup.policy": "compact", "min.insync.replicas":
                          str(cfg.get("share.coordinator.state.topic.min.isr")),
                          "segment.bytes": str(
                              cfg.get("share.coordinator.state.topic.segment.bytes"))}))

    async def _write(self, hash_key: str, key: bytes, value: bytes | None) -> None:
        agent = self.broker.cluster
        builder = RecordBatchBuilder()
        builder.append(None, self.broker.now_ms(), key, value)
        records = bytes(builder.build())
        problem = "no attempt"
        for attempt in range(ATTEMPTS):
            if attempt:
                await asyncio.sleep(RETRY_S)
            topic = agent.image.topics.get(_topic_name())
            if topic is None or not topic.partitions:
                self._create_topic()
                problem = "the state topic is being created"
                continue
            index = partition_for_group(hash_key, len(topic.partitions))
            leader = topic.partitions[index].leader
            endpoint = agent.endpoint_of(leader) if leader >= 0 else None
            if endpoint is None:
                problem = f"state partition {index} has no leader"
                continue
            outcome = await self._writer.produce(leader, endpoint, _topic_name(), index,
                                                 records, TIMEOUT_S)
            if outcome is None:
                return
            problem = outcome
        raise ConnectionError(problem)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        await self._writer.close()


def reload_partition(coordinator: Any, topic_id: uuid.UUID, index: int, leads: bool) -> None:
    """The leadership of (topic, partition) moved here or away: forget its share-partitions
    and, when this broker now leads it, restore them from the replicated journal."""
    from server_ref.share.partition import SharePartition

    for key in [k for k in coordinator.partitions if k[1] == topic_id and k[2] == index]:
        del coordinator.partitions[key]
        coordinator._dirty.discard(key)
    if not leads:
        return
    restored = 0
    for key, value in coordinator.journal.replay():
        if key[1] != topic_id or key[2] != index:
            continue
        if value is None:
            coordinator.partitions.pop(key, None)
            continue
        sp = coordinator.partitions.get(key)
        if sp is None:
            sp = coordinator.partitions[key] = SharePartition(key[0], key[1], key[2], 0)
        sp.restore(value)
        restored += 1
    if restored:
        log.info("share-partitions of %s-%d restored from the journal as its new leader",
                 topic_id, index)
