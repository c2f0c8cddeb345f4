"""Consumer follow-ups on every broker: ``fetch_min_bytes=0`` (Kafka's range starts at 0),
and a group member's commit of a partition a rebalance gave to another member.

The commit is refused by the client (CommitFailedError naming the partition) before any
request, so every broker behaves the same; without the refusal each of them takes it, as
Kafka's classic coordinator checks the generation and not who owns a partition.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from sdk import Consumer, TopicPartition
from sdk.errors import CommitFailedError

from .conftest import Target
from .test_consumer import produce

WAIT_S = 60.0  # a rebalance on tansu takes a few seconds per round


def _poll_until(done: Any, what: str, *consumers: Consumer,
                got: dict[TopicPartition, list[int]] | None = None) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        assert time.monotonic() < deadline, f"{what}: not reached within {WAIT_S:g} s"
        for consumer in consumers:
            for tp, records in consumer.poll(timeout_ms=100).items():
                if got is not None:
                    got.setdefault(tp, []).extend(r.offset for r in records)


def test_fetch_min_bytes_zero_consumes_what_is_there_and_what_comes(
        broker: Target, topic: str) -> None:
    broker.create_topic(topic, 2)
    produce(broker.bootstrap_servers, topic, 20, 2)
    parts = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    got: dict[TopicPartition, list[int]] = {}
    with Consumer(bootstrap_servers=broker.bootstrap_servers, fetch_min_bytes=0,
                  auto_offset_reset="earliest") as consumer:
        assert consumer.config.fetch_min_bytes == 0
        consumer.assign(parts)
        _poll_until(lambda: sum(map(len, got.values())) == 20, "the first records", consumer,
                    got=got)
        produce(broker.bootstrap_servers, topic, 6, 2, start=20)
        _poll_until(lambda: sum(map(len, got.values())) == 26, "the later records", consumer,
                    got=got)
    assert {tp: sorted(offsets) for tp, offsets in got.items()} == {
        tp: list(range(13)) for tp in parts}


def test_a_commit_of_a_partition_given_away_is_refused(broker: Target, topic: str) -> None:
    broker.create_topic(topic, 2)
    produce(broker.bootstrap_servers, topic, 20, 2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    settings: dict[str, Any] = dict(
        bootstrap_servers=broker.bootstrap_servers, group_id=group,
        partition_assignment_strategy="range", enable_auto_commit=False,
        auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=500)
    with Consumer(topic, client_id="a", **settings) as a:
        read: dict[TopicPartition, list[int]] = {}
        _poll_until(lambda: {p0, p1} <= set(read), "a reads both partitions", a, got=read)
        held = {tp: max(offsets) + 1 for tp, offsets in read.items()}
        with Consumer(topic, client_id="b", **settings) as b:
            # Range gives partition 0 to the first member id ("a-..." < "b-...").
            _poll_until(lambda: a.assignment() == {p0} and b.assignment() == {p1},
                        "the rebalance", a, b)
            b.commit({p1: 3})
            with pytest.raises(CommitFailedError) as refused:
                a.commit(held)
            assert f"{p1} at {held[p1]} not committed" in str(refused.value)
            assert f"committed: {p0} at {held[p0]}" in str(refused.value)
            committed = {tp: om.offset for tp in (p0, p1) if (om := b.committed(tp))}
            assert committed == {p0: held[p0], p1: 3}
