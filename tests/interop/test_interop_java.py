"""Kafka's own Java tools as peers of our client, against our broker and Apache Kafka.

Every test runs twice: against the reference broker (a subprocess) and against Apache Kafka
4.3.1 (one combined KRaft node, its jars run as JVMs). The Java side is Kafka's command-line
tools from those jars: the console producer and consumer, the consumer-groups tool and the
transactional message copier, so the Java client library itself (its partitioner, its group
membership, its admin client, its transactions) talks to the same broker as our SDK. Each JVM start costs a second or two of CPU, so each
test launches as few as it can (one console producer writes every record, for instance).
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from apache_support import apache_cluster, require_apache_kafka
from interop_kit import BrokerProcess, wait_until

from sdk import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from sdk.producer.partitioner import default_partition
from sdk.types import ConsumerRecord
from tools.apache_kafka import java_command

PRODUCER_TOOL = "org.apache.kafka.tools.ConsoleProducer"
CONSUMER_TOOL = "org.apache.kafka.tools.consumer.ConsoleConsumer"
GROUPS_TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
COOPERATIVE = "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
JAVA_TIMEOUT_S = 120.0


@dataclass
class Target:
    name: str  # "ref" (our broker) or "kafka" (Apache Kafka)
    bootstrap: str

    def create_topic(self, name: str, partitions: int) -> None:
        with AdminClient(bootstrap_servers=self.bootstrap) as admin:
            admin.create_topics([NewTopic(name, num_partitions=partitions,
                                          replication_factor=1)]).raise_if_failed()
        # Apache Kafka publishes a new topic's leaders asynchronously; wait until a
        # metadata answer lists every partition so the Java tools never see it half made.
        with Consumer(bootstrap_servers=self.bootstrap) as consumer:
            wait_until(lambda: len(consumer.partitions_for_topic(name)) == partitions)


@pytest.fixture(scope="module", params=["ref", "kafka"])
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Target]:
    require_apache_kafka()  # the Java tools come from Apache Kafka's jars either way
    if request.param == "ref":
        broker = BrokerProcess(tmp_path_factory.mktemp("java-interop"))
        broker.start()
        try:
            yield Target("ref", broker.bootstrap)
        finally:
            broker.kill()
    else:
        with apache_cluster(brokers=1) as cluster:
            yield Target("kafka", cluster.bootstrap_servers)


def run_java_full(main_class: str, *args: str, stdin: str | None = None
                  ) -> tuple[str, str]:
    """Run one Java tool to its end: (stdout, stderr), or a failure with what it printed."""
    result = subprocess.run(java_command(main_class, *args), input=stdin, capture_output=True,
                            text=True, timeout=JAVA_TIMEOUT_S)
    assert result.returncode == 0, (
        f"{main_class} exited {result.returncode}\nstdout: {result.stdout[-3000:]}\n"
        f"stderr: {result.stderr[-3000:]}")
    return result.stdout, result.stderr


def run_java(main_class: str, *args: str, stdin: str | None = None) -> str:
    return run_java_full(main_class, *args, stdin=stdin)[0]


def printed_records(lines: list[str]) -> list[tuple[int, int, str, str, str]]:
    """(partition, offset, headers, key, value) from the console consumer's lines printed
    with print.partition, print.offset, print.headers and print.key (tab-separated)."""
    rows = []
    for line in lines:
        partition, offset, headers, key, value = line.rstrip("\n").split("\t")
        assert partition.startswith("Partition:") and offset.startswith("Offset:"), line
        rows.append((int(partition.removeprefix("Partition:")),
                     int(offset.removeprefix("Offset:")), headers, key, value))
    return rows


PRINT_ALL = ("--formatter-property", "print.partition=true", "--formatter-property",
             "print.offset=true", "--formatter-property", "print.headers=true",
             "--formatter-property", "print.key=true")


def consume_assigned(bootstrap: str, topic: str, partitions: int, count: int
                     ) -> list[ConsumerRecord]:
    """Every record of ``topic`` from the start, read by our consumer without a group."""
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        return poll_until(consumer, count)


def text(data: object) -> str:
    """A key or value as text (our consumer hands out bytes without a deserializer)."""
    assert isinstance(data, bytes), data
    return data.decode()


def poll_until(consumer: Consumer, count: int, timeout_s: float = 60.0
               ) -> list[ConsumerRecord]:
    """Poll until ``count`` records arrived or time is up; what arrived."""
    got: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            got.extend(records)
    return got


# ----------------------------------------------------------------------------- 1. Java -> us


def test_java_console_producer_to_our_consumer(target: Target) -> None:
    """Keyed records with headers, lz4-compressed by the Java producer, read by our consumer:
    values, keys, headers in order, and the partition Java's murmur2 chose for each key."""
    topic, partitions, count = "java-to-sdk", 4, 60
    target.create_topic(topic, partitions)
    lines = []
    for i in range(count):
        key = "<null>" if i % 20 == 7 else f"user-{i}"
        lines.append(f"trace:t-{i},seq:{i},empty:\t{key}\tpayload {i} = {{'n': {i}}}\n")
    run_java(PRODUCER_TOOL, "--bootstrap-server", target.bootstrap, "--topic", topic,
             "--compression-codec", "lz4",
             "--reader-property", "parse.key=true", "--reader-property", "parse.headers=true",
             "--reader-property", "null.marker=<null>", stdin="".join(lines))

    got = consume_assigned(target.bootstrap, topic, partitions, count)
    assert len(got) == count
    by_index = {int(text(r.value).split()[1]): r for r in got}
    assert sorted(by_index) == list(range(count))
    for i, record in by_index.items():
        assert record.value == f"payload {i} = {{'n': {i}}}".encode()
        assert list(record.headers) == [("trace", f"t-{i}".encode()), ("seq", str(i).encode()),
                                        ("empty", b"")]
        if i % 20 == 7:
            assert record.key is None  # the null marker: Java sent no key
        else:
            assert record.key == f"user-{i}".encode()
            # Java's default partitioner for a keyed record: toPositive(murmur2(key)) % n.
            assert record.partition == default_partition(record.key, partitions), record.key
    # One producer, lines sent in order: each partition holds its records in line order.
    for p in range(partitions):
        in_log = [int(text(r.value).split()[1]) for r in sorted(got, key=lambda r: r.offset)
                  if r.partition == p]
        assert in_log == sorted(in_log)
        assert [r.offset for r in got if r.partition == p] == list(range(len(in_log)))


# ----------------------------------------------------------------------------- 2. us -> Java


def test_our_producer_to_java_console_consumer(target: Target) -> None:
    """Our producer's keyed records (headers on most) read by the Java console consumer:
    everything arrives, at the offsets we were told, in the partitions Java would pick."""
    topic, partitions, count = "sdk-to-java", 5, 100
    target.create_topic(topic, partitions)
    sent: dict[str, tuple[str, str, int, int]] = {}  # key -> (value, headers, partition, offset)
    with Producer(bootstrap_servers=target.bootstrap, linger_ms=5) as producer:
        futures = []
        for i in range(count):
            headers = [] if i % 10 == 0 else [("origin", b"sdk"), ("n", str(i).encode())]
            futures.append((i, headers, producer.send(topic, f"value-{i}".encode(),
                                                      key=f"k-{i}".encode(), headers=headers)))
        for i, headers, future in futures:
            meta = future.result(timeout=30)
            shown = ",".join(f"{k}:{v.decode()}" for k, v in headers) or "NO_HEADERS"
            sent[f"k-{i}"] = (f"value-{i}", shown, meta.partition, meta.offset)

    out = run_java(CONSUMER_TOOL, "--bootstrap-server", target.bootstrap, "--topic", topic,
                   "--from-beginning", "--max-messages", str(count), "--timeout-ms", "30000",
                   *PRINT_ALL)
    rows = printed_records(out.splitlines())
    assert len(rows) == count
    received = {key: (value, headers, partition, offset)
                for partition, offset, headers, key, value in rows}
    assert received == sent
    for key, (_value, _headers, partition, _offset) in received.items():
        assert partition == default_partition(key.encode(), partitions), key


# ----------------------------------------------------------------------------- 3. one group


class JavaConsoleConsumer:
    """The Java console consumer as a long-running group member; ``lines`` fills as it
    prints (it flushes each record)."""

    def __init__(self, bootstrap: str, topic: str, group: str, client_id: str) -> None:
        self.proc = subprocess.Popen(
            java_command(CONSUMER_TOOL, "--bootstrap-server", bootstrap, "--topic", topic,
                         "--group", group, "--from-beginning", *PRINT_ALL,
                         "--command-property", f"partition.assignment.strategy={COOPERATIVE}",
                         "--command-property", "heartbeat.interval.ms=500",
                         "--command-property", f"client.id={client_id}"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.errors: list[str] = []
        self._readers = [threading.Thread(target=self._collect, args=(stream, into), daemon=True)
                         for stream, into in ((self.proc.stdout, self.lines),
                                              (self.proc.stderr, self.errors))]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _collect(stream: object, into: list[str]) -> None:
        for line in stream:  # type: ignore[attr-defined]
            into.append(line)

    def check_running(self) -> None:
        assert self.proc.poll() is None, f"the Java consumer exited: {''.join(self.errors)}"

    def leave(self) -> None:
        """SIGTERM: the tool's shutdown hook closes its consumer, which commits what it
        consumed and sends LeaveGroup."""
        self.proc.terminate()
        self.proc.wait(30)
        for reader in self._readers:
            reader.join(10)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def records(self) -> list[tuple[str, str, int]]:
        return [(key, value, p) for p, _offset, _headers, key, value in printed_records(self.lines)]


class MixedGroup:
    """One Java console consumer and our consumers (one at a time) in a cooperative-sticky
    group; ``ours`` collects (key, value, partition) of what our consumers received."""

    def __init__(self, target: Target, topic: str, group: str, partitions: int,
                 admin: AdminClient) -> None:
        self.target, self.topic, self.group, self.partitions = target, topic, group, partitions
        self.admin = admin
        self.java: JavaConsoleConsumer | None = None
        self.consumer: Consumer | None = None
        self.ours: list[tuple[str, str, int]] = []
        self.sent = 0

    def join(self, client_id: str) -> None:
        self.consumer = Consumer(self.topic, bootstrap_servers=self.target.bootstrap,
                                 group_id=self.group, client_id=client_id,
                                 auto_offset_reset="earliest", heartbeat_interval_ms=500,
                                 partition_assignment_strategy=["cooperative-sticky"])

    def leave(self) -> None:
        assert self.consumer is not None
        self.consumer.close()  # commits what it handed out (auto-commit), then LeaveGroup
        self.consumer = None

    def poll(self) -> None:
        if self.consumer is not None:
            for records in self.consumer.poll(timeout_ms=100).values():
                self.ours.extend((text(r.key), text(r.value), r.partition)
                                 for r in records)
        if self.java is not None and self.java.proc.returncode is None:
            self.java.check_running()

    def owners(self) -> dict[str, set[int]]:
        (description,) = self.admin.describe_consumer_groups([self.group]).values()
        return {m.client_id: {tp.partition for tp in m.assignment}
                for m in description.members}

    def settle(self, members: set[str]) -> dict[str, set[int]]:
        """Poll until exactly ``members`` hold every partition once, none empty-handed, and
        our consumer's own view agrees with the coordinator's; that split."""
        def settled() -> bool:
            self.poll()
            owners = self.owners()
            held = sorted(p for ps in owners.values() for p in ps)
            mine = ({tp.partition for tp in self.consumer.assignment()}
                    if self.consumer is not None else set())
            ours = {c for c in owners if c.startswith("sdk")}
            return (set(owners) == members and all(owners.values())
                    and held == list(range(self.partitions))
                    and all(owners[c] == mine for c in ours))

        wait_until(settled, timeout=60, interval=0)
        return self.owners()

    def deliver(self, tag: str, per_partition: int) -> None:
        """Produce ``per_partition`` records to each partition; poll until the members
        together received everything sent so far."""
        produce(self.target.bootstrap, self.topic, self.partitions, per_partition, tag)
        self.sent += self.partitions * per_partition
        assert self.java is not None
        java = self.java

        def arrived() -> bool:
            self.poll()
            return len(self.ours) + len(java.lines) >= self.sent

        wait_until(arrived, timeout=60, interval=0)


def test_java_and_our_consumers_share_a_group(target: Target) -> None:
    """A Java console consumer and our consumers in one cooperative-sticky group, with each
    side leading in turn: our leader assigns the Java member its share, then (after ours
    left) the Java leader assigns our new member its share, then ours is left alone. Each
    holds some partitions while both are in, each receives records, and over the whole run
    every record arrives exactly once (members resume from each other's commits)."""
    topic, group, partitions, per = "shared-group", "java-sdk-group", 4, 20
    target.create_topic(topic, partitions)
    all_partitions = set(range(partitions))
    with AdminClient(bootstrap_servers=target.bootstrap) as admin:
        run = MixedGroup(target, topic, group, partitions, admin)
        try:
            # Ours first: alone, it leads the group, and stays leader when Java joins.
            run.join("sdk-first")
            assert run.settle({"sdk-first"}) == {"sdk-first": all_partitions}
            run.java = JavaConsoleConsumer(target.bootstrap, topic, group, "java-member")
            split_a = run.settle({"sdk-first", "java-member"})  # our assignor's split
            run.deliver("a", per)
            got_a = ({row for row in run.ours if row[1].startswith("a-")},
                     {row for row in run.java.records() if row[1].startswith("a-")})

            # Ours leaves: Java, now leader, takes every partition from our commits.
            run.leave()
            assert run.settle({"java-member"}) == {"java-member": all_partitions}
            run.deliver("b", per)

            # A new consumer of ours joins: the Java leader assigns it a share.
            run.join("sdk-second")
            split_c = run.settle({"sdk-second", "java-member"})  # Java's assignor's split
            run.deliver("c", per)

            # The Java member leaves: ours takes every partition from its commits.
            run.java.leave()
            assert run.settle({"sdk-second"}) == {"sdk-second": all_partitions}
            run.deliver("d", per)
            assert run.consumer is not None and run.consumer.poll(timeout_ms=1000) == {}
        finally:
            if run.consumer is not None:
                run.consumer.close()
            if run.java is not None:
                run.java.kill()

    java = run.java.records()
    for split, tag in ((split_a, "a-"), (split_c, "c-")):
        java_parts = {p for _k, v, p in java if v.startswith(tag)}
        our_parts = {p for _k, v, p in run.ours if v.startswith(tag)}
        sdk_member = next(c for c in split if c.startswith("sdk"))
        assert java_parts == split["java-member"] and our_parts == split[sdk_member], tag
    assert all(got_a), "each member received records while both were in"
    assert {v[:2] for _k, v, _p in java} == {"a-", "b-", "c-"}
    assert {v[:2] for _k, v, _p in run.ours} == {"a-", "c-", "d-"}
    assert sorted(java + run.ours) == sorted(  # each record once, none missing
        row for tag in "abcd" for row in expected_rows(partitions, per, tag))


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int, tag: str) -> None:
    """``per_partition`` records to each partition: key ``k-<tag>-p-i``, value ``<tag>-p-i``."""
    with Producer(bootstrap_servers=bootstrap) as producer:
        for p in range(partitions):
            for i in range(per_partition):
                producer.send(topic, f"{tag}-{p}-{i}".encode(), key=f"k-{tag}-{p}-{i}".encode(),
                              partition=p)


def expected_rows(partitions: int, per_partition: int, tag: str) -> list[tuple[str, str, int]]:
    return [(f"k-{tag}-{p}-{i}", f"{tag}-{p}-{i}", p)
            for p in range(partitions) for i in range(per_partition)]


# ----------------------------------------------------------------------------- 4. groups tool


def describe_rows(out: str, group: str) -> dict[int, list[str]]:
    """The consumer-groups tool's --describe table: partition -> its columns."""
    rows = {}
    for line in out.splitlines():
        cells = line.split()
        if cells and cells[0] == group:
            rows[int(cells[2])] = cells
    return rows


def test_groups_tool_describes_and_resets_our_group(target: Target) -> None:
    """Java's consumer-groups tool describes a group our consumer committed (offsets, lag,
    our member), then resets it to the earliest offsets, and our consumer reads it again."""
    topic, group, partitions = "tool-group", "sdk-committed", 3
    target.create_topic(topic, partitions)
    with Producer(bootstrap_servers=target.bootstrap) as producer:
        for p in range(partitions):
            for i in range(10):
                producer.send(topic, f"first-{p}-{i}".encode(), partition=p)
    with Consumer(topic, bootstrap_servers=target.bootstrap, group_id=group,
                  client_id="sdk-tool-member", auto_offset_reset="earliest",
                  enable_auto_commit=False) as consumer:
        assert len(poll_until(consumer, 30)) == 30
        consumer.commit()
        with Producer(bootstrap_servers=target.bootstrap) as producer:
            for p in range(partitions):
                for i in range(5):
                    producer.send(topic, f"later-{p}-{i}".encode(), partition=p)
        # Described while our member is active: its committed offsets, the lag, the member.
        out = run_java(GROUPS_TOOL, "--bootstrap-server", target.bootstrap,
                       "--describe", "--group", group)
        rows = describe_rows(out, group)
        assert sorted(rows) == list(range(partitions)), out
        for cells in rows.values():
            _group, shown_topic, _p, current, log_end, lag, member, host, client = cells
            assert (shown_topic, current, log_end, lag) == (topic, "10", "15", "5"), out
            assert member != "-" and host.lstrip("/") == "127.0.0.1", out
            assert client == "sdk-tool-member", out

    # Reset (the group is empty now that our consumer left) to the earliest offsets.
    out = run_java(GROUPS_TOOL, "--bootstrap-server", target.bootstrap, "--reset-offsets",
                   "--to-earliest", "--execute", "--topic", topic, "--group", group)
    rows = describe_rows(out, group)
    assert {p: cells[1:] for p, cells in rows.items()} == {
        p: [topic, str(p), "0"] for p in range(partitions)}, out

    with Consumer(topic, bootstrap_servers=target.bootstrap, group_id=group,
                  auto_offset_reset="latest", enable_auto_commit=False) as consumer:
        again = poll_until(consumer, 45)
    assert len(again) == 45  # auto_offset_reset=latest: only the reset offsets say "from 0"
    for p in range(partitions):
        values = [text(r.value) for r in again if r.partition == p]
        assert values == ([f"first-{p}-{i}" for i in range(10)]
                          + [f"later-{p}-{i}" for i in range(5)])

    out = run_java(GROUPS_TOOL, "--bootstrap-server", target.bootstrap, "--delete",
                   "--group", group)
    assert f"Deletion of requested consumer groups ('{group}') was successful." in out, out
    # Describing the deleted group: both brokers say it is gone, in different words. Apache
    # Kafka 4.3 answers DescribeGroups v6, which reports GROUP_ID_NOT_FOUND (KIP-1043); our
    # broker's schemas (../shared/kafka-protocol) end at v5, where an unknown group is
    # described as Dead with no error, which the tool prints as "does not exist".
    out, err = run_java_full(GROUPS_TOOL, "--bootstrap-server", target.bootstrap,
                             "--describe", "--group", group)
    if target.name == "ref":
        assert f"Error: Consumer group '{group}' does not exist." in out, out + err
    else:
        assert f"GroupIdNotFoundException: Group {group} not found." in out, out + err


# ----------------------------------------------------------------------------- 5. KIP-848


def test_java_consumer_group_protocol(target: Target) -> None:
    """A Java consumer asking for the KIP-848 group protocol (group.protocol=consumer):
    both brokers serve it (ConsumerGroupHeartbeat, the broker-side assignment) and the tool
    reads every record."""
    topic, count = "kip848", 10
    target.create_topic(topic, 2)
    with Producer(bootstrap_servers=target.bootstrap) as producer:
        for i in range(count):
            producer.send(topic, f"v-{i}".encode(), key=f"k-{i}".encode())
    out, err = run_java_full(CONSUMER_TOOL, "--bootstrap-server", target.bootstrap,
                             "--topic", topic, "--group", "kip848-group", "--from-beginning",
                             "--max-messages", str(count), "--timeout-ms", "30000",
                             "--command-property", "group.protocol=consumer")
    assert sorted(out.split()) == sorted(f"v-{i}" for i in range(count)), out + err


# ----------------------------------------------------------------------------- 6. transactions


COPIER_TOOL = "org.apache.kafka.tools.TransactionalMessageCopier"


def read_to_end(bootstrap: str, topic: str, isolation_level: str) -> list[ConsumerRecord]:
    """Partition 0 of ``topic`` from the start to its end offset (the last stable offset
    under read_committed), read by our consumer."""
    partition = TopicPartition(topic, 0)
    got: list[ConsumerRecord] = []
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                  isolation_level=isolation_level) as consumer:
        consumer.assign([partition])
        end = consumer.end_offsets([partition])[partition]
        deadline = time.monotonic() + 60
        while consumer.position(partition) < end and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(records)
    return got


def test_java_transactions_read_by_our_consumer(target: Target) -> None:
    """Kafka's TransactionalMessageCopier (a Java transactional producer that aborts about a
    third of its transactions and copies those records again) copies 300 records in
    transactions of 10. Our consumer reads each record exactly once under read_committed and
    the aborted copies too under read_uncommitted; the copier's offsets, committed inside its
    transactions (TxnOffsetCommit), are the group's. The same on both brokers: our broker
    is the Java producer's transaction coordinator too."""
    source, copy, count = "txn-source", "txn-copy", 300
    target.create_topic(source, 1)
    target.create_topic(copy, 1)
    with Producer(bootstrap_servers=target.bootstrap) as producer:
        for i in range(count):
            producer.send(source, f"m-{i}".encode(), key=f"k-{i}".encode())
    result = subprocess.run(java_command(
        COPIER_TOOL, "--broker-list", target.bootstrap, "--input-topic", source,
        "--input-partition", "0", "--output-topic", copy, "--transactional-id", "copier-1",
        "--transaction-size", "10", "--enable-random-aborts", "--consumer-group", "copier"),
        capture_output=True, text=True, timeout=JAVA_TIMEOUT_S)
    printed = result.stdout + result.stderr
    assert result.returncode == 0, printed
    expected = [(f"k-{i}", f"m-{i}") for i in range(count)]
    committed = read_to_end(target.bootstrap, copy, "read_committed")
    assert [(text(r.key), text(r.value)) for r in committed] == expected
    everything = read_to_end(target.bootstrap, copy, "read_uncommitted")
    assert len(everything) >= count
    assert {(text(r.key), text(r.value)) for r in everything} == set(expected)
    # Offsets held by commit and abort markers are never handed out: 30 commits at least,
    # all but the last before the last record.
    assert everything[-1].offset + 1 >= len(everything) + count // 10 - 1
    with AdminClient(bootstrap_servers=target.bootstrap) as admin:
        offsets = admin.list_consumer_group_offsets("copier").raise_if_failed()
        assert offsets[TopicPartition(source, 0)].offset == count
