"""Automatic preferred-leader elections (``auto.leader.rebalance.enable``), as Kafka's KRaft
controller runs them.

After a broker comes back, the partitions it led stay with the replicas that took over;
the active controller checks every ``leader.imbalance.check.interval.seconds`` and moves
each partition whose preferred replica (the first of its replica list) is not leading, is
in the ISR and is unfenced back to it — at most ``MAX_ELECTIONS_PER_CHECK`` per check, all
in one metadata batch, like an ElectLeaders(PREFERRED) for exactly those partitions.
Partitions in a reassignment are left alone (the reassignment decides their leader).
Kafka 4's controller has no per-broker imbalance ratio any more
(``leader.imbalance.per.broker.percentage`` was a ZooKeeper-mode setting): any imbalanced
partition is balanced at the next check.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from sdk.errors import KafkaError
from server_ref.controller.election import with_leader
from server_ref.controller.image import NO_LEADER, PartitionImage
from server_ref.controller.records import partition_record
from server_ref.raft.api import CommittedBatch, LeaderAndEpoch

log = logging.getLogger(__name__)

__all__ = ["LeaderRebalancer", "imbalanced"]

MAX_ELECTIONS_PER_CHECK = 1000  # Kafka's maxElectionsPerImbalance


def imbalanced(p: PartitionImage, alive: Any) -> bool:
    """Whether the preferred replica could lead ``p`` and does not."""
    if not p.replicas or p.adding or p.removing:
        return False
    preferred = p.replicas[0]
    return p.leader != preferred and preferred in p.isr and bool(alive(preferred))


class LeaderRebalancer:
    """Runs on every controller; acts only while its controller is the active one."""

    def __init__(self, controller: Any, *, enabled: bool, interval_s: float) -> None:
        self.controller = controller
        self.enabled = enabled
        self.interval_s = interval_s
        self._task: asyncio.Task[None] | None = None
        if enabled:
            controller.node.register_listener(self._on_commit, None, self._on_leader_change)

    @classmethod
    def from_config(cls, controller: Any, config: Any) -> LeaderRebalancer:
        enabled = str(config.get("auto.leader.rebalance.enable")).lower() == "true"
        interval = float(config.get("leader.imbalance.check.interval.seconds"))
        return cls(controller, enabled=enabled, interval_s=interval)

    def _on_commit(self, _batch: CommittedBatch) -> None:
        pass  # the controller's own listener applies the records

    def _on_leader_change(self, leader: LeaderAndEpoch) -> None:
        mine = leader.leader_id == self.controller.node.node_id
        if mine and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._run())
        elif not mine and self._task is not None:
            self._task.cancel()
            self._task = None

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            if not self.controller.active:
                continue
            try:
                moved = await self.controller.write(self._decide)
            except KafkaError as exc:  # lost the leadership meanwhile: the next one checks
                log.info("preferred leader elections not written: %s", exc)
                continue
            if moved:
                log.info("auto leader rebalance: %d partitions back on their preferred "
                         "replica", moved)

    def _decide(self) -> tuple[list[dict[str, Any]], int]:
        c = self.controller
        batch: list[dict[str, Any]] = []
        for topic in c.image.topics.values():
            for index, p in topic.partitions.items():
                if len(batch) >= MAX_ELECTIONS_PER_CHECK:
                    return batch, len(batch)
                if p.leader != NO_LEADER and imbalanced(p, c.alive):
                    batch.append(partition_record(topic.topic_id, index,
                                                  with_leader(p, p.replicas[0])))
        return batch, len(batch)
