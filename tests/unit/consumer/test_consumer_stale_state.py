"""What a rebalance leaves stale, against the reference broker.

* A commit of partitions the member no longer owns (a rebalance took them while the
  application held their records) is not sent: the coordinator checks only the generation,
  so it would take the offsets and overwrite the new owner's. CommitFailedError names them.
* A committed-offset lookup (OffsetFetch) answered after the assignment changed, or after
  the application sought, is not applied: the partition is looked up again. (Within a
  group, the rebalance's JoinGroup and SyncGroup travel on the coordinator connection
  behind the OffsetFetch, whose answer therefore comes first; a manual reassignment, a
  seek from another task, or a lookup whose answer is resumed late are what remain, and
  the same check covers a rebalance if its requests ever stop queueing behind it.)
* fetch_min_bytes=0, which Kafka allows, is accepted and used.

The broker's answer to an OffsetFetch is held (computed when the request arrives, returned
when the test says so) with its control surface, so the rebalance or the seek lands while
the lookup is in flight, without relying on timing.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from sdk import AdminClient, AsyncConsumer, NewTopic, Producer, TopicPartition
from sdk.consumer.config import ConsumerConfig
from sdk.errors import CommitFailedError, ConfigError
from sdk.protocol.api import ApiKey
from server_ref.handlers.offsets import offset_fetch

pytestmark = pytest.mark.timeout(60)


def _topic(bootstrap: str, partitions: int, records: int = 0) -> str:
    name = f"stale-{uuid.uuid4().hex[:8]}"
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)]).raise_if_failed()
    if records:
        with Producer(bootstrap_servers=bootstrap) as producer:
            for i in range(records):
                producer.send(name, str(i).encode(), partition=i % partitions)
            producer.flush(timeout=10)
    return name


def _member(bootstrap: str, group: str, name: str, *topics: str, **extra: Any) -> AsyncConsumer:
    return AsyncConsumer(*topics, bootstrap_servers=bootstrap, group_id=group, client_id=name,
                         partition_assignment_strategy="range", enable_auto_commit=False,
                         auto_offset_reset="earliest", heartbeat_interval_ms=100, **extra)


async def _until(done: Callable[[], bool], what: str, *polled: AsyncConsumer,
                 got: dict[TopicPartition, list[int]] | None = None,
                 timeout_s: float = 30.0) -> None:
    """Poll ``polled`` (if any) until ``done()``, adding the offsets handed out to ``got``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not done():
        assert loop.time() < deadline, f"{what}: not reached in {timeout_s} s"
        for consumer in polled:
            for tp, records in (await consumer.getmany(timeout_ms=50)).items():
                if got is not None:
                    got.setdefault(tp, []).extend(r.offset for r in records)
        if not polled:
            await asyncio.sleep(0.02)


def _hold_offset_fetch(control: Any) -> threading.Event:
    """The next OffsetFetch is answered as the broker sees it on arrival, once the returned
    event is set."""
    release = threading.Event()

    def held(ctx: Any, request: Any) -> Any:
        response = offset_fetch(ctx, request)

        async def later() -> Any:
            while not release.is_set():
                await asyncio.sleep(0.01)
            return response

        return later()

    control.answer_next(ApiKey.OFFSET_FETCH, held)
    return release


# ------------------------------------------------------------------------------ commits


async def test_a_commit_of_partitions_a_rebalance_took_is_refused_by_name(
        embedded_broker: Any, control: Any) -> None:
    bootstrap = embedded_broker.bootstrap_servers
    topic, group = _topic(bootstrap, 2, records=20), f"g-{uuid.uuid4().hex[:8]}"
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    a = _member(bootstrap, group, "a", topic)
    b = _member(bootstrap, group, "b", topic)
    await a.start()
    await b.start()
    try:
        read: dict[TopicPartition, list[int]] = {}
        await _until(lambda: {p0, p1} <= set(read), "a reads both partitions", a, got=read)
        held = {tp: max(offsets) + 1 for tp, offsets in read.items()}  # the slow application's
        # b joins; the range assignor gives it partition 1 (member ids sort "a-" < "b-").
        await _until(lambda: a.assignment() == {p0} and b.assignment() == {p1},
                     "the rebalance", a, b)
        await b.commit({p1: 3})
        sent = control.seen(ApiKey.OFFSET_COMMIT)
        with pytest.raises(CommitFailedError) as only_p1:
            await a.commit({p1: held[p1]})
        assert f"{p1} at {held[p1]} not committed" in str(only_p1.value)
        assert "not assigned to this member" in str(only_p1.value)
        assert control.seen(ApiKey.OFFSET_COMMIT) == sent  # nothing was sent for it
        with pytest.raises(CommitFailedError) as both:
            await a.commit(held)
        assert f"{p1} at {held[p1]} not committed" in str(both.value)
        assert f"committed: {p0} at {held[p0]}" in str(both.value)
        committed = {tp: om.offset for tp in (p0, p1) if (om := await a.committed(tp))}
        assert committed == {p0: held[p0], p1: 3}  # b's offset stands
        # A partition this member never had is refused the same way.
        with pytest.raises(CommitFailedError):
            await a.commit({TopicPartition(topic, 7): 1})
    finally:
        await a.close()
        await b.close()


# ------------------------------------------------------------------- committed offsets


async def test_a_committed_offset_looked_up_for_an_earlier_assignment_is_not_applied(
        embedded_broker: Any, control: Any) -> None:
    """The consumer asks for partition 0's committed offset (10) and the answer is held;
    meanwhile partition 0 is unassigned and assigned again (a new assignment, which a
    rebalance makes too) and the group's offset moves to 60. Applying the held answer would
    rewind the consumer to 10; it asks again instead."""
    bootstrap = embedded_broker.bootstrap_servers
    topic, group = _topic(bootstrap, 2, records=200), f"g-{uuid.uuid4().hex[:8]}"
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    async with AsyncConsumer(bootstrap_servers=bootstrap, group_id=group) as setter:
        setter.assign([p0])
        await setter.commit({p0: 10})
        async with AsyncConsumer(bootstrap_servers=bootstrap, group_id=group) as consumer:
            consumer.assign([p0])
            release = _hold_offset_fetch(control)
            try:
                position = asyncio.ensure_future(consumer.position(p0))
                await _until(lambda: control.pending(ApiKey.OFFSET_FETCH) == 0, "the lookup")
                consumer.assign([p1])
                consumer.assign([p0])
                await setter.commit({p0: 60})  # its own connection: not queued behind
            finally:
                release.set()
            assert await position == 60
            records = await consumer.getmany(timeout_ms=10_000)
            assert records[p0][0].offset == 60


async def test_a_seek_during_the_committed_offset_lookup_wins(
        embedded_broker: Any, control: Any) -> None:
    bootstrap = embedded_broker.bootstrap_servers
    topic, group = _topic(bootstrap, 1, records=50), f"g-{uuid.uuid4().hex[:8]}"
    p0 = TopicPartition(topic, 0)
    async with AsyncConsumer(bootstrap_servers=bootstrap, group_id=group) as consumer:
        consumer.assign([p0])
        await consumer.commit({p0: 10})
        release = _hold_offset_fetch(control)
        try:
            position = asyncio.ensure_future(consumer.position(p0))
            await _until(lambda: control.pending(ApiKey.OFFSET_FETCH) == 0, "the lookup")
            consumer.seek(p0, 42)
        finally:
            release.set()
        assert await position == 42
        records = await consumer.getmany(timeout_ms=10_000)
        assert records[p0][0].offset == 42


# ------------------------------------------------------------------------ fetch.min.bytes


def test_fetch_min_bytes_zero_is_accepted_as_kafka_allows() -> None:
    assert ConsumerConfig.build({"fetch.min.bytes": "0"},
                                bootstrap_servers="h:9092").fetch_min_bytes == 0
    assert ConsumerConfig.build(bootstrap_servers="h:9092", fetch_min_bytes=0).fetch_min_bytes == 0
    with pytest.raises(ConfigError) as negative:
        ConsumerConfig.build({"fetch.min.bytes": "-1"}, bootstrap_servers="h:9092")
    assert negative.value.key == "fetch.min.bytes"


async def test_fetch_min_bytes_zero_is_sent_and_consumes(embedded_broker: Any,
                                                         control: Any) -> None:
    bootstrap = embedded_broker.bootstrap_servers
    topic = _topic(bootstrap, 1, records=5)
    p0 = TopicPartition(topic, 0)
    asked: list[int] = []

    def note(request: Any) -> bool:  # sees every Fetch, applies no rule
        asked.append(request.min_bytes)
        return False

    control.delay_next(ApiKey.FETCH, 0.0, match=note)
    async with AsyncConsumer(bootstrap_servers=bootstrap, fetch_min_bytes=0,
                             auto_offset_reset="earliest") as consumer:
        consumer.assign([p0])
        got: dict[TopicPartition, list[int]] = {}
        await _until(lambda: len(got.get(p0, [])) == 5, "the first records", consumer, got=got)
        # Caught up, the fetcher keeps asking (the broker answers at once) and sees new ones.
        with Producer(bootstrap_servers=bootstrap) as producer:
            producer.send(topic, b"later", partition=0).result(timeout=10)
        await _until(lambda: len(got[p0]) == 6, "the later record", consumer, got=got)
    assert got[p0] == list(range(6))
    assert asked and set(asked) == {0}
