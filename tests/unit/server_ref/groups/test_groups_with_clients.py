"""Third-party group consumers against the reference broker: partitions are split between
the members of a group, committed offsets are where a restarted member resumes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from server_ref import EmbeddedBroker

pytestmark = pytest.mark.interop

TOPIC = "orders"
PARTITIONS = 4
DEADLINE_S = 60.0


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(config={"group.initial.rebalance.delay.ms": 0,
                                "num.partitions": PARTITIONS}) as b:
        yield b


def create_topic(broker: EmbeddedBroker) -> None:
    """Create the topic with no records, so nothing is read before the group settles."""
    broker.call(lambda: broker.broker.auto_create(TOPIC))


def produce(bootstrap: str, count: int, start: int = 0) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(start, start + count):
        producer.send(TOPIC, key=f"k{i}".encode(), value=f"v{i}".encode())
    producer.flush()
    producer.close()


class KafkaPythonMember(threading.Thread):
    """One kafka-python group consumer polling on its own thread (the client is not
    thread-safe), committing after every batch it reads.

    Long polls on purpose: kafka-python 3.0.12 can lose a join that completes between two
    ``poll()`` calls when the leader rejoins for a metadata change (``need_rejoin()`` is
    false by then, so the finished JoinGroup/SyncGroup is never awaited and heartbeats stay
    off); a poll that outlasts the rebalance avoids that client race.
    """

    def __init__(self, name: str, bootstrap: str) -> None:
        super().__init__(name=name, daemon=True)
        self.bootstrap = bootstrap
        self.values: list[str] = []
        self.read_from: set[int] = set()
        self.assigned: frozenset[int] = frozenset()
        self.stopping = threading.Event()
        self.failure: BaseException | None = None

    def run(self) -> None:
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(TOPIC, bootstrap_servers=self.bootstrap, group_id="billing",
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 heartbeat_interval_ms=100)
        try:
            while not self.stopping.is_set():
                batch = consumer.poll(timeout_ms=1000)
                for tp, records in batch.items():
                    self.read_from.add(tp.partition)
                    self.values.extend(r.value.decode() for r in records)
                if batch:
                    consumer.commit()
                self.assigned = frozenset(tp.partition for tp in consumer.assignment())
        except BaseException as exc:
            self.failure = exc
        finally:
            consumer.close()


def wait_until(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_kafka_python_consumers_split_partitions_and_resume(broker: EmbeddedBroker) -> None:
    from kafka import KafkaConsumer, TopicPartition

    bootstrap = broker.bootstrap_servers
    create_topic(broker)
    members = [KafkaPythonMember(f"member-{i}", bootstrap) for i in range(2)]
    for member in members:
        member.start()
    try:
        # Both members hold a share of the partitions before the data arrives.
        wait_until(lambda: all(m.assigned for m in members)
                   and len(members[0].assigned | members[1].assigned) == PARTITIONS
                   and not members[0].assigned & members[1].assigned,
                   "the group never split the partitions")
        produce(bootstrap, 40)
        wait_until(lambda: sum(len(m.values) for m in members) >= 40,
                   "the members did not read everything")
    finally:
        for member in members:
            member.stopping.set()
        for member in members:
            member.join(DEADLINE_S)
    for member in members:
        assert member.failure is None, member.failure
        assert member.read_from <= member.assigned  # each read only its own partitions
    assert sorted(v for m in members for v in m.values) == sorted(f"v{i}" for i in range(40))

    produce(bootstrap, 5, start=40)
    resumed = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id="billing",
                            auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        fresh: list[str] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(fresh) < 5:
            assert time.monotonic() < deadline, f"resumed consumer read {fresh}"
            for records in resumed.poll(timeout_ms=1000).values():
                fresh.extend(r.value.decode() for r in records)
        assert sorted(fresh) == [f"v{i}" for i in range(40, 45)]  # nothing before the commit
        committed = [resumed.committed(TopicPartition(TOPIC, p)) for p in range(PARTITIONS)]
        assert sum(c or 0 for c in committed) == 40
    finally:
        resumed.close()


async def test_aiokafka_group_commit_and_static_restart(broker: EmbeddedBroker) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    bootstrap = broker.bootstrap_servers
    produce(bootstrap, 20)

    def consumer(instance: str) -> AIOKafkaConsumer:
        return AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id="audit",
                                group_instance_id=instance, auto_offset_reset="earliest",
                                enable_auto_commit=False, heartbeat_interval_ms=100)

    first, second = consumer("audit-1"), consumer("audit-2")
    await first.start()
    await second.start()
    try:
        count = 0
        deadline = time.monotonic() + DEADLINE_S
        while count < 20 or not (first.assignment() and second.assignment()):
            assert time.monotonic() < deadline, "the group never consumed everything"
            for c in (first, second):
                batch = await c.getmany(timeout_ms=100)
                count += sum(len(records) for records in batch.values())
        assert not first.assignment() & second.assignment()
        assert len(first.assignment() | second.assignment()) == PARTITIONS
        await first.commit()
        await second.commit()
        held_by_second = second.assignment()
        generation = broker.call(lambda: broker.broker.groups.group("audit").generation_id)
    finally:
        await first.stop()
    # A static member's restart takes its old seat: same assignment, no new generation.
    await second.stop()
    restarted = consumer("audit-2")
    await restarted.start()
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not restarted.assignment():
            assert time.monotonic() < deadline, "the restarted member got no partitions"
            await restarted.getmany(timeout_ms=100)
        assert restarted.assignment() == held_by_second
        assert broker.call(lambda: broker.broker.groups.group("audit").generation_id) == \
            generation
        for tp in held_by_second:
            assert await restarted.committed(TopicPartition(tp.topic, tp.partition)) is not None
    finally:
        await restarted.stop()


def test_confluent_kafka_consumers_split_partitions_and_resume(broker: EmbeddedBroker) -> None:
    from confluent_kafka import Consumer, TopicPartition

    bootstrap = broker.bootstrap_servers
    create_topic(broker)

    def consumer() -> Consumer:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ledger",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "heartbeat.interval.ms": 100, "session.timeout.ms": 6000})
        c.subscribe([TOPIC])
        return c

    first, second = consumer(), consumer()
    try:
        def owned(c: Consumer) -> set[int]:
            return {tp.partition for tp in c.assignment()}

        values: list[str] = []

        def poll_both() -> None:
            for c in (first, second):
                message = c.poll(0.05)
                if message is None:
                    continue
                assert message.error() is None, message.error()
                assert message.partition() in owned(c)
                values.append(message.value().decode())
                c.commit(message, asynchronous=False)

        deadline = time.monotonic() + DEADLINE_S
        while not (owned(first) and owned(second)
                   and len(owned(first) | owned(second)) == PARTITIONS):
            assert time.monotonic() < deadline, "the group never split the partitions"
            poll_both()
        assert not owned(first) & owned(second)
        produce(bootstrap, 20)
        while len(values) < 20:
            assert time.monotonic() < deadline, f"read only {values}"
            poll_both()
        assert sorted(values) == sorted(f"v{i}" for i in range(20))
    finally:
        first.close()
        second.close()

    produce(bootstrap, 3, start=20)
    resumed = consumer()
    try:
        fresh: list[str] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(fresh) < 3:
            assert time.monotonic() < deadline, f"resumed consumer read {fresh}"
            message = resumed.poll(0.1)
            if message is not None and message.error() is None:
                fresh.append(message.value().decode())
        assert sorted(fresh) == ["v20", "v21", "v22"]
        committed = resumed.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)],
                                      timeout=10)
        assert sum(tp.offset for tp in committed if tp.offset >= 0) == 20
    finally:
        resumed.close()
