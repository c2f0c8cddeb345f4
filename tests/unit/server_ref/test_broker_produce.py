"""Produce against a live broker: offsets, validation errors, idempotence, topic configs."""

from __future__ import annotations

import struct

import pytest
from broker_kit import Served, batches_of, make_batch

from sdk import errors
from sdk.protocol.messages.create_topics import CreateTopicsRequest
from sdk.protocol.messages.fetch import FetchRequest
from sdk.protocol.messages.init_producer_id import InitProducerIdRequest
from sdk.protocol.messages.metadata import MetadataRequest
from sdk.protocol.messages.produce import ProduceRequest
from sdk.records.compression import Compression


def produce_request(topic: str, records: bytes | None, partition: int = 0, acks: int = -1,
                    transactional_id: str | None = None) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=transactional_id, acks=acks, timeout_ms=5000,
        topic_data=[ProduceRequest.TopicProduceData(
            name=topic,
            partition_data=[ProduceRequest.PartitionProduceData(index=partition,
                                                                records=records)])])


def partition_result(response: object) -> object:
    return response.responses[0].partition_responses[0]  # type: ignore[attr-defined]


async def create_topic(served: Served, name: str, partitions: int = 1,
                       **configs: str) -> None:
    client = await served.client()
    response = await client.call(CreateTopicsRequest(topics=[
        CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=1,
            configs=[CreateTopicsRequest.CreatableTopicConfig(name=k.replace("_", "."),
                                                              value=v)
                     for k, v in configs.items()])]))
    assert response.topics[0].error_code == 0, response.topics[0]


async def fetch_all(served: Served, topic: str, partition: int = 0, offset: int = 0
                    ) -> object:
    client = await served.client()
    response = await client.call(FetchRequest(max_wait_ms=0, min_bytes=0, topics=[
        FetchRequest.FetchTopic(topic=topic, partitions=[
            FetchRequest.FetchPartition(partition=partition, fetch_offset=offset,
                                        partition_max_bytes=1 << 20)])]), 12)
    return response.responses[0].partitions[0]


async def test_offsets_and_high_watermark_after_multi_record_batches(served: Served) -> None:
    await create_topic(served, "t")
    client = await served.client()
    first = await client.call(produce_request("t", make_batch([(b"a", b"1")] * 100)))
    second = await client.call(produce_request("t", make_batch([(b"b", b"2")] * 3)))
    assert partition_result(first).base_offset == 0
    assert partition_result(second).base_offset == 100
    data = await fetch_all(served, "t")
    assert data.high_watermark == 103
    assert [b.base_offset for b in batches_of(data.records)] == [0, 100]
    records = [r for b in batches_of(data.records) for r in b.records()]
    assert [r.offset for r in records] == list(range(103))


async def test_stored_batch_is_served_as_sent_with_headers(served: Served) -> None:
    await create_topic(served, "t")
    client = await served.client()
    sent = make_batch([(b"k", b"v")], codec=Compression.ZSTD, headers=[("h", b"x")])
    await client.call(produce_request("t", sent))
    data = await fetch_all(served, "t")
    stored = bytearray(data.records)
    # Only the base offset (0 here) and the leader epoch (bytes 12-15) differ.
    assert stored[16:] == bytearray(sent)[16:]
    assert struct.unpack_from(">i", stored, 12)[0] == 0
    (record,) = batches_of(data.records)[0].records()
    assert (record.key, record.value, record.headers) == (b"k", b"v", [("h", b"x")])


@pytest.mark.parametrize(("records", "code"), [
    (None, errors.InvalidRecordError.errno),
    (b"", errors.InvalidRecordError.errno),
    (make_batch()[:30], errors.CorruptMessageError.errno),
], ids=["null", "empty", "truncated"])  # the batch's bytes hold a timestamp: not an id
async def test_missing_or_truncated_records(served: Served, records: bytes | None,
                                            code: int) -> None:
    await create_topic(served, "t")
    client = await served.client()
    result = partition_result(await client.call(produce_request("t", records)))
    assert result.error_code == code
    assert result.base_offset == -1


async def test_corrupt_crc_is_refused(served: Served) -> None:
    await create_topic(served, "t")
    client = await served.client()
    batch = bytearray(make_batch([(b"k", b"value")]))
    batch[-1] ^= 0xFF
    result = partition_result(await client.call(produce_request("t", bytes(batch))))
    assert result.error_code == errors.CorruptMessageError.errno
    assert (await fetch_all(served, "t")).high_watermark == 0


async def test_old_magic_and_two_batches_are_invalid_records(served: Served) -> None:
    await create_topic(served, "t")
    client = await served.client()
    old = bytearray(make_batch())
    old[16] = 1
    two = make_batch() + make_batch()
    for records in (bytes(old), two):
        result = partition_result(await client.call(produce_request("t", records)))
        assert result.error_code == errors.InvalidRecordError.errno


async def test_declared_size_larger_than_sent_is_corrupt(served: Served) -> None:
    await create_topic(served, "t")
    client = await served.client()
    batch = make_batch([(b"k", b"v" * 50)])
    result = partition_result(await client.call(produce_request("t", batch[:-10])))
    assert result.error_code == errors.CorruptMessageError.errno


async def test_message_too_large(served: Served) -> None:
    await create_topic(served, "t", max_message_bytes="200")
    client = await served.client()
    result = partition_result(await client.call(produce_request(
        "t", make_batch([(b"k", b"v" * 300)]))))
    assert result.error_code == errors.MessageTooLargeError.errno
    small = partition_result(await client.call(produce_request("t", make_batch())))
    assert small.error_code == 0


async def test_unknown_invalid_and_internal_topics(served: Served) -> None:
    client = await served.client()
    unknown = partition_result(await client.call(produce_request("nope", make_batch())))
    assert unknown.error_code == errors.UnknownTopicOrPartitionError.errno
    invalid = partition_result(await client.call(produce_request("bad name!", make_batch())))
    assert invalid.error_code == errors.InvalidTopicError.errno
    await create_topic(served, "t")
    no_partition = partition_result(await client.call(produce_request("t", make_batch(), 5)))
    assert no_partition.error_code == errors.UnknownTopicOrPartitionError.errno
    served.b.offsets_journal.partition_for("g")  # creates __consumer_offsets
    internal = partition_result(await client.call(produce_request("__consumer_offsets",
                                                                  make_batch())))
    assert internal.error_code == errors.InvalidTopicError.errno


async def test_invalid_required_acks(served: Served) -> None:
    await create_topic(served, "t")
    client = await served.client()
    result = partition_result(await client.call(produce_request("t", make_batch(), acks=2)))
    assert result.error_code == errors.InvalidRequiredAcksError.errno


async def test_acks_zero_gets_no_response_but_is_written(served: Served) -> None:
    await create_topic(served, "t")
    client = await served.client()
    await client.send(produce_request("t", make_batch(), acks=0), expect_response=False)
    response = await client.call(MetadataRequest(topics=None))  # the next response is this
    assert [t.name for t in response.topics] == ["t"]
    assert (await fetch_all(served, "t")).high_watermark == 1


async def test_compacted_topic_refuses_records_without_key(served: Served) -> None:
    await create_topic(served, "c", cleanup_policy="compact")
    client = await served.client()
    result = partition_result(await client.call(produce_request(
        "c", make_batch([(b"k", b"1"), (None, b"2")]))))
    assert result.error_code == errors.InvalidRecordError.errno
    assert result.record_errors[0].batch_index == 1
    assert "without key" in result.error_message
    ok = partition_result(await client.call(produce_request("c", make_batch([(b"k", None)]))))
    assert ok.error_code == 0


async def test_log_append_time(served: Served) -> None:
    await create_topic(served, "t", message_timestamp_type="LogAppendTime")
    client = await served.client()
    before = served.b.now_ms()
    result = partition_result(await client.call(produce_request(
        "t", make_batch(timestamp=1000))))
    assert result.log_append_time_ms >= before
    (batch,) = batches_of((await fetch_all(served, "t")).records)
    assert batch.records()[0].timestamp == result.log_append_time_ms
    batch.validate_crc()


async def test_timestamp_bounds(served: Served) -> None:
    await create_topic(served, "t", message_timestamp_before_max_ms="60000")
    client = await served.client()
    result = partition_result(await client.call(produce_request(
        "t", make_batch(timestamp=1000))))
    assert result.error_code == errors.InvalidTimestampError.errno


async def test_topic_compression_type_recompresses(served: Served) -> None:
    await create_topic(served, "t", compression_type="gzip")
    client = await served.client()
    await client.call(produce_request("t", make_batch([(b"k", b"v" * 100)] * 5)))
    (batch,) = batches_of((await fetch_all(served, "t")).records)
    assert batch.compression == Compression.GZIP
    assert [r.value for r in batch.records()] == [b"v" * 100] * 5


async def test_min_insync_replicas_above_replica_count_accepts_acks_all(served: Served
                                                                        ) -> None:
    """A single node's partition has one replica: min.insync.replicas=2 is capped at 1, as
    Apache Kafka caps it (Partition.effectiveMinIsr), so acks=all writes are taken."""
    await create_topic(served, "t", min_insync_replicas="2")
    client = await served.client()
    all_isr = partition_result(await client.call(produce_request("t", make_batch())))
    assert (all_isr.error_code, all_isr.base_offset) == (0, 0)
    leader_only = partition_result(await client.call(produce_request("t", make_batch(),
                                                                     acks=1)))
    assert (leader_only.error_code, leader_only.base_offset) == (0, 1)
    assert [b.base_offset for b in batches_of((await fetch_all(served, "t")).records)] \
        == [0, 1]


# ---------------------------------------------------------------------------- idempotence


async def _producer_id(served: Served) -> int:
    client = await served.client()
    response = await client.call(InitProducerIdRequest(transactional_id=None))
    assert response.error_code == 0 and response.producer_epoch == 0
    return int(response.producer_id)


def _idempotent(pid: int, seq: int, n: int = 1, epoch: int = 0) -> bytes:
    return make_batch([(b"k", b"v")] * n, producer_id=pid, producer_epoch=epoch,
                      base_sequence=seq)


async def test_idempotent_retry_returns_original_offset(served: Served) -> None:
    await create_topic(served, "t")
    pid = await _producer_id(served)
    client = await served.client()
    first = partition_result(await client.call(produce_request("t", _idempotent(pid, 0, 3))))
    second = partition_result(await client.call(produce_request("t", _idempotent(pid, 3, 2))))
    retry = partition_result(await client.call(produce_request("t", _idempotent(pid, 0, 3))))
    assert (first.base_offset, second.base_offset, retry.base_offset) == (0, 3, 0)
    assert retry.error_code == 0
    assert (await fetch_all(served, "t")).high_watermark == 5


async def test_out_of_order_sequence_and_old_epoch(served: Served) -> None:
    await create_topic(served, "t")
    pid = await _producer_id(served)
    client = await served.client()
    await client.call(produce_request("t", _idempotent(pid, 0, 1, epoch=1)))
    gap = partition_result(await client.call(produce_request("t", _idempotent(pid, 5))))
    assert gap.error_code == errors.InvalidProducerEpochError.errno  # epoch 0 < 1
    gap = partition_result(await client.call(produce_request("t", _idempotent(pid, 5,
                                                                              epoch=1))))
    assert gap.error_code == errors.OutOfOrderSequenceNumberError.errno
    new_epoch_bad = partition_result(await client.call(produce_request(
        "t", _idempotent(pid, 3, epoch=2))))
    assert new_epoch_bad.error_code == errors.OutOfOrderSequenceNumberError.errno
    new_epoch = partition_result(await client.call(produce_request("t", _idempotent(pid, 0,
                                                                                    epoch=2))))
    assert new_epoch.error_code == 0


async def test_duplicate_older_than_the_window(served: Served) -> None:
    await create_topic(served, "t")
    pid = await _producer_id(served)
    client = await served.client()
    for seq in range(7):
        await client.call(produce_request("t", _idempotent(pid, seq)))
    stale = partition_result(await client.call(produce_request("t", _idempotent(pid, 0))))
    assert stale.error_code == errors.DuplicateSequenceNumberError.errno
    assert (await fetch_all(served, "t")).high_watermark == 7


@pytest.mark.parametrize("clean", [True, False])
async def test_producer_state_survives_restart(served: Served, clean: bool) -> None:
    await create_topic(served, "t")
    pid = await _producer_id(served)
    client = await served.client()
    await client.call(produce_request("t", _idempotent(pid, 0, 2)))
    await client.call(produce_request("t", _idempotent(pid, 2, 2)))
    await served.stop()
    snapshot = served.data_dir / "producer_state.json"
    assert snapshot.exists()
    if not clean:
        # As after a crash: no snapshot, so the state comes from the log's batch headers.
        snapshot.unlink()
    await served.start()
    client = await served.client()
    retry = partition_result(await client.call(produce_request("t", _idempotent(pid, 2, 2))))
    assert (retry.error_code, retry.base_offset) == (0, 2)
    gap = partition_result(await client.call(produce_request("t", _idempotent(pid, 9))))
    assert gap.error_code == errors.OutOfOrderSequenceNumberError.errno
    assert await _producer_id(served) > pid  # ids are never handed out twice


def _recrc(batch: bytearray) -> bytes:
    from sdk.records.header import batch_crc

    struct.pack_into(">I", batch, 17, batch_crc(batch, 0, len(batch)))
    return bytes(batch)


async def test_records_inside_a_crc_valid_batch_are_checked(served: Served) -> None:
    await create_topic(served, "t")
    client = await served.client()
    good = bytearray(make_batch([(b"k", b"a"), (b"k", b"b")], timestamp=5))
    first_len = good[61] >> 1  # record 0's length (one-byte zig-zag varint)
    second = 61 + 1 + first_len  # start of record 1
    assert good[second + 3] == 2  # its offset delta, zig-zag 1

    skipped = bytearray(good)
    skipped[second + 3] = 6  # offset delta 3 where 1 belongs
    result = partition_result(await client.call(produce_request("t", _recrc(skipped))))
    assert result.error_code == errors.InvalidRecordError.errno
    assert result.record_errors[0].batch_index == 1

    overrun = bytearray(good)
    overrun[second] = 0x7E  # record 1 claims 63 bytes
    result = partition_result(await client.call(produce_request("t", _recrc(overrun))))
    assert result.error_code == errors.CorruptMessageError.errno

    compressed = bytearray(make_batch([(b"k", b"v")], codec=Compression.GZIP))
    compressed[-5] ^= 0xFF  # inside the gzip stream
    result = partition_result(await client.call(produce_request("t", _recrc(compressed))))
    assert result.error_code == errors.CorruptMessageError.errno
    assert (await fetch_all(served, "t")).high_watermark == 0
