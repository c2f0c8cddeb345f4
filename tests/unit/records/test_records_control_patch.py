"""Control batches (transaction markers) and the broker's in-place header patching."""

from __future__ import annotations

import struct

import pytest
from kafka.record.memory_records import MemoryRecords as KpRecords

from sdk.errors import MalformedDataError
from sdk.records import (
    Compression,
    ControlType,
    CorruptRecordError,
    RecordBatchBuilder,
    TimestampType,
    build_control_batch,
    decode_control_record,
    iter_batches,
    patch_batch,
    patch_producer_state,
    read_batches,
)
from sdk.records.control import encode_control_key


@pytest.mark.parametrize("ctype", [ControlType.COMMIT, ControlType.ABORT])
def test_control_batch_round_trip(ctype: ControlType) -> None:
    data = build_control_batch(
        ctype, 4242, 7, 19, timestamp_ms=1234, base_offset=88, partition_leader_epoch=3
    )
    (batch,) = read_batches(data)
    batch.validate_crc()
    assert batch.is_control and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4242, 7, -1)
    assert (batch.base_offset, batch.partition_leader_epoch, batch.record_count) == (88, 3, 1)
    marker = batch.control_record()
    assert (marker.offset, marker.timestamp, marker.version) == (88, 1234, 0)
    assert marker.type is ctype and marker.coordinator_epoch == 19
    assert marker.is_commit == (ctype == ControlType.COMMIT)
    assert marker.is_abort == (ctype == ControlType.ABORT)
    (record,) = batch.records()
    assert record.key == struct.pack(">hh", 0, ctype)
    assert record.value == struct.pack(">hi", 0, 19)

    kp_batch = KpRecords(data).next_batch()
    assert kp_batch.validate_crc() and kp_batch.is_control_batch
    (kp_record,) = list(kp_batch)
    assert (kp_record.version, kp_record.type, kp_record.offset) == (0, int(ctype), 88)


def test_control_record_decoding() -> None:
    other = decode_control_record(5, 6, encode_control_key(9), None)
    assert other.type == 9 and other.coordinator_epoch is None  # unknown types stay ints
    leader = decode_control_record(5, 6, encode_control_key(ControlType.LEADER_CHANGE), b"\x00")
    assert leader.type is ControlType.LEADER_CHANGE and leader.coordinator_epoch is None
    with pytest.raises(MalformedDataError, match="shorter than 4"):
        decode_control_record(0, 0, b"\x00", None)
    with pytest.raises(MalformedDataError, match="key version -1"):
        decode_control_record(0, 0, struct.pack(">hh", -1, 0), None)
    with pytest.raises(MalformedDataError, match="shorter than 6"):
        decode_control_record(0, 0, encode_control_key(ControlType.COMMIT), b"\x00\x00")
    with pytest.raises(ValueError):
        build_control_batch(ControlType.LEADER_CHANGE, 1, 0, 0)


def _stream() -> bytearray:
    parts = []
    for codec in (Compression.NONE, Compression.LZ4, Compression.GZIP):
        b = RecordBatchBuilder(codec, producer_id=1, producer_epoch=0, base_sequence=0)
        for i in range(5):
            b.append(None, 1000 + i, None, b"v%d" % i)
        parts.append(b.build())
    return bytearray(b"".join(parts))


def test_patch_base_offset_and_leader_epoch_in_place() -> None:
    buf = _stream()
    before = bytes(buf)
    next_offset = 500
    for batch in list(iter_batches(buf)):
        patch_batch(buf, batch.position, base_offset=next_offset, partition_leader_epoch=12)
        next_offset += batch.record_count
    for batch in read_batches(before):  # the CRC-covered bytes are untouched
        checked = slice(batch.position + 17, batch.position + batch.size)
        assert buf[checked] == before[checked]
    batches = read_batches(bytes(buf))
    assert [b.base_offset for b in batches] == [500, 505, 510]
    assert {b.partition_leader_epoch for b in batches} == {12}
    for batch in batches:
        batch.validate_crc()  # both fields sit before the CRC-covered region
    assert [r.offset for b in batches for r in b.records()] == list(range(500, 515))


def test_patch_log_append_time_recomputes_crc() -> None:
    buf = _stream()
    positions = [b.position for b in iter_batches(buf)]
    for pos in positions:
        patch_batch(buf, pos, base_offset=0, log_append_time_ms=99_999)
    for batch in read_batches(bytes(buf)):
        batch.validate_crc()
        assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
        assert batch.max_timestamp == 99_999
        assert {r.timestamp for r in batch.records()} == {99_999}
    kp = KpRecords(bytes(buf)).next_batch()
    assert kp.validate_crc()
    assert [r.timestamp for r in kp] == [99_999] * 5

    # Patching again with the same time changes nothing; a corrupt batch is refused rather
    # than given a fresh CRC.
    again = bytearray(buf)
    patch_batch(again, positions[0], log_append_time_ms=99_999)
    assert again == buf
    again[positions[1] + 70] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        patch_batch(again, positions[1], log_append_time_ms=5)


def test_patch_producer_state() -> None:
    buf = _stream()
    pos = read_batches(buf)[1].position
    patch_producer_state(buf, pos, 77, 3, 1000)
    batch = read_batches(bytes(buf))[1]
    batch.validate_crc()
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 3, 1000)
    assert [r.value for r in batch.records()] == [b"v%d" % i for i in range(5)]
    buf[pos + 80] ^= 1
    with pytest.raises(CorruptRecordError):
        patch_producer_state(buf, pos, 1, 1, 1)


def test_patch_rejects_bad_targets() -> None:
    buf = _stream()
    with pytest.raises(MalformedDataError, match="no complete v2 batch header"):
        patch_batch(buf[:40], 0, base_offset=1)
    with pytest.raises(MalformedDataError, match="declares"):
        patch_batch(buf[:100], 0, base_offset=1)
    legacy = bytearray(buf)
    legacy[16] = 1
    with pytest.raises(MalformedDataError, match="only v2"):
        patch_batch(legacy, 0, base_offset=1)
    with pytest.raises(MalformedDataError):
        patch_batch(buf, -5, base_offset=1)
