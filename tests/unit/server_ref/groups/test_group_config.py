"""GroupConfig: Kafka's property names, defaults and validation."""

from __future__ import annotations

import pytest

from sdk.errors import ConfigError
from server_ref.groups import GroupConfig


def test_defaults_are_kafkas() -> None:
    config = GroupConfig()
    assert config.initial_rebalance_delay_ms == 3000
    assert (config.min_session_timeout_ms, config.max_session_timeout_ms) == (6000, 1_800_000)
    assert config.offsets_retention_ms == 7 * 24 * 3600 * 1000
    assert config.offset_metadata_max_bytes == 4096


def test_from_properties_reads_kafka_names_and_skips_the_rest() -> None:
    config = GroupConfig.from_properties({
        "group.initial.rebalance.delay.ms": "0", "offsets.retention.minutes": 2,
        "group.min.session.timeout.ms": 100, "num.partitions": 3,
    })
    assert config.initial_rebalance_delay_ms == 0
    assert config.offsets_retention_ms == 120_000
    assert config.min_session_timeout_ms == 100
    with pytest.raises(ConfigError, match=r"num\.partitions"):
        GroupConfig.from_properties({"num.partitions": 3}, strict=True)


@pytest.mark.parametrize("settings", [
    {"initial_rebalance_delay_ms": -1},
    {"max_size": 0},
    {"min_session_timeout_ms": 10, "max_session_timeout_ms": 5},
    {"offsets_retention_check_interval_ms": 0},
])
def test_invalid_settings_are_refused(settings: dict[str, int]) -> None:
    with pytest.raises(ConfigError):
        GroupConfig(**settings)


def test_non_numeric_property_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"group\.max\.size"):
        GroupConfig.from_properties({"group.max.size": "many"})
