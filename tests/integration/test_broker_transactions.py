"""The transaction coordinator's answers to raw requests, the same sequence sent to our
broker and to Apache Kafka (one node), which must give the same error codes: timeouts
checked at InitProducerId, unknown partitions, EndTxn with nothing open, a new instance
aborting the open transaction (CONCURRENT_TRANSACTIONS, then the bumped epoch), a fenced
epoch per API version (PRODUCER_FENCED from KIP-588's versions, INVALID_PRODUCER_EPOCH
before), unknown producer ids, TxnOffsetCommit's KIP-447 member check,
DescribeTransactions / ListTransactions.

tansu is not a target here: its transaction answers differ (see
tests/integration/test_transactions.py, where they are asserted); this file pins our
broker to Kafka's codes.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from sdk.errors import (
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    IllegalGenerationError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    NotCoordinatorError,
    OperationNotAttemptedError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionalIdNotFoundError,
    TransactionCoordinatorFencedError,
    UnknownTopicOrPartitionError,
)
from sdk.net.client import NetClient
from sdk.net.config import CommonConfig
from sdk.net.targets import Coordinator, CoordinatorType, LeaderOf
from sdk.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from sdk.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest as APT
from sdk.protocol.messages.describe_producers import DescribeProducersRequest
from sdk.protocol.messages.describe_transactions import DescribeTransactionsRequest
from sdk.protocol.messages.end_txn import EndTxnRequest
from sdk.protocol.messages.init_producer_id import InitProducerIdRequest
from sdk.protocol.messages.list_offsets import ListOffsetsRequest
from sdk.protocol.messages.list_transactions import ListTransactionsRequest
from sdk.protocol.messages.produce import ProduceRequest
from sdk.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest as TOC
from sdk.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from sdk.records.builder import RecordBatchBuilder

from .conftest import Target, create_topic, new_topic, start_target

_NOT_READY = {CoordinatorLoadInProgressError.errno, CoordinatorNotAvailableError.errno,
              NotCoordinatorError.errno}


@pytest.fixture(scope="module", params=["ref", "kafka"])
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    with start_target(request.param) as started:
        yield started


class Raw:
    """Raw requests to the transaction coordinator of one transactional id."""

    def __init__(self, client: NetClient, txn_id: str) -> None:
        self.client = client
        self.txn_id = txn_id
        self.route = Coordinator(txn_id, CoordinatorType.TRANSACTION)

    async def call(self, request: Any, version: int, retry: set[int] = _NOT_READY) -> Any:
        deadline = time.monotonic() + 30
        while True:
            response = await self.client.call(request, self.route, max_version=version,
                                              timeout_s=20)
            code = getattr(response, "error_code", 0)
            if code not in retry or time.monotonic() > deadline:
                return response
            await asyncio.sleep(0.2)

    async def init(self, timeout_ms: int = 60000, version: int = 4,
                   retry: set[int] = _NOT_READY, **fields: Any) -> Any:
        return await self.call(InitProducerIdRequest(
            transactional_id=self.txn_id, transaction_timeout_ms=timeout_ms, **fields),
            version, retry)

    async def add(self, pid: int, epoch: int, topic: str, partitions: list[int],
                  version: int = 3) -> list[int]:
        response = await self.call(APT(
            v3_and_below_transactional_id=self.txn_id, v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
                APT.AddPartitionsToTxnTopic(name=topic, partitions=partitions)]), version)
        return [p.partition_error_code for t in response.results_by_topic_v3_and_below
                for p in sorted(t.results_by_partition, key=lambda r: r.partition_index)]

    async def end(self, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
        response = await self.call(EndTxnRequest(
            transactional_id=self.txn_id, producer_id=pid, producer_epoch=epoch,
            committed=commit), version)
        return int(response.error_code)


async def _sequence(target: Target) -> list[tuple[str, object]]:
    """The answers, labelled, to one fixed sequence of requests."""
    topic = new_topic("txn-raw")
    await create_topic(target.bootstrap_servers, topic, 2)
    client = NetClient(CommonConfig.build(bootstrap_servers=target.bootstrap_servers))
    await client.start()
    out: list[tuple[str, object]] = []
    try:
        raw = Raw(client, f"raw-{uuid.uuid4().hex[:8]}")
        too_long = await raw.init(timeout_ms=(1 << 31) - 1)
        out.append(("init timeout too long", too_long.error_code))
        first = await raw.init()
        out.append(("init", (first.error_code, first.producer_epoch)))
        pid = first.producer_id
        out.append(("add unknown partition", await raw.add(pid, 0, topic, [0, 9])))
        out.append(("end while empty", await raw.end(pid, 0, commit=True)))
        out.append(("add", await raw.add(pid, 0, topic, [0, 1])))
        out.append(("add again", await raw.add(pid, 0, topic, [1])))
        out.append(("unknown producer id", await raw.add(pid + 12345, 0, topic, [0])))
        busy = await raw.init(retry=_NOT_READY)
        out.append(("new instance while open", busy.error_code))
        retried = await raw.init(retry=_NOT_READY | {ConcurrentTransactionsError.errno})
        out.append(("new instance", (retried.error_code, retried.producer_id == pid,
                                     retried.producer_epoch)))
        out.append(("zombie add v1", await raw.add(pid, 0, topic, [0], version=1)))
        out.append(("zombie add v2", await raw.add(pid, 0, topic, [0], version=2)))
        out.append(("zombie end v1", await raw.end(pid, 0, commit=True, version=1)))
        out.append(("zombie end v3", await raw.end(pid, 0, commit=True, version=3)))
        epoch = retried.producer_epoch
        stale = await raw.init(producer_id=pid, producer_epoch=epoch - 1)
        out.append(("stale KIP-360 bump v4", stale.error_code))
        stale3 = await raw.init(version=3, producer_id=pid, producer_epoch=epoch - 1)
        out.append(("stale KIP-360 bump v3", stale3.error_code))
        bumped = await raw.init(producer_id=pid, producer_epoch=epoch)
        out.append(("KIP-360 bump", (bumped.error_code, bumped.producer_epoch - epoch)))
        epoch = bumped.producer_epoch
        out.append(("add after bump", await raw.add(pid, epoch, topic, [0])))

        async def produce(partition: int, seq: int, produce_epoch: int,
                          version: int = 11) -> int:
            builder = RecordBatchBuilder(producer_id=pid, producer_epoch=produce_epoch,
                                         base_sequence=seq, is_transactional=True)
            builder.append(None, None, None, b"v")
            response = await client.call(ProduceRequest(
                transactional_id=raw.txn_id, acks=-1, timeout_ms=10000, topic_data=[
                    ProduceRequest.TopicProduceData(name=topic, partition_data=[
                        ProduceRequest.PartitionProduceData(index=partition,
                                                            records=builder.build())])]),
                LeaderOf(topic, partition), max_version=version, timeout_s=20)
            return int(response.responses[0].partition_responses[0].error_code)

        out.append(("produce to an added partition", await produce(0, 0, epoch)))
        out.append(("produce to a partition not added", await produce(1, 0, epoch)))
        out.append(("produce to a partition not added v9", await produce(1, 0, epoch, 9)))
        out.append(("produce with an old epoch", await produce(0, 1, epoch - 1)))
        ongoing = (await raw.call(DescribeTransactionsRequest(
            transactional_ids=[raw.txn_id]), 0)).transaction_states[0]
        out.append(("describe ongoing", (ongoing.transaction_state, ongoing.producer_epoch == epoch,
                                         [(t.topic == topic, t.partitions) for t in ongoing.topics],
                                         ongoing.transaction_start_time_ms > 0)))
        producers = await client.call(DescribeProducersRequest(topics=[
            DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[0])]),
            LeaderOf(topic, 0), timeout_s=20)
        states = producers.topics[0].partitions[0].active_producers
        out.append(("describe producers", [(s.producer_id == pid, s.producer_epoch == epoch,
                                            s.last_sequence, s.coordinator_epoch,
                                            s.current_txn_start_offset) for s in states]))
        group = f"g-{raw.txn_id}"
        added = await raw.call(AddOffsetsToTxnRequest(
            transactional_id=raw.txn_id, producer_id=pid, producer_epoch=epoch,
            group_id=group), 3)
        out.append(("add offsets", added.error_code))

        async def txn_commit(generation: int, member: str, version: int = 3) -> int:
            for _ in range(100):  # Kafka's group coordinator may still be loading
                code = await txn_commit_once(generation, member, version)
                if code not in _NOT_READY:
                    break
                await asyncio.sleep(0.2)
            return code

        async def txn_commit_once(generation: int, member: str, version: int) -> int:
            response = await client.call(TOC(
                transactional_id=raw.txn_id, group_id=group, producer_id=pid,
                producer_epoch=epoch, generation_id=generation, member_id=member,
                topics=[TOC.TxnOffsetCommitRequestTopic(name=topic, partitions=[
                    TOC.TxnOffsetCommitRequestPartition(partition_index=0,
                                                        committed_offset=3)])]),
                Coordinator(group), max_version=version, timeout_s=20)
            return int(response.topics[0].partitions[0].error_code)

        out.append(("txn offset commit, unknown member", await txn_commit(5, "nobody")))
        out.append(("txn offset commit, simple", await txn_commit(-1, "")))
        out.append(("abort", await raw.end(pid, epoch, commit=False)))
        out.append(("commit after abort", await raw.end(
            pid, epoch, commit=True)))  # CONCURRENT while completing, then INVALID_TXN_STATE
        described = await raw.call(DescribeTransactionsRequest(
            transactional_ids=[raw.txn_id, "no-such-id-" + raw.txn_id]), 0)
        states = {s.transactional_id: s for s in described.transaction_states}
        mine = states[raw.txn_id]
        out.append(("describe", (mine.error_code, mine.producer_id == pid,
                                 mine.transaction_timeout_ms)))
        out.append(("describe unknown",
                    states["no-such-id-" + raw.txn_id].error_code))
        by_pid = await raw.call(ListTransactionsRequest(producer_id_filters=[pid],
                                                        duration_filter=0), 1)
        long_running = await raw.call(ListTransactionsRequest(
            producer_id_filters=[pid], duration_filter=3_600_000), 1)
        out.append(("list by producer id, duration 0",
                    [s.transaction_state for s in by_pid.transaction_states]))
        out.append(("list by producer id, running an hour",
                    [s.transaction_state for s in long_running.transaction_states]))
        listed = await raw.call(ListTransactionsRequest(state_filters=["NoSuchState"]), 1)
        out.append(("list unknown state", (listed.error_code, listed.unknown_state_filters,
                                           len(listed.transaction_states))))
    finally:
        await client.close()
    return out


def test_raw_transaction_answers_match_kafka(target: Target) -> None:
    answers = dict(asyncio.run(_sequence(target)))
    fenced, old_epoch = ProducerFencedError.errno, InvalidProducerEpochError.errno
    concurrent, invalid_state = ConcurrentTransactionsError.errno, InvalidTxnStateError.errno
    assert answers["init timeout too long"] == InvalidTransactionTimeoutError.errno
    assert answers["init"] == (0, 0)
    assert answers["add unknown partition"] == [OperationNotAttemptedError.errno,
                                                UnknownTopicOrPartitionError.errno]
    assert answers["end while empty"] == invalid_state
    assert answers["add"] == [0, 0]
    assert answers["add again"] == [0]
    assert answers["unknown producer id"] == [InvalidProducerIdMappingError.errno]
    assert answers["new instance while open"] == concurrent
    # The open transaction is aborted under epoch 1, the new instance gets epoch 2.
    assert answers["new instance"] == (0, True, 2)
    assert answers["zombie add v1"] == [old_epoch]
    assert answers["zombie add v2"] == [fenced]
    assert answers["zombie end v1"] == old_epoch
    assert answers["zombie end v3"] == fenced
    assert answers["stale KIP-360 bump v4"] == fenced
    assert answers["stale KIP-360 bump v3"] == old_epoch
    assert answers["KIP-360 bump"] == (0, 1)
    assert answers["add after bump"] == [0]
    assert answers["add offsets"] == 0
    assert answers["produce to an added partition"] == 0
    # Kafka's partition verification: TRANSACTION_ABORTABLE from Produce v11 (KIP-890).
    assert answers["produce to a partition not added"] == TransactionAbortableError.errno
    assert answers["produce to a partition not added v9"] == invalid_state
    assert answers["produce with an old epoch"] == old_epoch
    assert answers["txn offset commit, unknown member"] == IllegalGenerationError.errno
    assert answers["txn offset commit, simple"] == 0
    assert answers["abort"] == 0
    assert answers["commit after abort"] in (concurrent, invalid_state)
    assert answers["describe"] == (0, True, 60000)
    assert answers["describe unknown"] == TransactionalIdNotFoundError.errno
    assert answers["list unknown state"] == (0, ["NoSuchState"], 0)
    assert answers["describe ongoing"] == ("Ongoing", True, [(True, [0])], True)
    # The record at offset 1 (after the fencing abort's marker at 0) opened the transaction.
    assert answers["describe producers"] == [(True, True, 0, 0, 1)]
    # KIP-994's duration filter counts from the transaction's start, whatever its state.
    assert answers["list by producer id, duration 0"] in (["CompleteAbort"], ["PrepareAbort"])
    assert answers["list by producer id, running an hour"] == []


async def _v2_commit_then_stale_writes(target: Target) -> dict[str, object]:
    """Transactions v2: a commit (markers under epoch + 1), then writes of the old epoch and
    a marker from an older coordinator epoch, sent straight to the partition's leader."""
    topic = new_topic("txn-fence")
    await create_topic(target.bootstrap_servers, topic, 1)
    client = NetClient(CommonConfig.build(bootstrap_servers=target.bootstrap_servers))
    await client.start()
    out: dict[str, object] = {}
    leader = LeaderOf(topic, 0)
    try:
        raw = Raw(client, f"fence-{uuid.uuid4().hex[:8]}")
        first = await raw.init(version=5)
        pid, epoch = first.producer_id, first.producer_epoch

        async def produce(seq: int, produce_epoch: int, transactional: bool) -> int:
            builder = RecordBatchBuilder(producer_id=pid, producer_epoch=produce_epoch,
                                         base_sequence=seq, is_transactional=transactional)
            builder.append(None, None, None, b"v")
            response = await client.call(ProduceRequest(
                transactional_id=raw.txn_id if transactional else None, acks=-1,
                timeout_ms=10000, topic_data=[ProduceRequest.TopicProduceData(
                    name=topic, partition_data=[ProduceRequest.PartitionProduceData(
                        index=0, records=builder.build())])]),
                leader, max_version=12, timeout_s=20)
            return int(response.responses[0].partition_responses[0].error_code)

        async def producer_state() -> tuple[int, int]:
            response = await client.call(DescribeProducersRequest(topics=[
                DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[0])]),
                leader, timeout_s=20)
            states = response.topics[0].partitions[0].active_producers
            assert [s.producer_id for s in states] == [pid]
            return states[0].producer_epoch - epoch, states[0].coordinator_epoch

        async def log_end() -> int:
            response = await client.call(ListOffsetsRequest(replica_id=-1, topics=[
                ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                    ListOffsetsRequest.ListOffsetsPartition(partition_index=0,
                                                            timestamp=-1)])]),
                leader, timeout_s=20)
            return int(response.topics[0].partitions[0].offset)

        out["produce v12"] = await produce(0, epoch, transactional=True)
        out["producer while open"] = await producer_state()
        ended = await raw.call(EndTxnRequest(transactional_id=raw.txn_id, producer_id=pid,
                                             producer_epoch=epoch, committed=True), 5)
        out["end v5"] = (ended.error_code, ended.producer_epoch - epoch)
        deadline = time.monotonic() + 30  # Kafka writes the markers after its answer
        while (await producer_state())[0] != 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        state_after = await producer_state()
        out["producer after commit"] = state_after
        out["idempotent batch, old epoch"] = await produce(1, epoch, transactional=False)
        end_before = await log_end()
        W = WriteTxnMarkersRequest
        marker = await client.call(W(markers=[W.WritableTxnMarker(
            producer_id=pid, producer_epoch=epoch + 1, transaction_result=False,
            coordinator_epoch=state_after[1] - 1,
            topics=[W.WritableTxnMarkerTopic(name=topic, partition_indexes=[0])])]),
            leader, max_version=1, timeout_s=20)
        out["marker, older coordinator epoch"] = \
            marker.markers[0].topics[0].partitions[0].error_code
        out["written since"] = await log_end() - end_before
    finally:
        await client.close()
    return out


def test_a_v2_commit_fences_the_old_epoch_and_older_coordinators(target: Target) -> None:
    answers = asyncio.run(_v2_commit_then_stale_writes(target))
    assert answers["produce v12"] == 0
    # A partition's producer knows no coordinator epoch until a marker was written.
    assert answers["producer while open"] == (0, -1)
    assert answers["end v5"] == (0, 1)
    # The marker carried epoch + 1 and the coordinator's epoch (0 on one node: the first
    # leader epoch of its __transaction_state partition).
    assert answers["producer after commit"] == (1, 0)
    assert answers["idempotent batch, old epoch"] == InvalidProducerEpochError.errno
    assert answers["marker, older coordinator epoch"] == \
        TransactionCoordinatorFencedError.errno
    assert answers["written since"] == 0
