"""The transaction coordinator on the wire (raw requests, in-process broker): the state
machine, Kafka's error codes per version, markers, read_committed fetches, transactional
offsets, timeouts and reload from ``__transaction_state``.

Third-party clients (confluent-kafka, Kafka's Java console consumer) and SIGKILLed broker
processes are in tests/interop/test_transactions_peers.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from broker_kit import Served, batches_of
from test_broker_produce import create_topic, partition_result, produce_request

from sdk import errors
from sdk.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from sdk.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from sdk.protocol.messages.describe_producers import DescribeProducersRequest
from sdk.protocol.messages.describe_transactions import DescribeTransactionsRequest
from sdk.protocol.messages.end_txn import EndTxnRequest
from sdk.protocol.messages.fetch import FetchRequest
from sdk.protocol.messages.find_coordinator import FindCoordinatorRequest
from sdk.protocol.messages.init_producer_id import InitProducerIdRequest
from sdk.protocol.messages.list_offsets import ListOffsetsRequest
from sdk.protocol.messages.list_transactions import ListTransactionsRequest
from sdk.protocol.messages.offset_fetch import OffsetFetchRequest
from sdk.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from sdk.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from sdk.records.builder import RecordBatchBuilder
from server_ref.transactions import STATE_TOPIC, TxnState

READ_COMMITTED, READ_UNCOMMITTED = 1, 0
APT = AddPartitionsToTxnRequest


def txn_batch(pid: int, epoch: int, seq: int, values: list[bytes]) -> bytes:
    builder = RecordBatchBuilder(0, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                 is_transactional=True)
    for value in values:
        builder.append(None, None, None, value)
    return builder.build()


async def init(client: Any, txn_id: str = "tx", timeout_ms: int = 60000,
               version: int = 4, **fields: Any) -> Any:
    return await client.call(InitProducerIdRequest(
        transactional_id=txn_id, transaction_timeout_ms=timeout_ms, **fields), version)


async def add(client: Any, pid: int, epoch: int, topic: str, partitions: list[int],
              txn_id: str = "tx", version: int = 3) -> list[int]:
    response = await client.call(APT(
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
            APT.AddPartitionsToTxnTopic(name=topic, partitions=partitions)]), version)
    return [p.partition_error_code for t in response.results_by_topic_v3_and_below
            for p in t.results_by_partition]


async def end(client: Any, pid: int, epoch: int, commit: bool, txn_id: str = "tx",
              version: int = 3) -> int:
    response = await client.call(EndTxnRequest(transactional_id=txn_id, producer_id=pid,
                                               producer_epoch=epoch, committed=commit), version)
    return int(response.error_code)


async def eventually(check: Callable[[], bool | Awaitable[bool]], timeout_s: float = 10) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        outcome = check()
        if not isinstance(outcome, bool):
            outcome = await outcome
        if outcome:
            return
        assert asyncio.get_running_loop().time() < deadline, "condition never held"
        await asyncio.sleep(0.02)


def state_of(served: Served, txn_id: str = "tx") -> TxnState:
    coordinator = served.b.transactions
    assert coordinator is not None
    return coordinator.txns[txn_id].state


async def fetch(client: Any, topic: str, partition: int, isolation: int) -> Any:
    response = await client.call(FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
        isolation_level=isolation, topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
            FetchRequest.FetchPartition(partition=partition, fetch_offset=0,
                                        partition_max_bytes=1 << 20)])]), 11)
    return response.responses[0].partitions[0]


def data_values(records: bytes | None) -> list[bytes]:
    return [r.value for b in batches_of(records) if not b.is_control for r in b.records()]


async def test_commit_and_abort_write_markers_and_read_committed_sees_only_commits(
        served: Served) -> None:
    await create_topic(served, "t", partitions=2)
    client = await served.client()
    found = await client.call(FindCoordinatorRequest(key="tx", key_type=1), 3)
    assert found.error_code == 0 and found.node_id == served.b.node_id
    first = await init(client)
    assert first.error_code == 0 and first.producer_epoch == 0
    pid = first.producer_id
    assert await add(client, pid, 0, "t", [0, 1]) == [0, 0]
    for p in (0, 1):
        result = partition_result(await client.call(produce_request(
            "t", txn_batch(pid, 0, 0, [b"c1", b"c2"]), partition=p, transactional_id="tx")))
        assert result.error_code == 0
    # Open: read_committed sees nothing, its ListOffsets latest is the LSO (0).
    open_fetch = await fetch(client, "t", 0, READ_COMMITTED)
    assert open_fetch.last_stable_offset == 0 and open_fetch.high_watermark == 2
    assert data_values(open_fetch.records) == []
    dirty = await fetch(client, "t", 0, READ_UNCOMMITTED)  # the LSO is in every answer
    assert (dirty.last_stable_offset, data_values(dirty.records)) == (0, [b"c1", b"c2"])
    latest = await client.call(ListOffsetsRequest(replica_id=-1, isolation_level=1, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name="t", partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])]), 5)
    assert latest.topics[0].partitions[0].offset == 0
    assert await end(client, pid, 0, commit=True) == 0
    await eventually(lambda: state_of(served) is TxnState.COMPLETE_COMMIT)
    assert await end(client, pid, 0, commit=True) == 0  # a retry of the completed commit
    assert await end(client, pid, 0, commit=False) == errors.InvalidTxnStateError.errno

    # Second transaction, aborted.
    assert await add(client, pid, 0, "t", [0]) == [0]
    result = partition_result(await client.call(produce_request(
        "t", txn_batch(pid, 0, 2, [b"a1"]), partition=0, transactional_id="tx")))
    assert result.error_code == 0 and result.base_offset == 3  # after 2 records + marker
    assert await end(client, pid, 0, commit=False) == 0
    await eventually(lambda: state_of(served) is TxnState.COMPLETE_ABORT)
    committed = await fetch(client, "t", 0, READ_COMMITTED)
    assert committed.last_stable_offset == committed.high_watermark == 5
    assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions] == \
        [(pid, 3)]
    markers = [b for b in batches_of(committed.records) if b.is_control]
    assert len(markers) == 2
    uncommitted = await fetch(client, "t", 0, READ_UNCOMMITTED)
    assert data_values(uncommitted.records) == [b"c1", b"c2", b"a1"]
    assert uncommitted.aborted_transactions is None


async def test_fencing_and_error_codes_per_version(served: Served) -> None:
    await create_topic(served, "t")
    client = await served.client()
    old = await init(client)
    pid = old.producer_id
    assert await add(client, pid, 0, "t", [0]) == [0]
    assert partition_result(await client.call(produce_request(
        "t", txn_batch(pid, 0, 0, [b"zombie"]), transactional_id="tx"))).error_code == 0
    # A new instance while a transaction is open: aborted under a bumped epoch first.
    busy = await init(client)
    assert busy.error_code == errors.ConcurrentTransactionsError.errno
    await eventually(lambda: state_of(served) is TxnState.COMPLETE_ABORT)
    new = await init(client)
    assert new.error_code == 0 and new.producer_id == pid and new.producer_epoch == 2
    # The zombie (epoch 0): PRODUCER_FENCED from v2 (KIP-588), INVALID_PRODUCER_EPOCH before.
    assert await add(client, pid, 0, "t", [0], version=2) == [errors.ProducerFencedError.errno]
    assert await add(client, pid, 0, "t", [0], version=1) == \
        [errors.InvalidProducerEpochError.errno]
    assert await end(client, pid, 0, True, version=1) == errors.InvalidProducerEpochError.errno
    assert await end(client, pid, 0, True, version=3) == errors.ProducerFencedError.errno
    late = partition_result(await client.call(produce_request(
        "t", txn_batch(pid, 0, 1, [b"late"]), transactional_id="tx")))
    assert late.error_code == errors.InvalidProducerEpochError.errno
    # KIP-360 bump with the current id and epoch; a stale epoch is fenced (v3 says so as
    # INVALID_PRODUCER_EPOCH, v4 as PRODUCER_FENCED).
    bumped = await init(client, producer_id=pid, producer_epoch=2)
    assert (bumped.error_code, bumped.producer_epoch) == (0, 3)
    stale = await init(client, producer_id=pid, producer_epoch=1)
    assert stale.error_code == errors.ProducerFencedError.errno
    stale_v3 = await init(client, version=3, producer_id=pid, producer_epoch=1)
    assert stale_v3.error_code == errors.InvalidProducerEpochError.errno
    other = await add(client, pid + 100, 3, "t", [0])
    assert other == [errors.InvalidProducerIdMappingError.errno]
    # Records after the abort marker: only the aborted one is in the log, and listed.
    committed = await fetch(client, "t", 0, READ_COMMITTED)
    assert [a.first_offset for a in committed.aborted_transactions] == [0]


async def test_bad_requests_get_kafka_errors(make_served: Callable[..., Awaitable[Served]]
                                             ) -> None:
    served = await make_served(transaction_max_timeout_ms=5000)
    await create_topic(served, "t")
    client = await served.client()
    too_long = await init(client, timeout_ms=5001)
    assert too_long.error_code == errors.InvalidTransactionTimeoutError.errno
    pid = (await init(client, timeout_ms=5000)).producer_id
    assert await add(client, pid, 0, "t", [0, 7]) == [
        errors.OperationNotAttemptedError.errno, errors.UnknownTopicOrPartitionError.errno]
    assert await end(client, pid, 0, True) == errors.InvalidTxnStateError.errno  # Empty
    # A transactional batch to a partition not added (TRANSACTION_ABORTABLE from Produce
    # v11, INVALID_TXN_STATE before); one without the transactional id.
    assert partition_result(await client.call(produce_request(
        "t", txn_batch(pid, 0, 0, [b"x"]), transactional_id="tx"), 11)).error_code == \
        errors.TransactionAbortableError.errno
    assert partition_result(await client.call(produce_request(
        "t", txn_batch(pid, 0, 0, [b"x"]), transactional_id="tx"), 9)).error_code == \
        errors.InvalidTxnStateError.errno
    assert partition_result(await client.call(produce_request(
        "t", txn_batch(pid, 0, 0, [b"x"])))).error_code == \
        errors.TransactionalIdAuthorizationFailedError.errno
    # The v4+ verify-only (broker) path reports membership and adds nothing.
    assert await add(client, pid, 0, "t", [0]) == [0]
    verify = await client.call(APT(transactions=[APT.AddPartitionsToTxnTransaction(
        transactional_id="tx", producer_id=pid, producer_epoch=0, verify_only=True,
        topics=[APT.AddPartitionsToTxnTopic(name="t", partitions=[0])])]), 4)
    codes = [p.partition_error_code for r in verify.results_by_transaction
             for t in r.topic_results for p in t.results_by_partition]
    assert codes == [0]


async def test_transactional_offsets_are_visible_only_at_commit(served: Served) -> None:
    await create_topic(served, "in")
    client = await served.client()
    pid = (await init(client)).producer_id
    offset_commit = TxnOffsetCommitRequest(
        transactional_id="tx", group_id="g", producer_id=pid, producer_epoch=0,
        generation_id=-1, member_id="", topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(
            name="in", partitions=[TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=42)])])

    async def committed(require_stable: bool = False) -> tuple[int, int]:
        response = await client.call(OffsetFetchRequest(
            group_id="g", require_stable=require_stable, topics=[
                OffsetFetchRequest.OffsetFetchRequestTopic(name="in", partition_indexes=[0])]),
            7)
        part = response.topics[0].partitions[0]
        return part.committed_offset, part.error_code

    # Before AddOffsetsToTxn the group is not in the transaction.
    early = await client.call(offset_commit, 3)
    assert early.topics[0].partitions[0].error_code == errors.InvalidTxnStateError.errno
    added = await client.call(AddOffsetsToTxnRequest(
        transactional_id="tx", producer_id=pid, producer_epoch=0, group_id="g"), 3)
    assert added.error_code == 0
    staged = await client.call(offset_commit, 3)
    assert staged.topics[0].partitions[0].error_code == 0
    assert await committed() == (-1, 0)
    assert await committed(require_stable=True) == \
        (-1, errors.UnstableOffsetCommitError.errno)
    assert await end(client, pid, 0, commit=True) == 0
    await eventually(lambda: state_of(served) is TxnState.COMPLETE_COMMIT)
    assert await committed() == (42, 0)
    # An aborted one leaves the committed offset alone.
    assert (await client.call(AddOffsetsToTxnRequest(
        transactional_id="tx", producer_id=pid, producer_epoch=0, group_id="g"), 3)
            ).error_code == 0
    offset_commit.topics[0].partitions[0].committed_offset = 99
    assert (await client.call(offset_commit, 3)).topics[0].partitions[0].error_code == 0
    assert await end(client, pid, 0, commit=False) == 0
    await eventually(lambda: state_of(served) is TxnState.COMPLETE_ABORT)
    assert await committed() == (42, 0)


async def test_timed_out_transaction_is_aborted_and_its_producer_fenced(
        make_served: Callable[..., Awaitable[Served]]) -> None:
    served = await make_served(
        transaction_abort_timed_out_transaction_cleanup_interval_ms=50)
    await create_topic(served, "t")
    client = await served.client()
    pid = (await init(client, timeout_ms=300)).producer_id
    assert await add(client, pid, 0, "t", [0]) == [0]
    assert partition_result(await client.call(produce_request(
        "t", txn_batch(pid, 0, 0, [b"late"]), transactional_id="tx"))).error_code == 0
    await eventually(lambda: state_of(served) is TxnState.COMPLETE_ABORT)
    meta = served.b.transactions.txns["tx"]  # type: ignore[union-attr]
    assert meta.producer_epoch == 1  # bumped: the producer is fenced
    assert await end(client, pid, 0, commit=True) == errors.ProducerFencedError.errno
    part = await fetch(client, "t", 0, READ_COMMITTED)
    # As Kafka: the aborted records are sent, with the list the consumer drops them by.
    assert part.last_stable_offset == 2
    assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(pid, 0)]


async def test_state_reloads_and_prepared_transactions_complete_after_restart(
        served: Served) -> None:
    await create_topic(served, "t", partitions=2)
    client = await served.client()
    pid = (await init(client)).producer_id
    pid2 = (await init(client, txn_id="open")).producer_id
    assert await add(client, pid, 0, "t", [0, 1]) == [0, 0]
    assert await add(client, pid2, 0, "t", [1], txn_id="open") == [0]
    for p in (0, 1):
        assert partition_result(await client.call(produce_request(
            "t", txn_batch(pid, 0, 0, [b"v"]), partition=p, transactional_id="tx"))
        ).error_code == 0
    # Offsets in the transaction too: journaled as transactional records, decided by the
    # marker written after the restart.
    assert (await client.call(AddOffsetsToTxnRequest(
        transactional_id="tx", producer_id=pid, producer_epoch=0, group_id="g"), 3)
            ).error_code == 0
    staged = await client.call(TxnOffsetCommitRequest(
        transactional_id="tx", group_id="g", producer_id=pid, producer_epoch=0, topics=[
            TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name="t", partitions=[
                TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                    partition_index=0, committed_offset=7)])]), 3)
    assert staged.topics[0].partitions[0].error_code == 0
    coordinator = served.b.transactions
    assert coordinator is not None
    coordinator._marker_delay_s = 3600  # PrepareCommit is written; markers are not yet
    assert await end(client, pid, 0, commit=True) == 0
    assert state_of(served) is TxnState.PREPARE_COMMIT
    assert (await fetch(client, "t", 0, READ_COMMITTED)).last_stable_offset == 0
    await served.restart()
    client = await served.client()
    await eventually(lambda: state_of(served) is TxnState.COMPLETE_COMMIT)
    assert state_of(served, "open") is TxnState.ONGOING
    fetched = await client.call(OffsetFetchRequest(group_id="g", topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0])]), 7)
    assert fetched.topics[0].partitions[0].committed_offset == 7
    for p in (0, 1):
        assert data_values((await fetch(client, "t", p, READ_COMMITTED)).records) == [b"v"]
    described = await client.call(DescribeTransactionsRequest(
        transactional_ids=["open", "tx", "nope"]), 0)
    by_id = {s.transactional_id: s for s in described.transaction_states}
    assert by_id["open"].transaction_state == "Ongoing"
    assert [(t.topic, t.partitions) for t in by_id["open"].topics] == [("t", [1])]
    assert by_id["tx"].transaction_state == "CompleteCommit"
    assert by_id["nope"].error_code == errors.TransactionalIdNotFoundError.errno
    listed = await client.call(ListTransactionsRequest(state_filters=["Ongoing", "Bogus"]), 1)
    assert [(s.transactional_id, s.transaction_state) for s in listed.transaction_states] == \
        [("open", "Ongoing")]
    assert listed.unknown_state_filters == ["Bogus"]
    producers = await client.call(DescribeProducersRequest(topics=[
        DescribeProducersRequest.TopicRequest(name="t", partition_indexes=[1])]), 0)
    states = {s.producer_id: s for s in producers.topics[0].partitions[0].active_producers}
    assert pid2 not in states  # added the partition, produced nothing
    assert states[pid].current_txn_start_offset == -1  # its transaction is committed
    assert served.b.topics.get(STATE_TOPIC) is not None


async def test_write_txn_markers_handler_appends_through_the_same_path(
        served: Served) -> None:
    await create_topic(served, "t")
    client = await served.client()
    pid = (await init(client)).producer_id
    assert await add(client, pid, 0, "t", [0]) == [0]
    assert partition_result(await client.call(produce_request(
        "t", txn_batch(pid, 0, 0, [b"v"]), transactional_id="tx"))).error_code == 0
    producers = await client.call(DescribeProducersRequest(topics=[
        DescribeProducersRequest.TopicRequest(name="t", partition_indexes=[0])]), 0)
    state = producers.topics[0].partitions[0].active_producers[0]
    # No marker yet: no coordinator epoch (Kafka answers -1 too, see
    # tests/integration/test_broker_transactions.py).
    assert (state.producer_id, state.current_txn_start_offset, state.coordinator_epoch) == \
        (pid, 0, -1)
    W = WriteTxnMarkersRequest
    response = await client.call(W(markers=[W.WritableTxnMarker(
        producer_id=pid, producer_epoch=0, transaction_result=True, coordinator_epoch=0,
        topics=[W.WritableTxnMarkerTopic(name="t", partition_indexes=[0, 5])])]), 1)
    codes = [p.error_code for t in response.markers[0].topics for p in t.partitions]
    assert codes == [0, errors.UnknownTopicOrPartitionError.errno]
    part = await fetch(client, "t", 0, READ_COMMITTED)
    assert part.last_stable_offset == 2 and data_values(part.records) == [b"v"]


async def test_idle_transactional_ids_expire(make_served: Callable[..., Awaitable[Served]]
                                             ) -> None:
    served = await make_served(
        transaction_abort_timed_out_transaction_cleanup_interval_ms=50,
        transaction_remove_expired_transaction_cleanup_interval_ms=100,
        transactional_id_expiration_ms=300)
    await create_topic(served, "t")
    client = await served.client()
    pid = (await init(client, "idle")).producer_id
    busy = (await init(client, "busy", timeout_ms=60000)).producer_id
    assert await add(client, busy, 0, "t", [0], txn_id="busy") == [0]
    coordinator = served.b.transactions
    assert coordinator is not None
    await eventually(lambda: "idle" not in coordinator.txns)
    assert "busy" in coordinator.txns  # an open transaction keeps its id
    await served.restart()  # the tombstone holds across a reload
    assert "idle" not in served.b.transactions.txns  # type: ignore[union-attr]
    client = await served.client()
    again = await init(client, "idle")
    assert again.error_code == 0 and again.producer_id != pid and again.producer_epoch == 0
