"""Admin calls for transactions: list, describe, the producers of a partition, and the
abort of a hanging transaction.

* ``list_transactions``: ListTransactions to every broker (each coordinator knows the
  transactional ids it owns), filtered by state, producer id or age (KIP-994);
* ``describe_transactions``: DescribeTransactions to each id's coordinator
  (FindCoordinator key_type=1);
* ``describe_producers``: DescribeProducers to each partition's leader: the producers
  with state there and, for those in an open transaction, where it started;
* ``abort_transaction``: WriteTxnMarkers(abort) to the partition's leader for one
  producer, as Java's ``Admin.abortTransaction`` does. For a *hanging* transaction (a
  partition whose coordinator forgot it, so the last stable offset never moves on);
  a transaction the coordinator still knows is ended by its producer or its timeout.
  Needs CLUSTER_ACTION on an authorizing cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sdk.admin.dispatch import Deadline, Dispatcher
from sdk.admin.results import ResultSet
from sdk.admin.topics import error_from
from sdk.errors import ItemsFailedError, KafkaError
from sdk.net import Coordinator
from sdk.net.targets import CoordinatorType, LeaderOf
from sdk.protocol.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
)
from sdk.protocol.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)
from sdk.protocol.messages.list_transactions import (
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from sdk.protocol.messages.write_txn_markers import (
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from sdk.types import TopicPartition

__all__ = ["AbortTransactionResult", "PartitionProducers", "ProducerState",
           "TransactionDescription", "TransactionListing", "abort_transaction",
           "describe_producers", "describe_transactions", "list_transactions"]

_LIST = ListTransactionsRequest.API_KEY
_DESCRIBE = DescribeTransactionsRequest.API_KEY
_PRODUCERS = DescribeProducersRequest.API_KEY
_MARKERS = WriteTxnMarkersRequest.API_KEY
_LIST_DURATION_FILTER = 1  # ListTransactions v1: duration_filter (KIP-994)


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str  # Kafka's names: Ongoing, PrepareCommit, CompleteAbort, Empty, ...
    coordinator: int  # the broker that answered


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    transactional_id: str
    state: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    timeout_ms: int = 0
    start_time_ms: int = -1  # -1 when no transaction is open
    partitions: tuple[TopicPartition, ...] = ()
    coordinator: int = -1
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int  # -1: no open transaction on this partition


@dataclass(frozen=True, slots=True)
class PartitionProducers:
    partition: TopicPartition
    producers: tuple[ProducerState, ...] = ()
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True)
class AbortTransactionResult:
    partition: TopicPartition
    producer_id: int
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True)
class _BrokerTransactions:
    node: int
    listings: tuple[TransactionListing, ...] = field(default=())
    error: KafkaError | None = None


async def list_transactions(d: Dispatcher, *, states: Sequence[str] | None,
                            producer_ids: Sequence[int] | None, min_duration_ms: int | None,
                            deadline: Deadline) -> dict[str, TransactionListing]:
    """Every transactional id of every broker, sorted; ItemsFailedError if a broker could
    not answer (a partial list would silently miss its ids)."""
    if isinstance(states, str):
        raise TypeError("states is a list of state names, not one string")
    await d.client.refresh_metadata(timeout_s=max(0.001, deadline.remaining()))
    nodes = sorted(d.client.metadata.brokers)
    min_version = _LIST_DURATION_FILTER if min_duration_ms is not None else 0

    async def send(node: int, _batch: list[int]) -> dict[int, _BrokerTransactions]:
        def build(_version: int) -> ListTransactionsRequest:
            return ListTransactionsRequest(
                state_filters=list(states or ()), producer_id_filters=list(producer_ids or ()),
                duration_filter=-1 if min_duration_ms is None else min_duration_ms)

        response: ListTransactionsResponse = await d.request(node, build, _LIST, deadline,
                                                             min_version=min_version)
        listings = tuple(TransactionListing(t.transactional_id, t.producer_id,
                                            t.transaction_state, node)
                         for t in response.transaction_states)
        return {node: _BrokerTransactions(node, listings, error_from(response.error_code))}

    results = await d.run_items(
        nodes, what="list transactions", deadline=deadline, route=lambda node: node,
        send=send, fail=lambda node, exc: _BrokerTransactions(node, error=exc),
        error_of=lambda r: r.error)
    failed = {f"broker {n}": r.error for n, r in results.items() if r.error is not None}
    if failed:
        raise ItemsFailedError("list transactions", failed, len(results))
    found = [t for r in results.values() for t in r.listings]
    return {t.transactional_id: t for t in sorted(found, key=lambda t: t.transactional_id)}


def _check_ids(ids: Sequence[str], what: str) -> list[str]:
    if isinstance(ids, str):
        raise TypeError(f"{what} takes a list of transactional ids, not one string")
    out = list(dict.fromkeys(ids))
    for t in out:
        if not isinstance(t, str) or not t:
            raise ValueError(f"{what}: every transactional id must be a non-empty string, "
                             f"not {t!r}")
    return out


async def describe_transactions(d: Dispatcher, transactional_ids: Sequence[str], *,
                                deadline: Deadline) -> ResultSet[str, TransactionDescription]:
    ids = _check_ids(transactional_ids, "describe_transactions")

    async def send(node: int, batch: list[str]) -> dict[str, TransactionDescription]:
        response: DescribeTransactionsResponse = await d.request(
            node, lambda _v: DescribeTransactionsRequest(transactional_ids=batch), _DESCRIBE,
            deadline)
        out: dict[str, TransactionDescription] = {}
        for t in response.transaction_states:
            parts = tuple(TopicPartition(topic.topic, p) for topic in t.topics
                          for p in topic.partitions)
            out[t.transactional_id] = TransactionDescription(
                t.transactional_id, t.transaction_state, t.producer_id, t.producer_epoch,
                t.transaction_timeout_ms, t.transaction_start_time_ms, parts, node,
                error_from(t.error_code))
        return out

    results = await d.run_items(
        ids, what="describe transactions", deadline=deadline,
        route=lambda t: Coordinator(t, CoordinatorType.TRANSACTION), send=send,
        fail=lambda t, exc: TransactionDescription(t, error=exc), error_of=lambda r: r.error)
    return ResultSet(results, "describe transactions")


def _check_partitions(partitions: Sequence[TopicPartition], what: str) -> list[TopicPartition]:
    out = list(dict.fromkeys(partitions))
    for tp in out:
        if not isinstance(tp, TopicPartition):
            raise TypeError(f"{what} takes TopicPartitions, not {tp!r}")
    return out


async def describe_producers(d: Dispatcher, partitions: Sequence[TopicPartition], *,
                             deadline: Deadline) -> ResultSet[TopicPartition, PartitionProducers]:
    wanted = _check_partitions(partitions, "describe_producers")

    async def send(_node: int, batch: list[TopicPartition]) -> dict[TopicPartition,
                                                                     PartitionProducers]:
        topics: dict[str, list[int]] = {}
        for tp in batch:
            topics.setdefault(tp.topic, []).append(tp.partition)
        request = DescribeProducersRequest(topics=[
            DescribeProducersRequest.TopicRequest(name=t, partition_indexes=ps)
            for t, ps in topics.items()])
        response: DescribeProducersResponse = await d.request(_node, lambda _v: request,
                                                              _PRODUCERS, deadline)
        out: dict[TopicPartition, PartitionProducers] = {}
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                out[tp] = PartitionProducers(tp, tuple(
                    ProducerState(s.producer_id, s.producer_epoch, s.last_sequence,
                                  s.last_timestamp, s.coordinator_epoch,
                                  s.current_txn_start_offset) for s in p.active_producers),
                    error_from(p.error_code, p.error_message))
        return out

    results = await d.run_items(
        wanted, what="describe producers", deadline=deadline,
        route=lambda tp: LeaderOf(tp.topic, tp.partition), send=send,
        fail=lambda tp, exc: PartitionProducers(tp, error=exc), error_of=lambda r: r.error)
    return ResultSet(results, "describe producers")


async def abort_transaction(d: Dispatcher, partition: TopicPartition, producer_id: int, *,
                            producer_epoch: int | None, coordinator_epoch: int | None,
                            deadline: Deadline) -> AbortTransactionResult:
    """WriteTxnMarkers(abort) for ``producer_id`` on ``partition``'s leader. The epochs
    default to what DescribeProducers reports for that producer there."""
    if not isinstance(partition, TopicPartition):
        raise TypeError(f"abort_transaction takes a TopicPartition, not {partition!r}")
    if producer_epoch is None or coordinator_epoch is None:
        described = (await describe_producers(d, [partition], deadline=deadline))[partition]
        if described.error is not None:
            return AbortTransactionResult(partition, producer_id, described.error)
        state = next((s for s in described.producers if s.producer_id == producer_id), None)
        if state is None:
            raise ValueError(f"producer {producer_id} has no state on {partition}: nothing "
                             "to abort there")
        producer_epoch = state.producer_epoch if producer_epoch is None else producer_epoch
        coordinator_epoch = (state.coordinator_epoch if coordinator_epoch is None
                             else coordinator_epoch)
    marker = WriteTxnMarkersRequest.WritableTxnMarker(
        producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
        coordinator_epoch=max(coordinator_epoch, 0),
        topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(
            name=partition.topic, partition_indexes=[partition.partition])])

    async def send(node: int, _batch: list[TopicPartition]
                   ) -> dict[TopicPartition, AbortTransactionResult]:
        response: WriteTxnMarkersResponse = await d.request(
            node, lambda _v: WriteTxnMarkersRequest(markers=[marker]), _MARKERS, deadline)
        code = next((p.error_code for m in response.markers for t in m.topics
                     for p in t.partitions), 0)
        return {partition: AbortTransactionResult(partition, producer_id, error_from(code))}

    results = await d.run_items(
        [partition], what="abort transaction", deadline=deadline,
        route=lambda tp: LeaderOf(tp.topic, tp.partition), send=send,
        fail=lambda tp, exc: AbortTransactionResult(tp, producer_id, exc),
        error_of=lambda r: r.error)
    return results[partition]
