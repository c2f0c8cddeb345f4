"""Transactions v2 (KIP-890 part 2) on the reference broker, raw requests: the feature it
advertises, partitions joining with Produce v12, the group with TxnOffsetCommit v5, EndTxn
v5's epoch bump (markers under the new epoch, the old one fenced), its retries, and the
move to a new producer id when the epochs run out, also across a restart."""

from __future__ import annotations

import pytest
from broker_kit import Served
from test_broker_produce import create_topic, partition_result, produce_request
from test_broker_transactions import (
    READ_COMMITTED,
    data_values,
    fetch,
    init,
    state_of,
    txn_batch,
)

from sdk import errors
from sdk.protocol.messages.api_versions import ApiVersionsRequest
from sdk.protocol.messages.end_txn import EndTxnRequest
from sdk.protocol.messages.offset_fetch import OffsetFetchRequest
from sdk.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from server_ref.transactions import TxnState
from server_ref.transactions.state import MAX_EPOCH


async def end_v5(client: object, pid: int, epoch: int, commit: bool) -> object:
    return await client.call(EndTxnRequest(  # type: ignore[attr-defined]
        transactional_id="tx", producer_id=pid, producer_epoch=epoch, committed=commit), 5)


async def produce_v12(client: object, pid: int, epoch: int, seq: int, value: bytes,
                      partition: int = 0) -> int:
    response = await client.call(produce_request(  # type: ignore[attr-defined]
        "t", txn_batch(pid, epoch, seq, [value]), partition=partition,
        transactional_id="tx"), 12)
    return int(partition_result(response).error_code)  # type: ignore[attr-defined]


async def test_api_versions_advertise_transaction_version_2(served: Served) -> None:
    client = await served.client()
    response = await client.call(ApiVersionsRequest(client_software_name="t",
                                                    client_software_version="1"), 3)
    assert [(f.name, f.min_version, f.max_version) for f in response.supported_features] == \
        [("transaction.version", 0, 2)]
    assert [(f.name, f.min_version_level, f.max_version_level)
            for f in response.finalized_features] == [("transaction.version", 2, 2)]
    tops = {k.api_key: k.max_version for k in response.api_keys}
    assert (tops[0], tops[26], tops[28]) == (12, 5, 5)  # Produce, EndTxn, TxnOffsetCommit


async def test_a_broker_at_transaction_version_1_says_so(
        served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVER_REF_TRANSACTION_VERSION", "1")
    client = await served.client()
    response = await client.call(ApiVersionsRequest(client_software_name="t",
                                                    client_software_version="1"), 3)
    assert [(f.name, f.max_version_level) for f in response.finalized_features] == \
        [("transaction.version", 1)]


async def test_produce_v12_adds_the_partition_and_end_txn_v5_bumps_the_epoch(
        served: Served) -> None:
    await create_topic(served, "t", partitions=2)
    client = await served.client()
    first = await init(client)
    pid, epoch = first.producer_id, first.producer_epoch
    # No AddPartitionsToTxn: the batches add their partitions.
    assert await produce_v12(client, pid, epoch, 0, b"c1", 0) == 0
    assert await produce_v12(client, pid, epoch, 0, b"c2", 1) == 0
    assert state_of(served) is TxnState.ONGOING
    assert served.b.transactions.txns["tx"].partitions == {("t", 0), ("t", 1)}  # type: ignore[union-attr]
    ended = await end_v5(client, pid, epoch, commit=True)
    assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (0, pid, epoch + 1)
    # The markers were written before the answer, under the new epoch.
    assert state_of(served) is TxnState.COMPLETE_COMMIT
    assert data_values((await fetch(client, "t", 0, READ_COMMITTED)).records) == [b"c1"]
    # A retry of that EndTxn (old epoch) gets the same answer; the other outcome is refused.
    again = await end_v5(client, pid, epoch, commit=True)
    assert (again.error_code, again.producer_epoch) == (0, epoch + 1)
    assert (await end_v5(client, pid, epoch, commit=False)).error_code == \
        errors.InvalidTxnStateError.errno
    # A late batch of the ended transaction (old epoch) is refused; the next one starts at
    # sequence 0 under the new epoch, and an abort ends it.
    assert await produce_v12(client, pid, epoch, 1, b"late") == \
        errors.InvalidProducerEpochError.errno
    assert await produce_v12(client, pid, epoch + 1, 0, b"a1") == 0
    aborted = await end_v5(client, pid, epoch + 1, commit=False)
    assert (aborted.error_code, aborted.producer_epoch) == (0, epoch + 2)
    stable = await fetch(client, "t", 0, READ_COMMITTED)  # c1, marker, a1, marker
    assert stable.last_stable_offset == stable.high_watermark == 4
    assert [(a.producer_id, a.first_offset) for a in stable.aborted_transactions] == [(pid, 2)]
    # Committing with nothing produced is refused; aborting it still moves the epoch on.
    assert (await end_v5(client, pid, epoch + 2, commit=True)).error_code == \
        errors.InvalidTxnStateError.errno
    empty = await end_v5(client, pid, epoch + 2, commit=False)
    assert (empty.error_code, empty.producer_epoch) == (0, epoch + 3)


async def test_txn_offset_commit_v5_adds_the_group(served: Served) -> None:
    await create_topic(served, "t")
    client = await served.client()
    first = await init(client)
    pid, epoch = first.producer_id, first.producer_epoch
    response = await client.call(TxnOffsetCommitRequest(
        transactional_id="tx", group_id="g", producer_id=pid, producer_epoch=epoch,
        topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name="t", partitions=[
            TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=7)])]), 5)
    assert response.topics[0].partitions[0].error_code == 0
    assert (await end_v5(client, pid, epoch, commit=True)).error_code == 0
    fetched = await client.call(OffsetFetchRequest(groups=[
        OffsetFetchRequest.OffsetFetchRequestGroup(group_id="g", topics=[
            OffsetFetchRequest.OffsetFetchRequestTopics(name="t", partition_indexes=[0])])]), 9)
    assert fetched.groups[0].topics[0].partitions[0].committed_offset == 7


async def test_used_up_epochs_move_to_a_new_producer_id_and_survive_a_restart(
        served: Served) -> None:
    await create_topic(served, "t")
    client = await served.client()
    pid = (await init(client)).producer_id
    served.b.transactions.txns["tx"].producer_epoch = MAX_EPOCH - 1  # type: ignore[union-attr]
    last = MAX_EPOCH - 1
    assert await produce_v12(client, pid, last, 0, b"c") == 0
    ended = await end_v5(client, pid, last, commit=True)
    assert ended.error_code == 0 and ended.producer_id != pid and ended.producer_epoch == 0
    new_pid = ended.producer_id
    await client.close()

    await served.restart()
    client = await served.client()
    retry = await end_v5(client, pid, last, commit=True)  # the answer was lost
    assert (retry.error_code, retry.producer_id, retry.producer_epoch) == (0, new_pid, 0)
    assert await produce_v12(client, new_pid, 0, 0, b"d") == 0
    assert (await end_v5(client, new_pid, 0, commit=True)).producer_epoch == 1
    assert data_values((await fetch(client, "t", 0, READ_COMMITTED)).records) == [b"c", b"d"]
