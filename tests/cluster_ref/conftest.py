"""Our broker as a 3-broker cluster (1 controller) for the failover scenarios of tests/cluster.

The scenarios written for Apache Kafka (``tests/cluster/``) run here unchanged: this
``kafka_cluster`` fixture gives an ``EmbeddedCluster`` (``server_ref.cluster``: one OS
process per node, the same methods as ``ApacheKafkaCluster``) with the same settings as
tests/cluster/conftest.py's (``auto.leader.rebalance.enable=false`` included: leaderships
stay where failover put them; test_leader_rebalance.py turns it on). One cluster per module; the autouse ``healed`` fixture restarts / resumes every broker after a
test and waits until every replica is back in sync, as there.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster.conftest import CLUSTER_CONFIG, heal

from server_ref.cluster import EmbeddedCluster

REF_CONFIG = dict(CLUSTER_CONFIG)


def tiered_ref_config(remote: Path, task_interval_ms: int = 200) -> dict[str, str]:
    """REF_CONFIG with tiered storage on: one remote directory every broker shares."""
    return {**REF_CONFIG,
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.uri": f"file://{remote}",
            "remote.log.manager.task.interval.ms": str(task_interval_ms),
            "log.retention.check.interval.ms": "200"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.cluster)


_REPORT = pytest.StashKey[list[str]]()


@pytest.fixture
def failover_report(request: pytest.FixtureRequest) -> list[str]:
    """Lines (measured failover times) printed in the terminal summary, not asserted."""
    return request.config.stash.setdefault(_REPORT, [])


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config
                            ) -> None:
    lines = config.stash.get(_REPORT, [])
    if lines:
        terminalreporter.section("failover timings (reference broker cluster, 3 brokers)")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture(scope="module")
def kafka_cluster() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(brokers=3, controllers=1, config=REF_CONFIG) as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def healed(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "kafka_cluster" not in request.fixturenames:
        return
    heal(request.getfixturevalue("kafka_cluster"))
