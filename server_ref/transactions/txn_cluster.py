"""The transaction coordinator in cluster mode: which ids this broker serves, and markers
sent to partition leaders on other brokers.

A broker coordinates the transactional ids of the ``__transaction_state`` partitions it
leads (Kafka's placement). When it gains the leadership of one, it replays that partition
from its local log (what the ISR had when it was elected) and takes its ids: a transaction
found PrepareCommit/PrepareAbort gets its markers sent again and then Complete* written, as
Kafka's coordinator does on load; an Ongoing one is left to its timeout. When it loses one,
the ids are dropped (requests for them answer NOT_COORDINATOR, marker rounds in flight
stop: the new leader sends them again from the Prepare* record it has).

Every state write is appended at the leader and counts once the ISR has it
(``durable``): the handlers answer only then, and the markers of a Prepare* decision
leave only then, so a coordinator that dies after answering always has a successor that
knows the decision. The coordinator epoch on the markers is the partition's leader epoch.
Markers go out per leader (``cluster/txn_link.MarkerSender``) in rounds until each partition
has its marker (a dead or moved leader is retried with the leaders of the newer metadata
image), then Complete* is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from sdk.errors import BrokerResponseError, CoordinatorNotAvailableError
from server_ref.offsets_journal import partition_for_group
from server_ref.transactions.state import TxnMetadata, TxnState
from server_ref.transactions.statelog import STATE_TOPIC

if TYPE_CHECKING:
    from server_ref.cluster.txn_link import MarkerSender, PeerPool
    from server_ref.topics import Partition
    from server_ref.transactions.coordinator import TransactionCoordinator

log = logging.getLogger(__name__)

__all__ = ["ClusterTransactions"]

MARKER_RETRY_S = 0.2


class ClusterTransactions:
    def __init__(self, coordinator: TransactionCoordinator) -> None:
        from server_ref.cluster.txn_link import MarkerSender, PeerPool

        self.coordinator = coordinator
        self.broker = coordinator.broker
        self.owned: dict[int, int] = {}  # state partition index -> leader (coordinator) epoch
        self.markers: MarkerSender = MarkerSender(self.broker)
        self.peers: PeerPool = PeerPool(self.broker, "txn-verify")
        self._marker_tasks: dict[str, asyncio.Task[None]] = {}
        self._changed: set[int] = set()
        self._scheduled = False

    async def close(self) -> None:
        for task in list(self._marker_tasks.values()):
            task.cancel()
        self._marker_tasks.clear()
        self.owned.clear()
        await self.markers.close()
        await self.peers.close()

    # ------------------------------------------------------------------ ownership

    def _index(self, txn_id: str) -> int:
        topic = self.broker.topics.get(STATE_TOPIC)
        if topic is None or not topic.partitions:
            raise CoordinatorNotAvailableError(f"{STATE_TOPIC} does not exist yet")
        return partition_for_group(txn_id, len(topic.partitions))

    def owns(self, txn_id: str) -> bool:
        try:
            return self._index(txn_id) in self.owned
        except CoordinatorNotAvailableError:
            return False

    def coordinator_epoch(self, txn_id: str) -> int:
        return self.owned.get(self._index(txn_id), 0)

    def leadership_changed(self, partition: Partition) -> None:
        self._changed.add(partition.index)
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._apply_changes)

    def _apply_changes(self) -> None:
        self._scheduled = False
        changed, self._changed = self._changed, set()
        topic = self.broker.topics.get(STATE_TOPIC)
        if topic is None or not self.broker.opened:
            return
        for index in sorted(changed):
            if index >= len(topic.partitions):
                continue
            partition = topic.partitions[index]
            replica = partition.replica
            leads = replica is not None and replica.is_leader
            if leads and self.owned.get(index) != replica.leader_epoch:
                self._unload(index)
                self._load(partition, replica.leader_epoch)
            elif not leads and index in self.owned:
                self._unload(index)

    def _load(self, partition: Partition, epoch: int) -> None:
        coordinator = self.coordinator
        found: dict[str, TxnMetadata] = {}
        for txn_id, meta in coordinator.state_log.replay(partition):
            if meta is None:
                found.pop(txn_id, None)
            else:
                found[txn_id] = meta
        coordinator.txns.update(found)
        self.owned[partition.index] = epoch
        for meta in found.values():
            if meta.state.is_prepared:
                log.info("transaction %s was %s when %s was loaded: sending its markers",
                         meta.transactional_id, meta.state.kafka_name, partition.name)
                self.schedule_markers(meta, 0.0)
        log.info("transaction coordinator took %s (epoch %d): %d transactional ids",
                 partition.name, epoch, len(found))

    def _unload(self, index: int) -> None:
        if self.owned.pop(index, None) is None:
            return
        coordinator = self.coordinator
        topic = self.broker.topics.get(STATE_TOPIC)
        count = len(topic.partitions) if topic is not None else 1
        gone = [t for t in coordinator.txns if partition_for_group(t, count) == index]
        for txn_id in gone:
            del coordinator.txns[txn_id]
            task = self._marker_tasks.pop(txn_id, None)
            if task is not None:
                task.cancel()
        log.info("transaction coordinator left %s-%d (%d ids dropped)", STATE_TOPIC, index,
                 len(gone))

    # ------------------------------------------------------------------ durability

    async def durable(self, txn_id: str) -> int:
        from server_ref.cluster.txn_link import state_durable

        try:
            index = self._index(txn_id)
        except CoordinatorNotAvailableError as exc:
            return exc.errno
        topic = self.broker.topics.get(STATE_TOPIC)
        assert topic is not None
        return await state_durable(self.broker, topic.partitions[index])

    # ------------------------------------------------------------------ markers

    def schedule_markers(self, meta: TxnMetadata, delay_s: float) -> None:
        txn_id = meta.transactional_id
        old = self._marker_tasks.pop(txn_id, None)
        if old is not None:
            old.cancel()
        self._marker_tasks[txn_id] = asyncio.get_running_loop().create_task(
            self._send_markers(meta, delay_s), name=f"txn-markers-{txn_id}")

    async def markers_written(self, txn_id: str, timeout_s: float) -> None:
        task = self._marker_tasks.get(txn_id)
        if task is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(task), timeout_s)

    def _current(self, meta: TxnMetadata) -> bool:
        """The round may go on: ``meta`` is still this broker's record of the id."""
        txn_id = meta.transactional_id
        return self.coordinator.txns.get(txn_id) is meta and self.owns(txn_id) \
            and meta.state.is_prepared

    async def _send_markers(self, meta: TxnMetadata, delay_s: float) -> None:
        txn_id = meta.transactional_id
        try:
            if delay_s > 0:
                await asyncio.sleep(delay_s)
            # The decision first: no marker before the ISR has the Prepare* record.
            while self._current(meta):
                code = await self.durable(txn_id)
                if code == 0:
                    break
                await asyncio.sleep(MARKER_RETRY_S)
            committed = meta.state is TxnState.PREPARE_COMMIT
            left = set(meta.partitions)
            while left and self._current(meta):
                left = await self.markers.send(meta.producer_id, meta.producer_epoch,
                                               committed, self.coordinator_epoch(txn_id),
                                               left)
                if left:
                    log.info("markers of %s not written yet on %s; retrying", txn_id,
                             sorted(left))
                    await asyncio.sleep(MARKER_RETRY_S)
            if not self._current(meta):
                return  # another leader took the id: it sends the markers from its log
            meta.state = TxnState.COMPLETE_COMMIT if committed else TxnState.COMPLETE_ABORT
            meta.partitions = set()
            try:
                self.coordinator._complete(meta)
            except BrokerResponseError as exc:
                log.info("completing %s failed (%s): the next leader completes it", txn_id,
                         exc)
                return
            await self.durable(txn_id)
            log.debug("transaction %s %s", txn_id, meta.state.kafka_name)
        finally:
            if self._marker_tasks.get(txn_id) is asyncio.current_task():
                del self._marker_tasks[txn_id]
