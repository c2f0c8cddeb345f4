"""Transactions of third-party clients against our broker (a ``python -m server_ref``
subprocess): confluent-kafka's transactional producer and its read_committed and
read_uncommitted consumers, Kafka's Java console consumer with ``--isolation-level
read_committed``, a fenced zombie, a transaction aborted by its timeout, the broker process
SIGKILLed with a transaction prepared and with one open, and a checker over many
transactions with broker kills in between.
"""

from __future__ import annotations

import random
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from apache_support import require_apache_kafka
from confluent_kafka import OFFSET_INVALID, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from interop_kit import BrokerProcess, wait_until

from tools.apache_kafka import java_command

CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
MakeBroker = Callable[..., BrokerProcess]
QUIET_S = 1.5  # after the expected records, how long nothing more may arrive


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def txn_producer(bootstrap: str, txn_id: str, **extra: Any) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "linger.ms": 5, **extra})
    producer.init_transactions(30)
    return producer


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str, expected: int,
             group: str | None = None) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record a confluent consumer with ``isolation``
    hands out from the start: polled until ``expected`` arrived and then quiet."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group or uuid.uuid4().hex,
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + 60
    quiet_until = None
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is not None and not message.error():
                got.append((message.partition(), message.offset(), message.value()))
                quiet_until = None
            if len(got) >= expected:
                quiet_until = quiet_until or time.monotonic() + QUIET_S
                if time.monotonic() >= quiet_until:
                    break
    finally:
        consumer.close()
    return got


def values(records: list[tuple[int, int, bytes]]) -> list[bytes]:
    return [v for _, _, v in records]


def test_confluent_commit_and_abort_across_partitions(broker: BrokerProcess) -> None:
    topic = "txn-multi"
    create_topic(broker.bootstrap, topic, 3)
    producer = txn_producer(broker.bootstrap, "multi")
    committed = [f"commit-{i}".encode() for i in range(60)]
    aborted = [f"abort-{i}".encode() for i in range(45)]
    producer.begin_transaction()
    for i, value in enumerate(committed):
        producer.produce(topic, value=value, partition=i % 3)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i, value in enumerate(aborted):
        producer.produce(topic, value=value, partition=i % 3)
    producer.flush(30)  # written to the logs, then aborted
    producer.abort_transaction(30)
    # A third transaction left open: read_committed stops at its first record.
    producer.begin_transaction()
    open_values = [f"open-{i}".encode() for i in range(3)]
    for i, value in enumerate(open_values):
        producer.produce(topic, value=value, partition=i)
    producer.flush(30)

    seen = read_all(broker.bootstrap, topic, 3, "read_committed", len(committed))
    assert sorted(values(seen)) == sorted(committed)
    for p in range(3):  # per partition in produce order
        assert [v for q, _, v in sorted(seen) if q == p] == committed[p::3]
    everything = read_all(broker.bootstrap, topic, 3, "read_uncommitted",
                          len(committed) + len(aborted) + len(open_values))
    assert sorted(values(everything)) == sorted(committed + aborted + open_values)
    producer.commit_transaction(30)
    seen = read_all(broker.bootstrap, topic, 3, "read_committed",
                    len(committed) + len(open_values))
    assert sorted(values(seen)) == sorted(committed + open_values)


def test_send_offsets_to_transaction_commits_offsets_with_the_output(
        broker: BrokerProcess) -> None:
    """A consume-transform-produce step: offsets sent in the transaction become the group's
    committed offsets at commit; an aborted step leaves them (and its output) unseen."""
    source, sink, group = "cp-in", "cp-out", "copier"
    create_topic(broker.bootstrap, source, 1)
    create_topic(broker.bootstrap, sink, 1)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(20):
        plain.produce(source, value=f"in-{i}".encode())
    plain.flush(30)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    consumer.subscribe([source])
    producer = txn_producer(broker.bootstrap, "copier-tx")

    def step(count: int, commit: bool) -> list[Any]:
        taken: list[Any] = []
        deadline = time.monotonic() + 60
        while len(taken) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                taken.append(message)
        assert len(taken) == count
        producer.begin_transaction()
        for message in taken:
            producer.produce(sink, value=message.value().replace(b"in", b"out"))
        producer.send_offsets_to_transaction(
            [TopicPartition(source, 0, taken[-1].offset() + 1)],
            consumer.consumer_group_metadata(), 30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
        return taken

    def committed_offset() -> int:
        return int(consumer.committed([TopicPartition(source, 0)], 30)[0].offset)

    step(10, commit=True)
    assert committed_offset() == 10
    step(5, commit=False)
    assert committed_offset() == 10  # the aborted step's offsets never became the group's
    consumer.seek(TopicPartition(source, 0, 10))
    step(10, commit=True)
    assert committed_offset() == 20
    consumer.close()
    out = read_all(broker.bootstrap, sink, 1, "read_committed", 20)
    assert values(out) == [f"out-{i}".encode() for i in range(20)]


def test_a_zombie_with_the_same_transactional_id_is_fenced(broker: BrokerProcess) -> None:
    topic = "zombie"
    create_topic(broker.bootstrap, topic, 1)
    zombie = txn_producer(broker.bootstrap, "same-id")
    zombie.begin_transaction()
    zombie.produce(topic, value=b"from-zombie")
    zombie.flush(30)
    successor = txn_producer(broker.bootstrap, "same-id")  # aborts the zombie's transaction
    successor.begin_transaction()
    successor.produce(topic, value=b"from-successor")
    successor.commit_transaction(30)
    with pytest.raises(KafkaException) as failure:
        zombie.commit_transaction(30)
    error = failure.value.args[0]
    assert error.fatal(), error  # fenced: librdkafka's _FENCED / PRODUCER_FENCED
    assert "fenced" in error.str().lower(), error
    assert values(read_all(broker.bootstrap, topic, 1, "read_committed", 1)) == \
        [b"from-successor"]
    everything = read_all(broker.bootstrap, topic, 1, "read_uncommitted", 2)
    assert values(everything) == [b"from-zombie", b"from-successor"]


def test_an_open_transaction_is_aborted_by_its_timeout(make_broker: MakeBroker) -> None:
    broker = make_broker(config={
        "transaction.max.timeout.ms": "60000",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"})
    topic = "timeout"
    create_topic(broker.bootstrap, topic, 1)
    producer = txn_producer(broker.bootstrap, "slow", **{"transaction.timeout.ms": 1000})
    producer.begin_transaction()
    producer.produce(topic, value=b"never-committed")
    producer.flush(30)
    wait_until(lambda: "timed out after" in broker.log_text(), timeout=30)
    with pytest.raises(KafkaException) as failure:
        producer.commit_transaction(30)
    assert failure.value.args[0].fatal(), failure.value.args[0]  # the epoch was bumped
    assert read_all(broker.bootstrap, topic, 1, "read_committed", 0) == []
    # Too long a timeout is refused at InitProducerId (INVALID_TRANSACTION_TIMEOUT).
    with pytest.raises(KafkaException) as refused:
        txn_producer(broker.bootstrap, "greedy", **{"transaction.timeout.ms": 120000})
    assert "INVALID_TRANSACTION_TIMEOUT" in str(refused.value) or \
        "timeout" in str(refused.value).lower(), refused.value


@pytest.mark.parametrize("commit", [True, False], ids=["PrepareCommit", "PrepareAbort"])
def test_broker_killed_with_a_prepared_transaction_completes_it_after_restart(
        make_broker: MakeBroker, monkeypatch: pytest.MonkeyPatch, commit: bool) -> None:
    """EndTxn answered once PrepareCommit/PrepareAbort was written; the broker process is
    SIGKILLed before any marker (the test hook holds them back). The restarted broker
    writes them: a commit's records and offsets become visible, an abort's never do."""
    monkeypatch.setenv("SERVER_REF_TXN_MARKER_DELAY_MS", "3600000")
    broker = make_broker()
    monkeypatch.delenv("SERVER_REF_TXN_MARKER_DELAY_MS")
    topic = "prepared"
    create_topic(broker.bootstrap, topic, 2)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "prep-group",
                         "enable.auto.commit": False})
    producer = txn_producer(broker.bootstrap, "prepared-tx")
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, value=f"v-{i}".encode(), partition=i % 2)
    producer.send_offsets_to_transaction([TopicPartition(topic, 0, 5)],
                                         consumer.consumer_group_metadata(), 30)
    producer.flush(30)
    if commit:
        producer.commit_transaction(30)  # answered at PrepareCommit
    else:
        producer.abort_transaction(30)  # answered at PrepareAbort
    assert read_all(broker.bootstrap, topic, 2, "read_committed", 0) == []
    broker.kill()
    broker.start()
    written = sorted(f"v-{i}".encode() for i in range(10))
    seen = read_all(broker.bootstrap, topic, 2, "read_committed", 10 if commit else 0)
    assert sorted(values(seen)) == (written if commit else [])
    assert sorted(values(read_all(broker.bootstrap, topic, 2, "read_uncommitted", 10))) == \
        written
    committed = consumer.committed([TopicPartition(topic, 0)], 30)[0].offset
    assert committed == (5 if commit else OFFSET_INVALID)
    consumer.close()
    # The producer carries on with the next transaction.
    producer.begin_transaction()
    producer.produce(topic, value=b"after", partition=0)
    producer.commit_transaction(30)
    expected = (11 if commit else 1)
    assert len(read_all(broker.bootstrap, topic, 2, "read_committed", expected)) == expected


def test_broker_killed_with_an_open_transaction_aborts_it_after_restart(
        make_broker: MakeBroker) -> None:
    broker = make_broker(config={
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"})
    topic = "ongoing"
    create_topic(broker.bootstrap, topic, 2)
    producer = txn_producer(broker.bootstrap, "ongoing-tx", **{"transaction.timeout.ms": 2000})
    producer.begin_transaction()
    for i in range(6):
        producer.produce(topic, value=f"lost-{i}".encode(), partition=i % 2)
    producer.flush(30)
    broker.kill()
    broker.start()
    # Reloaded as Ongoing, then aborted by its timeout: read_committed readers move past it.
    wait_until(lambda: "timed out after" in broker.log_text(), timeout=30)
    later = txn_producer(broker.bootstrap, "other-tx")
    later.begin_transaction()
    later.produce(topic, value=b"kept", partition=0)
    later.commit_transaction(30)
    assert values(read_all(broker.bootstrap, topic, 2, "read_committed", 1)) == [b"kept"]
    assert len(read_all(broker.bootstrap, topic, 2, "read_uncommitted", 7)) == 7


def test_java_console_consumer_read_committed(broker: BrokerProcess) -> None:
    require_apache_kafka()
    topic = "java-rc"
    create_topic(broker.bootstrap, topic, 1)
    producer = txn_producer(broker.bootstrap, "java-rc-tx")
    for round_, commit in enumerate([True, False, True]):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, value=f"r{round_}-{i}".encode())
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)

    def console(isolation: str, count: int) -> list[str]:
        result = subprocess.run(java_command(
            CONSOLE_CONSUMER, "--bootstrap-server", broker.bootstrap, "--topic", topic,
            "--from-beginning", "--isolation-level", isolation, "--max-messages", str(count),
            "--timeout-ms", "20000"), capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout.split()

    expected = [f"r{r}-{i}" for r in (0, 2) for i in range(5)]
    assert console("read_committed", 10) == expected
    assert len(console("read_uncommitted", 15)) == 15


def test_checker_many_transactions_with_broker_kills(make_broker: MakeBroker) -> None:
    """Jepsen-style: 40 transactions of random size, each committed or aborted at random,
    the broker SIGKILLed and restarted between transactions and in the middle of them (its
    records written, before EndTxn). Every acknowledged commit is read exactly once, in
    order per partition; nothing aborted or unacknowledged is read; no duplicate."""
    rng = random.Random(16)
    broker = make_broker()
    topic = "checker"
    create_topic(broker.bootstrap, topic, 3)
    producer = txn_producer(broker.bootstrap, "checker-tx")
    acknowledged: list[bytes] = []
    for txn in range(40):
        if txn and txn % 10 == 0:
            broker.kill()
            broker.start()
        values_ = [f"t{txn}-{i}".encode() for i in range(rng.randint(1, 30))]
        commit = rng.random() < 0.7
        try:
            producer.begin_transaction()
            for i, value in enumerate(values_):
                producer.produce(topic, value=value, partition=i % 3)
            if txn % 10 == 5:
                producer.flush(30)
                broker.kill()
                broker.start()
            if commit:
                producer.commit_transaction(30)
                acknowledged.extend(values_)
            else:
                producer.abort_transaction(30)
        except KafkaException as exc:
            error = exc.args[0]
            assert not error.fatal(), error
            if error.txn_requires_abort():
                producer.abort_transaction(30)
            elif error.retriable() and commit:
                producer.commit_transaction(30)  # librdkafka's documented retry
                acknowledged.extend(values_)
    seen = read_all(broker.bootstrap, topic, 3, "read_committed", len(acknowledged))
    got = values(seen)
    assert len(got) == len(set(got)), "duplicates"
    assert sorted(got) == sorted(acknowledged), "lost or extra records"
    for p in range(3):  # per partition, acknowledged order (a transaction's i % 3 records)
        in_partition = [v for q, _, v in sorted(seen) if q == p]
        order = {v: n for n, v in enumerate(acknowledged)}
        assert in_partition == sorted(in_partition, key=order.__getitem__), "reordered"


MAX_CHAOS_KILLS = 8


def test_checker_with_the_broker_killed_at_random_moments(make_broker: MakeBroker) -> None:
    """Jepsen-style, with the kills not aligned to the producer: a thread SIGKILLs and
    restarts the broker at random moments while transactions run (so also inside
    EndTxn, between the Prepare* record and the markers). Outcomes: acknowledged commits
    must be read exactly once, acknowledged aborts never, and a transaction whose outcome
    the client could not learn (a fatal error) all or nothing; no duplicates, no
    reordering within a partition."""
    broker = make_broker()
    topic = "chaos"
    create_topic(broker.bootstrap, topic, 3)
    rng = random.Random(1616)
    stop = threading.Event()
    kills: list[float] = []

    def chaos() -> None:
        # A bounded nemesis, then the broker heals (as Jepsen runs them): kills 0.2-0.8 s
        # apart without end can starve a transaction's completion for good, since the
        # client's reconnect backoff and the coordinator's reload need a quiet moment.
        killer = random.Random()
        while len(kills) < MAX_CHAOS_KILLS and not stop.wait(killer.uniform(0.2, 0.8)):
            broker.kill()
            broker.start()
            kills.append(time.monotonic())

    producer = txn_producer(broker.bootstrap, "chaos-tx", **{"transaction.timeout.ms": 20000})
    outcomes: list[tuple[str, list[bytes]]] = []  # ("committed" | "aborted" | "unknown", values)
    thread = threading.Thread(target=chaos, daemon=True)
    thread.start()
    try:
        txn = 0
        while (len(kills) < 4 or txn < 30) and txn < 5000:  # until 4 kills happened
            txn += 1
            values_ = [f"x{txn}-{i}".encode() for i in range(rng.randint(1, 20))]
            commit = rng.random() < 0.7
            outcome = "unknown"
            try:
                producer.begin_transaction()
                for i, value in enumerate(values_):
                    producer.produce(topic, value=value, partition=i % 3)
                for _ in range(10):  # librdkafka: a retriable EndTxn error is retried
                    try:
                        if commit:
                            producer.commit_transaction(60)
                        else:
                            producer.abort_transaction(60)
                        outcome = "committed" if commit else "aborted"
                        break
                    except KafkaException as exc:
                        if not exc.args[0].retriable():
                            raise
            except KafkaException as exc:
                error = exc.args[0]
                if error.txn_requires_abort():
                    for attempt in range(10):  # _TIMED_OUT: "retry call to resume" (librdkafka)
                        try:
                            producer.abort_transaction(60)
                            outcome = "aborted"
                            break
                        except KafkaException as again:
                            error = again.args[0]
                            if error.fatal():  # settled below, as any fatal error
                                break
                            if not error.retriable() or attempt == 9:
                                raise
                if outcome == "aborted":
                    pass
                elif error.fatal():  # a new instance fences this one and settles the rest
                    producer = txn_producer(broker.bootstrap, "chaos-tx",
                                            **{"transaction.timeout.ms": 20000})
                else:
                    raise
            outcomes.append((outcome, values_))
    finally:
        stop.set()
        thread.join(30)
    assert kills, "the broker was never killed"
    committed = [v for o, vs in outcomes if o == "committed" for v in vs]
    seen = read_all(broker.bootstrap, topic, 3, "read_committed", len(committed))
    got = values(seen)
    assert len(got) == len(set(got)), "duplicates"
    got_set = set(got)
    assert set(committed) <= got_set, "acknowledged commits lost"
    for outcome, vs in outcomes:
        present = [v in got_set for v in vs]
        if outcome == "aborted":
            assert not any(present), f"aborted transaction visible: {vs[0]!r}"
        elif outcome == "unknown":
            assert all(present) or not any(present), f"partial transaction: {vs[0]!r}"
    order = {v: n for n, (_, vs) in enumerate(outcomes) for v in vs}
    for p in range(3):
        in_partition = [v for q, _, v in sorted(seen) if q == p]
        assert in_partition == sorted(in_partition, key=order.__getitem__), "reordered"


def test_kafka_transactions_tool(broker: BrokerProcess) -> None:
    """Kafka's kafka-transactions.sh (the Java admin client) on our broker: list,
    describe, describe-producers, and abort of a hanging transaction by its start offset
    (DescribeProducers, then WriteTxnMarkers straight to the partition leader)."""
    require_apache_kafka()
    topic = "hanging"
    create_topic(broker.bootstrap, topic, 1)
    producer = txn_producer(broker.bootstrap, "hanging-tx")
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, value=f"h-{i}".encode(), partition=0)
    producer.flush(30)

    def tool(*args: str) -> str:
        result = subprocess.run(java_command(
            "org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server",
            broker.bootstrap, *args), capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
        return result.stdout

    listed = tool("list")
    assert "hanging-tx" in listed and "Ongoing" in listed, listed
    described = tool("describe", "--transactional-id", "hanging-tx")
    assert "Ongoing" in described and f"{topic}-0" in described, described
    producers = tool("describe-producers", "--topic", topic, "--partition", "0")
    rows = [line.split() for line in producers.splitlines()[1:] if line.strip()]
    assert len(rows) == 1 and rows[0][-1] == "0", producers  # the open transaction at 0
    tool("abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
    # The partition's transaction is closed by the ABORT marker: the LSO moves past it.
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "h",
                         "isolation.level": "read_committed"})
    wait_until(lambda: consumer.get_watermark_offsets(
        TopicPartition(topic, 0), timeout=10, cached=False)[1] == 5)
    consumer.close()
    # A later transaction is readable: the hanging one no longer holds the LSO back.
    other = txn_producer(broker.bootstrap, "other-tx")
    other.begin_transaction()
    other.produce(topic, value=b"after", partition=0)
    other.commit_transaction(30)
    assert values(read_all(broker.bootstrap, topic, 1, "read_committed", 1)) == [b"after"]
