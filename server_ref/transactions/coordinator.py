"""The transaction coordinator: transactional ids, their producer ids and epochs, and the
two-phase end of each transaction (Kafka's TransactionCoordinator, transactions v1 and v2).

Transactions v2 (KIP-890 part 2, ``transaction.version`` 2): a partition joins the open
transaction when a Produce v12+ brings its first transactional batch (``add_on_produce``),
the group's offsets partition with TxnOffsetCommit v5, and EndTxn v5 bumps the epoch
(``end_txn(..., bump=True)``): the markers carry the new epoch, so a late write of the ended
transaction is refused, and the answer hands the producer its next (id, epoch) - a new
producer id once the epochs are used up. A retry of that EndTxn (old epoch, the answer was
lost) gets the same answer; the markers are written before the answer, so the producer's
next transaction finds the last one complete.

Every decision is written to ``__transaction_state`` before it is answered. EndTxn writes
PrepareCommit/PrepareAbort and answers; the markers are then written to every partition of
the transaction (all local on a single node, through the WriteTxnMarkers append path) and
CompleteCommit/CompleteAbort closes it. Until then InitProducerId, AddPartitionsToTxn and
EndTxn for that id answer CONCURRENT_TRANSACTIONS, which clients retry.

At start the log is replayed: a transaction found prepared gets its markers written again
(a marker written twice is harmless: the second finds no open transaction), an Ongoing one
is left to its timeout. Every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``
open transactions older than their timeout are aborted with the epoch bumped, so the
producer that let it time out is fenced (PRODUCER_FENCED) on its next call. Ids idle for
``transactional.id.expiration.ms`` without an open transaction are forgotten (tombstone),
checked every ``transaction.remove.expired.transaction.cleanup.interval.ms``.

Test hook: the environment variable ``SERVER_REF_TXN_MARKER_DELAY_MS`` delays the marker
writes after a Prepare* record, so a test can kill the broker process in that window.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from sdk.errors import (
    BrokerResponseError,
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    NotCoordinatorError,
    ProducerFencedError,
    UnknownTopicOrPartitionError,
)
from server_ref.transactions.markers import write_marker
from server_ref.transactions.state import MAX_EPOCH, NO_PRODUCER_ID, TxnMetadata, TxnState
from server_ref.transactions.statelog import TransactionStateLog

if TYPE_CHECKING:
    from server_ref.broker import Broker
    from server_ref.topics import Partition as LogPartition
    from server_ref.transactions.txn_cluster import ClusterTransactions

log = logging.getLogger(__name__)

__all__ = ["TransactionCoordinator", "COORDINATOR_EPOCH"]

COORDINATOR_EPOCH = 0  # one broker leads every __transaction_state partition for good
MARKER_RETRY_S = 0.1
Partition = tuple[str, int]


class TransactionCoordinator:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.state_log = TransactionStateLog(broker)
        self.txns: dict[str, TxnMetadata] = {}
        self.loaded = False
        self._timeout_task: asyncio.Task[None] | None = None
        self._marker_handles: dict[str, asyncio.TimerHandle] = {}
        self._marker_delay_s = int(os.environ.get("SERVER_REF_TXN_MARKER_DELAY_MS", "0")) / 1000
        self._cluster_part: ClusterTransactions | None = None
        # Cluster mode: a guard per (topic, partition, producer id) of transactional
        # batches being verified with the coordinator before their append; a marker for
        # the producer there removes it (Kafka's VerificationStateEntry).
        self.produce_guards: dict[tuple[str, int, int], object] = {}

    # ================================================================== cluster mode

    @property
    def _cluster(self) -> ClusterTransactions:
        """Cluster mode's part (``txn_cluster.py``): partitions owned, markers to leaders."""
        if self._cluster_part is None:
            from server_ref.transactions.txn_cluster import ClusterTransactions

            self._cluster_part = ClusterTransactions(self)
        return self._cluster_part

    def owns(self, txn_id: str) -> bool:
        """Cluster mode: this broker leads the id's ``__transaction_state`` partition and
        has loaded it (always true on a single node)."""
        if self.broker.cluster is None:
            return True
        return self._cluster.owns(txn_id)

    def leadership_changed(self, partition: LogPartition) -> None:
        self._cluster.leadership_changed(partition)

    async def durable(self, txn_id: str) -> int:
        """Cluster mode: 0 once the ISR has every state record of the id's partition, else
        the error to answer (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE)."""
        if self.broker.cluster is None:
            return 0
        return await self._cluster.durable(txn_id)

    async def markers_written(self, txn_id: str, timeout_s: float) -> None:
        """Cluster mode: wait (at most ``timeout_s``) until the id's markers are written."""
        if self.broker.cluster is not None:
            await self._cluster.markers_written(txn_id, timeout_s)

    def verify_or_add(self, txn_id: str, producer_id: int, epoch: int,
                      partitions: list[Partition], add: bool) -> dict[Partition, int]:
        """A partition leader's question (AddPartitionsToTxn v4+ from a broker, or the
        in-process one): may the producer's transactional data go to ``partitions``?
        ``add`` (transactions v2) first adds them to the open transaction."""
        try:
            if add:
                self.add_partitions(txn_id, producer_id, epoch, partitions, client_version=2)
            return self.verify_partitions(txn_id, producer_id, epoch, partitions)
        except BrokerResponseError as exc:
            return dict.fromkeys(partitions, exc.errno)

    # ================================================================== lifecycle

    async def start(self) -> None:
        self.load()
        self._timeout_task = asyncio.get_running_loop().create_task(self._abort_timed_out())

    async def stop(self) -> None:
        self.loaded = False
        if self._cluster_part is not None:
            await self._cluster_part.close()
        for handle in self._marker_handles.values():
            handle.cancel()
        self._marker_handles.clear()
        if self._timeout_task is not None:
            self._timeout_task.cancel()
            try:
                await self._timeout_task
            except asyncio.CancelledError:
                pass  # asked for just above
            self._timeout_task = None

    def load(self) -> None:
        """Replay ``__transaction_state``; finish what was prepared before a crash. (In
        cluster mode nothing here: each partition is loaded when this broker leads it.)"""
        if self.broker.cluster is not None:
            # (txns is not reset: a leadership gained during start may have loaded some)
            self.loaded = True
            return
        txns: dict[str, TxnMetadata] = {}
        for txn_id, meta in self.state_log.replay():
            if meta is None:
                txns.pop(txn_id, None)
            else:
                txns[txn_id] = meta
        self.txns = txns
        self.loaded = True
        for meta in txns.values():
            if meta.state.is_prepared:
                log.info("transaction %s was %s at start: writing its markers",
                         meta.transactional_id, meta.state.kafka_name)
                self._schedule_markers(meta, 0.0)
        log.info("transaction coordinator loaded %d transactional ids", len(txns))

    def _check_loaded(self, txn_id: str | None = None) -> None:
        if not self.loaded:
            raise CoordinatorLoadInProgressError("the transaction state is not loaded yet")
        if txn_id is not None and self.broker.cluster is not None and not self.owns(txn_id):
            raise NotCoordinatorError(
                f"this broker is not the transaction coordinator of {txn_id}")

    def _write(self, meta: TxnMetadata) -> None:
        meta.last_update_ms = self.broker.now_ms()
        self.state_log.write(meta)
        self.txns[meta.transactional_id] = meta

    # ================================================================== client APIs

    def init_producer_id(self, txn_id: str, timeout_ms: int, producer_id: int = NO_PRODUCER_ID,
                         epoch: int = -1) -> tuple[int, int]:
        """InitProducerId for a transactional id: (producer id, epoch), or a Kafka error."""
        self._check_loaded(txn_id)
        max_timeout = int(self.broker.config.get("transaction.max.timeout.ms"))
        if timeout_ms <= 0 or timeout_ms > max_timeout:
            raise InvalidTransactionTimeoutError(
                f"The transaction timeout is larger than the maximum value allowed by the "
                f"broker (as configured by transaction.max.timeout.ms): {timeout_ms} "
                f"(maximum {max_timeout})" if timeout_ms > 0 else
                f"transaction timeout {timeout_ms} must be positive")
        meta = self.txns.get(txn_id)
        if meta is None:
            meta = TxnMetadata(txn_id, self._allocate(), 0, timeout_ms)
            self._write(meta)
            return meta.producer_id, meta.producer_epoch
        if meta.state.is_prepared or meta.state is TxnState.PREPARE_EPOCH_FENCE:
            raise ConcurrentTransactionsError(
                f"transaction {txn_id} is completing; retry when its markers are written")
        if producer_id != NO_PRODUCER_ID:  # KIP-360: the producer asks to bump its epoch
            if producer_id != meta.producer_id or epoch not in (meta.producer_epoch,
                                                                meta.last_epoch):
                raise ProducerFencedError(
                    f"producer {producer_id} epoch {epoch} is not the current producer of "
                    f"{txn_id} ({meta.producer_id} epoch {meta.producer_epoch})")
            if epoch == meta.last_epoch and epoch != meta.producer_epoch \
                    and meta.state.is_complete:
                return meta.producer_id, meta.producer_epoch  # a retry of the bump we made
        if meta.state is TxnState.ONGOING:
            # A new producer instance (or a bump) while a transaction is open: abort it
            # under a bumped epoch, fencing the old instance; the client retries.
            self._fence_and_abort(meta)
            raise ConcurrentTransactionsError(
                f"aborting the open transaction of {txn_id}; retry when it is complete")
        meta.timeout_ms = timeout_ms
        self._bump(meta, kip360=producer_id != NO_PRODUCER_ID)
        meta.state = TxnState.EMPTY
        meta.partitions = set()
        meta.start_ms = -1
        self._write(meta)
        return meta.producer_id, meta.producer_epoch

    def add_partitions(self, txn_id: str, producer_id: int, epoch: int,
                       partitions: Iterable[Partition], *, client_version: int = 0) -> None:
        """AddPartitionsToTxn (client path): the partitions join the open transaction
        (``client_version`` 2: added for a v2 producer by Produce or TxnOffsetCommit)."""
        meta = self._current(txn_id, producer_id, epoch)
        meta.client_version = client_version
        if meta.state.is_prepared or meta.state is TxnState.PREPARE_EPOCH_FENCE:
            raise ConcurrentTransactionsError(f"transaction {txn_id} is completing")
        wanted = set(partitions)
        if meta.state is TxnState.ONGOING and wanted <= meta.partitions:
            return  # nothing new: no state record
        if meta.state is not TxnState.ONGOING:
            meta.partitions = set()
            meta.start_ms = self.broker.now_ms()
            meta.state = TxnState.ONGOING
        meta.partitions |= wanted
        self._write(meta)

    def verify_partitions(self, txn_id: str, producer_id: int, epoch: int,
                          partitions: Iterable[Partition]) -> dict[Partition, int]:
        """AddPartitionsToTxn v4+ with verify_only: which partitions are in the open
        transaction (INVALID_TXN_STATE for the others); nothing is added."""
        meta = self._current(txn_id, producer_id, epoch)
        ongoing = meta.state is TxnState.ONGOING
        return {p: 0 if ongoing and p in meta.partitions else InvalidTxnStateError.errno
                for p in partitions}

    def add_offsets(self, txn_id: str, producer_id: int, epoch: int, group_id: str, *,
                    client_version: int = 0) -> None:
        """AddOffsetsToTxn (and TxnOffsetCommit v5): the group's ``__consumer_offsets``
        partition joins."""
        try:
            offsets_partition = self.broker.offsets_journal.partition_for(group_id)
        except CoordinatorNotAvailableError:
            # Cluster mode, no offsets topic yet (a v1 client adds the group before it
            # looks the group's coordinator up): the controller creates it, the client retries.
            if self.broker.cluster is not None:
                self.broker.cluster.placement.create_offsets_topic()
            raise
        self.add_partitions(txn_id, producer_id, epoch,
                            [(offsets_partition.topic.name, offsets_partition.index)],
                            client_version=client_version)

    def add_on_produce(self, txn_id: str, producer_id: int, epoch: int,
                       partition: Partition) -> None:
        """Produce v12+ (transactions v2): the batch's partition joins the producer's
        transaction if it is not in it yet (starting one after the last ended)."""
        self._check_loaded(txn_id)
        meta = self.txns.get(txn_id)
        if meta is None or meta.producer_id != producer_id or meta.producer_epoch != epoch:
            return  # check_produce answers with the precise error
        if meta.state is TxnState.ONGOING and partition in meta.partitions:
            return
        self.add_partitions(txn_id, producer_id, epoch, [partition], client_version=2)

    def check_offset_commit(self, txn_id: str, producer_id: int, epoch: int,
                            group_id: str) -> None:
        """TxnOffsetCommit may stage offsets: the producer is current and the group's
        offsets partition is in its open transaction (AddOffsetsToTxn came first)."""
        self._check_loaded(txn_id)
        meta = self.txns.get(txn_id)
        if meta is None or meta.producer_id != producer_id:
            raise InvalidProducerIdMappingError(f"{txn_id} has no producer {producer_id}")
        if meta.producer_epoch != epoch:
            raise InvalidProducerEpochError(
                f"epoch {epoch} is not the current epoch {meta.producer_epoch} of {txn_id}")
        offsets_partition = self.broker.offsets_journal.partition_for(group_id)
        if meta.state is not TxnState.ONGOING or \
                (offsets_partition.topic.name, offsets_partition.index) not in meta.partitions:
            raise InvalidTxnStateError(
                f"group {group_id} was not added to the open transaction of {txn_id}")

    def end_txn(self, txn_id: str, producer_id: int, epoch: int, committed: bool, *,
                bump: bool = False) -> tuple[int, int]:
        """EndTxn: write the Prepare* decision; markers and Complete* follow. ``bump``
        (EndTxn v5, transactions v2): the epoch moves on; returns the (producer id, epoch)
        the producer uses next."""
        if bump:
            return self._end_txn_v2(txn_id, producer_id, epoch, committed)
        meta = self._current(txn_id, producer_id, epoch)
        state = meta.state
        wanted_prepare = TxnState.PREPARE_COMMIT if committed else TxnState.PREPARE_ABORT
        wanted_complete = TxnState.COMPLETE_COMMIT if committed else TxnState.COMPLETE_ABORT
        if state is TxnState.ONGOING:
            meta.state = wanted_prepare
            self._write(meta)
            self._schedule_markers(meta, self._marker_delay_s)
            return meta.producer_id, meta.producer_epoch
        if state is wanted_prepare:
            raise ConcurrentTransactionsError(f"transaction {txn_id} is completing")
        if state is wanted_complete:
            return meta.producer_id, meta.producer_epoch  # a retry of the EndTxn that did it
        what = "commit" if committed else "abort"
        raise InvalidTxnStateError(
            f"TransactionalId {txn_id} cannot {what}: its state is {state.kafka_name}")

    def _end_txn_v2(self, txn_id: str, producer_id: int, epoch: int,
                    committed: bool) -> tuple[int, int]:
        self._check_loaded(txn_id)
        meta = self.txns.get(txn_id)
        wanted_prepare = TxnState.PREPARE_COMMIT if committed else TxnState.PREPARE_ABORT
        wanted_complete = TxnState.COMPLETE_COMMIT if committed else TxnState.COMPLETE_ABORT
        what = "commit" if committed else "abort"
        if meta is not None and meta.previous_producer_id == producer_id >= 0 \
                and meta.producer_id != producer_id and epoch >= MAX_EPOCH - 1:
            # A retry of the EndTxn that moved the id on (its epochs were used up).
            if meta.state is wanted_complete:
                return meta.producer_id, meta.producer_epoch
            raise InvalidTxnStateError(f"TransactionalId {txn_id} cannot {what} again")
        if meta is None or meta.producer_id != producer_id:
            raise InvalidProducerIdMappingError(
                f"The producer ID mapping is invalid: {txn_id} has no producer {producer_id}")
        if epoch != meta.producer_epoch:
            if epoch == meta.last_epoch == meta.producer_epoch - 1:  # a retry
                if meta.state is wanted_prepare:
                    raise ConcurrentTransactionsError(f"transaction {txn_id} is completing")
                if meta.state is wanted_complete:
                    return self._next_pair(meta)
                raise InvalidTxnStateError(
                    f"TransactionalId {txn_id} cannot {what}: its last transaction ended "
                    f"as {meta.state.kafka_name}")
            if epoch == meta.producer_epoch - 1 and meta.state.is_complete \
                    and meta.state is not wanted_complete:
                # The coordinator ended it under epoch + 1 (a timeout): as Kafka answers a v2
                # producer that asks for the other outcome. Nothing is handed out.
                raise InvalidTxnStateError(
                    f"TransactionalId {txn_id} cannot {what}: it ended as "
                    f"{meta.state.kafka_name}")
            raise ProducerFencedError(
                f"There is a newer producer with the same transactionalId {txn_id}: epoch "
                f"{epoch} is not the current epoch {meta.producer_epoch}")
        if meta.state.is_prepared or meta.state is TxnState.PREPARE_EPOCH_FENCE:
            raise ConcurrentTransactionsError(f"transaction {txn_id} is completing")
        if meta.state is not TxnState.ONGOING and committed:
            raise InvalidTxnStateError(
                f"TransactionalId {txn_id} cannot commit: no transaction is open "
                f"({meta.state.kafka_name})")
        # The markers carry epoch + 1 (at the last epoch a new id follows them).
        meta.last_epoch = epoch
        meta.producer_epoch = epoch + 1
        meta.client_version = 2
        if meta.producer_epoch >= MAX_EPOCH:
            meta.next_producer_id = self._allocate()
        if meta.state is not TxnState.ONGOING:
            # Nothing reached a partition (an abort after failed sends): no markers, but the
            # epoch moves on all the same.
            meta.partitions = set()
            meta.state = TxnState.COMPLETE_ABORT
            self._complete(meta)
            return self._next_pair(meta)
        meta.state = wanted_prepare
        self._write(meta)
        if self._marker_delay_s > 0:
            self._schedule_markers(meta, self._marker_delay_s)
        elif self.broker.cluster is not None:  # the EndTxn handler waits for them
            self._schedule_markers(meta, 0.0)
        else:  # local markers: done before the answer, so the next transaction can start
            self._write_markers(txn_id)
        return self._next_pair(meta)

    @staticmethod
    def _next_pair(meta: TxnMetadata) -> tuple[int, int]:
        if meta.next_producer_id >= 0:
            return meta.next_producer_id, 0
        return meta.producer_id, meta.producer_epoch

    def check_produce(self, txn_id: str, producer_id: int, epoch: int,
                      partition: Partition, *, add: bool = False) -> None:
        """A transactional batch may be appended (KIP-890 part 1 verification, done
        in-process): its producer is current and the partition is in the open transaction.
        ``add`` (Produce v12+): the partition joins first if it is not in it yet."""
        if add:
            self.add_on_produce(txn_id, producer_id, epoch, partition)
        meta = self.txns.get(txn_id)
        if meta is None or meta.producer_id != producer_id:
            raise InvalidProducerIdMappingError(
                f"producer {producer_id} is not the producer of transactional id {txn_id}")
        if epoch < meta.producer_epoch:
            raise InvalidProducerEpochError(
                f"Producer's epoch {epoch} is older than the current epoch "
                f"{meta.producer_epoch} of {txn_id}")
        if meta.state is not TxnState.ONGOING or partition not in meta.partitions or \
                epoch != meta.producer_epoch:
            raise InvalidTxnStateError(
                f"partition {partition[0]}-{partition[1]} is not in an open transaction of "
                f"{txn_id}")

    # ================================================================== admin APIs

    def listing(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
             min_duration_ms: int = -1) -> list[TxnMetadata]:
        wanted_states = set(states)
        wanted_ids = set(producer_ids)
        now = self.broker.now_ms()
        out = []
        for meta in self.txns.values():
            if wanted_states and meta.state.kafka_name not in wanted_states:
                continue
            if wanted_ids and meta.producer_id not in wanted_ids:
                continue
            # KIP-994: started at least that long ago, whatever the state (as Kafka lists).
            if min_duration_ms >= 0 and now - meta.start_ms < min_duration_ms:
                continue
            out.append(meta)
        return sorted(out, key=lambda m: m.transactional_id)

    # ================================================================== internals

    def _allocate(self) -> int:
        allocator = self.broker.producer_ids
        assert allocator is not None
        return allocator.allocate()

    def _current(self, txn_id: str, producer_id: int, epoch: int) -> TxnMetadata:
        self._check_loaded(txn_id)
        meta = self.txns.get(txn_id)
        if meta is None or meta.producer_id != producer_id:
            raise InvalidProducerIdMappingError(
                f"The producer ID mapping is invalid: {txn_id} has no producer {producer_id}")
        if meta.producer_epoch != epoch:
            raise ProducerFencedError(
                f"There is a newer producer with the same transactionalId {txn_id}: epoch "
                f"{epoch} is not the current epoch {meta.producer_epoch}")
        return meta

    def _bump(self, meta: TxnMetadata, kip360: bool) -> None:
        """The next epoch (or a new producer id when the epochs are used up). Only a KIP-360
        bump remembers the old epoch, which a retry of that request may name (as Kafka's
        prepareIncrementProducerEpoch: a new instance clears it)."""
        meta.last_epoch = meta.producer_epoch if kip360 else -1
        if meta.producer_epoch >= MAX_EPOCH - 1:
            meta.producer_id, meta.producer_epoch = self._allocate(), 0
            meta.last_epoch = -1
        else:
            meta.producer_epoch += 1

    def _fence_and_abort(self, meta: TxnMetadata) -> None:
        """Abort the open transaction under a bumped epoch (timeouts, a new instance)."""
        # No room for the bump at the last epochs: abort under the current one; the next
        # InitProducerId moves to a new producer id.
        if meta.producer_epoch < MAX_EPOCH - 1:
            meta.producer_epoch += 1
        meta.last_epoch = -1  # no retry of an earlier bump gets past a fence
        meta.state = TxnState.PREPARE_ABORT
        self._write(meta)
        self._schedule_markers(meta, 0.0)

    def _schedule_markers(self, meta: TxnMetadata, delay_s: float) -> None:
        txn_id = meta.transactional_id
        if self.broker.cluster is not None:
            self._cluster.schedule_markers(meta, delay_s)
            return
        old = self._marker_handles.pop(txn_id, None)
        if old is not None:
            old.cancel()
        loop = asyncio.get_running_loop()
        self._marker_handles[txn_id] = loop.call_later(delay_s, self._write_markers, txn_id)

    def _write_markers(self, txn_id: str) -> None:
        self._marker_handles.pop(txn_id, None)
        meta = self.txns.get(txn_id)
        if meta is None or not meta.state.is_prepared or not self.loaded:
            return
        committed = meta.state is TxnState.PREPARE_COMMIT
        left = set()
        for topic, index in meta.sorted_partitions():
            try:
                write_marker(self.broker, topic, index, meta.producer_id,
                             meta.producer_epoch, committed, COORDINATOR_EPOCH)
            except UnknownTopicOrPartitionError:
                pass  # deleted since it was added: nothing to mark (as Kafka)
            except BrokerResponseError as exc:
                log.warning("marker for %s on %s-%d failed (%s); retrying", txn_id, topic,
                            index, exc)
                left.add((topic, index))
        if left:
            # Markers already written stay written; the next pass writes the rest (and a
            # repeated one would find no open transaction).
            meta.partitions = left
            loop = asyncio.get_running_loop()
            self._marker_handles[txn_id] = loop.call_later(MARKER_RETRY_S,
                                                           self._write_markers, txn_id)
            return
        meta.state = TxnState.COMPLETE_COMMIT if committed else TxnState.COMPLETE_ABORT
        meta.partitions = set()
        self._complete(meta)
        log.debug("transaction %s %s", txn_id, meta.state.kafka_name)

    def _complete(self, meta: TxnMetadata) -> None:
        """Write the Complete* state; a v2 transaction whose epochs ran out moves to the
        producer id its EndTxn handed out (the old one is kept for a retry of it)."""
        if meta.next_producer_id >= 0:
            meta.previous_producer_id = meta.producer_id
            meta.producer_id, meta.producer_epoch = meta.next_producer_id, 0
            meta.next_producer_id = -1
            meta.last_epoch = -1
        self._write(meta)

    async def _abort_timed_out(self) -> None:
        config = self.broker.config
        last_expiry = self.broker.now_ms()
        while True:
            interval = int(config.get(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms"))
            await asyncio.sleep(interval / 1000)
            now = self.broker.now_ms()
            try:
                self.abort_timed_out(now)
                if now - last_expiry >= int(config.get(
                        "transaction.remove.expired.transaction.cleanup.interval.ms")):
                    last_expiry = now
                    self.expire_ids(now - int(config.get("transactional.id.expiration.ms")))
            except Exception:
                log.exception("transaction coordinator maintenance failed")

    def expire_ids(self, idle_since: int) -> list[str]:
        """Forget transactional ids without an open transaction, untouched since
        ``idle_since`` (``transactional.id.expiration.ms``): a tombstone each, as Kafka."""
        expired = [m.transactional_id for m in self.txns.values()
                   if m.state.is_complete and m.last_update_ms < idle_since]
        for txn_id in expired:
            self.state_log.write_tombstone(txn_id)
            del self.txns[txn_id]
            log.info("transactional id %s expired", txn_id)
        return expired

    def abort_timed_out(self, now: int) -> list[str]:
        """Abort (with an epoch bump) every Ongoing transaction past its timeout."""
        aborted = []
        for meta in list(self.txns.values()):
            if meta.state is TxnState.ONGOING and now - meta.start_ms > meta.timeout_ms:
                log.info("transaction %s timed out after %d ms: aborting",
                         meta.transactional_id, now - meta.start_ms)
                self._fence_and_abort(meta)
                aborted.append(meta.transactional_id)
        return aborted
