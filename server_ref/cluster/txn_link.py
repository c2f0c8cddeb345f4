"""What a transaction coordinator needs across brokers in cluster mode.

* ``state_durable``: a ``__transaction_state`` write counts once the ISR of its partition
  has it (Kafka's coordinator appends with acks=-1); a failed wait is answered as Kafka's
  TransactionStateManager maps it (NOT_ENOUGH_REPLICAS[_AFTER_APPEND], REQUEST_TIMED_OUT,
  UNKNOWN_TOPIC_OR_PARTITION as COORDINATOR_NOT_AVAILABLE; NOT_LEADER_OR_FOLLOWER,
  KAFKA_STORAGE_ERROR as NOT_COORDINATOR), so clients find the coordinator again and retry.
* ``MarkerSender``: the COMMIT/ABORT markers of a transaction go to each partition's leader
  (WriteTxnMarkers over a broker-to-broker connection, or the local append path when this
  broker leads it), grouped per leader like Kafka's TransactionMarkerChannelManager; what
  is not written (no leader, a leader that moved or died, a timeout) is returned and sent
  again by the caller with the leaders of a newer metadata image.
* ``write_markers_here``: the WriteTxnMarkers side at a partition leader: append the
  control batch stamped with the leader epoch and answer once the ISR has it;
  NOT_LEADER_OR_FOLLOWER for a partition this broker does not lead.
* ``verify``: a partition leader asks the transactional id's coordinator whether a
  transactional batch may be appended (AddPartitionsToTxn v5, verify-only for v1 clients,
  adding the partition for transactions v2 clients: Kafka's AddPartitionsToTxnManager),
  or asks its own coordinator in-process when it is the coordinator too.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from sdk.errors import (
    BrokerResponseError,
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidProducerEpochError,
    KafkaError,
    KafkaStorageError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from sdk.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
)
from sdk.protocol.messages.write_txn_markers import (
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from server_ref.cluster.peer import PeerConnection
from server_ref.controller.image import NO_LEADER
from server_ref.offsets_journal import partition_for_group
from server_ref.transactions.markers import write_marker
from server_ref.transactions.statelog import STATE_TOPIC

if TYPE_CHECKING:
    from server_ref.broker import Broker
    from server_ref.topics import Partition

log = logging.getLogger(__name__)

__all__ = ["MarkerSender", "PeerPool", "state_durable", "verify", "write_markers_here"]

TopicPartition = tuple[str, int]
WRITE_TXN_MARKERS_VERSION = 1
ADD_PARTITIONS_VERSION = 5
REQUEST_TIMEOUT_S = 10.0
# Kafka's coordinator waits request.timeout.ms (30 s) for the ISR: a dead follower leaves
# the ISR only when the controller fences it, seconds later.
STATE_WRITE_TIMEOUT_MS = 30_000
NOT_AVAILABLE = CoordinatorNotAvailableError.errno
# Verification answers a producer retries (Kafka's produce path answers them as
# NOT_ENOUGH_REPLICAS: older clients know no other retriable code for them).
_RETRY_LATER = {NOT_AVAILABLE, NotCoordinatorError.errno,
                CoordinatorLoadInProgressError.errno, ConcurrentTransactionsError.errno}


def _state_error(error: KafkaError) -> int:
    if isinstance(error, (UnknownTopicOrPartitionError, NotEnoughReplicasError,
                          NotEnoughReplicasAfterAppendError, RequestTimedOutError)):
        return NOT_AVAILABLE
    if isinstance(error, (NotLeaderOrFollowerError, KafkaStorageError)):
        return NotCoordinatorError.errno
    return int(getattr(error, "errno", -1))


async def state_durable(broker: Broker, partition: Partition) -> int:
    """0 once the ISR of ``partition`` (of ``__transaction_state``) has its whole log, else
    the coordinator error to answer."""
    last = partition.log.log_end_offset - 1
    if last < 0:
        return 0
    timeout_ms = STATE_WRITE_TIMEOUT_MS
    error = await broker.cluster.replicas.wait_for_isr(partition, last, timeout_ms)
    if error is None:
        return 0
    code = _state_error(error)
    log.info("transaction state on %s not replicated (%s): answering error %d",
             partition.name, error, code)
    return code


class PeerPool:
    """One connection per broker, re-aimed when its endpoint changes."""

    def __init__(self, broker: Broker, purpose: str) -> None:
        self.broker = broker
        self.client_id = f"broker-{broker.node_id}-{purpose}"
        self._peers: dict[int, PeerConnection] = {}

    def to(self, node: int) -> PeerConnection | None:
        endpoint = self.broker.cluster.endpoint_of(node)
        if endpoint is None:
            return None
        peer = self._peers.get(node)
        if peer is None:
            peer = self._peers[node] = PeerConnection(endpoint[0], endpoint[1], self.client_id)
        peer.retarget(*endpoint)
        return peer

    async def close(self) -> None:
        for peer in self._peers.values():
            await peer.close()
        self._peers.clear()


# ---------------------------------------------------------------------------- markers


async def write_markers_here(broker: Broker, partitions: Iterable[TopicPartition],
                             producer_id: int, epoch: int, committed: bool,
                             coordinator_epoch: int) -> dict[TopicPartition, int]:
    """Append the marker to each partition this broker leads; per partition, 0 once the
    ISR has it, else the error code (the coordinator retries)."""
    codes: dict[TopicPartition, int] = {}
    waits: list[tuple[TopicPartition, Partition, int]] = []
    for topic, index in partitions:
        partition = broker.topics.partition(topic, index)
        if partition is None:
            codes[(topic, index)] = UnknownTopicOrPartitionError.errno
            continue
        replica = partition.replica
        if replica is None or not replica.is_leader:
            codes[(topic, index)] = NotLeaderOrFollowerError.errno
            continue
        try:
            write_marker(broker, topic, index, producer_id, epoch, committed,
                         coordinator_epoch)
        except BrokerResponseError as exc:
            codes[(topic, index)] = exc.errno
            continue
        waits.append(((topic, index), partition, partition.log.log_end_offset - 1))
    manager = broker.cluster.replicas
    outcomes = await asyncio.gather(*(
        manager.wait_for_isr(partition, last, STATE_WRITE_TIMEOUT_MS)
        for _key, partition, last in waits))
    for (key, _partition, _last), outcome in zip(waits, outcomes, strict=True):
        codes[key] = 0 if outcome is None else int(getattr(outcome, "errno", -1))
    return codes


class MarkerSender:
    """Sends one transaction's markers to the leaders of its partitions."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.peers = PeerPool(broker, "txn-markers")

    async def send(self, producer_id: int, epoch: int, committed: bool,
                   coordinator_epoch: int, partitions: Iterable[TopicPartition]
                   ) -> set[TopicPartition]:
        """One round; the partitions whose marker is not written yet."""
        image = self.broker.cluster.image
        by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
        left: set[TopicPartition] = set()
        for topic, index in partitions:
            found = image.topics.get(topic)
            p = None if found is None else found.partitions.get(index)
            if p is None:
                continue  # deleted since it joined the transaction: nothing to mark (Kafka)
            if p.leader == NO_LEADER:
                left.add((topic, index))
            else:
                by_leader[p.leader].append((topic, index))
        rounds = await asyncio.gather(*(
            self._to_leader(leader, parts, producer_id, epoch, committed, coordinator_epoch)
            for leader, parts in by_leader.items()))
        for codes in rounds:
            for key, code in codes.items():
                if code == 0:
                    continue
                if code == InvalidProducerEpochError.errno:
                    # A newer epoch of the producer already wrote there: this transaction was
                    # superseded (Kafka's channel drops such markers too).
                    log.warning("marker for producer %d epoch %d on %s-%d refused as stale",
                                producer_id, epoch, *key)
                    continue
                if code == UnknownTopicOrPartitionError.errno and key[0] not in image.topics:
                    continue
                left.add(key)
        return left

    async def _to_leader(self, leader: int, parts: list[TopicPartition], producer_id: int,
                         epoch: int, committed: bool, coordinator_epoch: int
                         ) -> dict[TopicPartition, int]:
        failed = dict.fromkeys(parts, NotLeaderOrFollowerError.errno)
        if leader == self.broker.node_id:
            return await write_markers_here(self.broker, parts, producer_id, epoch, committed,
                                            coordinator_epoch)
        peer = self.peers.to(leader)
        if peer is None:
            return failed
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, index in parts:
            by_topic[topic].append(index)
        request = WriteTxnMarkersRequest(markers=[WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=producer_id, producer_epoch=epoch, transaction_result=committed,
            coordinator_epoch=coordinator_epoch,
            topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=t, partition_indexes=i)
                    for t, i in by_topic.items()])])
        try:
            response = await peer.request(request, WRITE_TXN_MARKERS_VERSION, REQUEST_TIMEOUT_S)
        except (ConnectionError, OSError, TimeoutError) as exc:
            log.info("markers to broker %d failed: %s", leader, exc)
            return failed
        assert isinstance(response, WriteTxnMarkersResponse)
        codes = dict(failed)
        for marker in response.markers:
            for topic_result in marker.topics:
                for pr in topic_result.partitions:
                    codes[(topic_result.name, pr.partition_index)] = pr.error_code
        return codes

    async def close(self) -> None:
        await self.peers.close()


# ---------------------------------------------------------------------------- verification


async def verify(broker: Broker, peers: PeerPool, txn_id: str, producer_id: int,
                 epoch: int, partitions: list[TopicPartition], add: bool
                 ) -> dict[TopicPartition, int]:
    """Per partition: 0 when a transactional batch (or transactional offsets) of the
    producer may be appended there; ``add`` lets the partition join the open transaction
    (transactions v2). Errors the caller should retry come back as NOT_ENOUGH_REPLICAS."""
    coordinator = broker.transactions
    assert coordinator is not None
    if coordinator.owns(txn_id):
        codes = coordinator.verify_or_add(txn_id, producer_id, epoch, partitions, add)
        if add and not any(codes.values()):
            code = await coordinator.durable(txn_id)
            if code:
                codes = dict.fromkeys(partitions, code)
    else:
        codes = await _ask_coordinator(broker, peers, txn_id, producer_id, epoch, partitions,
                                       add)
    retry = NotEnoughReplicasError.errno
    return {p: retry if c in _RETRY_LATER else c for p, c in codes.items()}


async def _ask_coordinator(broker: Broker, peers: PeerPool, txn_id: str, producer_id: int,
                           epoch: int, partitions: list[TopicPartition], add: bool
                           ) -> dict[TopicPartition, int]:
    unavailable = dict.fromkeys(partitions, NOT_AVAILABLE)
    state = broker.cluster.image.topics.get(STATE_TOPIC)
    if state is None or not state.partitions:
        return unavailable
    p = state.partitions.get(partition_for_group(txn_id, len(state.partitions)))
    if p is None or p.leader in (NO_LEADER, broker.node_id):
        return unavailable  # no leader, or it is this broker, still loading
    peer = peers.to(p.leader)
    if peer is None:
        return unavailable
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, index in partitions:
        by_topic[topic].append(index)
    request = AddPartitionsToTxnRequest(transactions=[
        AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
            transactional_id=txn_id, producer_id=producer_id, producer_epoch=epoch,
            verify_only=not add,
            topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=i)
                    for t, i in by_topic.items()])])
    try:
        response = await peer.request(request, ADD_PARTITIONS_VERSION, REQUEST_TIMEOUT_S)
    except (ConnectionError, OSError, TimeoutError) as exc:
        log.info("verification with coordinator %d failed: %s", p.leader, exc)
        return unavailable
    assert isinstance(response, AddPartitionsToTxnResponse)
    if response.error_code:
        return dict.fromkeys(partitions, response.error_code)
    codes = dict(unavailable)
    for result in response.results_by_transaction:
        for topic_result in result.topic_results:
            for pr in topic_result.results_by_partition:
                codes[(topic_result.name, pr.partition_index)] = pr.partition_error_code
    return codes
