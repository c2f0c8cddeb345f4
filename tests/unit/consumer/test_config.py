"""ConsumerConfig: Kafka's names, dotted mappings, defaults and clear errors."""

from __future__ import annotations

import pytest

from sdk.consumer.assignors import RangeAssignor, RoundRobinAssignor
from sdk.consumer.config import ConsumerConfig
from sdk.errors import ConfigError


def build(options=None, **kwargs) -> ConsumerConfig:
    if not (options and "bootstrap.servers" in options):
        kwargs.setdefault("bootstrap_servers", "127.0.0.1:9092")
    return ConsumerConfig.build(options, **kwargs)


def test_defaults_match_kafka() -> None:
    c = build(group_id="g")
    assert (c.auto_offset_reset, c.enable_auto_commit, c.auto_commit_interval_ms) == ("latest", True, 5000)
    assert (c.fetch_min_bytes, c.fetch_max_wait_ms, c.fetch_max_bytes) == (1, 500, 52_428_800)
    assert (c.max_partition_fetch_bytes, c.max_poll_records) == (1_048_576, 500)
    assert (c.session_timeout_ms, c.heartbeat_interval_ms, c.max_poll_interval_ms) == (45_000, 3_000, 300_000)
    assert c.partition_assignment_strategy == ("range", "cooperative-sticky")
    assert c.isolation_level == "read_uncommitted" and c.check_crcs


def test_properties_file_spelling() -> None:
    props = {
        "bootstrap.servers": "h1:9092, h2:9093",
        "group.id": "billing",
        "enable.auto.commit": "false",
        "auto.offset.reset": "earliest",
        "max.poll.records": "250",
        "partition.assignment.strategy": "org.apache.kafka.clients.consumer.RoundRobinAssignor,range",
        "key.deserializer": "org.apache.kafka.common.serialization.StringDeserializer",
        "value.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
        "isolation.level": "read_committed",
        "group.instance.id": "node-1",
    }
    c = build(props)
    assert c.bootstrap_servers == [("h1", 9092), ("h2", 9093)]
    assert (c.group_id, c.enable_auto_commit, c.max_poll_records) == ("billing", False, 250)
    assert c.partition_assignment_strategy == ("roundrobin", "range")
    assert [type(a) for a in c.assignors()] == [RoundRobinAssignor, RangeAssignor]
    assert c.key_deserializer is not None and c.key_deserializer(b"\xc3\xa9") == "\u00e9"
    assert c.value_deserializer is None
    assert c.isolation_level == "read_committed" and c.group_instance_id == "node-1"


def test_librdkafka_reset_spellings() -> None:
    assert build({"auto.offset.reset": "smallest"}).auto_offset_reset == "earliest"
    assert build({"auto.offset.reset": "largest"}).auto_offset_reset == "latest"
    assert build({"auto.offset.reset": "error"}).auto_offset_reset == "none"


def test_keywords_and_mapping_combine() -> None:
    c = build({"group.id": "g"}, group_id="g", fetch_min_bytes=10)
    assert c.fetch_min_bytes == 10
    with pytest.raises(ConfigError, match="given twice"):
        build({"group.id": "g"}, group_id="h")


def test_custom_assignor_instance() -> None:
    mine = RangeAssignor()
    c = build(partition_assignment_strategy=[mine, "sticky"])
    assert c.assignors()[0] is mine


def test_auto_commit_follows_group() -> None:
    assert not build().enable_auto_commit  # no group: off
    with pytest.raises(ConfigError, match=r"enable\.auto\.commit") as info:
        build(enable_auto_commit=True)
    assert info.value.key == "enable.auto.commit"


@pytest.mark.parametrize(
    ("options", "key", "allowed_part"),
    [
        ({"group.idd": "x"}, "group.idd", "group.id"),
        ({"auto.offset.reset": "sometimes"}, "auto.offset.reset", "earliest"),
        ({"max.poll.records": 0}, "max.poll.records", "> 0"),
        ({"fetch.max.wait.ms": "soon"}, "fetch.max.wait.ms", "integer"),
        ({"enable.auto.commit": "perhaps", "group.id": "g"}, "enable.auto.commit", "true or false"),
        ({"isolation.level": "serializable"}, "isolation.level", "read_committed"),
        ({"partition.assignment.strategy": "fair"}, "partition.assignment.strategy", "cooperative-sticky"),
        ({"partition.assignment.strategy": []}, "partition.assignment.strategy", "range"),
        ({"key.deserializer": 5}, "key.deserializer", "callable"),
        ({"bootstrap.servers": "host:notaport"}, "bootstrap.servers", "host:port"),
        ({"group.protocol": "streams"}, "group.protocol", "consumer"),
        ({"heartbeat.interval.ms": 9000, "session.timeout.ms": 6000}, "heartbeat.interval.ms", "session.timeout.ms"),
        ({"group.instance.id": "x"}, "group.instance.id", "group.id"),
        ({"group.id": " "}, "group.id", "non-empty"),
    ],
)
def test_errors_name_the_key_and_what_is_allowed(options, key, allowed_part) -> None:
    with pytest.raises(ConfigError) as info:
        build(options)
    err = info.value
    assert err.key == key
    assert allowed_part in str(err)
    assert str(err).startswith(key)


def test_keyword_spelling_is_reported_as_given() -> None:
    with pytest.raises(ConfigError) as info:
        build(max_poll_records=-5)
    assert info.value.key == "max_poll_records" and info.value.value == -5


def test_unknown_key_suggests_the_closest() -> None:
    with pytest.raises(ConfigError, match=r"did you mean session_timeout_ms"):
        build(session_timeout=1000)


def test_client_id_names_the_role() -> None:
    assert build().client_id.startswith("kafka-sdk-consumer-")
    assert build(client_id="mine").client_id == "mine"
