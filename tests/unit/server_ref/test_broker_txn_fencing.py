"""Producer state that transaction markers leave behind (raw requests, in-process broker):
the coordinator epoch of the last marker fences a marker from an older coordinator
(TRANSACTION_COORDINATOR_FENCED, nothing written), and the epoch a transactions-v2 marker
carries fences the old epoch. Both survive a clean restart (the producer snapshot) and a
crash (no snapshot: the state is rebuilt from the log, markers included)."""

from __future__ import annotations

from typing import Any

import pytest
from broker_kit import Served
from test_broker_produce import create_topic, partition_result, produce_request
from test_broker_transactions import READ_COMMITTED, add, data_values, fetch, init, txn_batch
from test_broker_transactions_v2 import end_v5, produce_v12

from sdk import errors
from sdk.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from sdk.records.builder import RecordBatchBuilder
from server_ref.producer_state import SNAPSHOT_FILE

W = WriteTxnMarkersRequest


async def write_marker(client: Any, pid: int, epoch: int, coordinator_epoch: int,
                       commit: bool = True) -> int:
    response = await client.call(W(markers=[W.WritableTxnMarker(
        producer_id=pid, producer_epoch=epoch, transaction_result=commit,
        coordinator_epoch=coordinator_epoch,
        topics=[W.WritableTxnMarkerTopic(name="t", partition_indexes=[0])])]), 1)
    return int(response.markers[0].topics[0].partitions[0].error_code)


def idempotent_batch(pid: int, epoch: int, seq: int, value: bytes) -> bytes:
    builder = RecordBatchBuilder(0, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    builder.append(None, None, None, value)
    return builder.build()


async def produce_plain(client: Any, pid: int, epoch: int, seq: int, value: bytes) -> int:
    response = await client.call(produce_request("t", idempotent_batch(pid, epoch, seq, value)))
    return int(partition_result(response).error_code)  # type: ignore[attr-defined]


async def produce_txn(client: Any, pid: int, epoch: int, seq: int, value: bytes) -> int:
    response = await client.call(produce_request("t", txn_batch(pid, epoch, seq, [value]),
                                                 transactional_id="tx"))
    return int(partition_result(response).error_code)  # type: ignore[attr-defined]


async def restart(served: Served, crash: bool) -> None:
    await served.restart() if not crash else await _restart_without_snapshot(served)


async def _restart_without_snapshot(served: Served) -> None:
    """What a crash leaves: the logs, no producer snapshot (written at clean shutdown)."""
    await served.stop()
    (served.data_dir / SNAPSHOT_FILE).unlink()
    await served.start()


@pytest.mark.parametrize("crash", [False, True], ids=["clean-restart", "crash-restart"])
async def test_a_marker_from_an_older_coordinator_epoch_is_fenced(served: Served,
                                                                  crash: bool) -> None:
    await create_topic(served, "t")
    client = await served.client()
    pid = 4242  # markers are the coordinator's word: the partition needs no InitProducerId
    assert await produce_plain(client, pid, 0, 0, b"a") == 0
    assert await write_marker(client, pid, 0, coordinator_epoch=3) == 0
    end = served.b.topics.partition("t", 0).log.log_end_offset  # type: ignore[union-attr]
    code = await write_marker(client, pid, 0, coordinator_epoch=2)
    assert errors.for_code(code) is errors.TransactionCoordinatorFencedError
    assert served.b.topics.partition("t", 0).log.log_end_offset == end  # type: ignore[union-attr]
    await client.close()

    await restart(served, crash)
    client = await served.client()
    assert await write_marker(client, pid, 0, coordinator_epoch=2, commit=False) == \
        errors.TransactionCoordinatorFencedError.errno
    assert served.b.topics.partition("t", 0).log.log_end_offset == end  # type: ignore[union-attr]
    # The same coordinator epoch, or a newer one, is still taken.
    assert await write_marker(client, pid, 0, coordinator_epoch=3) == 0
    assert await write_marker(client, pid, 0, coordinator_epoch=7) == 0
    assert await write_marker(client, pid, 0, coordinator_epoch=3) == \
        errors.TransactionCoordinatorFencedError.errno
    assert served.b.topics.partition("t", 0).log.log_end_offset == end + 2  # type: ignore[union-attr]


async def test_a_fenced_marker_leaves_the_transaction_open(served: Served) -> None:
    await create_topic(served, "t")
    client = await served.client()
    first = await init(client)
    pid, epoch = first.producer_id, first.producer_epoch
    assert await add(client, pid, epoch, "t", [0]) == [0]
    # Markers from another coordinator (a tool, or ours in cluster mode) at epoch 5.
    assert await produce_txn(client, pid, epoch, 0, b"one") == 0
    assert await write_marker(client, pid, epoch, coordinator_epoch=5) == 0
    assert await produce_txn(client, pid, epoch, 1, b"two") == 0
    assert await write_marker(client, pid, epoch, coordinator_epoch=4) == \
        errors.TransactionCoordinatorFencedError.errno
    held = await fetch(client, "t", 0, READ_COMMITTED)
    assert held.last_stable_offset == 2 and data_values(held.records) == [b"one"]
    assert await write_marker(client, pid, epoch, coordinator_epoch=5) == 0
    done = await fetch(client, "t", 0, READ_COMMITTED)
    assert done.last_stable_offset == 4 and data_values(done.records) == [b"one", b"two"]


@pytest.mark.parametrize("crash", [False, True], ids=["clean-restart", "crash-restart"])
async def test_the_epoch_of_a_v2_commit_marker_fences_the_old_epoch_after_a_restart(
        served: Served, crash: bool) -> None:
    await create_topic(served, "t")
    client = await served.client()
    first = await init(client)
    pid, epoch = first.producer_id, first.producer_epoch
    assert await produce_v12(client, pid, epoch, 0, b"c") == 0
    ended = await end_v5(client, pid, epoch, commit=True)
    assert (ended.error_code, ended.producer_epoch) == (0, epoch + 1)  # type: ignore[attr-defined]
    # The marker (epoch + 1) holds the newest epoch of the partition: a batch of the old
    # one is refused, before and after the restart, as Kafka 4.3.1 refuses it
    # (tests/integration/test_broker_transactions.py checks the live case on it).
    assert await produce_plain(client, pid, epoch, 1, b"late") == \
        errors.InvalidProducerEpochError.errno
    await client.close()

    await restart(served, crash)
    client = await served.client()
    assert await produce_plain(client, pid, epoch, 1, b"late") == \
        errors.InvalidProducerEpochError.errno
    # A marker of the old epoch is refused too; the new epoch starts at sequence 0.
    assert await write_marker(client, pid, epoch, coordinator_epoch=0, commit=False) == \
        errors.InvalidProducerEpochError.errno
    assert await produce_v12(client, pid, epoch + 1, 0, b"d") == 0
    assert (await end_v5(client, pid, epoch + 1, commit=True)).error_code == 0  # type: ignore[attr-defined]
    assert data_values((await fetch(client, "t", 0, READ_COMMITTED)).records) == [b"c", b"d"]
