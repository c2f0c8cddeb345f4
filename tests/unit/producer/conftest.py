"""Fixtures for producer tests: a read-back helper and topic names (the broker fixtures,
``embedded_broker`` and ``control``, come from tests/unit/conftest.py)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest


@pytest.fixture
def topic() -> str:
    return f"p-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def read_values() -> Callable[..., list[bytes]]:
    """``read_values(bootstrap, topic, count)``: see :func:`_read_values`."""
    return _read_values


def _read_values(bootstrap: str, topic: str, count: int, timeout_s: float = 20.0) -> list[bytes]:
    """Every value of ``topic`` (all partitions, from the start), read with confluent-kafka."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "enable.auto.commit": False, "fetch.queue.backoff.ms": 10})
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        out: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        while len(out) < count and time.monotonic() < deadline:
            out.extend(m.value() for m in consumer.consume(1000, timeout=0.2) if not m.error())
        # Anything beyond `count` (duplicates) shows up within a short extra wait.
        end = time.monotonic() + 0.3
        while time.monotonic() < end:
            out.extend(m.value() for m in consumer.consume(1000, timeout=0.1) if not m.error())
        return out
    finally:
        consumer.close()
