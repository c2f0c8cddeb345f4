"""Transaction APIs over :class:`~server_ref.transactions.TransactionCoordinator`:
InitProducerId v0-v5 (idempotent and transactional), AddPartitionsToTxn v0-v5 (v4+: the
brokers' batched, verify-only form), AddOffsetsToTxn v0-v4, EndTxn v0-v5, WriteTxnMarkers
v0-v1, TxnOffsetCommit v0-v5, DescribeTransactions v0, ListTransactions v0-v1.

Transactions v1 and v2 (KIP-890 part 2): ApiVersions advertises the finalized feature
``transaction.version`` 2 (``transaction_features``), so a v2 client sends Produce v12+
(the partition joins its transaction there, see ``handlers/produce.py``), TxnOffsetCommit v5
without AddOffsetsToTxn, and EndTxn v5, whose answer carries the bumped epoch. v1 clients
(AddPartitionsToTxn, EndTxn <= v4) are served as before.

Cluster mode: a transactional id is served by the leader of its ``__transaction_state``
partition (NOT_COORDINATOR elsewhere), and each answer that wrote state waits until the
ISR has it; WriteTxnMarkers is served at partition leaders and answered after the ISR;
AddPartitionsToTxn v4+ comes from partition leaders verifying (or, for transactions v2,
adding) a producer's partition; TxnOffsetCommit at the group coordinator verifies with the
transaction coordinator wherever it is (``cluster/txn_link.py``).

PRODUCER_FENCED exists from InitProducerId v4, AddPartitionsToTxn/AddOffsetsToTxn/EndTxn v2
(KIP-588); older versions get INVALID_PRODUCER_EPOCH in its place, as Kafka answers them.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

from sdk import errors
from sdk.protocol.messages.add_offsets_to_txn import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
)
from sdk.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
)
from sdk.protocol.messages.api_versions import ApiVersionsResponse
from sdk.protocol.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)
from sdk.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from sdk.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from sdk.protocol.messages.list_transactions import (
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from sdk.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from sdk.protocol.messages.write_txn_markers import (
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from server_ref.groups import OffsetToCommit
from server_ref.handlers import RequestContext, handles
from server_ref.transactions import TransactionCoordinator, TxnState
from server_ref.transactions.markers import write_marker

APTResponse = AddPartitionsToTxnResponse
TRANSACTION_VERSION = 2  # the highest transaction.version this broker serves



def transaction_features() -> dict[str, Any]:
    """ApiVersions v3+ fields (tagged): the feature naming the transaction protocol, levels
    0-2 supported and 2 finalized, as Apache Kafka 4.x formats a new cluster.

    Test hook: ``SERVER_REF_TRANSACTION_VERSION`` finalizes another level (0 or 1, what
    ``kafka-storage format --feature transaction.version=1`` does to Kafka), so clients pick
    transactions v1; the v2 request versions stay served, as Kafka serves them."""
    level = int(os.environ.get("SERVER_REF_TRANSACTION_VERSION", TRANSACTION_VERSION))
    finalized = [] if level <= 0 else [ApiVersionsResponse.FinalizedFeatureKey(
        name="transaction.version", min_version_level=level, max_version_level=level)]
    return {
        "supported_features": [ApiVersionsResponse.SupportedFeatureKey(
            name="transaction.version", min_version=0, max_version=TRANSACTION_VERSION)],
        "finalized_features_epoch": 1,
        "finalized_features": finalized,
    }
_FENCED = errors.ProducerFencedError.errno
_OLD_EPOCH = errors.InvalidProducerEpochError.errno


def _coordinator(ctx: RequestContext) -> TransactionCoordinator:
    coordinator = ctx.broker.transactions
    if coordinator is None:  # set by Broker.open(), before any request is served
        raise RuntimeError("the broker's transaction coordinator is not started")
    return coordinator


def _code(exc: errors.BrokerResponseError, fenced_from: int, version: int) -> int:
    """The error code, PRODUCER_FENCED as INVALID_PRODUCER_EPOCH below ``fenced_from``."""
    if exc.errno == _FENCED and version < fenced_from:
        return _OLD_EPOCH
    return exc.errno


def _run(ctx: RequestContext, fenced_from: int, call: Callable[[], object]) -> tuple[int, str | None]:
    try:
        call()
    except errors.BrokerResponseError as exc:
        return _code(exc, fenced_from, ctx.api_version), str(exc.message or exc)
    return 0, None


# ---------------------------------------------------------------------------- InitProducerId


@handles(22, 0, 5)
def init_producer_id(ctx: RequestContext, req: InitProducerIdRequest
                     ) -> InitProducerIdResponse | Awaitable[InitProducerIdResponse]:
    if not req.transactional_id:  # null, or "" from lenient clients: an idempotent producer
        allocator = ctx.broker.producer_ids
        assert allocator is not None
        # As Kafka does for idempotent producers: always a fresh id (even when the request
        # names the current one to bump its epoch), with epoch 0.
        try:
            return InitProducerIdResponse(producer_id=allocator.allocate(), producer_epoch=0)
        except errors.BrokerResponseError as exc:  # cluster mode: no block of ids yet
            return InitProducerIdResponse(error_code=exc.errno, producer_id=-1,
                                          producer_epoch=-1)
    v = ctx.api_version
    try:
        pid, epoch = _coordinator(ctx).init_producer_id(
            req.transactional_id, req.transaction_timeout_ms,
            req.producer_id if v >= 3 else -1, req.producer_epoch if v >= 3 else -1)
    except errors.BrokerResponseError as exc:
        return InitProducerIdResponse(error_code=_code(exc, 4, v), producer_id=-1,
                                      producer_epoch=-1)
    response = InitProducerIdResponse(producer_id=pid, producer_epoch=epoch)
    if ctx.broker.cluster is not None:
        return _when_durable(ctx, req.transactional_id, response, lambda code:
                             InitProducerIdResponse(error_code=code, producer_id=-1,
                                                    producer_epoch=-1))
    return response


async def _when_durable(ctx: RequestContext, txn_id: str, response: Any,
                        failed: Callable[[int], Any]) -> Any:
    """Cluster mode: ``response`` once the ISR has the id's state record, else ``failed``
    with the coordinator error (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE)."""
    code = await _coordinator(ctx).durable(txn_id)
    return failed(code) if code else response


# ---------------------------------------------------------------------------- AddPartitionsToTxn


def _topic_results(partitions: dict[tuple[str, int], int]) -> list[Any]:
    by_topic: dict[str, list[Any]] = {}
    for (topic, index), code in partitions.items():
        by_topic.setdefault(topic, []).append(APTResponse.AddPartitionsToTxnPartitionResult(
            partition_index=index, partition_error_code=code))
    return [APTResponse.AddPartitionsToTxnTopicResult(name=topic, results_by_partition=parts)
            for topic, parts in by_topic.items()]


def _add_partitions(ctx: RequestContext, txn_id: str, pid: int, epoch: int, topics: list[Any],
                    verify_only: bool) -> dict[tuple[str, int], int]:
    wanted = list(dict.fromkeys((t.name, i) for t in topics for i in t.partitions))
    broker = ctx.broker
    missing = [p for p in wanted if broker.topics.partition(*p) is None]
    internal = [p for p in wanted if p[0] == "__transaction_state"]
    if missing or internal:
        # As Kafka: nothing is added; the bad ones are named, the rest not attempted.
        codes = dict.fromkeys(wanted, errors.OperationNotAttemptedError.errno)
        codes.update(dict.fromkeys(missing, errors.UnknownTopicOrPartitionError.errno))
        codes.update(dict.fromkeys(internal, errors.InvalidTopicError.errno))
        return codes
    coordinator = _coordinator(ctx)
    try:
        if verify_only:
            return coordinator.verify_partitions(txn_id, pid, epoch, wanted)
        # v4+ comes from partition leaders: without verify_only, a transactions v2
        # producer's partition joins with its first batch (KIP-890).
        coordinator.add_partitions(txn_id, pid, epoch, wanted,
                                   client_version=2 if ctx.api_version >= 4 else 0)
    except errors.BrokerResponseError as exc:
        return dict.fromkeys(wanted, _code(exc, 2, ctx.api_version))
    return dict.fromkeys(wanted, 0)


async def _codes_when_durable(ctx: RequestContext, txn_id: str,
                              codes: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """Cluster mode: the successes stand once the ISR has the id's state record."""
    if not codes or any(codes.values()):
        return codes
    code = await _coordinator(ctx).durable(txn_id)
    return dict.fromkeys(codes, code) if code else codes


@handles(24, 0, 5)
def add_partitions_to_txn(ctx: RequestContext, req: AddPartitionsToTxnRequest
                          ) -> AddPartitionsToTxnResponse | Awaitable[AddPartitionsToTxnResponse]:
    if ctx.broker.cluster is not None:
        return _add_partitions_in_cluster(ctx, req)
    if ctx.api_version <= 3:
        codes = _add_partitions(ctx, req.v3_and_below_transactional_id,
                                req.v3_and_below_producer_id, req.v3_and_below_producer_epoch,
                                req.v3_and_below_topics, verify_only=False)
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_topic_results(codes))
    results = []
    for txn in req.transactions:
        codes = _add_partitions(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                txn.topics, verify_only=txn.verify_only)
        results.append(APTResponse.AddPartitionsToTxnResult(
            transactional_id=txn.transactional_id, topic_results=_topic_results(codes)))
    return AddPartitionsToTxnResponse(results_by_transaction=results)


async def _add_partitions_in_cluster(ctx: RequestContext, req: AddPartitionsToTxnRequest
                                     ) -> AddPartitionsToTxnResponse:
    if ctx.api_version <= 3:
        txn_id = req.v3_and_below_transactional_id
        codes = _add_partitions(ctx, txn_id, req.v3_and_below_producer_id,
                                req.v3_and_below_producer_epoch, req.v3_and_below_topics,
                                verify_only=False)
        codes = await _codes_when_durable(ctx, txn_id, codes)
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_topic_results(codes))
    results = []
    for txn in req.transactions:
        codes = _add_partitions(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                txn.topics, verify_only=txn.verify_only)
        if not txn.verify_only:
            codes = await _codes_when_durable(ctx, txn.transactional_id, codes)
        results.append(APTResponse.AddPartitionsToTxnResult(
            transactional_id=txn.transactional_id, topic_results=_topic_results(codes)))
    return AddPartitionsToTxnResponse(results_by_transaction=results)


# ---------------------------------------------------------------------------- AddOffsetsToTxn


@handles(25, 0, 4)
def add_offsets_to_txn(ctx: RequestContext, req: AddOffsetsToTxnRequest
                       ) -> AddOffsetsToTxnResponse | Awaitable[AddOffsetsToTxnResponse]:
    if not req.group_id:
        return AddOffsetsToTxnResponse(error_code=errors.InvalidGroupIdError.errno)
    code, _ = _run(ctx, 2, lambda: _coordinator(ctx).add_offsets(
        req.transactional_id, req.producer_id, req.producer_epoch, req.group_id))
    if ctx.broker.cluster is not None and code == 0:
        return _when_durable(ctx, req.transactional_id, AddOffsetsToTxnResponse(),
                             lambda c: AddOffsetsToTxnResponse(error_code=c))
    return AddOffsetsToTxnResponse(error_code=code)


# ---------------------------------------------------------------------------- EndTxn


@handles(26, 0, 5)
def end_txn(ctx: RequestContext, req: EndTxnRequest) -> EndTxnResponse | Awaitable[EndTxnResponse]:
    """v5 (transactions v2): the epoch is bumped and the answer names the next pair."""
    bump = ctx.api_version >= 5
    pair: list[tuple[int, int]] = []
    code, _ = _run(ctx, 2, lambda: pair.append(_coordinator(ctx).end_txn(
        req.transactional_id, req.producer_id, req.producer_epoch, req.committed, bump=bump)))
    if ctx.broker.cluster is not None and not code:
        return _end_txn_in_cluster(ctx, req, pair[0] if bump else None)
    if bump and not code:
        return EndTxnResponse(producer_id=pair[0][0], producer_epoch=pair[0][1])
    return EndTxnResponse(error_code=code)


V2_MARKERS_WAIT_S = 5.0


async def _end_txn_in_cluster(ctx: RequestContext, req: EndTxnRequest,
                              pair: tuple[int, int] | None) -> EndTxnResponse:
    """Answered once the ISR has the Prepare* record; transactions v2 also waits (a little)
    for the markers, as on a single node, so the producer's next transaction rarely meets
    CONCURRENT_TRANSACTIONS."""
    coordinator = _coordinator(ctx)
    code = await coordinator.durable(req.transactional_id)
    if code:
        return EndTxnResponse(error_code=code)
    if pair is None:
        return EndTxnResponse()
    await coordinator.markers_written(req.transactional_id, V2_MARKERS_WAIT_S)
    return EndTxnResponse(producer_id=pair[0], producer_epoch=pair[1])


# ---------------------------------------------------------------------------- WriteTxnMarkers


@handles(27, 0, 1)
def write_txn_markers(ctx: RequestContext, req: WriteTxnMarkersRequest
                      ) -> WriteTxnMarkersResponse | Awaitable[WriteTxnMarkersResponse]:
    """Markers from a transaction coordinator (ours writes its own; this serves another
    coordinator, or a tool). Same append path as the coordinator's."""
    if ctx.broker.cluster is not None:
        return _write_txn_markers_in_cluster(ctx, req)
    out = []
    for marker in req.markers:
        topics = []
        for topic in marker.topics:
            parts = []
            for index in topic.partition_indexes:
                try:
                    write_marker(ctx.broker, topic.name, index, marker.producer_id,
                                 marker.producer_epoch, marker.transaction_result,
                                 marker.coordinator_epoch)
                    code = 0
                except errors.BrokerResponseError as exc:
                    code = exc.errno
                parts.append(WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult(
                    partition_index=index, error_code=code))
            topics.append(WriteTxnMarkersResponse.WritableTxnMarkerTopicResult(
                name=topic.name, partitions=parts))
        out.append(WriteTxnMarkersResponse.WritableTxnMarkerResult(
            producer_id=marker.producer_id, topics=topics))
    return WriteTxnMarkersResponse(markers=out)


async def _write_txn_markers_in_cluster(ctx: RequestContext, req: WriteTxnMarkersRequest
                                        ) -> WriteTxnMarkersResponse:
    """At the partitions' leader: each marker appended and answered once the ISR has it;
    NOT_LEADER_OR_FOLLOWER where this broker does not lead (the coordinator retries)."""
    from server_ref.cluster.txn_link import write_markers_here

    out = []
    for marker in req.markers:
        wanted = [(t.name, i) for t in marker.topics for i in t.partition_indexes]
        codes = await write_markers_here(ctx.broker, wanted, marker.producer_id,
                                         marker.producer_epoch, marker.transaction_result,
                                         marker.coordinator_epoch)
        by_topic: dict[str, list[Any]] = {}
        for (name, index) in wanted:
            by_topic.setdefault(name, []).append(
                WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult(
                    partition_index=index, error_code=codes[(name, index)]))
        out.append(WriteTxnMarkersResponse.WritableTxnMarkerResult(
            producer_id=marker.producer_id, topics=[
                WriteTxnMarkersResponse.WritableTxnMarkerTopicResult(name=n, partitions=p)
                for n, p in by_topic.items()]))
    return WriteTxnMarkersResponse(markers=out)


# ---------------------------------------------------------------------------- TxnOffsetCommit


@handles(28, 0, 5)
def txn_offset_commit(ctx: RequestContext, req: TxnOffsetCommitRequest
                      ) -> TxnOffsetCommitResponse | Awaitable[TxnOffsetCommitResponse]:
    """v5 (transactions v2): the group joins the transaction here (no AddOffsetsToTxn)."""
    v = ctx.api_version
    requested = [(t.name, p) for t in req.topics for p in t.partitions]
    codes: dict[tuple[str, int], int] = {}
    to_stage: dict[tuple[str, int], OffsetToCommit] = {}
    for name, p in requested:
        key = (name, p.partition_index)
        if not ctx.broker.partition_exists(*key):
            codes[key] = errors.UnknownTopicOrPartitionError.errno
        else:
            to_stage[key] = OffsetToCommit(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch if v >= 2 else -1,
                metadata=p.committed_metadata)
    if to_stage and ctx.broker.cluster is not None:
        return _txn_offset_commit_in_cluster(ctx, req, requested, codes, to_stage)
    if to_stage:
        groups = ctx.broker.groups
        assert groups is not None
        try:
            if v >= 5:
                _coordinator(ctx).add_offsets(req.transactional_id, req.producer_id,
                                              req.producer_epoch, req.group_id,
                                              client_version=2)
            _coordinator(ctx).check_offset_commit(req.transactional_id, req.producer_id,
                                                  req.producer_epoch, req.group_id)
        except errors.BrokerResponseError as exc:
            codes.update(dict.fromkeys(to_stage, exc.errno))
        else:
            codes.update(_stage(ctx, req, to_stage))
    return _txn_offset_commit_response(requested, codes)


def _stage(ctx: RequestContext, req: TxnOffsetCommitRequest,
           to_stage: dict[tuple[str, int], OffsetToCommit]) -> dict[tuple[str, int], int]:
    # KIP-447: from v3 the member's generation is checked like a member commit; a member of
    # a group that does not exist is ILLEGAL_GENERATION (as Kafka answers).
    v = ctx.api_version
    groups = ctx.broker.groups
    assert groups is not None
    staged = groups.stage_transactional_offsets(
        req.group_id, req.producer_id, to_stage,
        generation_id=req.generation_id if v >= 3 else -1,
        member_id=req.member_id if v >= 3 else "",
        group_instance_id=req.group_instance_id if v >= 3 else None,
        producer_epoch=req.producer_epoch)
    missing = errors.GroupIdNotFoundError.errno
    return {k: errors.IllegalGenerationError.errno if c == missing else c
            for k, c in staged.items()}


_VERIFY_RETRY = {errors.NotEnoughReplicasError.errno}


async def _txn_offset_commit_in_cluster(
        ctx: RequestContext, req: TxnOffsetCommitRequest,
        requested: list[tuple[str, Any]], codes: dict[tuple[str, int], int],
        to_stage: dict[tuple[str, int], OffsetToCommit]) -> TxnOffsetCommitResponse:
    """At the group coordinator (the leader of the group's ``__consumer_offsets``
    partition), which may not be the transaction coordinator: the producer and its open
    transaction are verified with the latter (v5: the partition joins it), the offsets are
    staged as transactional records and answered once the ISR has them. The COMMIT marker
    the transaction coordinator sends to this partition applies them."""
    from server_ref.cluster.coordinators import replicated
    from server_ref.cluster.txn_link import verify

    broker = ctx.broker
    coordinator = _coordinator(ctx)
    try:
        partition = broker.offsets_journal.partition_for(req.group_id)
        replica = partition.replica
        if replica is None or not replica.is_leader:
            raise errors.NotCoordinatorError(
                f"this broker is not the coordinator of group {req.group_id}")
    except errors.BrokerResponseError as exc:
        codes.update(dict.fromkeys(to_stage, exc.errno))
        return _txn_offset_commit_response(requested, codes)
    key = (partition.topic.name, partition.index)
    verdict = (await verify(broker, coordinator._cluster.peers, req.transactional_id,
                            req.producer_id, req.producer_epoch, [key],
                            add=ctx.api_version >= 5))[key]
    if verdict:
        # Retry-later answers make the client find the coordinators again and retry.
        code = errors.CoordinatorNotAvailableError.errno if verdict in _VERIFY_RETRY \
            else verdict
        codes.update(dict.fromkeys(to_stage, code))
        return _txn_offset_commit_response(requested, codes)
    staged = _stage(ctx, req, to_stage)
    codes.update(await replicated(broker, partition, staged))
    return _txn_offset_commit_response(requested, codes)


def _txn_offset_commit_response(requested: list[tuple[str, Any]],
                                codes: dict[tuple[str, int], int]) -> TxnOffsetCommitResponse:
    by_topic: dict[str, list[Any]] = {}
    for name, p in requested:
        by_topic.setdefault(name, []).append(TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition(
            partition_index=p.partition_index, error_code=codes[(name, p.partition_index)]))
    return TxnOffsetCommitResponse(topics=[
        TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(name=name, partitions=parts)
        for name, parts in by_topic.items()])


# ---------------------------------------------------------------------------- admin


@handles(65, 0, 0)
def describe_transactions(ctx: RequestContext, req: DescribeTransactionsRequest
                          ) -> DescribeTransactionsResponse:
    coordinator = _coordinator(ctx)
    states = []
    for txn_id in req.transactional_ids:
        meta = coordinator.txns.get(txn_id)
        if not coordinator.loaded:
            code = errors.CoordinatorLoadInProgressError.errno
        elif not coordinator.owns(txn_id):  # cluster mode: another broker coordinates it
            code = errors.NotCoordinatorError.errno
        elif meta is None or meta.state is TxnState.DEAD:
            code = errors.TransactionalIdNotFoundError.errno
        else:
            code = 0
        if code:
            states.append(DescribeTransactionsResponse.TransactionState(
                error_code=code, transactional_id=txn_id, transaction_state="",
                transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1,
                producer_epoch=-1))
            continue
        assert meta is not None
        by_topic: dict[str, list[int]] = {}
        for topic, index in meta.sorted_partitions():
            by_topic.setdefault(topic, []).append(index)
        states.append(DescribeTransactionsResponse.TransactionState(
            transactional_id=txn_id, transaction_state=meta.state.kafka_name,
            transaction_timeout_ms=meta.timeout_ms, transaction_start_time_ms=meta.start_ms,
            producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
            topics=[DescribeTransactionsResponse.TopicData(topic=t, partitions=p)
                    for t, p in by_topic.items()]))
    return DescribeTransactionsResponse(transaction_states=states)


@handles(66, 0, 1)
def list_transactions(ctx: RequestContext, req: ListTransactionsRequest
                      ) -> ListTransactionsResponse:
    coordinator = _coordinator(ctx)
    if not coordinator.loaded:
        return ListTransactionsResponse(
            error_code=errors.CoordinatorLoadInProgressError.errno)
    unknown = [s for s in req.state_filters if TxnState.from_kafka_name(s) is None]
    known = [s for s in req.state_filters if s not in unknown]
    if unknown and not known:
        listed = []  # only unknown states asked for: none can match
    else:
        listed = coordinator.listing(known, req.producer_id_filters,
                                  req.duration_filter if ctx.api_version >= 1 else -1)
    return ListTransactionsResponse(
        unknown_state_filters=unknown,
        transaction_states=[ListTransactionsResponse.TransactionState(
            transactional_id=m.transactional_id, producer_id=m.producer_id,
            transaction_state=m.state.kafka_name) for m in listed])
