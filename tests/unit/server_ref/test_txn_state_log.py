"""``__transaction_state`` values (Kafka's TransactionLogValue v0 and v1) and the KIP-360
retry they let survive a restart: InitProducerId bumped a producer's epoch, the answer was
lost, the broker restarted, and the producer asks again with its old id and epoch."""

from __future__ import annotations

import struct

from broker_kit import Served
from test_broker_transactions import init

from sdk import errors
from sdk.protocol.primitives import write_uvarint
from server_ref.transactions.state import TxnMetadata, TxnState
from server_ref.transactions.statelog import decode_value, encode_value


def _meta(**fields: object) -> TxnMetadata:
    meta = TxnMetadata("tx", 7, 3, 60000, TxnState.ONGOING, {("a", 0), ("a", 2), ("b", 1)},
                       start_ms=1000, last_update_ms=2000)
    for name, value in fields.items():
        setattr(meta, name, value)
    return meta


def test_values_round_trip_in_both_versions() -> None:
    for version in (0, 1):
        raw = encode_value(_meta(), version)
        assert struct.unpack_from(">h", raw)[0] == version
        back = decode_value("tx", raw)
        assert (back.producer_id, back.producer_epoch, back.timeout_ms, back.state,
                back.partitions, back.start_ms, back.last_update_ms, back.last_epoch) == (
            7, 3, 60000, TxnState.ONGOING, {("a", 0), ("a", 2), ("b", 1)}, 1000, 2000, -1)


def test_v1_keeps_the_kip360_window_and_the_client_version() -> None:
    back = decode_value("tx", encode_value(_meta(last_epoch=2, client_version=2)))
    assert back.last_epoch == 2 and back.client_version == 2
    # Version 0 has no tagged fields: the window is lost, as in Kafka's v0 records.
    assert decode_value("tx", encode_value(_meta(last_epoch=2), 0)).last_epoch == -1


def test_v1_reads_tagged_fields_it_does_not_use() -> None:
    """A value with Kafka's NextProducerId (tag 1) and NextProducerEpoch (tag 3) set."""
    raw = bytearray(encode_value(_meta()))
    assert raw[-1] == 0  # no tagged fields
    del raw[-1]
    write_uvarint(raw, 2)
    raw += bytes([1, 8]) + struct.pack(">q", 99) + bytes([3, 2]) + struct.pack(">h", 5)
    back = decode_value("tx", bytes(raw))
    assert back.producer_id == 7 and back.partitions == {("a", 0), ("a", 2), ("b", 1)}


async def test_kip360_retry_after_a_restart_gets_the_bumped_epoch(served: Served) -> None:
    client = await served.client()
    first = await init(client)
    pid, epoch = first.producer_id, first.producer_epoch
    bumped = await init(client, producer_id=pid, producer_epoch=epoch)  # answer "lost"
    assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (0, pid, epoch + 1)
    await client.close()

    await served.restart()
    client = await served.client()
    retry = await init(client, producer_id=pid, producer_epoch=epoch)
    assert (retry.error_code, retry.producer_id, retry.producer_epoch) == (0, pid, epoch + 1)
    # The retry bumped nothing: the producer goes on with the pair it was meant to get.
    again = await init(client, producer_id=pid, producer_epoch=epoch + 1)
    assert (again.error_code, again.producer_epoch) == (0, epoch + 2)


async def test_an_old_instance_stays_fenced_after_a_restart(served: Served) -> None:
    client = await served.client()
    first = await init(client)
    pid, epoch = first.producer_id, first.producer_epoch
    await init(client, producer_id=pid, producer_epoch=epoch)  # KIP-360 bump: epoch + 1
    newer = await init(client)  # a new instance of the id: epoch + 2, no retry window
    assert newer.producer_epoch == epoch + 2
    await client.close()

    await served.restart()
    client = await served.client()
    for stale in (epoch, epoch + 1):
        response = await init(client, producer_id=pid, producer_epoch=stale)
        assert response.error_code == errors.ProducerFencedError.errno, stale
