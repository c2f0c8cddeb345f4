"""Apache Kafka for tests: start a cluster, or skip with the reason, or fail under CI.

``REQUIRE_APACHE_KAFKA=1`` (set by ``.ci/run``) turns every reason to skip (no ``java`` or
``mvn``, a failed fetch or start) into a test failure, so CI can never go green by silently
skipping the Apache target.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tools import apache_kafka
from tools.apache_kafka import ApacheKafkaCluster, ApacheKafkaUnavailable


def apache_required() -> bool:
    return os.environ.get("REQUIRE_APACHE_KAFKA", "") not in ("", "0")


def require_apache_kafka() -> None:
    """Skip (or fail under REQUIRE_APACHE_KAFKA) when Apache Kafka cannot run here."""
    reason = apache_kafka.missing_tools()
    if reason is None:
        try:
            apache_kafka.fetch()
        except ApacheKafkaUnavailable as exc:
            reason = str(exc)
    if reason is not None:
        message = f"Apache Kafka cannot run here: {reason}"
        if apache_required():
            pytest.fail(message + " (REQUIRE_APACHE_KAFKA is set)")
        pytest.skip(message)


@contextmanager
def apache_cluster(brokers: int = 1, controllers: int = 1, **kwargs: Any
                   ) -> Iterator[ApacheKafkaCluster]:
    """A running Apache Kafka cluster, or a skip with the reason (see the module docstring)."""
    require_apache_kafka()
    with ApacheKafkaCluster(brokers, controllers, **kwargs) as cluster:
        yield cluster
