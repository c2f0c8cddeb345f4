"""PartitionLog append/read: offsets, rolls, read slices, reopen, LogAppendTime, fsync."""

from __future__ import annotations

import itertools
import os
import socket
from pathlib import Path

import pytest

from sdk.errors import (
    CorruptMessageError,
    IllegalStateError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    UnsupportedForMessageFormatError,
)
from sdk.records.header import TimestampType
from server_ref.storage import LogConfig, PartitionLog


def test_new_log_is_empty_with_kafka_file_names(open_log, log_dir: Path) -> None:
    log = open_log()
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert log.read(0, 1000).size == 0
    names = sorted(p.name for p in log_dir.iterdir())
    assert "00000000000000000000.log" in names
    log.close()
    names = sorted(p.name for p in log_dir.iterdir())
    assert {"00000000000000000000.index", "00000000000000000000.timeindex"} <= set(names)


def test_offsets_are_assigned_and_high_watermark_follows_multi_record_batches(
    open_log, make_batch, batches_of
) -> None:
    log = open_log()
    first = log.append(make_batch(100))
    assert (first.first_offset, first.last_offset, first.record_count) == (0, 99, 100)
    assert first.log_append_time_ms == -1
    assert log.log_end_offset == log.high_watermark == 100
    second = log.append(make_batch(1) + make_batch(7))  # two batches in one append
    assert (second.first_offset, second.last_offset, second.record_count) == (100, 107, 8)
    assert log.log_end_offset == 108
    stored = batches_of(log.read(0, 1 << 20).to_bytes())
    assert [(b.base_offset, b.last_offset) for b in stored] == [(0, 99), (100, 100), (101, 107)]
    assert all(b.crc_matches() for b in stored)  # the base offset is outside the CRC


def test_bytearray_input_is_patched_in_place_and_bytes_input_is_copied(open_log, make_batch) -> None:
    log = open_log()
    log.append(make_batch(3))
    raw = bytearray(make_batch(2))
    log.append(raw)
    assert int.from_bytes(raw[:8], "big") == 3
    frozen = make_batch(2)
    log.append(frozen)
    assert int.from_bytes(frozen[:8], "big") == 0


def test_round_trip_across_segment_rolls(open_log, make_batch, read_all) -> None:
    log = open_log(segment_bytes=4096, index_interval_bytes=256)
    expected = []
    for i in range(200):
        count = 1 + i % 5
        values = [(f"k{i}".encode(), f"value-{i}-{j}".encode() * 3) for j in range(count)]
        log.append(make_batch(values, timestamp=1000 + i))
        expected.extend(values)
    assert len(log.segments) > 5
    bases = [s.base_offset for s in log.segments]
    assert bases == sorted(bases) and bases[0] == 0
    # Each segment's base is the offset after the previous segment's last batch.
    for prev, seg in zip(log.segments, log.segments[1:]):
        assert prev.next_offset == seg.base_offset
        assert prev.size <= 4096
    records = read_all(log)
    assert [r.offset for r in records] == list(range(len(expected)))
    assert [(r.key, r.value) for r in records] == expected


def test_read_returns_whole_batches_from_the_one_holding_the_offset(
    open_log, make_batch, batches_of
) -> None:
    log = open_log(index_interval_bytes=100)
    for _ in range(50):
        log.append(make_batch(10, value_size=20))  # offsets 10k .. 10k+9
    one_batch = len(make_batch(10, value_size=20))
    got = batches_of(log.read(237, 3 * one_batch).to_bytes())
    assert [b.base_offset for b in got] == [230, 240, 250]
    # At least one batch, even when it is larger than max_bytes (Kafka's rule).
    got = batches_of(log.read(237, 1).to_bytes())
    assert [b.base_offset for b in got] == [230]
    # A budget between batch sizes rounds down to whole batches.
    got = log.read(230, 2 * one_batch + one_batch // 2)
    assert got.size == 2 * one_batch and got.first_offset == 230
    assert log.read(500, 1000).size == 0  # at the log end: empty
    with pytest.raises(OffsetOutOfRangeError):
        log.read(501, 1000)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 1000)


def test_read_spans_segments_and_stops_before_max_offset(open_log, make_batch, batches_of) -> None:
    log = open_log(segment_bytes=1024)
    for _ in range(40):
        log.append(make_batch(4, value_size=30))
    assert len(log.segments) > 3
    everything = batches_of(log.read(0, 1 << 20).to_bytes())
    assert [b.base_offset for b in everything] == list(range(0, 160, 4))
    assert len(log.read(0, 1 << 20).chunks) == len(log.segments)
    bounded = batches_of(log.read(10, 1 << 20, max_offset=61).to_bytes())
    assert (bounded[0].base_offset, bounded[-1].last_offset) == (8, 59)  # 60..63 crosses 61
    assert log.read(60, 1 << 20, max_offset=60).size == 0


def test_read_slice_serves_through_sendfile(open_log, make_batch) -> None:
    log = open_log(segment_bytes=2048)
    for _ in range(30):
        log.append(make_batch(5, value_size=40))
    piece = log.read(0, 1 << 20)
    assert len(piece.chunks) > 1
    expected = piece.to_bytes()
    left, right = socket.socketpair()
    with left, right:
        for f, position, size in piece.chunks:
            sent = 0
            while sent < size:
                sent += os.sendfile(left.fileno(), f.fileno(), position + sent, size - sent)
        left.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := right.recv(65536):
            received += chunk
    assert received == expected and len(received) == piece.size


def test_offset_index_is_sparse_and_reads_use_it(open_log, make_batch) -> None:
    log = open_log(index_interval_bytes=1000)
    batch = make_batch(2, value_size=100)
    for _ in range(100):
        log.append(batch)
    index = log.active_segment.offset_index
    entries = index.entries()
    assert 0 < len(entries) < 100
    # An entry every time more than index.interval.bytes were written since the last one.
    positions = [p for _o, p in entries]
    gaps = {b - a for a, b in itertools.pairwise(positions)}
    assert all(g > 1000 for g in gaps) and all(g <= 1000 + 2 * len(batch) for g in gaps)
    for offset, position in entries:  # each entry points at the batch ending at its offset
        header = log.active_segment.read_header(position)
        assert header is not None and header.last_offset == offset
    assert index.lookup(125) == max(e for e in entries if e[0] <= 125)
    pos, header = log.active_segment.translate_offset(125)
    assert header.base_offset == 124 and pos == 62 * len(batch)


def test_reopen_after_close_gives_the_same_state(open_log, make_batch, read_all) -> None:
    log = open_log(segment_bytes=3000, index_interval_bytes=200)
    for i in range(60):
        log.append(make_batch([(b"k", b"v%d" % i)] * 3, timestamp=5000 + i))
    before = read_all(log)
    indexes = [(s.offset_index.entries(), s.time_index.entries()) for s in log.segments]
    state = (log.log_start_offset, log.log_end_offset, log.max_timestamp(), len(log.segments))
    log.close()
    with pytest.raises(IllegalStateError):
        log.read(0, 100)
    again = open_log(segment_bytes=3000, index_interval_bytes=200)
    assert again.recovery_report.clean and again.recovery_report.segments_recovered == 0
    assert (again.log_start_offset, again.log_end_offset, again.max_timestamp(),
            len(again.segments)) == state
    assert read_all(again) == before
    assert [(s.offset_index.entries(), s.time_index.entries()) for s in again.segments] == indexes
    info = again.append(make_batch(2))
    assert info.first_offset == state[1]


def test_log_append_time_stamps_batches_and_keeps_crc_valid(
    open_log, make_batch, batches_of, clock
) -> None:
    log = open_log(message_timestamp_type="LogAppendTime")
    info = log.append(make_batch(3, timestamp=42))
    assert info.log_append_time_ms == clock.now == info.max_timestamp
    (batch,) = batches_of(log.read(0, 1000).to_bytes())
    assert batch.crc_matches()
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in batch.records()] == [clock.now] * 3
    assert log.offset_for_timestamp(clock.now) == (0, clock.now)


def test_bad_input_raises_typed_errors_and_appends_nothing(open_log, make_batch) -> None:
    log = open_log(max_message_bytes=500)
    good = make_batch(1)
    with pytest.raises(CorruptMessageError):
        log.append(good[:-3])  # declared length runs past the buffer
    with pytest.raises(CorruptMessageError):
        log.append(good + good[:20])  # a trailing partial header
    legacy = bytearray(good)
    legacy[16] = 1
    with pytest.raises(UnsupportedForMessageFormatError):
        log.append(legacy)
    with pytest.raises(MessageTooLargeError):
        log.append(make_batch(1, value_size=600))
    assert log.log_end_offset == 0 and log.active_segment.size == 0
    assert log.append(b"").record_count == 0


def test_follower_append_keeps_given_offsets_and_leader_epoch(open_log, make_batch, batches_of) -> None:
    leader = open_log()
    leader.append(make_batch(4), leader_epoch=3)
    leader.append(make_batch(2), leader_epoch=5)
    copy = leader.read(0, 1 << 20).to_bytes()
    follower = PartitionLog.open(leader.directory.parent / "follower-0", LogConfig())
    try:
        info = follower.append(copy, assign_offsets=False)
        assert (info.first_offset, info.last_offset, follower.log_end_offset) == (0, 5, 6)
        got = batches_of(follower.read(0, 1 << 20).to_bytes())
        assert [(b.base_offset, b.partition_leader_epoch) for b in got] == [(0, 3), (4, 5)]
        with pytest.raises(Exception, match="below the log end"):
            follower.append(copy, assign_offsets=False)
    finally:
        follower.close()


def test_truncate_to_drops_whole_batches(open_log, make_batch, read_all) -> None:
    log = open_log(segment_bytes=1024)
    for i in range(30):
        log.append(make_batch(3, timestamp=100 + i))
    assert log.truncate_to(50) == 48  # batch 48..50 goes whole
    assert log.log_end_offset == 48 and log.max_timestamp() == (45, 115)
    assert [r.offset for r in read_all(log)] == list(range(48))
    assert log.append(make_batch(1)).first_offset == 48
    assert log.truncate_fully_and_start_at(500) == 500
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (500, 500, 1)
    assert log.append(make_batch(1)).first_offset == 500


def test_segment_ms_rolls_by_record_time(open_log, make_batch) -> None:
    log = open_log(segment_ms=1000)
    log.append(make_batch(1, timestamp=10_000))
    log.append(make_batch(1, timestamp=10_900))
    assert len(log.segments) == 1
    log.append(make_batch(1, timestamp=11_001))
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_fsync_per_append_with_flush_messages_1(open_log, make_batch, monkeypatch) -> None:
    synced: list[int] = []
    real = os.fdatasync

    def counting_fdatasync(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", counting_fdatasync)
    lazy = open_log()
    for _ in range(5):
        lazy.append(make_batch(2))
    assert synced == []  # the default leaves flushing to the page cache, as Kafka does
    lazy.close()
    eager = PartitionLog.open(lazy.directory.parent / "eager-0", LogConfig(flush_messages=1))
    try:
        for _ in range(5):
            eager.append(make_batch(2))
        assert len(synced) == 5
        every_ten = LogConfig(flush_messages=10)
        eager.update_config(every_ten)
        for _ in range(10):
            eager.append(make_batch(2))
        assert len(synced) == 7
    finally:
        eager.close()


def test_batch_headers_for_producer_state(open_log, make_batch) -> None:
    log = open_log(segment_bytes=1024)
    for i in range(20):
        log.append(make_batch(2, producer_id=7, producer_epoch=1, base_sequence=2 * i))
    headers = list(log.batch_headers(15))
    assert headers[0].base_offset == 14 and headers[-1].last_offset == 39
    assert [h.base_sequence for h in headers] == list(range(14, 40, 2))
    assert all(h.producer_id == 7 and h.producer_epoch == 1 for h in headers)
    assert headers[-1].last_sequence == 39


def test_config_validation_names_the_kafka_key() -> None:
    with pytest.raises(ValueError, match=r"cleanup\.policy"):
        LogConfig(cleanup_policy="shred")
    with pytest.raises(ValueError, match=r"segment\.bytes"):
        LogConfig(segment_bytes=0)
    assert LogConfig(cleanup_policy="delete,compact").cleanup_policy == "compact,delete"
    conf = LogConfig.from_kafka({"retention.ms": "1000", "cleanup.policy": "compact", "x.y": "1"})
    assert (conf.retention_ms, conf.compact, conf.delete) == (1000, True, False)
    assert LogConfig.from_kafka(conf.to_kafka()) == conf


def test_delete_removes_the_directory(open_log, make_batch, log_dir: Path) -> None:
    log = open_log()
    log.append(make_batch(1))
    log.delete()
    assert not log_dir.exists()


def test_log_append_time_refuses_to_bless_a_corrupt_batch_with_a_fresh_crc(
    open_log, make_batch
) -> None:
    log = open_log(message_timestamp_type="LogAppendTime")
    damaged = bytearray(make_batch(2))
    damaged[-1] ^= 0xFF
    with pytest.raises(CorruptMessageError):
        log.append(damaged)
    assert log.log_end_offset == 0
