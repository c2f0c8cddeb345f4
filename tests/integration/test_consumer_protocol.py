"""KIP-848 consumer groups (group.protocol=consumer) on our broker and Apache Kafka 4.3.

Both brokers run with a short heartbeat interval (500 ms) and session timeout (10 s), so a
member learns of a new assignment within a heartbeat and a crashed member's partitions move
after 10 s. tansu has no ConsumerGroupHeartbeat: asserted in its own test.

The delivery test: members join one by one (1 -> 4), two leave, one is a separate process
killed with SIGKILL. Each member commits in its revocation listener and after every poll.
Every record is consumed, and a record consumed twice lies at or after the last offset the
first reader committed for its partition (duplicates only after the last commit).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sdk import AdminClient, AsyncConsumer, ConfigResource, Consumer, Producer
from sdk.consumer.consumer_member import new_member_id
from sdk.errors import InvalidConfigError, UnsupportedVersionError
from sdk.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from sdk.protocol.messages.find_coordinator import FindCoordinatorRequest
from sdk.types import TopicPartition
from server_ref.cluster.processes import ask

from .conftest import Target, create_topic, new_topic, start_target

ROOT = Path(__file__).resolve().parents[2]
HEARTBEAT_MS = 500
SESSION_MS = 10_000
APACHE_CONFIG = {
    "group.consumer.heartbeat.interval.ms": HEARTBEAT_MS,
    "group.consumer.min.heartbeat.interval.ms": HEARTBEAT_MS,
    "group.consumer.session.timeout.ms": SESSION_MS,
    "group.consumer.min.session.timeout.ms": 6_000,
}
REF_CONFIG = {
    "group.consumer.heartbeat.interval.ms": HEARTBEAT_MS,
    "group.consumer.min.heartbeat.interval.ms": HEARTBEAT_MS,
    "group.consumer.session.timeout.ms": SESSION_MS,
    "group.consumer.min.session.timeout.ms": 6_000,
}
WAIT_S = 60.0


@pytest.fixture(scope="module", params=["ref", "kafka"])
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    if request.param == "ref":
        from server_ref import EmbeddedBroker

        broker = EmbeddedBroker(data_dir=None, port=0, config=REF_CONFIG)
        broker.start()
        try:
            yield Target("ref", broker.bootstrap_servers, embedded=broker)
        finally:
            broker.close()
    else:
        from apache_support import apache_cluster

        with apache_cluster(brokers=1, config=APACHE_CONFIG) as cluster:
            yield Target("kafka", cluster.bootstrap_servers, cluster=cluster)


def member(target: Target, group: str, **settings: object) -> Consumer:
    return Consumer(bootstrap_servers=target.bootstrap_servers, group_id=group,
                    group_protocol="consumer", auto_offset_reset="earliest",
                    enable_auto_commit=False, **settings)


def produce(target: Target, topic: str, start: int, count: int) -> None:
    with Producer(bootstrap_servers=target.bootstrap_servers) as producer:
        for i in range(start, start + count):
            producer.send(topic, f"r{i}".encode(), key=str(i).encode())


class Member:
    """One in-process member: polls, records what it read, commits after each poll and in
    its revocation listener."""

    def __init__(self, target: Target, group: str, topic: str) -> None:
        self.read: list[tuple[int, int]] = []  # (partition, offset)
        self.commits: dict[int, int] = {}  # partition -> last committed offset
        self.consumer = member(target, group)
        self.consumer.subscribe([topic], listener=self)

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.commit()

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        pass

    def commit(self) -> None:
        """Commit the position of every owned partition (what this member has read)."""
        try:
            offsets = {tp: self.consumer.position(tp) for tp in self.consumer.assignment()}
            if offsets:
                self.consumer.commit(offsets)
                self.commits.update({tp.partition: o for tp, o in offsets.items()})
        except Exception:  # a partition moved meanwhile: not committed, the rule still holds
            pass

    def poll(self) -> None:
        for records in self.consumer.poll(timeout_ms=100).values():
            self.read.extend((r.partition, r.offset) for r in records)
        self.commit()


CRASHER = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    from sdk import Consumer
    c = Consumer({topic!r}, bootstrap_servers={bootstrap!r}, group_id={group!r},
                 group_protocol="consumer", auto_offset_reset="earliest",
                 enable_auto_commit=False)
    while True:
        batch = c.poll(timeout_ms=100)
        for records in batch.values():
            for r in records:
                print("R", r.partition, r.offset, flush=True)
        try:
            offsets = {{tp: c.position(tp) for tp in c.assignment()}}
            if offsets:
                c.commit(offsets)
                for tp, o in offsets.items():
                    print("C", tp.partition, o, flush=True)
        except Exception as exc:
            print("E", exc, flush=True)
""")


class Lines:
    """A child process's stdout lines, collected by a thread (reads never block a test)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append(line.strip())

    def wait_for(self, predicate, what: str, timeout_s: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate(self.lines):
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {self.lines}"
            time.sleep(0.05)

    def finish(self) -> list[str]:
        self._thread.join(10)
        return list(self.lines)


def until(condition, what: str, members: list[Member], timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        for m in members:
            m.poll()


def test_members_join_leave_and_crash_without_losing_records(target: Target) -> None:
    topic, group = new_topic("k848"), f"g-{uuid.uuid4().hex[:8]}"
    target.create_topic(topic, 4)
    members: list[Member] = []
    crasher: subprocess.Popen[str] | None = None
    produced = 0
    try:
        def read_all() -> set[tuple[int, int]]:
            out = {x for m in members for x in m.read}
            return out | crash_read
        crash_read: set[tuple[int, int]] = set()
        # 1 -> 3 in-process members, a batch of records per step.
        for _ in range(3):
            members.append(Member(target, group, topic))
            produce(target, topic, produced, 150)
            produced += 150
            until(lambda n=produced: len(read_all()) >= n, f"{produced} records", members)
        # The fourth member is a process of its own; it will be SIGKILLed.
        crasher = subprocess.Popen(
            [sys.executable, "-c", CRASHER.format(root=str(ROOT), topic=topic,
                                                  bootstrap=target.bootstrap_servers,
                                                  group=group)],
            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        output = Lines(crasher)
        produce(target, topic, produced, 300)
        produced += 300
        until(lambda: any(x.startswith("C ") for x in output.lines),
              "the crashing member to commit", members)
        crasher.send_signal(signal.SIGKILL)
        crasher.wait(10)
        lines = output.finish()
        crash_commits: dict[int, int] = {}
        for line in lines:
            kind, *fields = line.split()
            if kind == "R":
                crash_read.add((int(fields[0]), int(fields[1])))
            elif kind == "C":
                crash_commits[int(fields[0])] = int(fields[1])
        # Its partitions move after the session timeout; two members leave meanwhile.
        produce(target, topic, produced, 200)
        produced += 200
        for m in members[:2]:
            m.consumer.close()
        survivors = members[2:]
        until(lambda: len(read_all()) >= produced, f"all {produced} records", survivors,
              timeout_s=WAIT_S + SESSION_MS / 1000)
        assert len(read_all()) == produced  # every record, nothing invented
        # Duplicates: only at or after the last offset the first reader committed.
        first_reader: dict[tuple[int, int], str] = {}
        counts: dict[tuple[int, int], int] = defaultdict(int)
        readers = [(f"m{i}", m.read, m.commits) for i, m in enumerate(members)]
        readers.append(("crasher", sorted(crash_read), crash_commits))
        for name, read, _commits in readers:
            for x in read:
                counts[x] += 1
                first_reader.setdefault(x, name)
        commits = {name: c for name, _r, c in readers}
        for (partition, offset), n in counts.items():
            if n > 1:
                last = commits[first_reader[(partition, offset)]].get(partition, 0)
                assert offset >= last, (partition, offset, last)
    finally:
        if crasher is not None and crasher.poll() is None:
            crasher.kill()
            crasher.wait(10)
        for m in members:
            with contextlib.suppress(Exception):
                m.consumer.close()


def test_regex_subscription_picks_up_a_topic_created_later(target: Target) -> None:
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    first, later = f"{prefix}-a", f"{prefix}-b"
    target.create_topic(first, 2)
    produce(target, first, 0, 10)
    with member(target, f"g-{prefix}") as consumer:
        consumer.subscribe(pattern=f"{prefix}-.*")
        seen: set[str] = set()
        deadline = time.monotonic() + WAIT_S
        created = False
        while seen != {first, later}:
            assert time.monotonic() < deadline, f"saw only {seen}"
            for tp, records in consumer.poll(timeout_ms=200).items():
                if records:
                    seen.add(tp.topic)
            if first in seen and not created:
                target.create_topic(later, 1)
                produce(target, later, 0, 5)
                created = True
        assert {tp.topic for tp in consumer.assignment()} == {first, later}
        with AdminClient(bootstrap_servers=target.bootstrap_servers) as admin:
            (m,) = admin.consumer_group_describe([f"g-{prefix}"])[f"g-{prefix}"].members
        # the broker holds the regex itself (SubscribedTopicRegex), not a list of names
        assert m.subscribed_topic_regex == f"{prefix}-.*" and not m.subscribed_topic_names


def test_static_member_restart_keeps_its_partitions(target: Target) -> None:
    topic, group = new_topic("static"), f"g-{uuid.uuid4().hex[:8]}"
    target.create_topic(topic, 4)
    a = member(target, group, group_instance_id="a")
    b = member(target, group, group_instance_id="b")
    try:
        a.subscribe([topic])
        b.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        while len(a.assignment()) + len(b.assignment()) < 4 or not a.assignment() or not b.assignment():
            assert time.monotonic() < deadline
            a.poll(timeout_ms=100)
            b.poll(timeout_ms=100)
        before = a.assignment()
        a.close()  # leaves with epoch -2: keeps its place for the session timeout
        a = member(target, group, group_instance_id="a")
        a.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        while a.assignment() != before:
            assert time.monotonic() < deadline, (a.assignment(), before)
            a.poll(timeout_ms=100)
            b.poll(timeout_ms=100)
        assert not before & b.assignment()
    finally:
        a.close()
        b.close()


def test_admin_describes_the_group(target: Target) -> None:
    topic, group = new_topic("desc"), f"g-{uuid.uuid4().hex[:8]}"
    target.create_topic(topic, 3)
    with member(target, group, group_remote_assignor="range") as consumer, \
            AdminClient(bootstrap_servers=target.bootstrap_servers) as admin:
        consumer.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        while len(consumer.assignment()) < 3:
            assert time.monotonic() < deadline
            consumer.poll(timeout_ms=100)
        described = admin.consumer_group_describe([group])[group]
        assert described.error is None
        assert described.state == "Stable" and described.assignor == "range"
        assert described.group_epoch == described.assignment_epoch >= 1
        (m,) = described.members
        assert m.subscribed_topic_names == (topic,)
        assert set(m.assignment) == {TopicPartition(topic, p) for p in range(3)}
        assert m.member_epoch == described.assignment_epoch
        listed = admin.list_consumer_groups()
        assert listed[group].group_type == "consumer"
        # A classic describe of a consumer-protocol group: Dead (not a classic group).
        classic = admin.describe_consumer_groups([group]).get(group)
        assert classic is None or classic.state == "Dead" or classic.error is not None


def test_tansu_has_no_consumer_protocol() -> None:
    """tansu does not implement ConsumerGroupHeartbeat: the member's poll raises the
    broker's UNSUPPORTED_VERSION instead of joining."""
    with start_target("tansu") as tansu, member(tansu, "g-tansu") as consumer:
        consumer.subscribe(["anything"])
        with pytest.raises(UnsupportedVersionError, match=r"group\.protocol=classic"):
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                consumer.poll(timeout_ms=200)


def test_confluent_kafka_members_share_the_group_with_ours(target: Target) -> None:
    """librdkafka's KIP-848 member (confluent-kafka, group.protocol=consumer) and ours in
    one group: the broker splits the partitions between them and every record is read."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic, group = new_topic("mixed"), f"g-{uuid.uuid4().hex[:8]}"
    target.create_topic(topic, 4)
    produce(target, topic, 0, 200)
    theirs = confluent_kafka.Consumer({
        "bootstrap.servers": target.bootstrap_servers, "group.id": group,
        "group.protocol": "consumer", "auto.offset.reset": "earliest",
        "enable.auto.commit": False})
    ours = member(target, group)
    try:
        theirs.subscribe([topic])
        ours.subscribe([topic])
        read: dict[str, set[tuple[int, int]]] = {"ours": set(), "theirs": set()}
        split = False
        deadline = time.monotonic() + WAIT_S
        while len(read["ours"] | read["theirs"]) < 200 or not split:
            assert time.monotonic() < deadline, {k: len(v) for k, v in read.items()}
            for records in ours.poll(timeout_ms=100).values():
                read["ours"].update((r.partition, r.offset) for r in records)
            msg = theirs.poll(0.1)
            if msg is not None and msg.error() is None:
                read["theirs"].add((msg.partition(), msg.offset()))
            mine = {tp.partition for tp in ours.assignment()}
            other = {tp.partition for tp in theirs.assignment()}
            split = bool(mine) and bool(other) and not mine & other and len(mine | other) == 4
        assert len(read["ours"] | read["theirs"]) == 200
    finally:
        theirs.close()
        ours.close()


def test_ref_broker_restart_keeps_the_group_and_its_offsets(tmp_path: Path) -> None:
    """Our broker journals a consumer-protocol group in __consumer_offsets: after a restart
    the member heartbeats on with its epoch and keeps its partitions, and the committed
    offsets are there (Kafka reloads the group the same way after a coordinator move)."""
    from server_ref import EmbeddedBroker

    broker = EmbeddedBroker(data_dir=tmp_path, port=0, config=REF_CONFIG).start()
    target = Target("ref", broker.bootstrap_servers, embedded=broker)
    topic, group = new_topic("restart"), f"g-{uuid.uuid4().hex[:8]}"
    try:
        target.create_topic(topic, 2)
        produce(target, topic, 0, 20)
        with member(target, group) as consumer:
            consumer.subscribe([topic])
            read = 0
            deadline = time.monotonic() + WAIT_S
            while read < 20:
                assert time.monotonic() < deadline
                read += sum(len(r) for r in consumer.poll(timeout_ms=100).values())
            consumer.commit()
            owned = consumer.assignment()
            epoch = consumer.group_metadata().generation_id
            broker.restart()
            described = broker.call(lambda: broker.broker.groups.consumer.group(group))
            assert described is not None and set(described.members) == {
                consumer.group_metadata().member_id}
            produce(target, topic, 20, 10)
            deadline = time.monotonic() + WAIT_S
            while read < 30:
                assert time.monotonic() < deadline
                read += sum(len(r) for r in consumer.poll(timeout_ms=100).values())
            assert consumer.assignment() == owned
            assert consumer.group_metadata().generation_id == epoch  # no rejoin was needed
            consumer.commit()
        with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
            offsets = admin.list_consumer_group_offsets(group)
        assert sum(offsets[tp].offset or 0 for tp in offsets) == 30
    finally:
        broker.close()


@contextlib.contextmanager
def mixed_group(target: Target, prefix: str) -> Iterator[tuple[str, str, Consumer, Consumer]]:
    """(topic, group, classic, newcomer): a classic member owned the topic's 4 partitions,
    then a consumer-protocol member joined; yields once the two share them."""
    topic, group = new_topic(prefix), f"g-{uuid.uuid4().hex[:8]}"
    target.create_topic(topic, 4)
    classic = Consumer(topic, bootstrap_servers=target.bootstrap_servers, group_id=group,
                       auto_offset_reset="earliest", session_timeout_ms=10_000,
                       heartbeat_interval_ms=500)
    newcomer = member(target, group)
    try:
        deadline = time.monotonic() + WAIT_S
        while len(classic.assignment()) < 4:
            assert time.monotonic() < deadline
            classic.poll(timeout_ms=100)
        newcomer.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        while not (newcomer.assignment() and classic.assignment()
                   and len(newcomer.assignment() | classic.assignment()) == 4):
            assert time.monotonic() < deadline, (classic.assignment(), newcomer.assignment())
            newcomer.poll(timeout_ms=100)
            classic.poll(timeout_ms=100)
        yield topic, group, classic, newcomer
    finally:
        newcomer.close()
        classic.close()


def test_a_classic_group_meets_a_consumer_protocol_member(target: Target) -> None:
    """The online upgrade (group.consumer.migration.policy=bidirectional, Kafka's default):
    a consumer-protocol member joins a stable classic group, the group becomes a consumer
    group, and the classic member carries on with JoinGroup/SyncGroup/Heartbeat, giving up
    the partitions the broker moves to the newcomer. Both brokers."""
    with mixed_group(target, "mixed") as (_topic, group, classic, newcomer):
        assert not newcomer.assignment() & classic.assignment()
        with AdminClient(bootstrap_servers=target.bootstrap_servers) as admin:
            described = admin.consumer_group_describe([group])[group]
        assert sorted(m.member_type for m in described.members) == [0, 1]  # classic, consumer


def test_a_mixed_group_turns_classic_when_its_last_consumer_member_leaves(
        target: Target) -> None:
    """The online downgrade (the same bidirectional policy): the consumer-protocol member
    of a mixed group leaves, only a classic member remains, so the group becomes a classic
    group again (ListGroups says classic, DescribeGroups describes it) after a classic
    rebalance, and the classic member owns every partition and reads on. Both brokers."""
    with mixed_group(target, "down") as (topic, group, classic, newcomer), \
            AdminClient(bootstrap_servers=target.bootstrap_servers) as admin:
        assert admin.list_consumer_groups()[group].group_type == "consumer"
        newcomer.close()
        produce(target, topic, 0, 40)
        values: set[bytes] = set()
        deadline = time.monotonic() + WAIT_S
        while len(classic.assignment()) < 4 or len(values) < 40:
            assert time.monotonic() < deadline, (classic.assignment(), len(values))
            for records in classic.poll(timeout_ms=100).values():
                values.update(r.value for r in records)
        assert values == {f"r{i}".encode() for i in range(40)}
        assert admin.list_consumer_groups()[group].group_type == "classic"
        described = admin.describe_consumer_groups([group])[group]
        assert described.state == "Stable" and len(described.members) == 1
        assert described.members[0].member_id == classic.group_metadata().member_id


PAUSED = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    from sdk import Consumer

    class Listener:
        def on_partitions_revoked(self, p): print("revoked", len(p), flush=True)
        def on_partitions_assigned(self, p): print("assigned", len(p), flush=True)
        def on_partitions_lost(self, p): print("lost", len(p), flush=True)

    c = Consumer(bootstrap_servers={bootstrap!r}, group_id={group!r},
                 group_protocol="consumer", auto_offset_reset="earliest")
    c.subscribe([{topic!r}], listener=Listener())
    print("member", c.group_metadata().member_id, flush=True)
    while True:
        c.poll(timeout_ms=100)
""")


def test_a_fenced_member_loses_its_partitions_and_rejoins(target: Target) -> None:
    """A member process SIGSTOPped past the session timeout is removed by the coordinator;
    once resumed, its heartbeat is refused (UNKNOWN_MEMBER_ID or FENCED_MEMBER_EPOCH), so
    it calls on_partitions_lost (not revoked: a commit would fail), rejoins with epoch 0
    and is given the partitions again."""
    topic, group = new_topic("fence"), f"g-{uuid.uuid4().hex[:8]}"
    target.create_topic(topic, 2)
    proc = subprocess.Popen(
        [sys.executable, "-c", PAUSED.format(root=str(ROOT), topic=topic, group=group,
                                              bootstrap=target.bootstrap_servers)],
        stdout=subprocess.PIPE, text=True)
    try:
        output = Lines(proc)
        output.wait_for(lambda lines: "assigned 2" in lines, "the first assignment")
        proc.send_signal(signal.SIGSTOP)
        time.sleep(SESSION_MS / 1000 + 3)  # the session timeout passes while it is stopped
        proc.send_signal(signal.SIGCONT)
        output.wait_for(lambda lines: "lost 2" in lines, "the partitions to be lost")
        output.wait_for(lambda lines: "assigned 2" in lines[lines.index("lost 2"):],
                        "the partitions to come back")
        assert not any(e.startswith("revoked") for e in output.lines)
    finally:
        proc.kill()
        proc.wait(10)


def test_a_member_that_stops_polling_leaves_and_rejoins_at_its_next_poll(
        target: Target) -> None:
    """max_poll_interval_ms without a poll: the member leaves the group (epoch -1) and its
    partitions go to the other member; polling again rejoins it with epoch 0 and the
    partitions are split again."""
    topic, group = new_topic("pollgap"), f"g-{uuid.uuid4().hex[:8]}"
    target.create_topic(topic, 2)
    slow = member(target, group, max_poll_interval_ms=2_000)
    other = member(target, group)
    try:
        slow.subscribe([topic])
        other.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        while not (slow.assignment() and other.assignment()):
            assert time.monotonic() < deadline
            slow.poll(timeout_ms=100)
            other.poll(timeout_ms=100)
        first_id = slow.group_metadata().member_id
        deadline = time.monotonic() + WAIT_S
        while len(other.assignment()) < 2:  # slow does not poll meanwhile
            assert time.monotonic() < deadline
            other.poll(timeout_ms=100)
        assert slow.group_metadata().generation_id == -1  # it left
        deadline = time.monotonic() + WAIT_S
        while not (slow.assignment() and other.assignment()):
            assert time.monotonic() < deadline
            slow.poll(timeout_ms=100)
            other.poll(timeout_ms=100)
        assert slow.group_metadata().member_id == first_id
    finally:
        slow.close()
        other.close()


def test_an_empty_classic_group_switches_protocol_and_keeps_its_offsets(
        target: Target) -> None:
    """The offline upgrade: a classic group commits and its members stop; consumer-protocol
    members of the same group id then start where the classic ones committed (both brokers
    turn an empty classic group into a consumer group and keep its offsets)."""
    topic, group = new_topic("upgrade"), f"g-{uuid.uuid4().hex[:8]}"
    target.create_topic(topic, 2)
    produce(target, topic, 0, 20)
    with Consumer(topic, bootstrap_servers=target.bootstrap_servers, group_id=group,
                  auto_offset_reset="earliest", enable_auto_commit=False) as classic:
        read = 0
        deadline = time.monotonic() + WAIT_S
        while read < 20:
            assert time.monotonic() < deadline
            read += sum(len(r) for r in classic.poll(timeout_ms=100).values())
        classic.commit()
    produce(target, topic, 20, 10)
    with member(target, group) as upgraded:
        upgraded.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while len(values) < 10:
            assert time.monotonic() < deadline
            for records in upgraded.poll(timeout_ms=100).values():
                values.extend(r.value for r in records)
        assert sorted(values) == sorted(f"r{i}".encode() for i in range(20, 30))


def _join_once(target: Target, group: str, topic: str) -> int:
    """One raw ConsumerGroupHeartbeat v1 joining ``group`` (epoch 0), never followed by
    another: the member falls silent at once. Returns the heartbeat interval answered."""
    port = int(target.bootstrap_servers.split(",")[0].rsplit(":", 1)[1])
    deadline = time.monotonic() + WAIT_S
    # FindCoordinator first: Apache Kafka creates __consumer_offsets for it.
    while ask(port, FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4,
              10.0).coordinators[0].error_code != 0:
        assert time.monotonic() < deadline, "no coordinator"
        time.sleep(0.2)
    request = ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=new_member_id(), member_epoch=0,
        rebalance_timeout_ms=30_000, subscribed_topic_names=[topic], topic_partitions=[])
    while True:
        response = ask(port, request, 1, 10.0)
        if response.error_code == 0:
            assert response.member_epoch >= 1
            return int(response.heartbeat_interval_ms)
        # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE while the group loads
        assert response.error_code in (14, 15) and time.monotonic() < deadline, response


def test_group_configs_set_the_session_timeout_and_heartbeat_interval(target: Target) -> None:
    """The GROUP config resource under the consumer protocol (IncrementalAlterConfigs, then
    DescribeConfigs): consumer.heartbeat.interval.ms is the interval the group's heartbeats
    are answered with, consumer.session.timeout.ms how long the coordinator keeps a silent
    member; values outside the broker's group.consumer.min/max.* are refused (Kafka's
    GroupConfig rules). The broker runs with a 500 ms interval and a 10 s session: a group
    set to 6 s loses its silent member while one set to 60 s (joined first) keeps its own
    (without the group configs both would go after 10 s, the 60 s group's first)."""
    topic = new_topic("gcfg")
    target.create_topic(topic, 1)
    short, long = f"g-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    settings = {ConfigResource.group(short): {"consumer.session.timeout.ms": "6000",
                                              "consumer.heartbeat.interval.ms": "1500"},
                ConfigResource.group(long): {"consumer.session.timeout.ms": "60000"}}
    with AdminClient(bootstrap_servers=target.bootstrap_servers) as admin:
        admin.alter_configs(settings).raise_if_failed()
        for bad in ({"consumer.session.timeout.ms": "5999"},       # below the min (6 s)
                    {"consumer.session.timeout.ms": "60001"},      # above the max (60 s)
                    {"consumer.heartbeat.interval.ms": "15001"}):  # above the max (15 s)
            error = admin.alter_configs({ConfigResource.group(short): bad}).errors.get(
                ConfigResource.group(short))
            assert isinstance(error, InvalidConfigError), (bad, error)
        deadline = time.monotonic() + WAIT_S
        for resource, wanted in settings.items():  # Apache Kafka: through its metadata log
            while True:
                described = admin.describe_configs([resource])[resource]
                if all(described.value(k) == v for k, v in wanted.items()):
                    break
                assert time.monotonic() < deadline, (resource, described)
                time.sleep(0.2)
        assert described.value("consumer.heartbeat.interval.ms") == str(HEARTBEAT_MS)
        assert _join_once(target, long, topic) == HEARTBEAT_MS  # the broker's interval
        assert _join_once(target, short, topic) == 1500  # the group's
        deadline = time.monotonic() + WAIT_S
        while admin.consumer_group_describe([short])[short].members:
            assert time.monotonic() < deadline, "the silent member was never removed"
            time.sleep(0.2)
        (kept,) = admin.consumer_group_describe([long])[long].members
        assert kept.member_epoch >= 1


class AsyncMember:
    """An AsyncConsumer member: what it read, and what its (async) listener was told; it
    commits in its revocation listener, the only place it commits."""

    def __init__(self, target: Target, group: str, topic: str) -> None:
        self.read: list[tuple[int, int]] = []
        self.events: list[tuple[str, set[int]]] = []
        self.consumer: AsyncConsumer[bytes, bytes] = AsyncConsumer(
            bootstrap_servers=target.bootstrap_servers, group_id=group,
            group_protocol="consumer", group_remote_assignor="uniform",
            auto_offset_reset="earliest", enable_auto_commit=False)
        self.topic = topic

    async def start(self) -> None:
        await self.consumer.start()
        self.consumer.subscribe([self.topic], listener=self)

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.events.append(("revoked", {tp.partition for tp in revoked}))
        await self.consumer.commit()  # hands the positions over to the next owner

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.events.append(("assigned", {tp.partition for tp in assigned}))

    async def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.events.append(("lost", {tp.partition for tp in lost}))

    def owned(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    async def poll(self) -> None:
        for records in (await self.consumer.getmany(timeout_ms=100)).values():
            self.read.extend((r.partition, r.offset) for r in records)


async def _pump(members: list[AsyncMember], done: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        for m in members:
            await m.poll()


async def test_async_members_reconcile_incrementally_and_leave_on_close(
        target: Target) -> None:
    """The async face under the consumer protocol (uniform assignor): a second member
    joining takes only the partitions the first gives up, and the first member's listener
    is told of those alone (revoked, committed there, then the member acknowledges); the
    second member's close leaves the group at once (epoch -1: the describe right after
    shows one member, where a session timeout would take 10 s) and the first takes the
    partitions back. The positions committed in the revocation listeners hand each
    partition over, so every record is read exactly once."""
    topic, group = new_topic("async848"), f"g-{uuid.uuid4().hex[:8]}"
    await create_topic(target.bootstrap_servers, topic, 4)
    produce(target, topic, 0, 40)
    a, b = AsyncMember(target, group, topic), AsyncMember(target, group, topic)
    with AdminClient(bootstrap_servers=target.bootstrap_servers) as admin:
        try:
            await a.start()
            await _pump([a], lambda: len(a.read) == 40 and a.owned() == {0, 1, 2, 3},
                        "the first member to read everything")
            assert a.events == [("assigned", {0, 1, 2, 3})]
            await b.start()
            await _pump([a, b], lambda: len(a.owned()) == 2 and len(b.owned()) == 2,
                        "the partitions to be split")
            moved = b.owned()
            assert not moved & a.owned()
            assert a.events[1:] == [("revoked", moved)]  # only what moved, no re-assign
            # The newcomer's first epoch may come with nothing (the partitions are still
            # being revoked): Java's listener is called with an empty set there too.
            assert [e for e in b.events if e[1]] == [("assigned", moved)]
            produce(target, topic, 40, 40)
            await _pump([a, b], lambda: len(a.read) + len(b.read) == 80, "80 records")
            described = admin.consumer_group_describe([group])[group]
            assert described.assignor == "uniform" and len(described.members) == 2
            await b.consumer.close()
            assert b.events[-1] == ("revoked", moved)
            (left,) = admin.consumer_group_describe([group])[group].members
            assert left.member_id == a.consumer.group_metadata().member_id
            produce(target, topic, 80, 40)
            await _pump([a], lambda: a.owned() == {0, 1, 2, 3} and len(a.read) + len(
                b.read) >= 120, "the first member to take everything back")
            assert a.events[-1] == ("assigned", moved)  # told only of what it gained
            assert not any(kind == "lost" for kind, _ in a.events + b.events)
        finally:
            await a.consumer.close()
            await b.consumer.close()
    everything = a.read + b.read
    assert len(everything) == len(set(everything)) == 120  # each record once
