"""Produce: validate each partition's record batch, de-duplicate, append, acknowledge.

Checks, in Kafka's order and with its error codes: the topic and partition exist and are
not internal (UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION); exactly one v2 batch
per partition (INVALID_RECORD); its declared size matches the bytes (CORRUPT_MESSAGE); it
fits ``max.message.bytes`` (MESSAGE_TOO_LARGE); its CRC-32C matches (CORRUPT_MESSAGE); it
is not a control batch and its record count agrees with its last offset delta
(INVALID_RECORD); a transactional batch is from its transactional id's current producer
for a partition of the open transaction, which from v12 the batch adds to it (KIP-890
transactions v2) (INVALID_PRODUCER_EPOCH; INVALID_TXN_STATE, from v11
TRANSACTION_ABORTABLE); its records region parses into exactly that many records with
offset deltas 0, 1, 2... (CORRUPT_MESSAGE / INVALID_RECORD). Then each record, as Kafka's
LogValidator: on a compacted topic it has a key; on a CreateTime topic its timestamp (unless
-1) respects ``message.timestamp.before/after.max.ms``; a LogAppendTime batch is refused by
a LogAppendTime topic. Every record is checked and all refused ones are listed in
``record_errors`` (KIP-467) with their index and message; the partition error is
INVALID_TIMESTAMP if any timestamp was wrong, else INVALID_RECORD, with Kafka's summary
message. A batch is stored as sent, only its base offset and leader epoch patched (and,
for a topic with another ``compression.type``, recompressed).
"""

from __future__ import annotations

import functools
import struct
from typing import Any

from sdk.errors import (
    CorruptMessageError,
    InvalidRecordError,
    InvalidRequiredAcksError,
    InvalidTimestampError,
    InvalidTopicError,
    InvalidTxnStateError,
    KafkaError,
    KafkaStorageError,
    MalformedDataError,
    MessageTooLargeError,
    NotEnoughReplicasError,
    TransactionAbortableError,
    TransactionalIdAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from sdk.protocol.messages.produce import ProduceRequest, ProduceResponse
from sdk.records.builder import RecordBatchBuilder
from sdk.records.compression import Compression, decompress
from sdk.records.header import (
    BATCH_HEADER,
    COMPRESSION_MASK,
    CONTROL_MASK,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    batch_crc,
)
from sdk.records.reader import RecordBatch
from server_ref.config import LONG_MAX
from server_ref.handlers import HandlerResult, RequestContext, handles
from server_ref.producer_state import AppendedBatch, last_sequence_of
from server_ref.replication.min_isr import effective_min_isr, min_isr_text
from server_ref.topics import Partition, Topic, validate_topic_name

PartitionResponse = ProduceResponse.PartitionProduceResponse
LEADER_EPOCH = 0
_INT32 = struct.Struct(">i")
MIN_RECORD_BODY = 6  # attributes, timestamp delta, offset delta, key, value, header count
_CODECS = {"uncompressed": Compression.NONE, "gzip": Compression.GZIP,
           "snappy": Compression.SNAPPY, "lz4": Compression.LZ4, "zstd": Compression.ZSTD}


class _RecordErrors(KafkaError):
    """Record-level failures (KIP-467): the partition's error and, for v8+ responses, every
    refused record's index in the batch with its own message."""

    def __init__(self, error: KafkaError, records: list[tuple[int, str]]) -> None:
        super().__init__(str(error.message or error))
        self.error = error
        self.records = records


def _record_errors(errors: list[tuple[int, str, bool]]) -> _RecordErrors:
    """Kafka's summary of a batch's refused records ``(index, message, is_timestamp)``: any
    timestamp error makes the whole batch INVALID_TIMESTAMP, otherwise INVALID_RECORD naming
    the count and the first three."""
    records = [(index, message) for index, message, _ in errors]
    if any(is_timestamp for _, _, is_timestamp in errors):
        return _RecordErrors(InvalidTimestampError(
            "One or more records have been rejected due to invalid timestamp"), records)
    shown = ", ".join(f"RecordError(batchIndex={index}, message='{message}')"
                      for index, message in records[:3])
    return _RecordErrors(InvalidRecordError(
        f"One or more records have been rejected due to {len(records)} record errors in "
        f"total, and only showing the first three errors at most: [{shown}]"), records)


@handles(0, 3, 12)
def produce(ctx: RequestContext, req: ProduceRequest) -> HandlerResult:
    broker = ctx.broker
    failure: KafkaError | None = None
    if req.acks not in (0, 1, -1):
        failure = InvalidRequiredAcksError(f"acks must be 0, 1 or -1, not {req.acks}")
    elif broker.cluster is not None:  # leaders only, acks=all waits for the ISR
        from server_ref.handlers.produce_verify import has_transactional_batch, verified_produce
        from server_ref.replication.produce_path import cluster_produce

        if has_transactional_batch(req):  # the transaction coordinator may be elsewhere
            return verified_produce(ctx, req, lambda verdicts: cluster_produce(
                ctx, req, functools.partial(_produce_partition, txn_verdicts=verdicts),
                _error))
        return cluster_produce(ctx, req, _produce_partition, _error)
    now = broker.now_ms()
    responses = []
    for topic_data in req.topic_data:
        topic = broker.topics.get(topic_data.name)
        parts = []
        for data in topic_data.partition_data:
            if failure is not None:
                parts.append(_error(data.index, failure))
            else:
                parts.append(_produce_partition(ctx, topic, topic_data.name, data, req.acks,
                                                now, req.transactional_id))
        responses.append(ProduceResponse.TopicProduceResponse(name=topic_data.name,
                                                              partition_responses=parts))
        if broker.metrics is not None:  # per topic of the request, never per record
            broker.metrics.record_produce(topic_data.name, topic_data.partition_data, parts)
    if req.acks == 0:
        return None
    return ProduceResponse(responses=responses)


def _error(index: int, exc: KafkaError) -> PartitionResponse:
    record_errors = []
    if isinstance(exc, _RecordErrors):
        record_errors = [ProduceResponse.BatchIndexAndErrorMessage(
            batch_index=index, batch_index_error_message=message)
            for index, message in exc.records]
        exc = exc.error
    code = getattr(exc, "errno", CorruptMessageError.errno)
    return PartitionResponse(index=index, error_code=code, base_offset=-1,
                             log_start_offset=-1, record_errors=record_errors,
                             error_message=exc.message)


def _find_partition(topic: Topic | None, name: str, index: int) -> Partition:
    if topic is None:
        validate_topic_name(name)
        raise UnknownTopicOrPartitionError(f"topic {name} does not exist")
    if topic.is_internal:
        raise InvalidTopicError(f"cannot append to internal topic {name}")
    if not 0 <= index < len(topic.partitions):
        raise UnknownTopicOrPartitionError(f"topic {name} has no partition {index}")
    return topic.partitions[index]


def _produce_partition(ctx: RequestContext, topic: Topic | None, name: str,
                       data: ProduceRequest.PartitionProduceData, acks: int,
                       now: int, transactional_id: str | None = None, *,
                       leader_epoch: int = LEADER_EPOCH, isr_size: int = 1,
                       txn_verdicts: dict[tuple[str, int], Any] | None = None
                       ) -> PartitionResponse:
    broker = ctx.broker
    try:
        partition = _find_partition(topic, name, data.index)
        assert topic is not None
        cfg = broker.config
        buf = _check_batch(data.records, int(topic.config_value("max.message.bytes", cfg)))
        header = BATCH_HEADER.unpack_from(buf, 0)
        _check_records(topic, partition, buf, header, now, ctx)
        if header[5] & TRANSACTIONAL_MASK:
            if txn_verdicts is not None:  # cluster mode: verified with the coordinator
                from server_ref.handlers.produce_verify import check_verified

                check_verified(ctx, txn_verdicts, name, data.index, header[9])
            else:
                _check_transaction(ctx, transactional_id, name, data.index, header)
        if acks == -1 and effective_min_isr(partition, cfg) > isr_size:
            raise NotEnoughReplicasError(
                f"min.insync.replicas of {name} is {min_isr_text(partition, cfg)}; the "
                f"in-sync replicas are {isr_size}")
        target = topic.config_value("compression.type", cfg)
        if target != "producer" and (header[5] & COMPRESSION_MASK) != _CODECS[target]:
            buf = _recompress(buf, _CODECS[target])
        return _append(partition, buf, header, now, leader_epoch)
    except KafkaError as exc:
        return _error(data.index, exc)


def _check_batch(records: bytes | None, max_message_bytes: int) -> bytearray:
    if not records:
        raise InvalidRecordError("Produce requests must have at least one record batch "
                                 "per partition")
    size = len(records)
    if size < RECORD_BATCH_OVERHEAD:
        if size >= 17 and records[16] in (0, 1):
            raise InvalidRecordError("only record batches with magic 2 are accepted")
        raise CorruptMessageError(f"record batch of {size} bytes is shorter than its header")
    magic = records[16]
    if magic != 2:
        if magic in (0, 1):
            raise InvalidRecordError(
                f"Produce requests are only allowed to contain record batches with magic "
                f"version 2, not {magic}")
        raise CorruptMessageError(f"record batch has unknown magic {magic}")
    (length,) = _INT32.unpack_from(records, 8)
    declared = length + LOG_OVERHEAD
    if declared < RECORD_BATCH_OVERHEAD or declared > size:
        raise CorruptMessageError(
            f"record batch declares {declared} bytes but {size} were sent")
    if declared < size:
        raise InvalidRecordError("Produce requests are only allowed to contain exactly one "
                                 "record batch per partition")
    if size > max_message_bytes:
        raise MessageTooLargeError(
            f"record batch of {size} bytes exceeds max.message.bytes ({max_message_bytes})")
    buf = bytearray(records)
    (stored_crc,) = struct.unpack_from(">I", buf, 17)
    if batch_crc(buf, 0, size) != stored_crc:
        raise CorruptMessageError("record batch CRC-32C does not match its contents")
    return buf


def _check_records(topic: Topic, partition: Partition, buf: bytearray, header: tuple[Any, ...],
                   now: int, ctx: RequestContext) -> None:
    attributes, last_delta, count = header[5], header[6], header[12]
    producer_id, epoch, base_seq = header[9], header[10], header[11]
    if attributes & CONTROL_MASK:
        raise InvalidRecordError("clients may not send control batches")
    if attributes & COMPRESSION_MASK > Compression.ZSTD:
        raise InvalidRecordError(f"unknown compression codec {attributes & COMPRESSION_MASK}")
    if count <= 0 or count != last_delta + 1:
        raise InvalidRecordError(
            f"record count {count} does not match last offset delta {last_delta}")
    if producer_id >= 0 and (epoch < 0 or base_seq < 0):
        raise InvalidRecordError("idempotent batch without producer epoch or base sequence")
    low, high = _walk_records(buf, attributes & COMPRESSION_MASK, count)
    cfg = ctx.broker.config
    compacted = topic.is_compacted(cfg)
    before = int(topic.config_value("message.timestamp.before.max.ms", cfg))
    after = int(topic.config_value("message.timestamp.after.max.ms", cfg))
    create_time = topic.config_value("message.timestamp.type", cfg) == "CreateTime"
    append_time_batch = bool(attributes & TIMESTAMP_TYPE_MASK)
    # Records of a LogAppendTime batch read the batch's max timestamp, as in Kafka.
    lowest, highest = ((header[8], header[8]) if append_time_batch
                       else (header[7] + low, header[7] + high))
    suspect_time = create_time and not now - before <= lowest <= highest <= now + after
    refused_type = append_time_batch and (not create_time or header[8] == -1)
    if not compacted and not suspect_time and not refused_type:
        return  # nothing to refuse: the records need not be decoded
    try:
        records = RecordBatch(buf, 0).records()
    except MalformedDataError as exc:
        raise CorruptMessageError(f"records cannot be decoded: {exc}") from None
    # As Kafka's LogValidator: every record is checked (one error each: the key first, then
    # the timestamp) and the batch is refused listing them all. A CreateTime topic checks a
    # record's timestamp unless it is -1 (none); a producer may not claim LogAppendTime.
    errors: list[tuple[int, str, bool]] = []
    for i, record in enumerate(records):
        if compacted and record.key is None:
            errors.append((i, "Compacted topic cannot accept message without key in topic "
                              f"partition {partition.name}", False))
        elif create_time and record.timestamp != -1:
            if not now - before <= record.timestamp <= now + after:
                errors.append((i, f"Timestamp {record.timestamp} of message with offset "
                                  f"{record.offset} is out of range. The timestamp should be "
                                  f"within [{now - before}, {_wrap64(now + after)}]", True))
        elif append_time_batch:
            shown = (f"DefaultRecord(offset={record.offset}, timestamp={record.timestamp}, "
                     f"key={len(record.key or b'')} bytes, "
                     f"value={len(record.value or b'')} bytes)")
            errors.append((i, f"Invalid timestamp type in message {shown}. Producer should "
                              "not set timestamp type to LogAppendTime.", True))
    if errors:
        raise _record_errors(errors)


def _check_transaction(ctx: RequestContext, transactional_id: str | None, name: str,
                       index: int, header: tuple[Any, ...]) -> None:
    """A transactional batch comes with its transactional id, from the id's current
    producer, to a partition of its open transaction (Kafka's verification, KIP-890 part 1,
    answered in-process: this broker is the coordinator)."""
    if transactional_id is None:
        raise TransactionalIdAuthorizationFailedError(
            "transactional records need the request's transactional id")
    coordinator = ctx.broker.transactions
    if coordinator is None:
        raise InvalidTxnStateError("the transaction coordinator is not started")
    try:
        # v12+ (transactions v2): the partition joins the transaction with this batch.
        coordinator.check_produce(transactional_id, header[9], header[10], (name, index),
                                  add=ctx.api_version >= 12)
    except InvalidTxnStateError as exc:
        if ctx.api_version >= 11:  # KIP-890: the client aborts and carries on
            raise TransactionAbortableError(exc.message) from None
        raise


def _wrap64(value: int) -> int:
    """``value`` as a Java long shows it (Kafka prints ``now + Long.MAX_VALUE`` wrapped)."""
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


def _varint_raw(data: bytes | bytearray, pos: int, end: int) -> tuple[int, int]:
    """An unsigned varint of up to 10 bytes (zig-zag undone by the caller)."""
    z = shift = 0
    while pos < end and shift < 70:
        b = data[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        if b < 0x80:
            return z, pos
        shift += 7
    raise CorruptMessageError("a record's varint is truncated or too long")


def _walk_records(buf: bytearray, codec: int, count: int) -> tuple[int, int]:
    """Kafka checks the records inside a batch, not only its CRC: each length prefix must
    end exactly where the next record starts and offset deltas must run 0, 1, 2, ... This
    walk reads three varints per record instead of decoding it; one- and two-byte varints
    (nearly all of them) are decoded inline, as this runs for every record produced.
    Returns the smallest and largest timestamp delta, so timestamps are checked against
    the topic's bounds without decoding the records when all are in range."""
    if codec:
        try:
            data: bytes | bytearray = decompress(codec, bytes(buf[RECORD_BATCH_OVERHEAD:]))
        except MalformedDataError as exc:
            raise CorruptMessageError(f"records cannot be decompressed: {exc}") from None
        pos, end = 0, len(data)
    else:
        data, pos, end = buf, RECORD_BATCH_OVERHEAD, len(buf)
    expected = 0
    low, high = LONG_MAX, -LONG_MAX
    try:
        for expected in range(count):
            b = data[pos]
            if b < 0x80:
                z, pos = b, pos + 1
            elif data[pos + 1] < 0x80:
                z, pos = (b & 0x7F) | (data[pos + 1] << 7), pos + 2
            else:
                z, pos = _varint_raw(data, pos, end)
            length = (z >> 1) ^ -(z & 1)
            if length < MIN_RECORD_BODY or pos + length > end:
                raise CorruptMessageError(f"record {expected} declares {length} bytes; "
                                          f"{end - pos} remain in the batch")
            b = data[pos + 1]  # after the attributes byte: the timestamp delta
            if b < 0x80:
                z, at = b, pos + 1
            elif data[pos + 2] < 0x80:
                z, at = (b & 0x7F) | (data[pos + 2] << 7), pos + 2
            else:
                z, at = _varint_raw(data, pos + 1, pos + length)
                at -= 1
            z = (z >> 1) ^ -(z & 1)
            if z < low:
                low = z
            if z > high:
                high = z
            b = data[at + 1]  # the offset delta, compared in its zig-zag form
            if b < 0x80:
                z = b
            elif data[at + 2] < 0x80:
                z = (b & 0x7F) | (data[at + 2] << 7)
            else:
                z = _varint_raw(data, at + 1, pos + length)[0]
            if z != expected << 1:
                message = (f"record {expected} has offset delta {(z >> 1) ^ -(z & 1)}; "
                           "deltas must be consecutive from 0")
                raise _RecordErrors(InvalidRecordError(message), [(expected, message)])
            pos += length
    except IndexError:
        raise CorruptMessageError(f"records end inside record {expected}") from None
    if pos != end:
        raise CorruptMessageError(f"{end - pos} bytes follow the last of {count} records")
    return low, high


def _recompress(buf: bytearray, codec: Compression) -> bytearray:
    """Rebuild a batch with the topic's codec, keeping producer state and record fields."""
    batch = RecordBatch(buf, 0)
    try:
        records = batch.records()
    except MalformedDataError as exc:
        raise CorruptMessageError(f"records cannot be decoded: {exc}") from None
    builder = RecordBatchBuilder(codec, producer_id=batch.producer_id,
                                 producer_epoch=batch.producer_epoch,
                                 base_sequence=batch.base_sequence)
    for record in records:
        builder.append(record.offset - batch.base_offset, record.timestamp, record.key,
                       record.value, record.headers)
    return bytearray(builder.build())


def _append(partition: Partition, buf: bytearray, header: tuple[Any, ...],
            now: int, leader_epoch: int = LEADER_EPOCH) -> PartitionResponse:
    producer_id, epoch, base_seq, last_delta = header[9], header[10], header[11], header[6]
    plog = partition.log
    last_seq = -1
    if producer_id >= 0:
        last_seq = last_sequence_of(base_seq, last_delta)
        duplicate = partition.producers.check(producer_id, epoch, base_seq, last_seq)
        if duplicate is not None:
            return PartitionResponse(index=partition.index, base_offset=duplicate.first_offset,
                                     log_append_time_ms=duplicate.log_append_time_ms,
                                     log_start_offset=plog.log_start_offset)
    try:
        info = plog.append(buf, now_ms=now, leader_epoch=leader_epoch)
    except OSError as exc:
        raise KafkaStorageError(f"writing to {partition.name} failed: {exc}") from exc
    if producer_id >= 0:
        partition.producers.record(producer_id, epoch, AppendedBatch(
            base_seq, last_seq, info.first_offset, info.last_offset, info.log_append_time_ms),
            now)
    partition.notify_appended()
    return PartitionResponse(index=partition.index, base_offset=info.first_offset,
                             log_append_time_ms=info.log_append_time_ms,
                             log_start_offset=plog.log_start_offset)
