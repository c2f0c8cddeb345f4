"""KIP-848 on the client: the settings Java refuses under group.protocol=consumer, and the
member's heartbeat request (epochs, subscription, owned partitions)."""

from __future__ import annotations

import pytest

from sdk import Consumer
from sdk.consumer.config import ConsumerConfig
from sdk.consumer.consumer_member import new_member_id
from sdk.errors import ConfigError


def build(options: dict[str, object]) -> ConsumerConfig:
    return ConsumerConfig.build({"bootstrap.servers": "localhost:9092", "group.id": "g",
                                 **options})


def test_consumer_protocol_is_chosen_by_name_in_any_case() -> None:
    assert build({"group.protocol": "CONSUMER"}).group_protocol == "consumer"
    assert build({}).group_protocol == "classic"
    assert build({"group.protocol": "consumer",
                  "group.remote.assignor": "range"}).group_remote_assignor == "range"


@pytest.mark.parametrize(("key", "value", "instead"), [
    ("partition.assignment.strategy", "range", "group.remote.assignor"),
    ("session.timeout.ms", 10_000, "group.consumer.session.timeout.ms"),
    ("heartbeat.interval.ms", 1_000, "group.consumer.heartbeat.interval.ms"),
])
def test_classic_settings_are_refused_under_the_consumer_protocol(
        key: str, value: object, instead: str) -> None:
    with pytest.raises(ConfigError) as info:
        build({"group.protocol": "consumer", key: value})
    assert info.value.key == key
    assert instead in str(info.value)
    # The same settings are fine for classic groups.
    build({key: value})


def test_remote_assignor_is_refused_under_the_classic_protocol() -> None:
    with pytest.raises(ConfigError) as info:
        build({"group.remote.assignor": "uniform"})
    assert info.value.key == "group.remote.assignor"
    assert "partition.assignment.strategy" in str(info.value)


def test_the_constructor_refuses_them_too() -> None:
    with pytest.raises(ConfigError, match=r"session\.timeout\.ms"):
        Consumer("t", bootstrap_servers="localhost:9092", group_id="g",
                 group_protocol="consumer", session_timeout_ms=10_000)


def test_member_ids_are_java_style_uuids() -> None:
    ids = {new_member_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(len(i) == 22 and "=" not in i for i in ids)
