"""The replica manager: a broker's partitions as leader or follower, per the metadata image.

``apply`` is called for every partition of the image after each metadata change; it makes
this broker the partition's leader (stamp the new leader epoch into the epoch cache, start
tracking followers, high watermark from what it knew) or a follower (hand the partition to
its leader's fetcher, truncate first), or takes it offline (not a replica any more).

On the leader, follower fetches move the high watermark; a follower that has caught up is
added to the ISR and one not caught up for ``replica.lag.time.max.ms`` is removed, each
through AlterPartition to the active controller (the ISR changes when the controller has
committed it; the answer, and later the metadata log, bring the new partition epoch).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from sdk.errors import (
    KafkaError,
    NotEnoughReplicasAfterAppendError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
)
from sdk.protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from server_ref.producer_state import producers_at_end
from server_ref.replication.fetcher import ReplicaFetcher
from server_ref.replication.min_isr import effective_min_isr, min_isr_text
from server_ref.replication.reads import epoch_start_offset
from server_ref.replication.state import FOLLOWER, LEADER, OFFLINE, ReplicaState

if TYPE_CHECKING:
    from server_ref.controller.image import PartitionImage
    from server_ref.topics import Partition

log = logging.getLogger(__name__)

__all__ = ["ReplicaManager"]

ALTER_PARTITION_VERSION = 2


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class ReplicaManager:
    def __init__(self, agent: Any, node_id: int, *, lag_time_ms: int, fetch_wait_ms: int,
                 request_timeout_s: float = 5.0) -> None:
        self.agent = agent  # ClusterAgent: endpoints, controller requests, topic ids
        self.node_id = node_id
        self.lag_time_ms = lag_time_ms
        self.fetch_wait_ms = fetch_wait_ms
        self.request_timeout_s = request_timeout_s
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.led: dict[int, Partition] = {}  # id(partition) -> partition, for ISR checks
        self._isr_task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._isr_task = asyncio.get_running_loop().create_task(self._check_isr())

    async def close(self) -> None:
        if self._isr_task is not None:
            self._isr_task.cancel()
            self._isr_task = None
        for fetcher in list(self.fetchers.values()):
            await fetcher.close()
        self.fetchers.clear()
        for partition in self.led.values():
            state = partition.replica
            if state is not None:
                state.release(NotLeaderOrFollowerError("the broker is shutting down"))

    def endpoint_of(self, broker: int) -> tuple[str, int] | None:
        return self.agent.endpoint_of(broker)

    # ------------------------------------------------------------------ roles

    def apply(self, partition: Partition, p: PartitionImage) -> None:
        old: ReplicaState | None = partition.replica
        me = self.node_id
        if me not in p.replicas and me not in p.adding:
            if old is not None and old.role != OFFLINE:
                self._leave(partition, old)
            partition.replica = ReplicaState(OFFLINE, p.leader, p.leader_epoch,
                                             p.partition_epoch, list(p.replicas), list(p.isr),
                                             partition.log.log_end_offset)
            return
        role = LEADER if p.leader == me else FOLLOWER
        if old is not None and old.role == role and old.leader_epoch == p.leader_epoch \
                and old.leader == p.leader:
            # Same leadership: only the ISR or replicas moved (AlterPartition committed).
            if p.partition_epoch >= old.partition_epoch:
                old.isr, old.replicas = list(p.isr), list(p.replicas)
                old.partition_epoch = p.partition_epoch
                if old.is_leader:
                    self._advance(partition, old)
            return
        hw = old.high_watermark if old is not None else 0
        hw = min(max(hw, 0), partition.log.log_end_offset)
        if old is not None and old.role != OFFLINE:
            self._leave(partition, old)
        state = ReplicaState(role, p.leader, p.leader_epoch, p.partition_epoch,
                             list(p.replicas), list(p.isr), hw)
        partition.replica = state
        if role == LEADER:
            plog = partition.log
            plog.leader_epoch_cache.assign(p.leader_epoch, plog.log_end_offset)
            now = _now_ms()
            for broker in p.replicas:  # a full lag period before anyone is dropped
                if broker != me:
                    state.follower_fetched(broker, -1, plog.log_end_offset, now)
            self.led[id(partition)] = partition
            self._rebuild_producers(partition)
            self._advance(partition, state)
            self.agent.became_leader(partition)
            log.info("%s: leader in epoch %d, isr %s", partition.name, p.leader_epoch, p.isr)
        elif p.leader >= 0:
            fetcher = self.fetchers.get(p.leader)
            if fetcher is None:
                fetcher = self.fetchers[p.leader] = ReplicaFetcher(self, p.leader)
            fetcher.add(partition, p.leader_epoch)

    def _leave(self, partition: Partition, old: ReplicaState) -> None:
        if old.is_leader:
            self.led.pop(id(partition), None)
            old.release(NotLeaderOrFollowerError(
                f"this broker is no longer the leader of {partition.name}"))
            self.agent.resigned(partition)
        else:
            fetcher = self.fetchers.get(old.leader)
            if fetcher is not None:
                fetcher.remove(partition)

    def forget(self, partition: Partition) -> None:
        """The partition's topic was deleted."""
        old = partition.replica
        if old is not None:
            self._leave(partition, old)
        partition.replica = None

    def _rebuild_producers(self, partition: Partition) -> None:
        """A new leader de-duplicates producers from its latest producer snapshot (taken at
        a segment roll) plus the batches after it, as Kafka's leader does: producers whose
        batches are all below the local log start (retention, the remote tier) are kept,
        where a replay of the local log alone forgot them."""
        state = partition.producers
        plog = partition.log
        if not plog.log_end_offset:
            return
        rebuilt = producers_at_end(plog, _now_ms())
        state.entries.clear()
        state.entries.update(rebuilt.entries)

    # ------------------------------------------------------------------ follower side

    def truncate(self, partition: Partition, offset: int) -> None:
        partition.log.truncate_to(offset)
        state = partition.replica
        if state is not None:
            state.high_watermark = min(state.high_watermark, partition.log.log_end_offset)

    def restart_at(self, partition: Partition, offset: int) -> None:
        partition.log.truncate_fully_and_start_at(offset)
        partition.producers.entries.clear()
        state = partition.replica
        if state is not None:
            state.high_watermark = offset

    def append_replicated(self, partition: Partition, records: Any, now: int) -> None:
        partition.log.append(records if not isinstance(records, bytes) else bytearray(records),
                             now_ms=now, assign_offsets=False)
        partition.notify_appended()

    def follower_high_watermark(self, partition: Partition, leader_hw: int) -> None:
        state = partition.replica
        if state is None or state.is_leader:
            return
        hw = min(leader_hw, partition.log.log_end_offset)
        if hw > state.high_watermark:
            state.high_watermark = hw

    # ------------------------------------------------------------------ leader side

    def follower_fetched(self, partition: Partition, broker: int, offset: int) -> None:
        state = partition.replica
        if state is None or not state.is_leader:
            return
        plog = partition.log
        state.follower_fetched(broker, offset, plog.log_end_offset, _now_ms())
        self._advance(partition, state)
        if broker not in state.isr and broker in state.replicas and not state.alter_in_flight \
                and offset >= state.high_watermark and offset >= \
                epoch_start_offset(partition):
            self._alter_isr(partition, state, [*state.isr, broker])

    def appended(self, partition: Partition) -> None:
        state = partition.replica
        if state is not None and state.is_leader:
            self._advance(partition, state)

    def _advance(self, partition: Partition, state: ReplicaState) -> None:
        hw = state.new_high_watermark(partition.log.log_end_offset)
        if hw != state.high_watermark:
            state.high_watermark = hw
            state.release()
            partition.notify_appended()  # consumers waiting at the old high watermark

    async def wait_for_isr(self, partition: Partition, last_offset: int, timeout_ms: int
                           ) -> KafkaError | None:
        """An acks=all append's outcome: None once the ISR has ``last_offset``; else the
        error for the producer. The minimum ISR is read once the offset is in, capped at
        the replica count then (Kafka's checkEnoughReplicasReachOffset)."""
        state = partition.replica
        if state is None or not state.is_leader:
            return NotLeaderOrFollowerError(f"not the leader of {partition.name}")
        if last_offset >= state.high_watermark:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            state.waiters.append((last_offset, future))
            try:
                await asyncio.wait_for(future, max(timeout_ms, 1) / 1000)
            except TimeoutError:
                return RequestTimedOutError(
                    f"the ISR of {partition.name} did not get offset {last_offset} in time")
            except KafkaError as exc:
                return exc
        config = self.agent.broker.config
        if len(state.isr) < effective_min_isr(partition, config):
            return NotEnoughReplicasAfterAppendError(
                f"the ISR of {partition.name} shrank to {len(state.isr)} below "
                f"min.insync.replicas {min_isr_text(partition, config)} after the append")
        return None

    async def _check_isr(self) -> None:
        while True:
            await asyncio.sleep(max(0.05, self.lag_time_ms / 4000))
            now = _now_ms()
            for partition in list(self.led.values()):
                state = partition.replica
                if state is None or not state.is_leader or state.alter_in_flight:
                    continue
                end = partition.log.log_end_offset
                lagging = []
                for broker in state.isr:
                    if broker == self.node_id:
                        continue
                    progress = state.followers.get(broker)
                    behind = progress is None or progress.log_end_offset < end
                    if behind and (progress is None or
                                   now - progress.last_caught_up_ms > self.lag_time_ms):
                        lagging.append(broker)
                if lagging:
                    log.info("%s: %s out of the ISR (lag over %d ms)", partition.name,
                             lagging, self.lag_time_ms)
                    self._alter_isr(partition, state,
                                    [b for b in state.isr if b not in lagging])

    def _count_isr_change(self, before: set[int], after: list[int]) -> None:
        """The controller committed an ISR change this leader asked for: Kafka's
        IsrShrinksPerSec / IsrExpandsPerSec (the broker's /metrics, when served)."""
        metrics = self.agent.broker.metrics
        if metrics is not None:
            if before - set(after):
                metrics.record_isr_shrink()
            if set(after) - before:
                metrics.record_isr_expand()

    def _alter_isr(self, partition: Partition, state: ReplicaState, isr: list[int]) -> None:
        state.alter_in_flight = True
        asyncio.get_running_loop().create_task(self._send_alter(partition, state, isr))

    async def _send_alter(self, partition: Partition, state: ReplicaState, isr: list[int]
                          ) -> None:
        before = set(state.isr)
        try:
            topic_id = partition.topic.topic_id
            request = AlterPartitionRequest(
                broker_id=self.node_id, broker_epoch=self.agent.broker_epoch,
                topics=[AlterPartitionRequest.TopicData(topic_id=topic_id, partitions=[
                    AlterPartitionRequest.PartitionData(
                        partition_index=partition.index, leader_epoch=state.leader_epoch,
                        new_isr=sorted(isr), partition_epoch=state.partition_epoch)])])
            response = await self.agent.controller_request(request, ALTER_PARTITION_VERSION)
            assert isinstance(response, AlterPartitionResponse)
            for topic in response.topics:
                for pd in topic.partitions:
                    if pd.error_code == 0 and partition.replica is state:
                        self._count_isr_change(before, pd.isr)
                    if pd.error_code == 0 and partition.replica is state and \
                            pd.partition_epoch > state.partition_epoch:
                        state.isr, state.partition_epoch = list(pd.isr), pd.partition_epoch
                        self._advance(partition, state)
                    elif pd.error_code:
                        log.info("%s: AlterPartition refused with error %d", partition.name,
                                 pd.error_code)
        except Exception as exc:
            log.info("%s: AlterPartition failed: %s", partition.name, exc)
            await asyncio.sleep(0.2)
        finally:
            state.alter_in_flight = False
