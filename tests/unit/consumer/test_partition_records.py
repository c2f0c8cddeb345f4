"""PartitionRecords: decoding fetched batches in every format, markers, aborted transactions."""

from __future__ import annotations

import struct
import zlib

import pytest

from sdk.consumer.errors import RecordDeserializationError
from sdk.consumer.partition_records import PartitionRecords
from sdk.errors import CorruptRecordError
from sdk.records import ControlType, RecordBatchBuilder, build_control_batch, patch_batch
from sdk.types import TimestampType
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
