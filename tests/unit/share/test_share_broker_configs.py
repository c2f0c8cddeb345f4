"""Kafka's rules between consumer- and share-group broker configs: a broker does not start
with one broken (Kafka's GroupCoordinatorConfig and ShareGroupConfig refuse it, with these
messages)."""

from __future__ import annotations

import pytest

from sdk.errors import ConfigError
from server_ref.config import BrokerConfig

# (broker configs, the refusal) -- tests/integration/test_group_config_refusals.py starts
# Apache Kafka with each and gets the same message.
REFUSALS = [
    ({"group.share.assignment.interval.ms": "20000"},
     "group.share.assignment.interval.ms must be less than or equal to "
     "group.share.max.assignment.interval.ms"),
    ({"group.share.min.assignment.interval.ms": "2000"},
     "group.share.assignment.interval.ms must be greater than or equal to "
     "group.share.min.assignment.interval.ms"),
    ({"group.share.heartbeat.interval.ms": "50000", "group.share.max.heartbeat.interval.ms":
      "60000"}, "group.share.heartbeat.interval.ms must be less than "
                "group.share.session.timeout.ms"),
    ({"group.share.session.timeout.ms": "6000"},
     "group.share.session.timeout.ms must be greater than or equal to "
     "group.share.min.session.timeout.ms"),
    ({"group.share.delivery.count.limit": "10", "group.share.max.delivery.count.limit": "8"},
     "group.share.max.delivery.count.limit must be greater than or equal to "
     "group.share.delivery.count.limit"),
    ({"group.share.record.lock.duration.ms": "2000"},
     "group.share.record.lock.duration.ms must be greater than or equal to "
     "group.share.min.record.lock.duration.ms"),
    ({"group.share.max.size": "1000", "group.share.max.share.sessions": "500"},
     "group.share.max.share.sessions must be greater than or equal to group.share.max.size"),
    ({"group.consumer.heartbeat.interval.ms": "500"},
     "group.consumer.heartbeat.interval.ms must be greater than or equal to "
     "group.consumer.min.heartbeat.interval.ms"),
    ({"group.consumer.max.heartbeat.interval.ms": "4000"},
     "group.consumer.max.heartbeat.interval.ms must be greater than or equal to "
     "group.consumer.min.heartbeat.interval.ms"),
    ({"group.consumer.heartbeat.interval.ms": "20000"},
     "group.consumer.heartbeat.interval.ms must be less than or equal to "
     "group.consumer.max.heartbeat.interval.ms"),
    ({"group.consumer.session.timeout.ms": "6000"},
     "group.consumer.session.timeout.ms must be greater than or equal to "
     "group.consumer.min.session.timeout.ms"),
    ({"group.consumer.session.timeout.ms": "90000"},
     "group.consumer.session.timeout.ms must be less than or equal to "
     "group.consumer.max.session.timeout.ms"),
    ({"group.consumer.min.session.timeout.ms": "6000", "group.consumer.session.timeout.ms":
      "6000", "group.consumer.heartbeat.interval.ms": "6000"},
     "group.consumer.heartbeat.interval.ms must be less than "
     "group.consumer.session.timeout.ms"),
]


@pytest.mark.parametrize(("configs", "message"), REFUSALS)
def test_a_broker_with_inconsistent_group_configs_does_not_start(
        configs: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.from_properties(configs)


def test_consistent_share_configs() -> None:
    config = BrokerConfig.from_properties({
        "group.share.min.record.lock.duration.ms": "1000",
        "group.share.record.lock.duration.ms": "2000",
        "group.share.assignment.interval.ms": "0",
        "group.share.max.assignment.interval.ms": "3600000"})
    assert config.get("group.share.assignment.interval.ms") == 0
    config.alter("group.share.assignment.interval.ms", "3600000", cluster_default=True)
    assert config.get("group.share.assignment.interval.ms") == 3600000
