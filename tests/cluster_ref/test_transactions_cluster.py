"""Transactions on our broker's 3-broker cluster: the transaction coordinator lives on the
leader of the transactional id's ``__transaction_state`` partition, the data partitions and
the group's ``__consumer_offsets`` partition are led by other brokers, so every
transaction crosses brokers (WriteTxnMarkers to the leaders, produce verification with the
coordinator, TxnOffsetCommit at the group coordinator).

The Apache Kafka scenarios of tests/cluster/test_transactions_failover.py run here
unchanged (imported), on one module-scoped ``EmbeddedCluster``: ours as conftest's, with
the timed-out-transaction check every second instead of every 10 s (one test waits for a
timeout abort). The healed fixture (conftest) restarts killed brokers after each test.
"""

from __future__ import annotations

import asyncio
import random
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from apache_support import require_apache_kafka
from cluster.conftest import create_topic, leader_of, wait_for
from cluster.test_transactions_failover import (
    _coordinator_of,
    test_abort_with_the_coordinator_killed,
    test_commit_with_the_coordinator_killed,
)
from cluster_ref.conftest import REF_CONFIG

from sdk import AdminClient, Consumer, Producer, TopicPartition
from sdk.errors import KafkaError, ProducerFencedError, raise_for_code
from sdk.net.client import NetClient
from sdk.net.config import CommonConfig
from sdk.protocol.messages.init_producer_id import InitProducerIdRequest
from server_ref.cluster import EmbeddedCluster
from server_ref.offsets_journal import OFFSETS_TOPIC, partition_for_group
from tools.apache_kafka import java_command

__all__ = ["test_abort_with_the_coordinator_killed", "test_commit_with_the_coordinator_killed"]

PARTITIONS = 3
STATE_TOPIC = "__transaction_state"
CONFIG = {**REF_CONFIG,
          "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"}


@pytest.fixture(scope="module")
def kafka_cluster() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(brokers=3, controllers=1, config=CONFIG) as cluster:
        yield cluster


def _txn_id(prefix: str = "txn") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _producer(cluster: EmbeddedCluster, txn_id: str, **extra: Any) -> Producer:
    return Producer(bootstrap_servers=cluster.bootstrap_servers, transactional_id=txn_id,
                    linger_ms=2, **extra)


def _read(cluster: EmbeddedCluster, topic: str, isolation: str,
          partitions: int = PARTITIONS) -> list[bytes]:
    """Every value a consumer with ``isolation`` reads up to the end offsets it sees."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    out: list[bytes] = []
    with Consumer(bootstrap_servers=cluster.bootstrap_servers, isolation_level=isolation,
                  auto_offset_reset="earliest") as c:
        c.assign(tps)
        ends = c.end_offsets(tps)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for records in c.poll(timeout_ms=300).values():
                out.extend(r.value for r in records if r.value is not None)
            if all(c.position(tp) >= ends[tp] for tp in tps):
                break
        else:
            raise TimeoutError(f"{isolation}: read {len(out)} records, not to {ends}")
    return out


def _leaders(cluster: EmbeddedCluster, topic: str) -> set[int]:
    return {leader_of(cluster, topic, p) for p in range(PARTITIONS)}


def _state_leader(cluster: EmbeddedCluster, key: str, topic: str, partitions: int) -> int:
    """The leader of ``key``'s partition of an internal topic: its coordinator."""
    return leader_of(cluster, topic, partition_for_group(key, partitions))


def _partition_counts(cluster: EmbeddedCluster) -> dict[str, int]:
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        found = admin.describe_topics([STATE_TOPIC, OFFSETS_TOPIC], timeout_ms=30_000)
    return {name: len(found[name].partitions) for name in (STATE_TOPIC, OFFSETS_TOPIC)}


def test_commit_and_abort_across_partitions_led_by_different_brokers(
        kafka_cluster: EmbeddedCluster) -> None:
    """A committed and an aborted transaction over three partitions led by three brokers,
    then one left open: read_committed sees the committed one only, and stops at the open
    one; read_uncommitted sees everything."""
    topic = create_topic(kafka_cluster, "txn-spread", PARTITIONS)
    assert len(_leaders(kafka_cluster, topic)) == 3
    txn_id = _txn_id()
    committed = [f"commit-{i}".encode() for i in range(60)]
    aborted = [f"abort-{i}".encode() for i in range(45)]
    with _producer(kafka_cluster, txn_id) as p, \
            Producer(bootstrap_servers=kafka_cluster.bootstrap_servers) as plain:
        p.init_transactions(timeout=60)
        coordinator = _coordinator_of(kafka_cluster.bootstrap_servers, txn_id)
        assert coordinator in (1, 2, 3)
        with p.transaction(timeout=60):
            for i, value in enumerate(committed):
                p.send(topic, value, partition=i % PARTITIONS)
        p.begin_transaction()
        for i, value in enumerate(aborted):
            p.send(topic, value, partition=i % PARTITIONS)
        p.flush(timeout=60)  # in the logs, then aborted
        p.abort_transaction(timeout=60)
        p.begin_transaction()
        p.send(topic, b"open", partition=0).result(timeout=60)
        plain.send(topic, b"after-open", partition=0).result(timeout=60)
        seen = _read(kafka_cluster, topic, "read_committed")
        assert sorted(seen) == sorted(committed)  # "after-open" is past the LSO
        with AdminClient(bootstrap_servers=kafka_cluster.bootstrap_servers) as admin:
            listed = admin.list_transactions(timeout_ms=30_000)[txn_id]
            assert (listed.state, listed.coordinator) == ("Ongoing", coordinator)
            described = admin.describe_transactions([txn_id], timeout_ms=30_000)[txn_id]
            assert (described.state, described.coordinator) == ("Ongoing", coordinator)
            assert described.partitions == (TopicPartition(topic, 0),)
        everything = _read(kafka_cluster, topic, "read_uncommitted")
        assert sorted(everything) == sorted([*committed, *aborted, b"open", b"after-open"])
        p.commit_transaction(timeout=60)
    seen = _read(kafka_cluster, topic, "read_committed")
    assert sorted(seen) == sorted([*committed, b"open", b"after-open"])


def test_read_committed_on_a_follower_that_became_leader(
        kafka_cluster: EmbeddedCluster) -> None:
    """The last stable offset and the aborted-transaction index come from replicated data:
    an aborted and a committed transaction, then one left open, all on partition 0; its
    leader (not the coordinator) is SIGKILLed. The new leader serves read_committed
    exactly as the old one did: the aborted records dropped (its aborted index was built
    from the replicated ABORT marker), nothing past the open transaction's first offset;
    the open transaction's abort (markers to the new leader) then releases what follows."""
    topic = create_topic(kafka_cluster, "txn-follower", PARTITIONS)
    bootstrap = kafka_cluster.bootstrap_servers
    txn_id = _txn_id()
    with _producer(kafka_cluster, txn_id) as p, \
            Producer(bootstrap_servers=bootstrap) as plain:
        p.init_transactions(timeout=60)
        coordinator = _coordinator_of(bootstrap, txn_id)
        leader = leader_of(kafka_cluster, topic, 0)
        if leader == coordinator:  # another partition whose leader is not the coordinator
            target = next(q for q in range(PARTITIONS)
                          if leader_of(kafka_cluster, topic, q) != coordinator)
        else:
            target = 0
        leader = leader_of(kafka_cluster, topic, target)
        p.begin_transaction()
        for i in range(10):
            p.send(topic, f"aborted-{i}".encode(), partition=target)
        p.flush(timeout=60)
        p.abort_transaction(timeout=60)
        with p.transaction(timeout=60):
            for i in range(10):
                p.send(topic, f"committed-{i}".encode(), partition=target)
        p.begin_transaction()
        p.send(topic, b"open", partition=target).result(timeout=60)
        plain.send(topic, b"behind-open", partition=target).result(timeout=60)

        def read() -> list[bytes]:
            tp = TopicPartition(topic, target)
            out: list[bytes] = []
            with Consumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                          auto_offset_reset="earliest") as c:
                c.assign([tp])
                end = c.end_offsets([tp])[tp]
                deadline = time.monotonic() + 30
                while c.position(tp) < end and time.monotonic() < deadline:
                    for records in c.poll(timeout_ms=300).values():
                        out.extend(r.value for r in records if r.value is not None)
            return out

        committed = [f"committed-{i}".encode() for i in range(10)]
        assert read() == committed
        kafka_cluster.kill(leader)
        wait_for(lambda: leader_of(kafka_cluster, topic, target) != leader, 60,
                 f"a new leader of {topic}-{target}")
        assert read() == committed  # the same answer from the former follower
        p.abort_transaction(timeout=60)
        assert wait_for(lambda: (seen := read()) and len(seen) > len(committed) and seen,
                        60, "the LSO past the aborted transaction") == \
            [*committed, b"behind-open"]


def _producer_ids(bootstrap: str, node: int, count: int) -> list[int]:
    """``count`` idempotent producer ids from broker ``node`` (raw InitProducerId)."""
    async def ask() -> list[int]:
        client = NetClient(CommonConfig.build(bootstrap_servers=bootstrap))
        try:
            await client.start()
            out = []
            for _ in range(count):
                response = await client.call(
                    InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000),
                    node, check=lambda r: raise_for_code(r.error_code), timeout_s=60)
                out.append(response.producer_id)
            return out
        finally:
            await client.close()

    return asyncio.run(ask())


def test_producer_ids_come_from_controller_blocks(kafka_cluster: EmbeddedCluster) -> None:
    """AllocateProducerIds: brokers hand out producer ids (idempotent producers, new
    transactional ids) from blocks of 1,000 the active controller commits to the metadata
    log, so two brokers never give out the same id, and a broker SIGKILLed and restarted
    takes a new block after every block handed out before (it keeps nothing on disk)."""
    bootstrap = kafka_cluster.bootstrap_servers
    ids = {node: _producer_ids(bootstrap, node, 5) for node in (1, 2, 3)}
    blocks = {node: {pid // 1000 for pid in found} for node, found in ids.items()}
    for node, found in ids.items():
        assert found == list(range(found[0], found[0] + 5)), found  # one block, in order
        assert len(blocks[node]) == 1
    assert len(set.union(*blocks.values())) == 3  # a block each
    kafka_cluster.kill(1)
    kafka_cluster.start(1)
    again = wait_for(lambda: _producer_ids(bootstrap, 1, 1), 60, "an id from the restarted node")
    assert again[0] // 1000 > max(set.union(*blocks.values()))


def _ids_apart(cluster: EmbeddedCluster) -> tuple[str, str]:
    """A transactional id and a group whose coordinators are on different brokers."""
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        # Both internal topics exist once a coordinator was looked up for each kind.
        wait_for(lambda: {STATE_TOPIC, OFFSETS_TOPIC} <= set(admin.list_topics(
            include_internal=True, timeout_ms=10_000)), 60, "the internal topics")
    counts = _partition_counts(cluster)
    for _ in range(200):
        txn_id, group = _txn_id("apart"), _txn_id("group")
        if _state_leader(cluster, txn_id, STATE_TOPIC, counts[STATE_TOPIC]) != \
                _state_leader(cluster, group, OFFSETS_TOPIC, counts[OFFSETS_TOPIC]):
            return txn_id, group
    raise AssertionError("no transactional id and group with coordinators apart")


def test_send_offsets_with_the_group_coordinator_on_another_broker(
        kafka_cluster: EmbeddedCluster) -> None:
    """send_offsets_to_transaction when the group's coordinator is not the transaction
    coordinator: the offsets become the group's at commit (the COMMIT marker reaches the
    group's ``__consumer_offsets`` partition on its leader), never at abort."""
    bootstrap = kafka_cluster.bootstrap_servers
    source = create_topic(kafka_cluster, "txn-src", 1)
    sink = create_topic(kafka_cluster, "txn-sink", 1)
    with Producer(bootstrap_servers=bootstrap) as plain:
        for i in range(30):
            plain.send(source, f"in-{i}".encode(), partition=0)
        plain.flush(timeout=60)
    probe = _txn_id()  # looking coordinators up creates both internal topics
    with _producer(kafka_cluster, probe) as p:
        p.init_transactions(timeout=60)
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.list_consumer_group_offsets(_txn_id("probe"), timeout_ms=60_000)
    txn_id, group = _ids_apart(kafka_cluster)
    tp = TopicPartition(source, 0)
    with Consumer(source, bootstrap_servers=bootstrap, group_id=group,
                  auto_offset_reset="earliest", enable_auto_commit=False,
                  isolation_level="read_committed") as c, _producer(kafka_cluster, txn_id) as p:
        p.init_transactions(timeout=60)

        def step(count: int, commit: bool) -> None:
            taken: list[Any] = []
            deadline = time.monotonic() + 60
            while len(taken) < count and time.monotonic() < deadline:
                for records in c.poll(timeout_ms=300, max_records=count - len(taken)).values():
                    taken.extend(records)
            assert len(taken) == count
            p.begin_transaction()
            for record in taken:
                p.send(sink, record.value.replace(b"in", b"out"), partition=0)
            p.send_offsets_to_transaction({tp: taken[-1].offset + 1}, c.group_metadata(),
                                          timeout=60)
            if commit:
                p.commit_transaction(timeout=60)
            else:
                p.abort_transaction(timeout=60)

        def committed() -> int | None:
            found = c.committed(tp, timeout_ms=30_000)
            return None if found is None else found.offset

        step(10, commit=True)
        assert committed() == 10
        step(5, commit=False)
        assert committed() == 10  # the aborted step's offsets never became the group's
        c.seek(tp, 10)
        step(20, commit=True)
        assert committed() == 30
    out = _read(kafka_cluster, sink, "read_committed", partitions=1)
    assert out == [f"out-{i}".encode() for i in range(30)]


def test_zombie_is_fenced(kafka_cluster: EmbeddedCluster) -> None:
    topic = create_topic(kafka_cluster, "txn-zombie", PARTITIONS)
    txn_id = _txn_id()
    with _producer(kafka_cluster, txn_id) as zombie:
        zombie.init_transactions(timeout=60)
        zombie.begin_transaction()
        for i in range(PARTITIONS):
            zombie.send(topic, b"zombie", partition=i).result(timeout=60)
        with _producer(kafka_cluster, txn_id) as fresh:
            fresh.init_transactions(timeout=60)  # aborts the zombie's transaction
            with fresh.transaction(timeout=60):
                fresh.send(topic, b"fresh", partition=1)
            with pytest.raises(ProducerFencedError):
                zombie.commit_transaction(timeout=60)
    assert _read(kafka_cluster, topic, "read_committed") == [b"fresh"]


def test_open_transaction_is_aborted_by_its_timeout(kafka_cluster: EmbeddedCluster) -> None:
    """The coordinator aborts a transaction older than its timeout, with markers on every
    partition's leader: the LSO moves on and the late commit fails (fatal)."""
    topic = create_topic(kafka_cluster, "txn-timeout", PARTITIONS)
    with _producer(kafka_cluster, _txn_id(), transaction_timeout_ms=2000) as p, \
            Producer(bootstrap_servers=kafka_cluster.bootstrap_servers) as plain:
        p.init_transactions(timeout=60)
        p.begin_transaction()
        for i in range(PARTITIONS):
            p.send(topic, b"timed-out", partition=i).result(timeout=60)
        for i in range(PARTITIONS):
            plain.send(topic, b"after", partition=i).result(timeout=60)
        def past_the_transaction() -> list[bytes] | None:
            seen = _read(kafka_cluster, topic, "read_committed")
            return seen if len(seen) >= PARTITIONS else None  # each partition's marker

        seen = wait_for(past_the_transaction, 60, "the LSO past the timed-out transaction")
        assert seen == [b"after"] * PARTITIONS
        with pytest.raises(KafkaError):
            p.commit_transaction(timeout=60)


ROUNDS = 24
KILL_AT = {6: "coordinator", 14: "data leader", 20: "coordinator"}


def test_coordinator_killed_mid_transaction_checker(kafka_cluster: EmbeddedCluster,
                                                    failover_report: list[str]) -> None:
    """Jepsen-style count over transactions of random size, committed or aborted at random;
    in three of them the coordinator's broker (twice) or a data partition's leader is
    SIGKILLed after the records were written and before EndTxn, then restarted. Each
    transaction counts as committed, aborted, or unknown (the client got an error from
    EndTxn): lost (committed, not read), duplicated, uncommitted-visible (aborted, read)
    and partial (unknown, part read) must all be zero."""
    rng = random.Random(17)
    topic = create_topic(kafka_cluster, "txn-checker", PARTITIONS)
    bootstrap = kafka_cluster.bootstrap_servers
    txn_id = _txn_id("checker")
    outcomes: list[tuple[str, list[bytes]]] = []
    kills: list[str] = []
    p = _producer(kafka_cluster, txn_id)
    try:
        p.init_transactions(timeout=120)
        for n in range(ROUNDS):
            values = [f"t{n}-{i}".encode() for i in range(rng.randint(1, 30))]
            commit = rng.random() < 0.6
            outcome = "unknown"
            victim: int | None = None
            try:
                p.begin_transaction()
                for i, value in enumerate(values):
                    p.send(topic, value, partition=i % PARTITIONS)
                p.flush(timeout=120)
                victim_kind = KILL_AT.get(n)
                if victim_kind is not None:
                    victim = (_coordinator_of(bootstrap, txn_id) if victim_kind == "coordinator"
                              else leader_of(kafka_cluster, topic, n % PARTITIONS))
                    kafka_cluster.kill(victim)
                    kills.append(f"{victim_kind} (node {victim}) before "
                                 f"{'commit' if commit else 'abort'} of transaction {n}")
                for i in range(3):  # more records after the kill, same transaction
                    value = f"t{n}-late-{i}".encode()
                    values.append(value)
                    p.send(topic, value, partition=i)
                if commit:
                    p.commit_transaction(timeout=120)
                else:
                    p.abort_transaction(timeout=120)
                outcome = "committed" if commit else "aborted"
            except KafkaError as exc:
                kills.append(f"transaction {n}: {exc!r}")
                p.close(timeout=5)  # a new instance fences this one and settles it
                p = _producer(kafka_cluster, txn_id)
                p.init_transactions(timeout=120)
            finally:
                if victim is not None:  # never two brokers down at once
                    kafka_cluster.start(victim)
            outcomes.append((outcome, values))
    finally:
        p.close()
    counts = _check(kafka_cluster, topic, outcomes)
    failover_report.append(f"transactions checker (kills before EndTxn): {counts}; "
                           f"{'; '.join(kills)}")
    assert counts["committed"] > 0 and counts["aborted"] > 0
    assert counts["lost"] == counts["duplicated"] == counts["uncommitted_visible"] == \
        counts["partial"] == counts["reordered"] == 0, counts


def _check(cluster: EmbeddedCluster, topic: str, outcomes: list[tuple[str, list[bytes]]]
           ) -> dict[str, int]:
    """The checker's counts over what a read_committed reader gets: committed transactions
    lost, records duplicated, records of aborted transactions visible, transactions of
    unknown outcome partly visible, partitions out of transaction order."""
    order = {v: n for n, (_, vs) in enumerate(outcomes) for v in vs}
    tps = [TopicPartition(topic, q) for q in range(PARTITIONS)]
    per_partition: dict[int, list[bytes]] = {q: [] for q in range(PARTITIONS)}
    with Consumer(bootstrap_servers=cluster.bootstrap_servers,
                  isolation_level="read_committed", auto_offset_reset="earliest") as c:
        c.assign(tps)
        ends = c.end_offsets(tps)
        deadline = time.monotonic() + 60
        while any(c.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"read_committed did not reach {ends}"
            for tp, records in c.poll(timeout_ms=300).items():
                per_partition[tp.partition].extend(
                    r.value for r in records if r.value is not None)
    seen = [v for values in per_partition.values() for v in values]
    seen_set = set(seen)
    return {
        "committed": sum(1 for o, _ in outcomes if o == "committed"),
        "aborted": sum(1 for o, _ in outcomes if o == "aborted"),
        "unknown": sum(1 for o, _ in outcomes if o == "unknown"),
        "read": len(seen),
        "lost": sum(1 for o, vs in outcomes if o == "committed" for v in vs
                    if v not in seen_set),
        "duplicated": len(seen) - len(seen_set),
        "uncommitted_visible": sum(1 for o, vs in outcomes if o == "aborted" for v in vs
                                   if v in seen_set),
        "partial": sum(1 for o, vs in outcomes if o == "unknown"
                       and 0 < sum(v in seen_set for v in vs) < len(vs)),
        "reordered": sum(1 for values in per_partition.values()
                         if values != sorted(values, key=order.__getitem__)),
    }


MAX_RANDOM_KILLS = 3


def test_coordinator_killed_at_random_moments_checker(kafka_cluster: EmbeddedCluster,
                                                      failover_report: list[str]) -> None:
    """Jepsen-style with the kills not aligned to the producer: a nemesis thread SIGKILLs
    the transaction coordinator's broker at random moments (so also inside EndTxn, between
    the Prepare* record and the markers) and restarts it, a bounded number of times, while
    transactions run. A transaction whose EndTxn failed is of unknown outcome: a new
    producer instance settles it, and it must be visible all or nothing."""
    rng = random.Random(1617)
    topic = create_topic(kafka_cluster, "txn-chaos", PARTITIONS)
    bootstrap = kafka_cluster.bootstrap_servers
    txn_id = _txn_id("chaos")
    stop = threading.Event()
    kills: list[str] = []

    def nemesis() -> None:
        killer = random.Random(16170)
        while len(kills) < MAX_RANDOM_KILLS and not stop.wait(killer.uniform(1.0, 4.0)):
            try:
                victim = _coordinator_of(bootstrap, txn_id)
            except Exception as exc:  # the cluster still recovering: try again later
                kills.append(f"no coordinator found: {exc!r}")
                continue
            kafka_cluster.kill(victim)
            kills.append(f"node {victim}")
            stop.wait(killer.uniform(0.5, 3.0))
            kafka_cluster.start(victim)

    outcomes: list[tuple[str, list[bytes]]] = []
    p = _producer(kafka_cluster, txn_id)
    p.init_transactions(timeout=120)
    thread = threading.Thread(target=nemesis, daemon=True)
    thread.start()
    try:
        n = 0
        while (thread.is_alive() or n < 20) and n < 2000:
            n += 1
            values = [f"r{n}-{i}".encode() for i in range(rng.randint(1, 20))]
            commit = rng.random() < 0.7
            outcome = "unknown"
            try:
                p.begin_transaction()
                for i, value in enumerate(values):
                    p.send(topic, value, partition=i % PARTITIONS)
                if commit:
                    p.commit_transaction(timeout=120)
                else:
                    p.abort_transaction(timeout=120)
                outcome = "committed" if commit else "aborted"
            except (KafkaError, TimeoutError):
                p.close(timeout=5)  # a new instance fences this one and settles it
                p = _producer(kafka_cluster, txn_id)
                p.init_transactions(timeout=120)
            outcomes.append((outcome, values))
    finally:
        stop.set()
        thread.join(60)
        p.close()
    counts = _check(kafka_cluster, topic, outcomes)
    failover_report.append(f"transactions checker (random kills of the coordinator): "
                           f"{counts}; killed: {', '.join(kills)}")
    assert sum(1 for k in kills if k.startswith("node")) >= 2, kills
    assert counts["lost"] == counts["duplicated"] == counts["uncommitted_visible"] == \
        counts["partial"] == counts["reordered"] == 0, counts


def test_confluent_transactions_and_read_committed(kafka_cluster: EmbeddedCluster) -> None:
    """confluent-kafka's transactional producer (librdkafka: transactions v1, so
    AddPartitionsToTxn from the client and verify-only checks between brokers): commit,
    abort and send_offsets_to_transaction; its read_committed consumer."""
    from confluent_kafka import Consumer as CKConsumer
    from confluent_kafka import Producer as CKProducer
    from confluent_kafka import TopicPartition as CKTopicPartition

    bootstrap = kafka_cluster.bootstrap_servers
    topic = create_topic(kafka_cluster, "txn-ck", PARTITIONS)
    group = _txn_id("ck-group")
    producer = CKProducer({"bootstrap.servers": bootstrap, "transactional.id": _txn_id("ck"),
                           "linger.ms": 5})
    producer.init_transactions(60)
    committed = [f"ck-commit-{i}".encode() for i in range(30)]
    producer.begin_transaction()
    for i, value in enumerate(committed):
        producer.produce(topic, value=value, partition=i % PARTITIONS)
    producer.commit_transaction(60)
    producer.begin_transaction()
    for i in range(30):
        producer.produce(topic, value=f"ck-abort-{i}".encode(), partition=i % PARTITIONS)
    producer.flush(60)
    producer.abort_transaction(60)
    consumer = CKConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                           "isolation.level": "read_committed", "enable.auto.commit": False,
                           "auto.offset.reset": "earliest"})
    try:
        consumer.assign([CKTopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        got: list[bytes | None] = []
        deadline = time.monotonic() + 60
        while len(got) < len(committed) and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                got.append(message.value())
        quiet_until = time.monotonic() + 1.5  # nothing aborted follows
        while time.monotonic() < quiet_until:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                got.append(message.value())
        assert sorted(v or b"" for v in got) == sorted(committed)
        # The consumer's position committed with a transaction of the producer.
        producer.begin_transaction()
        producer.produce(topic, value=b"ck-with-offsets", partition=0)
        producer.send_offsets_to_transaction(
            [CKTopicPartition(topic, p, 5) for p in range(PARTITIONS)],
            consumer.consumer_group_metadata(), 60)
        producer.commit_transaction(60)
        offsets = consumer.committed([CKTopicPartition(topic, p) for p in range(PARTITIONS)],
                                     30)
        assert [o.offset for o in offsets] == [5] * PARTITIONS
    finally:
        consumer.close()


COPIER_TOOL = "org.apache.kafka.tools.TransactionalMessageCopier"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
JAVA_TIMEOUT_S = 240


def _java(main_class: str, *args: str) -> str:
    result = subprocess.run(java_command(main_class, *args), capture_output=True, text=True,
                            timeout=JAVA_TIMEOUT_S)
    assert result.returncode == 0, (f"{main_class} exited {result.returncode}\n"
                                    f"{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    return result.stdout


def test_java_transactional_copier_and_read_committed_console_consumer(
        kafka_cluster: EmbeddedCluster) -> None:
    """Kafka's own Java client (4.3.1: transactions v2, so Produce v12 adds partitions and
    EndTxn v5 bumps the epoch) through TransactionalMessageCopier: 300 records copied in
    transactions of 10, about a third aborted and copied again, offsets committed inside
    the transactions. Kafka's console consumer with --isolation-level read_committed reads
    each record once; the copier's offsets are the group's."""
    require_apache_kafka()
    bootstrap = kafka_cluster.bootstrap_servers
    source = create_topic(kafka_cluster, "java-src", 1)
    copy = create_topic(kafka_cluster, "java-copy", 1)
    group = _txn_id("java-copier")
    count = 300
    with Producer(bootstrap_servers=bootstrap) as plain:
        for i in range(count):
            plain.send(source, f"m-{i}".encode(), key=f"k-{i}".encode(), partition=0)
        plain.flush(timeout=60)
    _java(COPIER_TOOL, "--broker-list", bootstrap, "--input-topic", source,
          "--input-partition", "0", "--output-topic", copy, "--transactional-id",
          _txn_id("java-tx"), "--transaction-size", "10", "--enable-random-aborts",
          "--consumer-group", group)
    out = _java(CONSOLE_CONSUMER, "--bootstrap-server", bootstrap, "--topic", copy,
                "--from-beginning", "--isolation-level", "read_committed",
                "--max-messages", str(count), "--timeout-ms", "60000",
                "--formatter-property", "print.key=true", "--group", _txn_id("java-reader"))
    lines = [line for line in out.splitlines() if "\t" in line]
    assert sorted(lines) == sorted(f"k-{i}\tm-{i}" for i in range(count))
    everything = _read(kafka_cluster, copy, "read_uncommitted", partitions=1)
    assert set(everything) == {f"m-{i}".encode() for i in range(count)}  # + aborted copies
    assert _read(kafka_cluster, copy, "read_committed", partitions=1) == \
        [f"m-{i}".encode() for i in range(count)]
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        offsets = admin.list_consumer_group_offsets(group).raise_if_failed()
        assert offsets[TopicPartition(source, 0)].offset == count
