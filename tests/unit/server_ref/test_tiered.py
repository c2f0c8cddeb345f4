"""Tiered storage pieces on their own: Kafka's config rules, the bounded read cache, the
directory store, segment metadata states."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from broker_kit import make_batch

from sdk.errors import InvalidConfigError
from sdk.protocol.messages.produce import ProduceRequest
from server_ref.config import BrokerConfig
from server_ref.producer_state import AppendedBatch, PartitionProducers, state_as_of
from server_ref.storage import LogConfig, PartitionLog
from server_ref.storage.snapshots import snapshot_offsets, snapshot_path, write_snapshot
from server_ref.tiered.metadata import (
    PRODUCER_SNAPSHOT,
    PartitionRemoteState,
    RemoteSegment,
    SegmentState,
)
from server_ref.tiered.reader import CHUNK, ChunkCache
from server_ref.tiered.settings import store_location, topic_tiering, validate_topic
from server_ref.tiered.store import DirectoryStore, RemoteStorageError
from server_ref.topics import parse_topic_configs

ON = BrokerConfig.from_properties({"remote.log.storage.system.enable": "true"})
OFF = BrokerConfig.from_properties({})


def _check(new: dict[str, str], broker: BrokerConfig = ON,
           existing: dict[str, str] | None = None) -> None:
    validate_topic(parse_topic_configs(existing or {}), parse_topic_configs(new), broker)


@pytest.mark.parametrize(("new", "broker", "existing", "message"), [
    ({"remote.storage.enable": "true"}, OFF, None,
     "Tiered Storage functionality is disabled in the broker. Topic cannot be configured "
     "with remote log storage."),
    ({"remote.storage.enable": "true", "cleanup.policy": "compact,delete"}, ON, None,
     "Remote log storage is unsupported for the compacted topics"),
    ({"remote.storage.enable": "true", "retention.ms": "1000", "local.retention.ms": "-1"},
     ON, None, "Invalid value -1 for configuration local.retention.ms: Value must not be -1 "
     "as retention.ms value is set as 1000."),
    ({"remote.storage.enable": "true", "retention.bytes": "10", "local.retention.bytes": "11"},
     ON, None, "Invalid value 11 for configuration local.retention.bytes: Value must not be "
     "more than retention.bytes property value: 10"),
    ({}, ON, {"remote.storage.enable": "true"},
     "It is invalid to disable remote storage without deleting remote data."),
    ({"remote.storage.enable": "true", "remote.log.copy.disable": "true",
      "local.retention.ms": "5", "retention.ms": "10"}, ON, None,
     "When `remote.log.copy.disable` is set to true, the `local.retention.ms` and "
     "`retention.ms` must be set to the identical value"),
])
def test_kafka_refusals(new: dict[str, str], broker: BrokerConfig,
                        existing: dict[str, str] | None, message: str) -> None:
    with pytest.raises(InvalidConfigError) as info:
        _check(new, broker, existing)
    assert message in str(info.value)


def test_allowed_changes_and_the_resolved_policy() -> None:
    _check({"remote.storage.enable": "true", "retention.bytes": "100",
            "local.retention.bytes": "100"})
    _check({"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"},
           existing={"remote.storage.enable": "true"})
    _check({"remote.storage.enable": "true", "remote.log.copy.disable": "true"},
           existing={"remote.storage.enable": "true"})
    policy = topic_tiering(parse_topic_configs({"remote.storage.enable": "true",
                                                "retention.ms": "5000"}), ON)
    assert policy.enabled and policy.copies
    assert policy.local_retention_ms == 5000  # -2 follows retention.ms
    assert not topic_tiering(parse_topic_configs({"remote.storage.enable": "true"}),
                             OFF).enabled


class _Store(DirectoryStore):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.gets = 0

    def get_range(self, key: str, start: int, length: int) -> bytes:
        self.gets += 1
        return super().get_range(key, start, length)


def test_cache_reads_ranges_in_chunks_and_stays_within_its_bound(tmp_path: Path) -> None:
    store = _Store(tmp_path)
    data = bytes(range(256)) * (3 * CHUNK // 256 + 10)
    store.put_bytes("a/seg.log", data)
    cache = ChunkCache(2 * CHUNK)
    assert cache.range(store, "a/seg.log", CHUNK - 5, 10, len(data)) == data[CHUNK - 5:CHUNK + 5]
    assert store.gets == 2
    assert cache.range(store, "a/seg.log", CHUNK + 1, 3, len(data)) == data[CHUNK + 1:CHUNK + 4]
    assert store.gets == 2  # a hit
    cache.range(store, "a/seg.log", 2 * CHUNK, 1, len(data))  # evicts the oldest chunk
    assert cache.size <= 2 * CHUNK
    cache.range(store, "a/seg.log", 0, 1, len(data))
    assert store.gets == 4
    end = len(data) - 3
    assert cache.range(store, "a/seg.log", end, 100, len(data)) == data[end:]


def test_directory_store_writes_whole_objects_only(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "tier")
    store.put_bytes("t-1/0/x.index", b"abc")
    assert store.get("t-1/0/x.index") == b"abc"
    assert store.list("t-1") == ["t-1/0/x.index"]
    assert not list((tmp_path / "tier").rglob("*.tmp"))
    with pytest.raises(RemoteStorageError):
        store.put_bytes("../escape", b"x")
    store.delete(["t-1/0/x.index", "t-1/0/missing"])
    assert store.list("t-1") == []


def test_only_finished_segments_are_readable() -> None:
    state = PartitionRemoteState()
    seg = RemoteSegment("id1", "t", "tid", 0, 0, 99, 1, 1000,
                        SegmentState.COPY_SEGMENT_STARTED, 0)
    state.apply(seg)
    assert state.segment_for(5) is None and state.highest_offset == -1
    state.apply(seg.with_state(SegmentState.COPY_SEGMENT_FINISHED, 1))
    assert state.segment_for(5) is not None and state.highest_offset == 99
    assert RemoteSegment.from_json(seg.to_json()) == seg
    state.apply(seg.with_state(SegmentState.DELETE_SEGMENT_STARTED, 2))
    assert state.segment_for(5) is None
    state.apply(seg.with_state(SegmentState.DELETE_SEGMENT_FINISHED, 3))
    assert not state.segments


def test_a_writer_killed_mid_object_leaves_nothing_once_the_key_is_deleted(
        tmp_path: Path) -> None:
    """A broker SIGKILLed while writing an object to the directory tier leaves its
    temporary file (never listed, never read); deleting the key, as the cleanup of an
    interrupted copy does, removes it too instead of leaking it."""
    import subprocess
    import sys
    import time

    root, key = tmp_path / "tier", "t-1/0/00000000000000000000-id.log"
    writer = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; "
         "from server_ref.tiered.store import DirectoryStore; "
         f"DirectoryStore(Path({str(root)!r})).put_file({key!r}, sys.stdin.buffer, 1 << 20)"],
        stdin=subprocess.PIPE, cwd=Path(__file__).resolve().parents[3])
    assert writer.stdin is not None
    writer.stdin.write(b"x" * 4096)  # a quarter of the object: the writer waits for more
    writer.stdin.flush()
    deadline = time.monotonic() + 30
    while not list(root.rglob("*.tmp")):
        assert writer.poll() is None and time.monotonic() < deadline, "no write under way"
        time.sleep(0.02)
    writer.kill()
    writer.wait()
    store = DirectoryStore(root)
    assert store.list("t-1") == []  # half an object is never an object
    with pytest.raises(RemoteStorageError):
        store.get(key)
    store.delete([key])
    assert not [p for p in root.rglob("*") if p.is_file()]


@pytest.mark.parametrize(("uri", "problem"), [
    ("ftp://host/tier", "got 'ftp://host/tier'"),
    ("/plain/path", "got '/plain/path'"),
    ("file://relative/tier", "a file URI takes an absolute path (file:///abs/path), not "
                             "host 'relative'"),
    ("s3://", "no bucket named"),
    ("s3:///prefix", "no bucket named"),
])
def test_a_remote_tier_uri_that_names_no_place_is_refused(uri: str, problem: str) -> None:
    config = BrokerConfig.from_properties({"remote.log.storage.system.enable": "true",
                                           "remote.log.storage.uri": uri})
    with pytest.raises(InvalidConfigError) as refused:
        store_location(config, "/data")
    assert "remote.log.storage.uri must be file:///path or s3://bucket/prefix" in \
        str(refused.value) and problem in str(refused.value)


def test_remote_tier_uris_accepted() -> None:
    for uri in ("file:///srv/tier", "file://localhost/srv/tier", "s3://bucket",
                "s3://bucket/some/prefix"):
        config = BrokerConfig.from_properties({"remote.log.storage.uri": uri})
        assert store_location(config, "/data") == uri
    assert store_location(OFF, "/data") == "file:///data/remote-storage"


# ------------------------------------------------------- the producer snapshot of a segment


async def test_uploaded_producer_snapshot_is_the_state_at_the_segments_end(
        make_served: Callable[..., Awaitable[Any]]) -> None:
    """Idempotent producers (ids, epochs chosen here; one bumps its epoch) write across
    several 2 KB segments; the log snapshots the producer state at each roll, and the copy
    uploads the one of the segment's end: each uploaded snapshot holds exactly the producers
    that wrote up to that segment's last offset, with their epoch and last sequence there,
    none that wrote later. One segment's snapshot file is removed before the copy: it is
    rebuilt from the previous snapshot and the segment's batches, with the same result."""
    served = await make_served(**{"remote.log.storage.system.enable": "true",
                                  "remote.log.manager.task.interval.ms": "3600000"})
    broker = served.b
    broker.topics.create("snap", 1, configs={"remote.storage.enable": "true",
                                             "segment.bytes": "2048"})
    client = await served.client()
    writers = [(1000, 0), (1000, 0), (1001, 0), (1001, 0), (1000, 0), (1002, 3), (1002, 3),
               (1000, 1), (1003, 0), (1001, 0), (1003, 0), (1004, 2), (1000, 1), (1004, 2),
               (1002, 3), (1005, 0)]
    sequences: dict[tuple[int, int], int] = {}
    written: list[tuple[int, int, int, int]] = []  # (last offset, pid, epoch, last sequence)
    for pid, epoch in writers:
        first = sequences.get((pid, epoch), 0)
        batch = make_batch([(b"k", bytes(90))] * 10, producer_id=pid, producer_epoch=epoch,
                           base_sequence=first)
        response = await client.call(ProduceRequest(acks=1, timeout_ms=1000, topic_data=[
            ProduceRequest.TopicProduceData(name="snap", partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=batch)])]))
        result = response.responses[0].partition_responses[0]
        assert result.error_code == 0
        sequences[(pid, epoch)] = first + 10
        written.append((result.base_offset + 9, pid, epoch, first + 9))
    partition = broker.topics.get("snap").partitions[0]
    plog = partition.log
    closed = plog.segments[:-1]
    assert len(closed) >= 5
    assert snapshot_offsets(plog.directory) == [s.next_offset for s in closed]
    snapshot_path(plog.directory, closed[2].next_offset).unlink()  # rebuilt from the log

    await broker.remote.run_once()
    state = broker.remote.state_of(partition)
    assert state is not None and broker.remote.store is not None
    uploaded = state.finished()
    assert [s.end_offset for s in uploaded] == [s.next_offset - 1 for s in closed]
    every_producer = {pid for _, pid, _, _ in written}
    partial = 0
    for segment in uploaded:
        expected: dict[int, tuple[int, int]] = {}
        for last_offset, pid, epoch, last_sequence in written:
            if last_offset <= segment.end_offset:
                expected[pid] = (epoch, last_sequence)
        snapshot = json.loads(broker.remote.store.get(segment.key(PRODUCER_SNAPSHOT)))
        got = {int(pid): (e["epoch"], e["batches"][-1][1]) for pid, e in snapshot.items()}
        assert got == expected, segment.end_offset
        partial += set(got) < every_producer
    assert partial >= 2  # early segments leave out producers that only wrote later


def test_the_log_keeps_a_snapshot_per_roll_and_drops_stale_ones(tmp_path: Path) -> None:
    """A snapshot at each roll, named by the sealed segment's end; those of deleted segments
    go with them, those past a truncation (a diverged suffix) too, and a restart keeps
    them. ``state_as_of`` answers the snapshot, or rebuilds one from an earlier snapshot and
    the batches after it."""
    state = PartitionProducers()
    plog = PartitionLog.open(tmp_path / "p-0", LogConfig(segment_bytes=1024))
    plog.producer_snapshot = state.to_json
    sequence = 0
    for i in range(24):
        info = plog.append(make_batch([(b"k", bytes(100))] * 2, producer_id=7 + i // 8,
                                      producer_epoch=0, base_sequence=sequence))
        state.record(7 + i // 8, 0, AppendedBatch(sequence, sequence + 1, info.first_offset,
                                                   info.last_offset, -1), 0)
        sequence = 0 if i % 8 == 7 else sequence + 2
    ends = [s.next_offset for s in plog.segments[:-1]]
    assert len(ends) >= 6 and snapshot_offsets(plog.directory) == ends
    mid = ends[3]
    assert set(state_as_of(plog, mid, 0)) == {str(7 + (mid - 1) // 16)} | {
        str(p) for p in range(7, 7 + (mid - 1) // 16)}
    rebuilt = state_as_of(plog, mid + 1, 0)  # no snapshot there: snapshot at mid + a batch
    assert rebuilt[str(7 + mid // 16)]["batches"][-1][3] == mid + 1

    plog.delete_records(ends[2])  # the segments up to ends[2] go: their ends' snapshots
    assert snapshot_offsets(plog.directory) == ends[2:]  # (the first one left's start stays)
    plog.truncate_to(ends[4] - 1)
    assert snapshot_offsets(plog.directory) == ends[2:4]
    plog.close()
    # one past the log end (as a crash whose recovery cut the log leaves it): dropped at open
    write_snapshot(plog.directory, plog.log_end_offset + 5, {})
    plog = PartitionLog.open(tmp_path / "p-0", LogConfig(segment_bytes=1024))
    assert snapshot_offsets(plog.directory) == ends[2:4]
    plog.truncate_fully_and_start_at(1000)
    assert snapshot_offsets(plog.directory) == []
    plog.close()
