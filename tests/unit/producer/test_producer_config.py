"""ProducerConfig: Kafka names, defaults and the cross-field rules (KIP-679)."""

from __future__ import annotations

import pytest

from sdk.errors import ConfigError
from sdk.producer.config import ProducerConfig


def build(**kw: object) -> ProducerConfig:
    return ProducerConfig.build(bootstrap_servers="h:9092", **kw)


def test_defaults() -> None:
    cfg = build()
    assert (cfg.acks, cfg.linger_ms, cfg.batch_size, cfg.buffer_memory) == (-1, 5, 16384, 32 << 20)
    assert cfg.enable_idempotence is True
    assert cfg.delivery_timeout_ms == 120_000
    assert cfg.max_in_flight_requests_per_connection == 5
    assert cfg.compression_type == "none"
    assert cfg.client_id.startswith("kafka-sdk-producer-")


@pytest.mark.parametrize(("given", "acks"), [("all", -1), ("ALL", -1), ("-1", -1), (-1, -1),
                                              ("1", 1), (1, 1), ("0", 0), (0, 0)])
def test_acks_forms(given: object, acks: int) -> None:
    assert build(acks=given, enable_idempotence=False).acks == acks


def test_dotted_mapping_from_a_properties_file() -> None:
    cfg = ProducerConfig.build({"bootstrap.servers": "h", "linger.ms": "20", "acks": "1",
                                "compression.type": "LZ4", "enable.idempotence": "false",
                                "max.in.flight.requests.per.connection": "10"})
    assert (cfg.linger_ms, cfg.acks, cfg.compression_type) == (20, 1, "lz4")
    assert cfg.enable_idempotence is False
    assert cfg.max_in_flight_requests_per_connection == 10


def test_implicit_idempotence_yields_to_conflicting_settings() -> None:
    assert build(acks=1).enable_idempotence is False
    assert build(retries=0).enable_idempotence is False
    assert build(max_in_flight_requests_per_connection=6).enable_idempotence is False


@pytest.mark.parametrize(("key", "value"), [("acks", 1), ("acks", 0), ("retries", 0),
                                            ("max_in_flight_requests_per_connection", 6)])
def test_explicit_idempotence_conflicts_name_the_key(key: str, value: object) -> None:
    with pytest.raises(ConfigError) as info:
        build(enable_idempotence=True, **{key: value})
    assert info.value.key == key
    assert "enable_idempotence" in str(info.value)


def test_delivery_timeout_floor() -> None:
    assert build(linger_ms=100, request_timeout_ms=1000).delivery_timeout_ms == 120_000
    assert build(request_timeout_ms=200_000).delivery_timeout_ms == 200_005  # raised to fit
    with pytest.raises(ConfigError, match="linger_ms \\+ request_timeout_ms = 1010") as info:
        build(linger_ms=10, request_timeout_ms=1000, delivery_timeout_ms=500)
    assert info.value.key == "delivery_timeout_ms"


@pytest.mark.parametrize(
    ("kw", "key", "fragment"),
    [
        ({"compression_type": "brotli"}, "compression_type", "'lz4'"),
        ({"acks": 2}, "acks", "0, 1 or 'all'"),
        ({"acks": True}, "acks", "boolean"),
        ({"linger_ms": -5}, "linger_ms", ">= 0"),
        ({"buffer_memory": 0}, "buffer_memory", "> 0"),
        ({"partitioner": "weird"}, "partitioner", "round_robin"),
        ({"partitioner": 42}, "partitioner", "callable"),
        ({"value_serializer": "json"}, "value_serializer", "callable"),
        ({"enable_idempotence": "maybe"}, "enable_idempotence", "true or false"),
    ],
)
def test_invalid_settings(kw: dict[str, object], key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        build(**kw)
    assert info.value.key == key
    assert fragment in str(info.value)


def test_unknown_key_names_it() -> None:
    with pytest.raises(ConfigError) as info:
        ProducerConfig.build({"bootstrap.servers": "h", "linger.msec": 5})
    assert info.value.key == "linger.msec"
    assert "did you mean linger.ms?" in str(info.value)  # in the dotted form typed


def test_partitioner_objects_and_callables_are_accepted() -> None:
    from sdk.producer.partitioner import RoundRobinPartitioner

    assert isinstance(build(partitioner=RoundRobinPartitioner()).partitioner, RoundRobinPartitioner)
    fn = build(partitioner=lambda key, all_, avail: 0).partitioner
    assert callable(fn)
