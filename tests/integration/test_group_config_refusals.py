"""Kafka's rules between consumer- and share-group broker configs, on Apache Kafka 4.3.1: a
node given configs that break one does not start, and says which rule with the same words
our broker uses when it refuses them (tests/unit/share/test_share_broker_configs.py holds
the cases and checks our side)."""

from __future__ import annotations

import pytest
from apache_support import apache_cluster

from tests.unit.share.test_share_broker_configs import REFUSALS

pytestmark = pytest.mark.integration


def test_apache_kafka_refuses_the_same_group_configs_with_the_same_words() -> None:
    refused: dict[str, str] = {}
    for configs, message in REFUSALS:
        with pytest.raises(RuntimeError) as failure:  # Kafka's storage tool stops first
            with apache_cluster(brokers=1, config=configs):
                pass
        said = [line for line in str(failure.value).splitlines()
                if "IllegalArgumentException" in line]
        refused[message] = said[0].split("IllegalArgumentException: ", 1)[-1] if said else \
            str(failure.value)[-300:]
    assert refused == {message: message for _configs, message in REFUSALS}
