"""Pure units: config parsing and validation, producer sequence state and id allocation."""

from __future__ import annotations

from pathlib import Path

import pytest

from sdk import errors
from server_ref.config import BROKER_CONFIGS, TOPIC_CONFIGS, BrokerConfig, parse_config_value
from server_ref.offsets_journal import java_string_hash, partition_for_group
from server_ref.producer_state import AppendedBatch, PartitionProducers, ProducerIdAllocator


@pytest.mark.parametrize(("key", "text", "expected"), [
    ("retention.ms", "-1", -1),
    ("cleanup.policy", "compact, delete", ("compact", "delete")),
    ("unclean.leader.election.enable", "TRUE", True),
    ("message.timestamp.type", "LogAppendTime", "LogAppendTime"),
])
def test_topic_values_parse(key: str, text: str, expected: object) -> None:
    assert parse_config_value(TOPIC_CONFIGS[key], text) == expected


@pytest.mark.parametrize(("key", "text"), [
    ("retention.ms", "-2"), ("retention.ms", "1.5"), ("segment.bytes", "13"),
    ("segment.bytes", str(1 << 31)), ("cleanup.policy", "delete,shred"),
    ("compression.type", "brotli"), ("unclean.leader.election.enable", "yes"),
    ("retention.ms", None),
])
def test_topic_values_rejected_with_the_key_named(key: str, text: str | None) -> None:
    with pytest.raises(errors.InvalidConfigError, match=key.replace(".", r"\.")):
        parse_config_value(TOPIC_CONFIGS[key], text)


def test_every_topic_config_has_a_broker_default() -> None:
    # Kafka's tiered-storage switches are topic-only: no broker config supplies them.
    topic_only = {"remote.storage.enable", "remote.log.copy.disable",
                  "remote.log.delete.on.disable"}
    for definition in TOPIC_CONFIGS.values():
        if definition.name in topic_only:
            assert definition.broker_default is None
            continue
        assert definition.broker_default in BROKER_CONFIGS
        broker = BROKER_CONFIGS[definition.broker_default]
        assert broker.dynamic and broker.type == definition.type


def test_broker_config_sources_and_dynamic_changes() -> None:
    config = BrokerConfig.from_properties(["num.partitions=3", "log.retention.hours=2"],
                                          fsync=True)
    assert config.get("num.partitions") == 3
    assert config.get("log.retention.ms") == 2 * 3600 * 1000
    assert config.get("log.flush.interval.messages") == 1
    assert config.source_of("num.partitions").name == "STATIC_BROKER_CONFIG"
    assert config.source_of("message.max.bytes").name == "DEFAULT_CONFIG"
    config.alter("log.retention.ms", "5000")
    assert config.source_of("log.retention.ms").name == "DYNAMIC_BROKER_CONFIG"
    assert config.topic_default("retention.ms") == 5000
    config.alter("log.retention.ms", None)  # back to the static value, as in Kafka
    assert config.topic_default("retention.ms") == 2 * 3600 * 1000
    config.alter("log.retention.ms", "7000", cluster_default=True)
    assert config.source_of("log.retention.ms").name == "DYNAMIC_DEFAULT_BROKER_CONFIG"
    config.alter("log.retention.ms", "6000")  # this broker's value wins over the default
    assert config.topic_default("retention.ms") == 6000
    with pytest.raises(errors.InvalidConfigError, match="dynamically"):
        config.alter("num.partitions", "4")
    with pytest.raises(errors.ConfigError, match=r"num\.partition"):
        BrokerConfig.from_properties({"num.partition": 1})


def test_sequences_duplicates_and_epochs() -> None:
    state = PartitionProducers()
    assert state.check(7, 0, 0, 4) is None
    state.record(7, 0, AppendedBatch(0, 4, 100, 104, -1), now_ms=1)
    assert state.check(7, 0, 0, 4) == AppendedBatch(0, 4, 100, 104, -1)
    assert state.check(7, 0, 5, 5) is None
    with pytest.raises(errors.OutOfOrderSequenceNumberError):
        state.check(7, 0, 6, 6)
    state.record(7, 1, AppendedBatch(0, 0, 105, 105, -1), now_ms=2)
    with pytest.raises(errors.InvalidProducerEpochError):
        state.check(7, 0, 1, 1)


def test_sequence_wraps_at_int32_max() -> None:
    state = PartitionProducers()
    top = (1 << 31) - 1
    state.record(1, 0, AppendedBatch(top - 1, top, 0, 1, -1), now_ms=0)
    assert state.check(1, 0, 0, 3) is None


def test_snapshot_round_trip_and_expiry() -> None:
    state = PartitionProducers()
    for seq in range(8):
        state.record(3, 2, AppendedBatch(seq, seq, seq, seq, -1), now_ms=10)
    copy = PartitionProducers.from_json(state.to_json())
    assert copy.check(3, 2, 7, 7) == AppendedBatch(7, 7, 7, 7, -1)
    assert len(copy.entries[3].batches) == 5
    assert copy.expire(older_than_ms=11) == 1 and not copy.entries


def test_producer_ids_are_never_reused(tmp_path: Path) -> None:
    first = ProducerIdAllocator(tmp_path)
    ids = [first.allocate() for _ in range(3)]
    second = ProducerIdAllocator(tmp_path)  # as after a crash: the block is skipped
    assert second.allocate() > max(ids)


def test_offsets_partition_matches_java_hashing() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(1 << 31)  # a known Integer.MIN_VALUE
    assert partition_for_group("polygenelubricants", 50) == 0
    assert 0 <= partition_for_group("billing", 50) < 50
