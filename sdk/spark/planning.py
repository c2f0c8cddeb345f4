"""Turning offset specs into concrete offsets, and offsets into Spark tasks.

Pure functions over plain data: the broker is reached only through an :class:`OffsetLookup`
handed in by the caller, so the rules (Spark's connector's, see the README's Spark section) are tested
without a cluster.

* :func:`resolve_offsets` -- an :data:`OffsetSpec` (earliest, latest, JSON offsets,
  timestamps) to one offset per partition.
* :func:`split_ranges` -- per-partition ranges to Spark input partitions, honouring
  ``maxRecordsPerPartition`` and then ``minPartitions``.
* :func:`limit_offsets` -- ``maxOffsetsPerTrigger``: how far each partition advances in one
  micro-batch, shared by backlog.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from sdk.errors import ConfigError
from sdk.spark.errors import DataLossError, OffsetNotFoundError
from sdk.spark.offsets import (
    EARLIEST,
    LATEST,
    Earliest,
    GlobalTimestamp,
    Latest,
    OffsetSpec,
    PartitionOffsets,
    PartitionTimestamps,
    SpecificOffsets,
    describe_partitions,
)
from sdk.types import TopicPartition


class OffsetLookup(Protocol):
    """What the planner asks the cluster (the driver answers it with an SDK consumer)."""

    def earliest(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets: ...

    def latest(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets: ...

    def for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]: ...


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Records ``start`` (inclusive) to ``end`` (exclusive) of one topic partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


# ------------------------------------------------------------------------- offset resolution


def _check_same_partitions(given: Iterable[TopicPartition], partitions: set[TopicPartition],
                           option: str) -> None:
    # Spark's connector insists that JSON offsets name every partition, so a forgotten
    # partition is an error rather than a silent "earliest".
    given_set = set(given)
    if given_set == partitions:
        return
    parts = []
    if partitions - given_set:
        parts.append(f"missing {describe_partitions(partitions - given_set)}")
    if given_set - partitions:
        parts.append(f"not part of the query: {describe_partitions(given_set - partitions)}")
    raise ConfigError(
        "must give a value for every partition of the query (-2 for earliest, -1 for latest): "
        + "; ".join(parts),
        key=option,
    )


def _resolve_times(
    timestamps: Mapping[TopicPartition, int],
    lookup: OffsetLookup,
    *,
    is_start: bool,
    strategy: Literal["error", "latest"],
) -> PartitionOffsets:
    found = lookup.for_times(timestamps)
    missing = [tp for tp in timestamps if found.get(tp) is None]
    # No record at or after the time: the end of the log, except that a start with the
    # "error" strategy fails, as Spark's connector does.
    if missing and is_start and strategy == "error":
        tp = min(missing)
        raise OffsetNotFoundError(
            f"no offset in {tp} has a timestamp >= {timestamps[tp]} "
            "(set startingOffsetsByTimestampStrategy=latest to start at the end instead)"
        )
    latest = lookup.latest(missing) if missing else {}
    return {tp: (latest[tp] if found.get(tp) is None else int(found[tp]))  # type: ignore[arg-type]
            for tp in timestamps}


def resolve_offsets(
    spec: OffsetSpec,
    partitions: Iterable[TopicPartition],
    lookup: OffsetLookup,
    *,
    is_start: bool,
    strategy: Literal["error", "latest"] = "error",
) -> PartitionOffsets:
    """One concrete offset per partition for ``spec`` (-2/-1 and timestamps looked up)."""
    wanted = set(partitions)
    option = "startingOffsets" if is_start else "endingOffsets"
    if not wanted:
        return {}
    if isinstance(spec, Earliest):
        return dict(lookup.earliest(wanted))
    if isinstance(spec, Latest):
        return dict(lookup.latest(wanted))
    if isinstance(spec, GlobalTimestamp):
        return _resolve_times({tp: spec.timestamp_ms for tp in wanted}, lookup,
                              is_start=is_start, strategy=strategy)
    if isinstance(spec, PartitionTimestamps):
        _check_same_partitions(spec.timestamps, wanted, option.replace("Offsets",
                                                                       "OffsetsByTimestamp"))
        return _resolve_times(spec.timestamps, lookup, is_start=is_start, strategy=strategy)
    if isinstance(spec, SpecificOffsets):
        _check_same_partitions(spec.offsets, wanted, option)
        need_earliest = [tp for tp, o in spec.offsets.items() if o == EARLIEST]
        need_latest = [tp for tp, o in spec.offsets.items() if o == LATEST]
        earliest = lookup.earliest(need_earliest) if need_earliest else {}
        latest = lookup.latest(need_latest) if need_latest else {}
        return {tp: earliest[tp] if o == EARLIEST else latest[tp] if o == LATEST else o
                for tp, o in spec.offsets.items()}
    raise TypeError(f"not an offset spec: {spec!r}")


def check_batch_ranges(
    start: PartitionOffsets,
    end: PartitionOffsets,
    earliest: PartitionOffsets,
    latest: PartitionOffsets,
    *,
    fail_on_data_loss: bool,
) -> list[OffsetRange]:
    """Batch ranges from resolved bounds, checked against what the log holds now.

    A start before the log start means deleted records: data loss (or, when tolerated, start
    at the log start). An end past the log end names records that do not exist: an error (or,
    when tolerated, end at the log end). A start after the end is always an error.
    """
    ranges = []
    for tp in sorted(end):
        first, last = start[tp], end[tp]
        if first < earliest[tp]:
            if fail_on_data_loss:
                raise DataLossError.about(
                    f"the starting offset {first} of {tp} is before its earliest available "
                    f"offset {earliest[tp]}")
            first = earliest[tp]
        if last > latest[tp]:
            if fail_on_data_loss:
                raise DataLossError.about(
                    f"the ending offset {last} of {tp} is past its latest offset {latest[tp]}")
            last = latest[tp]
        if first > last:
            raise ConfigError(
                f"the starting offset {first} of {tp} is after its ending offset {last}",
                key="startingOffsets",
            )
        ranges.append(OffsetRange(tp.topic, tp.partition, first, last))
    return ranges


# ---------------------------------------------------------------------------- task planning


def _apportion(total: int, weights: list[int], caps: list[int]) -> list[int]:
    """Split ``total`` into integer shares proportional to ``weights`` (largest remainder),
    each share at most its cap. Deterministic: ties go to the earlier entry."""
    weight_sum = sum(weights)
    if weight_sum == 0 or total <= 0:
        return [0] * len(weights)
    exact = [total * w / weight_sum for w in weights]
    shares = [min(int(x), cap) for x, cap in zip(exact, caps)]
    left = total - sum(shares)
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - int(exact[i])), i))
    while left > 0:
        progressed = False
        for i in order:
            if left == 0:
                break
            if shares[i] < caps[i]:
                shares[i] += 1
                left -= 1
                progressed = True
        if not progressed:
            break
    return shares


def _split_evenly(piece: OffsetRange, parts: int) -> list[OffsetRange]:
    size = piece.size
    bounds = [piece.start + size * i // parts for i in range(parts + 1)]
    return [OffsetRange(piece.topic, piece.partition, lo, hi)
            for lo, hi in itertools.pairwise(bounds) if hi > lo]


def split_ranges(
    ranges: Iterable[OffsetRange],
    *,
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """The Spark input partitions for ``ranges``: empty ranges dropped, each range split into
    pieces of at most ``max_records_per_partition`` records, then -- if that still gives fewer
    than ``min_partitions`` pieces -- the ranges split further in proportion to their size."""
    pieces = [r for r in sorted(ranges) if r.size > 0]
    if max_records_per_partition is not None:
        pieces = [part for r in pieces
                  for part in _split_evenly(r, -(-r.size // max_records_per_partition))]
    if min_partitions is not None and 0 < len(pieces) < min_partitions:
        total_records = sum(p.size for p in pieces)
        target = min(min_partitions, total_records)
        # Every piece keeps at least one part; the other parts go by size.
        extra = _apportion(target - len(pieces), [p.size for p in pieces],
                           [p.size - 1 for p in pieces])
        pieces = [part for p, more in zip(pieces, extra) for part in _split_evenly(p, 1 + more)]
    return pieces


def limit_offsets(
    start: PartitionOffsets, latest: PartitionOffsets, max_records: int
) -> PartitionOffsets:
    """End offsets that read at most ``max_records`` records in all, each partition's share
    proportional to its backlog (``latest - start``). Every partition of ``latest`` appears."""
    tps = sorted(latest)
    backlog = [max(0, latest[tp] - start[tp]) for tp in tps]
    if sum(backlog) <= max_records:
        return dict(latest)
    shares = _apportion(max_records, backlog, backlog)
    return {tp: start[tp] + share for tp, share in zip(tps, shares)}


def total_records(start: PartitionOffsets, end: PartitionOffsets) -> int:
    """How many offsets lie between two offset maps (partitions missing in ``start`` count 0)."""
    return sum(max(0, end[tp] - start.get(tp, end[tp])) for tp in end)


def report_data_loss(fail_on_data_loss: bool, warn: Callable[[str], None], what: str) -> None:
    """Raise :class:`DataLossError` for ``what``, or hand the message to ``warn``."""
    if fail_on_data_loss:
        raise DataLossError.about(what)
    warn(f"{what}; skipping it (failOnDataLoss=false)")
