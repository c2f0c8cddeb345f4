"""Helpers for the storage tests: batch factories, a manual clock and log openers."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from sdk.records.builder import RecordBatchBuilder
from sdk.records.reader import RecordBatch, iter_batches
from sdk.records.record import Record
from server_ref.storage import LogConfig, PartitionLog

KV = tuple[bytes | None, bytes | None]


class Clock:
    """A manual millisecond clock for segment.ms, retention and compaction tests."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now


def build_batch(
    records: Sequence[KV] | int = 1,
    *,
    timestamp: int | Sequence[int] = 1_700_000_000_000,
    compression: str = "none",
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    value_size: int = 10,
) -> bytes:
    """A v2 batch; ``records`` is a count (keyless values) or (key, value) pairs."""
    if isinstance(records, int):
        records = [(None, bytes([65 + i % 26]) * value_size) for i in range(records)]
    builder = RecordBatchBuilder(
        compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=transactional,
    )
    for i, (key, value) in enumerate(records):
        ts = timestamp if isinstance(timestamp, int) else timestamp[i]
        builder.append(None, ts, key, value)
    return builder.build()


def decode_batches(data: bytes) -> list[RecordBatch]:
    out = []
    for batch in iter_batches(data):
        assert isinstance(batch, RecordBatch)
        out.append(batch)
    return out


def decode_records(data: bytes) -> list[Record]:
    return [r for b in decode_batches(data) for r in b.records()]


def read_everything(log: PartitionLog, start: int | None = None) -> list[Record]:
    """Every record from ``start`` (the log start) to the log end, fetching in steps."""
    offset = log.log_start_offset if start is None else start
    out: list[Record] = []
    while offset < log.log_end_offset:
        data = log.read(offset, 64 * 1024).to_bytes()
        batches = decode_batches(data)
        if not batches:
            # Compaction removed the records up to the log end; a consumer waits here too.
            break
        out.extend(r for b in batches for r in b.records() if r.offset >= offset)
        offset = batches[-1].next_offset
    return out


# The helpers as fixtures: with --import-mode=importlib test modules cannot import conftest.
@pytest.fixture
def make_batch() -> Callable[..., bytes]:
    return build_batch


@pytest.fixture
def records_of() -> Callable[[bytes], list[Record]]:
    return decode_records


@pytest.fixture
def batches_of() -> Callable[[bytes], list[RecordBatch]]:
    return decode_batches


@pytest.fixture
def read_all() -> Callable[..., list[Record]]:
    return read_everything


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "topic-0"


@pytest.fixture
def open_log(log_dir: Path, clock: Clock) -> Iterator[Callable[..., PartitionLog]]:
    """Open (or reopen) the test partition with config overrides; closed at teardown."""
    opened: list[PartitionLog] = []

    def _open(**config: object) -> PartitionLog:
        log = PartitionLog.open(log_dir, LogConfig(**config), now_ms=clock)  # type: ignore[arg-type]
        opened.append(log)
        return log

    yield _open
    for log in opened:
        if not log._closed:
            log.close()
