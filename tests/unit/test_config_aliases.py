"""Java and librdkafka settings work as is: the alias table (sdk/net/config_names.py), the
settings ignored with one warning, the refused ones, and Java's (de)serializer class names
encoding exactly as Java's classes do (golden bytes printed by Kafka 4.3.1's own classes)."""

from __future__ import annotations

import logging
import math
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from sdk.admin.config import AdminConfig
from sdk.consumer.config import ConsumerConfig
from sdk.errors import ConfigError
from sdk.net import config_names
from sdk.net.config import CommonConfig
from sdk.net.config_names import Alias, Ignored, Refused
from sdk.net.properties import parse_properties, read_properties
from sdk.net.serde import deserializer_named, serializer_named
from sdk.producer.config import ProducerConfig

FILES = Path(__file__).parent / "config_files"
ROOT = Path(__file__).resolve().parents[2]
SER = "org.apache.kafka.common.serialization."
ROLES: dict[str, type[CommonConfig]] = {"P": ProducerConfig, "C": ConsumerConfig, "A": AdminConfig}


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "sdk.net.config" and r.levelno == logging.WARNING]


# ---------------------------------------------------------------- Java properties files


def test_java_producer_properties_work_as_is(caplog: pytest.LogCaptureFixture) -> None:
    settings = read_properties(FILES / "producer.properties")
    with caplog.at_level(logging.WARNING, logger="sdk.net.config"):
        cfg = ProducerConfig.build(settings)
    assert cfg.bootstrap_servers == [("localhost", 9092), ("localhost", 9093)]
    assert (cfg.acks, cfg.linger_ms, cfg.batch_size, cfg.buffer_memory) == (-1, 20, 65536, 64 << 20)
    assert cfg.compression_type == "lz4" and cfg.enable_idempotence
    assert cfg.partitioner == "round_robin"  # Java's RoundRobinPartitioner
    assert cfg.key_serializer is not None and cfg.key_serializer("é") == "é".encode()
    assert cfg.value_serializer is None  # ByteArraySerializer: bytes as given (raw fast path)
    # One warning for the client, naming every setting without effect and why.
    [warning] = warnings_of(caplog)
    for key in ("connections.max.idle.ms", "send.buffer.bytes", "receive.buffer.bytes",
                "metrics.recording.level"):
        assert key in warning
    assert cfg.metrics_num_samples == 2  # a setting of ours now (sdk.metrics)
    assert "operating system" in warning
    # A TLS setting is a setting now (read even under PLAINTEXT, used with SSL).
    assert "ssl.endpoint" not in warning and cfg.ssl_endpoint_identification_algorithm == "https"
    # Values that describe what the client does anyway draw no warning.
    for quiet in ("client.dns.lookup", "interceptor.classes", "partitioner.class"):
        assert quiet not in warning


def test_java_consumer_properties_work_as_is(caplog: pytest.LogCaptureFixture) -> None:
    settings = read_properties(FILES / "consumer.properties")
    assert settings["group.id"] == "billing" and settings["metadata.max.age.ms"] == "300000"
    with caplog.at_level(logging.WARNING, logger="sdk.net.config"):
        cfg = ConsumerConfig.build(settings)
    assert (cfg.group_id, cfg.group_instance_id) == ("billing", "billing-1")
    assert cfg.auto_offset_reset == "earliest" and not cfg.enable_auto_commit
    assert cfg.isolation_level == "read_committed"
    assert cfg.partition_assignment_strategy == ("cooperative-sticky",)
    assert (cfg.max_poll_records, cfg.fetch_max_wait_ms, cfg.client_rack) == (200, 250, "rack-a")
    assert not cfg.allow_auto_create_topics
    assert cfg.key_deserializer is not None and cfg.key_deserializer(b"caf\xc3\xa9") == "café"
    assert cfg.value_deserializer is not None
    assert cfg.value_deserializer(bytes.fromhex("fffffffffffffffe")) == -2
    [warning] = warnings_of(caplog)
    assert "enable.metrics.push" in warning and "client.dns.lookup" not in warning


def test_properties_format() -> None:
    text = ("# comment\n! also a comment\n  \n"
            "a=1\nb : two words \nc three\nd=\\\n   continued\\\n  here\n"
            "e\\=key=x\\ty\nf=\\u00e9\ng=C:\\\\dir\n#h=no\ni=\n a=last\n")
    assert parse_properties(text) == {
        "a": "last", "b": "two words ", "c": "three", "d": "continuedhere", "e=key": "x\ty",
        "f": "é", "g": "C:\\dir", "i": ""}


# ---------------------------------------------------------------- librdkafka settings


def test_librdkafka_producer_dict(caplog: pytest.LogCaptureFixture) -> None:
    settings: dict[str, Any] = {
        "metadata.broker.list": "h1:9092,h2",
        "queue.buffering.max.ms": 10,
        "queue.buffering.max.kbytes": 65536,  # kilobytes: 64 MiB
        "queue.buffering.max.messages": 100000,
        "batch.num.messages": 10000,
        "message.timeout.ms": 0,  # librdkafka: no limit
        "compression.codec": "snappy",
        "request.required.acks": -1,
        "message.send.max.retries": 5,
        "partitioner": "murmur2_random",
        "statistics.interval.ms": 0,
        "socket.keepalive.enable": True,
        "socket.nagle.disable": True,
        "enable.idempotence": True,
        "api.version.request": "true",
        "topic.metadata.refresh.interval.ms": 60000,
        "socket.timeout.ms": 20000,
        "debug": "",
    }
    with caplog.at_level(logging.WARNING, logger="sdk.net.config"):
        cfg = ProducerConfig.build(settings)
    assert cfg.bootstrap_servers == [("h1", 9092), ("h2", 9092)]
    assert (cfg.linger_ms, cfg.buffer_memory, cfg.compression_type) == (10, 64 << 20, "snappy")
    assert (cfg.delivery_timeout_ms, cfg.acks, cfg.retries) == (2_147_483_647, -1, 5)
    assert (cfg.partitioner, cfg.metadata_max_age_ms, cfg.request_timeout_ms) == (
        "default", 60000, 20000)
    [warning] = warnings_of(caplog)
    assert re.search(r"3 setting\(s\)", warning)
    for key in ("queue.buffering.max.messages", "batch.num.messages", "socket.keepalive.enable"):
        assert key in warning
    for quiet in ("statistics.interval.ms", "socket.nagle.disable", "api.version.request",
                  "debug"):
        assert quiet not in warning


def test_librdkafka_consumer_dict(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="sdk.net.config"):
        cfg = ConsumerConfig.build({
            "bootstrap.servers": "h:1", "group.id": "g", "auto.offset.reset": "smallest",
            "enable.partition.eof": False, "fetch.wait.max.ms": 100,
            "fetch.message.max.bytes": 2 << 20, "queued.min.messages": 1000,
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 2000,
            "enable.auto.offset.store": True, "auto.commit.enable": "false",
            "partition.assignment.strategy": "range,roundrobin",
        })
    assert (cfg.auto_offset_reset, cfg.fetch_max_wait_ms) == ("earliest", 100)
    assert cfg.max_partition_fetch_bytes == 2 << 20 and not cfg.enable_auto_commit
    assert cfg.partition_assignment_strategy == ("range", "roundrobin")
    [warning] = warnings_of(caplog)
    assert "queued.min.messages" in warning and "enable.partition.eof" not in warning


def test_enable_partition_eof_true_is_accepted_with_the_reason(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="sdk.net.config"):
        ConsumerConfig.build({"bootstrap.servers": "h", "enable.partition.eof": "true"})
    [warning] = warnings_of(caplog)
    assert "enable.partition.eof (there are no end-of-partition events" in warning
    assert "end_offsets()" in warning


def test_keyword_spelling_of_an_alias() -> None:
    cfg = ProducerConfig.build(bootstrap_servers="h", queue_buffering_max_ms=7)
    assert cfg.linger_ms == 7


def test_one_warning_per_client(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="sdk.net.config"):
        for _ in range(2):
            AdminConfig.build({"bootstrap.servers": "h", "client.dns.lookup":
                               "resolve_canonical_bootstrap_servers_only", "retries": 3})
    assert len(warnings_of(caplog)) == 2
    assert all("client.dns.lookup" in w and "retries" in w for w in warnings_of(caplog))


# ---------------------------------------------------------------- refusals and conflicts


@pytest.mark.parametrize(("role", "key", "value", "fragment"), [
    ("P", "transaction.two.phase.commit.enable", "true", "KIP-939"),
    ("P", "dr_msg_cb", print, "pass on_delivery= to send()"),
    ("P", "on_delivery", print, "pass on_delivery= to send()"),
    ("P", "partitioner", "consistent_random", "murmur2_random"),
    ("P", "partitioner.class", "com.example.MyPartitioner", "unknown partitioner"),
    ("P", "queuing.strategy", "lifo", "order of send()"),
    ("P", "key.serializer.encoding", "UTF-16", "UTF-8"),
    ("C", "enable.auto.offset.store", False, "commit()"),
    ("C", "rebalance_cb", print, "listener="),
    ("C", "queue.buffering.max.ms", 5, "a producer setting"),
    ("C", "offset.store.method", "file", "committed to the broker"),
    ("A", "bootstrap.controllers", "c:9093", "brokers only"),
    ("A", "config.providers", "file", "resolve them"),
])
def test_refused_settings_name_the_key_and_the_way(role: str, key: str, value: object,
                                                   fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        ROLES[role].build({"bootstrap.servers": "h", key: value})
    assert info.value.key == key
    assert fragment in str(info.value)


def test_quiet_values_of_refusable_settings_pass() -> None:
    cfg = ProducerConfig.build({"bootstrap.servers": "h", "transactional.id": "",
                                "key.serializer.encoding": "UTF8", "queuing.strategy": "fifo"})
    assert cfg.linger_ms == 5


def test_alias_and_own_name_conflict_names_both() -> None:
    with pytest.raises(ConfigError) as info:
        ProducerConfig.build({"bootstrap.servers": "h", "linger.ms": 5,
                              "queue.buffering.max.ms": 10})
    assert "'linger.ms'=5" in str(info.value) and "'queue.buffering.max.ms'=10" in str(info.value)
    with pytest.raises(ConfigError, match="given twice"):  # in bytes: 1 KiB vs 1000
        ProducerConfig.build({"bootstrap.servers": "h", "buffer.memory": 1000,
                              "queue.buffering.max.kbytes": 1})
    same = ProducerConfig.build({"bootstrap.servers": "h", "buffer.memory": "2048",
                                 "queue.buffering.max.kbytes": 2}, linger_ms="7",
                                queue_buffering_max_ms=7)
    assert (same.buffer_memory, same.linger_ms) == (2048, 7)


def test_scaled_alias_needs_an_integer() -> None:
    with pytest.raises(ConfigError, match=r"queue\.buffering\.max\.kbytes: an integer is required"):
        ProducerConfig.build({"bootstrap.servers": "h", "queue.buffering.max.kbytes": "lots"})


# ---------------------------------------------------------------- the table itself


def test_the_table_is_consistent() -> None:
    for key, entries in config_names.NAMES.items():
        seen = ""
        for entry in entries:
            assert not set(entry.roles) & set(seen), f"{key}: two entries for one role"
            seen += entry.roles
            for role in entry.roles:
                fields = ROLES[role].model_fields
                # An entry for one of the role's own settings would never be read.
                assert key.replace(".", "_") not in fields, f"{key} shadows a {role} setting"
                if isinstance(entry, Alias):
                    assert entry.target.replace(".", "_") in fields, f"{key} -> {entry.target}"
            if isinstance(entry, Ignored) and entry.otherwise == "refuse":
                assert entry.quiet, f"{key} would refuse every value"


def test_readme_lists_every_alias_and_ignored_setting() -> None:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("### Configuration")
    section = readme[start:readme.index("\n## ", start)]
    for key, entries in config_names.NAMES.items():
        if any(isinstance(e, Alias | Ignored | Refused) for e in entries):
            assert f"`{key}`" in section, f"README's Configuration section misses {key}"


# ---------------------------------------------------------------- (de)serializers


# (name, value, hex written by Kafka 4.3.1's <name>Serializer)
GOLDEN: list[tuple[str, object, str]] = [
    ("String", "h\u00e9llo \u20ac\U0001F600", "68c3a96c6c6f20e282acf09f9880"),
    ("Short", -2, "fffe"),
    ("Short", 32767, "7fff"),
    ("Integer", -123456789, "f8a432eb"),
    ("Integer", 258, "00000102"),
    ("Long", -2, "fffffffffffffffe"),
    ("Long", 1234567890123456789, "112210f47de98115"),
    ("Float", 1.5, "3fc00000"),
    ("Float", -0.1, "bdcccccd"),
    ("Double", -0.1, "bfb999999999999a"),
    ("Double", math.nan, "7ff8000000000000"),
    ("Boolean", True, "01"),
    ("Boolean", False, "00"),
    ("UUID", uuid.UUID("123E4567-E89B-12D3-A456-426614174000"),
     "31323365343536372d653839622d313264332d613435362d343236363134313734303030"),
]


@pytest.mark.parametrize(("java", "value", "hex_bytes"), GOLDEN)
def test_java_serializers_write_javas_bytes(java: str, value: object, hex_bytes: str) -> None:
    producer = ProducerConfig.build({"bootstrap.servers": "h",
                                     "value.serializer": f"{SER}{java}Serializer"},
                                    key_serializer=java.lower())  # the short name
    consumer = ConsumerConfig.build({"bootstrap.servers": "h",
                                     "value.deserializer": f"{SER}{java}Deserializer"})
    assert producer.value_serializer is not None and consumer.value_deserializer is not None
    assert producer.key_serializer is producer.value_serializer
    data = producer.value_serializer(value)
    assert data == bytes.fromhex(hex_bytes)
    back = consumer.value_deserializer(data)
    if java == "Float":
        assert back == pytest.approx(value, rel=1e-7)
    elif isinstance(value, float) and math.isnan(value):
        assert math.isnan(back)
    else:
        assert back == value


def test_same_names_on_producer_and_consumer() -> None:
    shorts = ["string", "bytes", "short", "integer", "long", "float", "double", "boolean",
              "uuid", "void"]
    for short in shorts:
        serializer_named(short)
        deserializer_named(short)
    for java in ("String", "ByteArray", "Bytes", "ByteBuffer", "Short", "Integer", "Long",
                 "Float", "Double", "Boolean", "UUID", "Void"):
        serializer_named(f"{SER}{java}Serializer")
        deserializer_named(f"{SER}{java}Deserializer")
    for raw in ("bytes", f"{SER}ByteArraySerializer", f"{SER}BytesSerializer"):
        assert serializer_named(raw) is None  # the producer's raw path: bytes as given


def test_serializer_errors_are_clear() -> None:
    with pytest.raises(ConfigError, match=r"that is a deserializer, the serializer is .*StringSer"):
        ProducerConfig.build(bootstrap_servers="h", key_serializer=f"{SER}StringDeserializer")
    with pytest.raises(ConfigError, match="ListSerializer/ListDeserializer are not built in"):
        ProducerConfig.build(bootstrap_servers="h", key_serializer=f"{SER}ListSerializer")
    integer, void = serializer_named("integer"), serializer_named("void")
    assert integer is not None and void is not None
    with pytest.raises(ValueError, match="does not fit IntegerSerializer's 4 bytes"):
        integer(2**31)
    with pytest.raises(TypeError, match="IntegerSerializer takes int, not bool"):
        integer(True)
    with pytest.raises(TypeError, match="VoidSerializer sends only null"):
        void(b"x")
    boolean, void_de = deserializer_named("boolean"), deserializer_named("void")
    assert boolean is not None and void_de is not None
    with pytest.raises(ValueError, match="unexpected byte received by BooleanDeserializer: 2"):
        boolean(b"\x02")
    with pytest.raises(ValueError, match="data should be null"):
        void_de(b"")
    assert void_de(None) is None and boolean(None) is None
