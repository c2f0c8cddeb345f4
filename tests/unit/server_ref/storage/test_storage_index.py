"""Offset and time indexes: Kafka's file formats, lookups, and ListOffsets by timestamp."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from server_ref.storage.index import OffsetIndex, TimeIndex


def test_offset_index_file_format_is_relative_offset_and_position(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000001000.index", 1000, 100)
    index.mark_loaded_empty()
    index.append(1004, 0)
    index.append(1010, 300)
    index.flush()
    raw = (tmp_path / "00000000000000001000.index").read_bytes()
    assert raw == struct.pack(">iiii", 4, 0, 10, 300)
    index.append(1020, 650)
    index.flush()  # appends only the new entry
    assert (tmp_path / "00000000000000001000.index").read_bytes() == raw + struct.pack(">ii", 20, 650)
    again = OffsetIndex(index.path, 1000, 100)
    assert again.entries() == [(1004, 0), (1010, 300), (1020, 650)]
    assert again.lookup(999) == (999, 0)  # nothing below: scan from the segment start
    assert again.lookup(1010) == (1010, 300)
    assert again.lookup(1015) == (1010, 300)
    assert again.lookup_position(649) == (1010, 300)
    with pytest.raises(ValueError):
        again.append(1020, 700)  # offsets must grow
    again.truncate_to_position(300)
    again.flush()
    assert OffsetIndex(index.path, 1000, 100).entries() == [(1004, 0)]


def test_time_index_file_format_and_strictly_growing_timestamps(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "00000000000000000050.timeindex", 50, 100)
    index.mark_loaded_empty()
    index.maybe_append(1000, 52)
    index.maybe_append(1000, 55)  # not above the last timestamp: skipped
    index.maybe_append(900, 58)
    index.maybe_append(2000, 60)
    index.flush()
    assert index.path.read_bytes() == struct.pack(">qiqi", 1000, 2, 2000, 10)
    again = TimeIndex(index.path, 50, 100)
    assert again.lookup_below(1000) is None
    assert again.lookup_below(1001) == (1000, 52)
    assert again.lookup_below(5000) == (2000, 60)


def test_an_index_file_out_of_order_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(struct.pack(">iiii", 10, 500, 5, 900))
    index = OffsetIndex(path, 0, 100)
    assert index.load() is False and index.entries() == []


def brute_force(records: list[tuple[int, int]], target: int) -> tuple[int, int] | None:
    for offset, ts in records:
        if ts >= target:
            return offset, ts
    return None


@pytest.mark.parametrize("compression", ["none", "lz4"])
def test_offset_for_timestamp_is_the_earliest_offset_at_or_after_the_target(
    open_log, make_batch, compression: str
) -> None:
    rng = random.Random(7)
    log = open_log(segment_bytes=4000, index_interval_bytes=300)
    records: list[tuple[int, int]] = []
    base = 1_000_000
    for i in range(150):
        # Timestamps mostly grow but jump back now and then, as producer clocks do.
        count = rng.randint(1, 6)
        stamps = [base + i * 100 + rng.randint(-350, 60) for _ in range(count)]
        info = log.append(make_batch(count, timestamp=stamps, compression=compression))
        records.extend(zip(range(info.first_offset, info.last_offset + 1), stamps))
    assert len(log.segments) > 3
    assert sum(len(s.time_index) for s in log.segments) > 10
    targets = [rng.randint(base - 500, base + 15_200) for _ in range(150)]
    targets += [ts for _o, ts in records[::17]] + [base + 99_999]
    for target in targets:
        assert log.offset_for_timestamp(target) == brute_force(records, target), target
    newest = max(ts for _o, ts in records)
    assert log.max_timestamp() == brute_force(records, newest)
    assert log.offset_for_timestamp(newest + 1) is None


def test_time_lookups_on_an_empty_log(open_log) -> None:
    log = open_log()
    assert log.offset_for_timestamp(0) is None
    assert log.max_timestamp() is None
