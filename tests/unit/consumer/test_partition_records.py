"""PartitionRecords: decoding fetched batches in every format, markers, aborted transactions."""

from __future__ import annotations

import struct
import zlib

import pytest

from sdk.consumer.errors import RecordDeserializationError
from sdk.consumer.partition_records import PartitionRecords
from sdk.errors import CorruptRecordError
from sdk.records import (
    ControlType,
    RecordBatchBuilder,
    build_control_batch,
    iter_batches,
    patch_batch,
)
from sdk.types import ConsumerRecord, TimestampType
from sdk.types import TopicPartition as TP

TP0 = TP("t", 0)


def batch(base_offset: int, values: list[bytes | None], *, codec: str = "none",
          pid: int = -1, transactional: bool = False, offset_deltas: list[int] | None = None,
          leader_epoch: int = -1) -> bytes:
    b = RecordBatchBuilder(codec, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                           base_sequence=0 if pid >= 0 else -1, is_transactional=transactional)
    for i, v in enumerate(values):
        delta = offset_deltas[i] if offset_deltas else i
        b.append(delta, 1_700_000_000_000 + i, b"k%d" % i, v, [("h", b"x")])
    data = bytearray(b.build())
    patch_batch(data, base_offset=base_offset, partition_leader_epoch=leader_epoch)
    return bytes(data)


def marker(offset: int, pid: int, kind: ControlType) -> bytes:
    data = bytearray(build_control_batch(kind, pid, 0, 1))
    patch_batch(data, base_offset=offset)
    return bytes(data)


def legacy_message(offset: int, value: bytes, magic: int = 1) -> bytes:
    body = struct.pack(">bb", magic, 0)
    if magic == 1:
        body += struct.pack(">q", 1_600_000_000_000)
    body += struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    crc = zlib.crc32(body) & 0xFFFFFFFF
    message = struct.pack(">I", crc) + body
    return struct.pack(">qi", offset, len(message)) + message


def offsets(records) -> list[int]:
    return [r.offset for r in records]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_decodes_from_the_fetch_offset(codec: str) -> None:
    data = batch(10, [b"a", b"b", b"c", b"d"], codec=codec, leader_epoch=3) + batch(14, [b"e"], codec=codec)
    pr = PartitionRecords(TP0, 12, data)
    first = pr.drain(2)
    assert offsets(first) == [12, 13]
    assert [r.value for r in first] == [b"c", b"d"]
    assert first[0].key == b"k2" and first[0].headers == [("h", b"x")]
    assert first[0].timestamp_type is TimestampType.CREATE_TIME
    assert first[0].leader_epoch == 3 and first[0].serialized_value_size == 1
    assert pr.next_offset == 14
    assert offsets(pr.drain(10)) == [14]
    assert pr.next_offset == 15 and pr.exhausted
    assert pr.drain(10) == []


def test_legacy_message_sets() -> None:
    data = legacy_message(5, b"old", magic=0) + legacy_message(6, b"older", magic=1)
    pr = PartitionRecords(TP0, 5, data)
    records = pr.drain(10)
    assert [(r.offset, r.value) for r in records] == [(5, b"old"), (6, b"older")]
    assert records[0].timestamp_type is TimestampType.NO_TIMESTAMP_TYPE
    assert records[1].timestamp == 1_600_000_000_000
    assert pr.next_offset == 7


def test_control_batches_are_skipped_and_stepped_over() -> None:
    data = batch(0, [b"a", b"b"], pid=7, transactional=True) + marker(2, 7, ControlType.COMMIT)
    pr = PartitionRecords(TP0, 0, data)
    assert offsets(pr.drain(10)) == [0, 1]
    assert pr.next_offset == 3  # past the marker, so lag reads 0 and the commit passes it
    assert pr.exhausted


def test_compaction_gaps_move_the_position_to_the_batch_end() -> None:
    data = batch(0, [b"a", b"b"], offset_deltas=[0, 4])  # offsets 0 and 4; 1-3 compacted
    pr = PartitionRecords(TP0, 0, data)
    assert offsets(pr.drain(1)) == [0]
    assert pr.next_offset == 1
    assert offsets(pr.drain(1)) == [4]
    assert pr.next_offset == 5


def test_read_committed_drops_aborted_transactions() -> None:
    data = (
        batch(0, [b"c1", b"c2"], pid=1, transactional=True)       # committed below
        + batch(2, [b"x1", b"x2"], pid=2, transactional=True)     # aborted
        + batch(4, [b"plain"])                                     # non-transactional
        + marker(5, 2, ControlType.ABORT)
        + marker(6, 1, ControlType.COMMIT)
        + batch(7, [b"y1"], pid=2, transactional=True)            # a later, committed txn of 2
        + marker(8, 2, ControlType.COMMIT)
    )
    aborted = [(2, 2)]  # (producer id, first offset)
    committed = PartitionRecords(TP0, 0, data, aborted_transactions=aborted, read_committed=True)
    assert [r.value for r in committed.drain(100)] == [b"c1", b"c2", b"plain", b"y1"]
    assert committed.next_offset == 9
    uncommitted = PartitionRecords(TP0, 0, data, aborted_transactions=aborted)
    assert [r.value for r in uncommitted.drain(100)] == [b"c1", b"c2", b"x1", b"x2", b"plain", b"y1"]


def test_crc_failure_keeps_the_position_and_sticks() -> None:
    good = batch(0, [b"a"])
    bad = bytearray(batch(1, [b"b"]))
    bad[-1] ^= 0xFF
    pr = PartitionRecords(TP0, 0, good + bytes(bad))
    assert offsets(pr.drain(10)) == [0]
    assert pr.failed
    for _ in range(2):
        with pytest.raises(CorruptRecordError):
            pr.drain(10)
    assert pr.next_offset == 1
    unchecked = PartitionRecords(TP0, 0, good + bytes(bad), check_crcs=False)
    assert offsets(unchecked.drain(10)) == [0, 1]


def test_deserializer_failure_names_the_record_and_keeps_the_position() -> None:
    def value_as_int(data: bytes | None) -> int:
        return int(data or b"")

    data = batch(0, [b"1", b"2", b"oops", b"4"])
    pr = PartitionRecords(TP0, 0, data, value_deserializer=value_as_int,
                          key_deserializer=lambda k: k.decode() if k else None)
    first = pr.drain(10)
    assert [r.value for r in first] == [1, 2] and first[0].key == "k0"
    assert first[0].serialized_value_size == 1
    with pytest.raises(RecordDeserializationError) as info:
        pr.drain(10)
    assert (info.value.topic_partition, info.value.offset) == (TP0, 2)
    assert pr.next_offset == 2


def test_trailing_partial_batch_is_ignored_and_empty_data() -> None:
    whole = batch(0, [b"a"])
    cut = batch(1, [b"b" * 100])[:40]
    pr = PartitionRecords(TP0, 0, whole + cut)
    assert offsets(pr.drain(10)) == [0]
    assert pr.exhausted and pr.next_offset == 1
    empty = PartitionRecords(TP0, 3, None)
    assert empty.drain(5) == [] and empty.exhausted and empty.next_offset == 3


def _reference(data: bytes, fetch_offset: int, topic_partition: TP) -> list[ConsumerRecord]:
    """What a consumer must hand out, built from the generic reader."""
    out = []
    for b in iter_batches(data):
        if b.is_control:
            continue
        ts_type = TimestampType(int(b.timestamp_type))
        epoch = b.partition_leader_epoch
        for r in b.records():
            if r.offset < fetch_offset:
                continue
            out.append(ConsumerRecord(
                topic_partition.topic, topic_partition.partition, r.offset, r.key, r.value,
                r.headers, r.timestamp, ts_type, -1 if r.key is None else len(r.key),
                -1 if r.value is None else len(r.value), epoch if epoch >= 0 else None))
    return out


def _mixed_batch(base_offset: int, codec: str, n: int, *, log_append: bool = False) -> bytes:
    b = RecordBatchBuilder(codec)
    for i in range(n):
        key = None if i % 4 == 1 else b"key-%d" % i
        value = None if i % 5 == 2 else bytes([i % 256]) * (i * 37 % 1500)
        headers = [("trace", b"t%d" % i), ("empty", None)] if i % 3 == 0 else []
        b.append(i, 1_700_000_000_000 + i * 3 - 5, key, value, headers)
    data = bytearray(b.build())
    patch_batch(data, base_offset=base_offset, partition_leader_epoch=base_offset % 3 - 1,
                log_append_time_ms=1_700_000_009_999 if log_append else None)
    return bytes(data)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("max_records", [1, 7, 500])
def test_handed_out_records_match_the_generic_reader(codec: str, max_records: int) -> None:
    data = (
        _mixed_batch(0, codec, 30)
        + marker(30, 9, ControlType.COMMIT)
        + _mixed_batch(31, codec, 12, log_append=True)
        + _mixed_batch(43, codec, 1)
    )
    for fetch_offset in (0, 5, 31, 40):
        pr = PartitionRecords(TP0, fetch_offset, data)
        got: list[ConsumerRecord] = []
        while chunk := pr.drain(max_records):
            assert len(chunk) <= max_records
            got.extend(chunk)
        assert got == _reference(data, fetch_offset, TP0)
        assert pr.exhausted and pr.next_offset == 44


def test_legacy_and_v2_mixed_match_the_generic_reader() -> None:
    data = legacy_message(0, b"old", magic=0) + legacy_message(1, b"older") + _mixed_batch(2, "lz4", 9)
    pr = PartitionRecords(TP0, 0, data)
    assert pr.drain(100) == _reference(data, 0, TP0)


def test_deserializers_apply_to_what_is_handed_out() -> None:
    data = _mixed_batch(0, "none", 20)
    pr = PartitionRecords(TP0, 0, data, key_deserializer=lambda k: ("K", k),
                          value_deserializer=lambda v: ("V", v))
    got = pr.drain(7) + pr.drain(100)
    want = _reference(data, 0, TP0)
    assert [r.key for r in got] == [("K", r.key) for r in want]
    assert [r.value for r in got] == [("V", r.value) for r in want]
    assert [r.serialized_value_size for r in got] == [r.serialized_value_size for r in want]
