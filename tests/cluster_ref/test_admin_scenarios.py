"""tests/cluster's admin scenarios on our broker's cluster, unchanged: the ISR shrinking and
growing back around a killed broker and a preferred-leader election (API and CLI), unclean
elections (by the controller for a topic that allows them, by ElectLeaders for one that
does not; the lagging replica's records are lost, the returning one truncates), and
partition reassignments (held while the new replica is down, listed, cancelled, completed;
the same from the CLI)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cluster.test_cluster_admin import (
    CONFIG,
    heal,
    test_cli_reassign,
    test_isr_shrinks_and_recovers_then_preferred_election,
    test_reassignment_and_cancel,
    test_unclean_election,
)

from sdk import AdminClient
from server_ref.cluster import EmbeddedCluster

__all__ = ["test_cli_reassign", "test_isr_shrinks_and_recovers_then_preferred_election",
           "test_reassignment_and_cancel", "test_unclean_election"]

# The same settings as on Apache Kafka (auto.leader.rebalance.enable=false: the preferred
# election is the test's to make).
REF_CONFIG = dict(CONFIG)


@pytest.fixture(scope="module")
def admin_cluster() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(brokers=3, controllers=1, config=REF_CONFIG) as cluster:
        yield cluster


@pytest.fixture
def admin(admin_cluster: EmbeddedCluster) -> Iterator[AdminClient]:
    with AdminClient(bootstrap_servers=admin_cluster.bootstrap_servers,
                     default_api_timeout_ms=20_000) as client:
        yield client
        heal(admin_cluster, client)  # type: ignore[arg-type]
