"""Offset resolution and task planning (pure; the cluster is an in-memory OffsetLookup)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdk.errors import ConfigError
from sdk.spark.errors import DataLossError, OffsetNotFoundError
from sdk.spark.offsets import (
    EARLIEST,
    LATEST,
    Earliest,
    GlobalTimestamp,
    Latest,
    PartitionOffsets,
    PartitionTimestamps,
    SpecificOffsets,
)
from sdk.spark.planning import (
    OffsetRange,
    check_batch_ranges,
    limit_offsets,
    resolve_offsets,
    split_ranges,
)
from sdk.types import TopicPartition

T0, T1, T2 = (TopicPartition("t", n) for n in range(3))


class LogTable:
    """An OffsetLookup over fixed logs: per partition (log start, end, [(offset, ts)...])."""

    def __init__(self, logs: Mapping[TopicPartition, tuple[int, int, list[tuple[int, int]]]]):
        self.logs = logs

    def earliest(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        return {tp: self.logs[tp][0] for tp in partitions}

    def latest(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        return {tp: self.logs[tp][1] for tp in partitions}

    def for_times(self, timestamps: Mapping[TopicPartition, int]
                  ) -> dict[TopicPartition, int | None]:
        return {tp: next((o for o, t in self.logs[tp][2] if t >= ts), None)
                for tp, ts in timestamps.items()}


LOGS = LogTable({
    T0: (0, 10, [(o, 1000 + 100 * o) for o in range(10)]),
    T1: (5, 20, [(o, 1000 + 100 * o) for o in range(5, 20)]),
})


def test_resolve_earliest_latest_and_specific() -> None:
    parts = [T0, T1]
    assert resolve_offsets(Earliest(), parts, LOGS, is_start=True) == {T0: 0, T1: 5}
    assert resolve_offsets(Latest(), parts, LOGS, is_start=False) == {T0: 10, T1: 20}
    spec = SpecificOffsets({T0: EARLIEST, T1: LATEST})
    assert resolve_offsets(spec, parts, LOGS, is_start=True) == {T0: 0, T1: 20}
    assert resolve_offsets(SpecificOffsets({T0: 3, T1: 7}), parts, LOGS,
                           is_start=True) == {T0: 3, T1: 7}


def test_specific_offsets_must_name_every_partition() -> None:
    with pytest.raises(ConfigError, match=r"missing t-1"):
        resolve_offsets(SpecificOffsets({T0: 1}), [T0, T1], LOGS, is_start=True)
    with pytest.raises(ConfigError, match=r"not part of the query: t-2"):
        resolve_offsets(SpecificOffsets({T0: 1, T1: 1, T2: 1}), [T0, T1], LOGS, is_start=True)


def test_resolve_timestamps() -> None:
    # t-0: ts 1000+100*o, so ts 1250 -> offset 3; t-1 starts at offset 5 (ts 1500).
    assert resolve_offsets(GlobalTimestamp(1250), [T0, T1], LOGS,
                           is_start=True) == {T0: 3, T1: 5}
    spec = PartitionTimestamps({T0: 1000, T1: 2500})
    assert resolve_offsets(spec, [T0, T1], LOGS, is_start=False) == {T0: 0, T1: 15}
    # Past the last record: an ending offset becomes latest; a start fails by default...
    assert resolve_offsets(GlobalTimestamp(99_999), [T0], LOGS, is_start=False) == {T0: 10}
    with pytest.raises(OffsetNotFoundError, match="t-0"):
        resolve_offsets(GlobalTimestamp(99_999), [T0], LOGS, is_start=True)
    # ... or is latest with startingOffsetsByTimestampStrategy=latest.
    assert resolve_offsets(GlobalTimestamp(99_999), [T0], LOGS, is_start=True,
                           strategy="latest") == {T0: 10}


def test_batch_ranges_check_the_log() -> None:
    ranges = check_batch_ranges({T0: 2, T1: 5}, {T0: 10, T1: 9}, {T0: 0, T1: 5},
                                {T0: 10, T1: 20}, fail_on_data_loss=True)
    assert ranges == [OffsetRange("t", 0, 2, 10), OffsetRange("t", 1, 5, 9)]
    with pytest.raises(DataLossError, match="before its earliest available offset 5"):
        check_batch_ranges({T1: 1}, {T1: 9}, {T1: 5}, {T1: 20}, fail_on_data_loss=True)
    assert check_batch_ranges({T1: 1}, {T1: 99}, {T1: 5}, {T1: 20},
                              fail_on_data_loss=False) == [OffsetRange("t", 1, 5, 20)]
    with pytest.raises(ConfigError, match="after its ending offset"):
        check_batch_ranges({T0: 8}, {T0: 4}, {T0: 0}, {T0: 10}, fail_on_data_loss=False)


def test_split_by_max_records_then_min_partitions() -> None:
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 50, 50),
              OffsetRange("t", 2, 0, 10)]
    assert split_ranges(ranges) == [OffsetRange("t", 0, 0, 100), OffsetRange("t", 2, 0, 10)]
    by_max = split_ranges(ranges, max_records_per_partition=30)
    assert [r.size for r in by_max] == [25, 25, 25, 25, 10]
    by_min = split_ranges(ranges, min_partitions=6)
    assert len(by_min) == 6
    # The big partition takes the extra splits; the small one stays whole.
    assert [r.size for r in by_min if r.partition == 2] == [10]
    assert split_ranges([OffsetRange("t", 0, 0, 3)], min_partitions=10) == [
        OffsetRange("t", 0, 0, 1), OffsetRange("t", 0, 1, 2), OffsetRange("t", 0, 2, 3)]


range_lists = st.lists(
    st.tuples(st.integers(0, 4), st.integers(0, 1000), st.integers(0, 500)),
    min_size=1, max_size=5, unique_by=lambda t: t[0],
).map(lambda items: [OffsetRange("t", p, s, s + n) for p, s, n in items])


@settings(max_examples=200, deadline=None)
@given(range_lists, st.none() | st.integers(1, 40), st.none() | st.integers(1, 200))
def test_split_covers_every_offset_once(ranges: list[OffsetRange], min_partitions: int | None,
                                        max_records: int | None) -> None:
    pieces = split_ranges(ranges, min_partitions=min_partitions,
                          max_records_per_partition=max_records)
    covered = sorted((p.partition, o) for p in pieces for o in range(p.start, p.end))
    assert covered == sorted((r.partition, o) for r in ranges for o in range(r.start, r.end))
    assert all(p.size > 0 for p in pieces)
    if max_records is not None and min_partitions is None:
        assert all(p.size <= max_records for p in pieces)
    total = sum(r.size for r in ranges)
    if min_partitions is not None:
        assert len(pieces) >= min(min_partitions, total)


def test_limit_shares_by_backlog() -> None:
    start = {T0: 0, T1: 100, T2: 5}
    latest = {T0: 300, T1: 200, T2: 5}
    assert limit_offsets(start, latest, 1000) == latest
    assert limit_offsets(start, latest, 40) == {T0: 30, T1: 110, T2: 5}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 5_000)), min_size=1,
                max_size=6),
       st.integers(1, 3_000))
def test_limit_never_exceeds_and_always_progresses(spans: list[tuple[int, int]],
                                                   limit: int) -> None:
    start = {TopicPartition("t", i): s for i, (s, _) in enumerate(spans)}
    latest = {TopicPartition("t", i): s + n for i, (s, n) in enumerate(spans)}
    end = limit_offsets(start, latest, limit)
    read = sum(end[tp] - start[tp] for tp in start)
    backlog = sum(latest[tp] - start[tp] for tp in start)
    assert read == min(limit, backlog)
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in start)
