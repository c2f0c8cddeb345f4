"""The consumer against real brokers: reading, codecs, seeking, pausing, offsets, commits.

Data is written by confluent-kafka (an independent client) and read back by ours; every
test runs on each broker target of ``conftest.py`` (reference broker, tansu, Apache Kafka).
Group-heavy scenarios are in ``test_consumer_group.py``.
"""

from __future__ import annotations

import asyncio
import re
import signal
import threading
import time
import uuid
from collections import defaultdict
from typing import Any

import pytest

from sdk import AsyncConsumer, Consumer, OffsetAndMetadata, TopicPartition
from sdk.consumer import NoOffsetForPartitionError
from sdk.errors import OffsetOutOfRangeError, WakeupError

from .conftest import Target, new_topic

# Recent timestamps: brokers delete records older than retention.ms (7 days by default).
BASE_TS = (int(time.time()) - 3600) * 1000
# Short sessions: tansu holds a JoinGroup for about half the session timeout.
GROUP = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 500}


def produce(bootstrap: str, topic: str, count: int, partitions: int, *,
            compression: str = "none", start: int = 0) -> list[tuple[int, bytes, bytes]]:
    """Write ``count`` records round-robin over the partitions; returns (partition, key,
    value) in write order."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "compression.type": compression})
    written = []
    for i in range(start, start + count):
        key, value = f"key-{i}".encode(), f"value-{i}-{compression}".encode() * 4
        partition = i % partitions
        producer.produce(topic, key=key, value=value, partition=partition,
                         timestamp=BASE_TS + i, headers=[("i", str(i).encode()), ("n", None)])
        written.append((partition, key, value))
    assert producer.flush(30) == 0, "confluent-kafka could not deliver the test data"
    return written


def by_partition(written: list[tuple[int, bytes, bytes]]) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = defaultdict(list)
    for partition, _, value in written:
        out[partition].append(value)
    return dict(out)


def poll_until(consumer: Consumer, count: int, timeout_polls: int = 60, **kw: Any) -> list[Any]:
    got: list[Any] = []
    for _ in range(timeout_polls):
        for records in consumer.poll(timeout_ms=500, **kw).values():
            got.extend(records)
        if len(got) >= count:
            break
    return got


def group_id() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"


def test_manual_assignment_reads_everything_in_order(broker: Target) -> None:
    topic = new_topic()
    broker.create_topic(topic, 3)
    written = produce(broker.bootstrap_servers, topic, 300, 3)
    with Consumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, p) for p in range(3)])
        got = poll_until(c, 300)
    assert len(got) == 300
    seen: dict[int, list[bytes]] = defaultdict(list)
    for rec in got:
        seen[rec.partition].append(rec.value)
        i = int(rec.key.decode().split("-")[1])
        assert rec.timestamp == BASE_TS + i
        assert rec.headers == [("i", str(i).encode()), ("n", None)]
        assert rec.topic == topic
    assert dict(seen) == by_partition(written)
    for partition_records in (
        [r for r in got if r.partition == p] for p in range(3)
    ):
        offsets = [r.offset for r in partition_records]
        assert offsets == list(range(len(offsets)))


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches(broker: Target, codec: str) -> None:
    topic = new_topic(codec)
    broker.create_topic(topic, 2)
    written = produce(broker.bootstrap_servers, topic, 200, 2, compression=codec)

    async def read() -> list[Any]:
        async with AsyncConsumer(topic, bootstrap_servers=broker.bootstrap_servers,
                                 auto_offset_reset="earliest") as c:
            got: list[Any] = []
            for _ in range(60):
                for records in (await c.getmany(timeout_ms=500)).values():
                    got.extend(records)
                if len(got) >= 200:
                    break
            return got

    got = asyncio.run(read())
    seen: dict[int, list[bytes]] = defaultdict(list)
    for rec in got:
        seen[rec.partition].append(rec.value)
    assert dict(seen) == by_partition(written)


def test_async_iteration_and_deserializers(broker: Target) -> None:
    topic = new_topic()
    broker.create_topic(topic, 1)
    produce(broker.bootstrap_servers, topic, 20, 1)

    async def read() -> list[Any]:
        out = []
        async with AsyncConsumer(
            topic, bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
            config={"key.deserializer": "org.apache.kafka.common.serialization.StringDeserializer"},
            value_deserializer=lambda v: v.decode().upper(),
        ) as c:
            first = await c.getone()
            out.append(first)
            async for rec in c:
                out.append(rec)
                if len(out) == 20:
                    break
        return out

    got = asyncio.run(read())
    assert [r.key for r in got] == [f"key-{i}" for i in range(20)]
    assert got[3].value == ("value-3-none" * 4).upper()


def test_seek_position_and_offset_lookups(broker: Target) -> None:
    topic = new_topic()
    broker.create_topic(topic, 2)
    produce(broker.bootstrap_servers, topic, 40, 2)  # 20 per partition, timestamps BASE_TS+i
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with Consumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="latest") as c:
        c.assign([tp0, tp1])
        assert c.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
        if broker.name != "tansu":  # tansu reports 1 after a multi-record batch (PEERS.md)
            assert c.end_offsets([tp0, tp1]) == {tp0: 20, tp1: 20}
            assert c.position(tp0) == 20  # auto_offset_reset=latest
        c.seek(tp0, 5)
        assert c.position(tp0) == 5
        got = poll_until(c, 15, max_records=15)
        assert [r.offset for r in got if r.partition == 0][:3] == [5, 6, 7]
        c.seek_to_beginning(tp0)
        assert c.position(tp0) == 0
        if broker.name != "tansu":  # tansu answers every timestamp lookup with offset 0
            # partition 0 holds the even i: BASE_TS + 10 is i=10, offset 5
            found = c.offsets_for_times({tp0: BASE_TS + 10, tp1: BASE_TS + 10_000})
            assert found[tp0] is not None and found[tp0].offset == 5
            assert found[tp0].timestamp == BASE_TS + 10
            assert found[tp1] is None
        c.seek_to_end(tp1)
        if broker.name != "tansu":
            assert c.position(tp1) == 20
        with pytest.raises(ValueError):
            c.seek(tp0, -1)


def test_pause_and_resume(broker: Target) -> None:
    topic = new_topic()
    broker.create_topic(topic, 2)
    produce(broker.bootstrap_servers, topic, 40, 2)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with Consumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest") as c:
        c.assign([tp0, tp1])
        c.pause(tp1)
        assert c.paused() == {tp1}
        got = poll_until(c, 20, timeout_polls=10)
        assert {r.partition for r in got} == {0} and len(got) == 20
        assert c.poll(timeout_ms=300) == {}  # partition 1 stays paused
        c.resume(tp1)
        got = poll_until(c, 20)
        assert {r.partition for r in got} == {1} and len(got) == 20


def test_commit_and_restart_resume_from_committed(broker: Target) -> None:
    topic = new_topic()
    broker.create_topic(topic, 1)
    produce(broker.bootstrap_servers, topic, 30, 1)
    tp = TopicPartition(topic, 0)
    group = group_id()
    settings = dict(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                    auto_offset_reset="earliest", enable_auto_commit=False, **GROUP)
    with Consumer(topic, **settings) as c:
        got = poll_until(c, 10, max_records=10)
        assert [r.offset for r in got[:10]] == list(range(10))
        c.commit({tp: OffsetAndMetadata(10, "after ten")})
        committed = c.committed(tp)
        assert committed is not None and committed.offset == 10
        if broker.name != "tansu":  # tansu does not keep commit metadata
            assert committed.metadata == "after ten"
    with Consumer(topic, **settings) as c:
        got = poll_until(c, 20)
        assert got[0].offset == 10
        c.commit()  # everything handed out
        assert c.committed(tp).offset == 30


def test_auto_commit_commits_only_what_was_handed_out(broker: Target) -> None:
    topic = new_topic()
    broker.create_topic(topic, 1)
    produce(broker.bootstrap_servers, topic, 50, 1)
    tp = TopicPartition(topic, 0)
    settings = dict(bootstrap_servers=broker.bootstrap_servers, group_id=group_id(),
                    auto_offset_reset="earliest", auto_commit_interval_ms=0, **GROUP)
    with Consumer(topic, **settings) as c:
        got = poll_until(c, 5, max_records=5)
        assert len(got) == 5  # 50 were prefetched, 5 handed out
    with Consumer(topic, **settings) as c:
        assert c.committed(tp).offset == 5  # the close committed exactly the handed-out five
        again = poll_until(c, 45)
        assert again[0].offset == 5


def test_no_committed_offset_and_reset_none_raises(broker: Target) -> None:
    topic = new_topic()
    broker.create_topic(topic, 1)
    with Consumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group_id(),
                  auto_offset_reset="none", **GROUP) as c:
        with pytest.raises(NoOffsetForPartitionError, match=re.escape(f"{topic}-0")):
            for _ in range(60):
                c.poll(timeout_ms=500)


def test_out_of_range_position_applies_the_reset_policy(broker: Target) -> None:
    topic = new_topic()
    broker.create_topic(topic, 1)
    produce(broker.bootstrap_servers, topic, 10, 1)
    tp = TopicPartition(topic, 0)
    if broker.name == "tansu":
        # tansu answers a fetch past the log end with no records and no error (Kafka:
        # OFFSET_OUT_OF_RANGE), so no reset policy ever applies: the position stays put.
        for reset in ("earliest", "none"):
            with Consumer(bootstrap_servers=broker.bootstrap_servers,
                          auto_offset_reset=reset) as c:
                c.assign([tp])
                c.seek(tp, 1000)
                for _ in range(6):
                    assert c.poll(timeout_ms=500) == {}, reset
                assert c.position(tp) == 1000, reset
        return
    with Consumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest") as c:
        c.assign([tp])
        c.seek(tp, 1000)
        got = poll_until(c, 10)
        assert [r.offset for r in got] == list(range(10))
    with Consumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="none") as c:
        c.assign([tp])
        c.seek(tp, 1000)
        with pytest.raises(OffsetOutOfRangeError, match="auto_offset_reset is 'none'"):
            for _ in range(40):
                c.poll(timeout_ms=500)


def test_wakeup_interrupts_a_blocking_poll(broker: Target) -> None:
    topic = new_topic()
    broker.create_topic(topic, 1)
    with Consumer(bootstrap_servers=broker.bootstrap_servers) as c:
        c.assign([TopicPartition(topic, 0)])
        outcome: list[BaseException | dict[Any, Any]] = []

        def blocked_poll() -> None:
            try:
                outcome.append(c.poll(timeout_ms=60_000))
            except BaseException as exc:
                outcome.append(exc)

        thread = threading.Thread(target=blocked_poll)
        thread.start()
        for _ in range(100):  # wake it up once it is inside poll (data never comes)
            c.wakeup()
            thread.join(0.1)
            if not thread.is_alive():
                break
        thread.join(30)
        assert not thread.is_alive()
        assert isinstance(outcome[0], WakeupError)
        assert c.poll(timeout_ms=0) == {}  # a wakeup is consumed once


def test_pattern_subscription_follows_new_topics(broker: Target) -> None:
    prefix = f"pat-{uuid.uuid4().hex[:6]}"
    first, second = f"{prefix}-a", f"{prefix}-b"
    broker.create_topic(first, 1)
    produce(broker.bootstrap_servers, first, 5, 1)
    with Consumer(bootstrap_servers=broker.bootstrap_servers, group_id=group_id(),
                  auto_offset_reset="earliest", metadata_max_age_ms=500, **GROUP) as c:
        c.subscribe(pattern=re.escape(prefix) + r"-.*")
        got = poll_until(c, 5)
        assert {r.topic for r in got} == {first}
        broker.create_topic(second, 1)
        produce(broker.bootstrap_servers, second, 5, 1)
        got = poll_until(c, 5, timeout_polls=120)
        assert {r.topic for r in got} == {second}
        assert c.subscription() == {first, second}


def test_blocking_iteration_ends_cleanly_on_ctrl_c(broker: Target) -> None:
    import _thread

    topic = new_topic()
    broker.create_topic(topic, 1)
    produce(broker.bootstrap_servers, topic, 10, 1)
    with Consumer(topic, bootstrap_servers=broker.bootstrap_servers,
                  auto_offset_reset="earliest") as c:
        got = []
        for rec in c:
            got.append(rec.offset)
            if len(got) == 10:
                break
        assert got == list(range(10))
        # Ctrl-C while the loop waits for more records: the loop just ends. A shell that
        # starts the suite in the background ignores SIGINT, and interrupt_main() then does
        # nothing; Python's own handler is put back for the duration, as an interactive
        # process has it.
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        timer = threading.Timer(1.0, _thread.interrupt_main)
        timer.start()
        try:
            for _ in c:
                pytest.fail("no more records were produced")
        finally:
            timer.cancel()
            signal.signal(signal.SIGINT, previous)
        produce(broker.bootstrap_servers, topic, 1, 1, start=10)
        assert [r.offset for r in poll_until(c, 1)] == [10]  # still usable afterwards
