"""Tiered storage pieces on their own: Kafka's config rules, the bounded read cache, the
directory store, segment metadata states."""

from __future__ import annotations

from pathlib import Path

import pytest

from sdk.errors import InvalidConfigError
from server_ref.config import BrokerConfig
from server_ref.tiered.metadata import PartitionRemoteState, RemoteSegment, SegmentState
from server_ref.tiered.reader import CHUNK, ChunkCache
from server_ref.tiered.settings import topic_tiering, validate_topic
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
