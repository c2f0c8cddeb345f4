"""A Jepsen-style durability check of our broker's cluster (issue 17, item 6).

3 brokers and a 3-controller quorum, no fsync (replication keeps the data, as in Kafka).
Two idempotent ``acks=all`` producers (the blocking and the asyncio face, one topic each,
RF=3, ``min.insync.replicas=2``) send numbered records while a consumer reads both topics
as they grow, and a nemesis runs ``ROUNDS`` random rounds (at least 20) of: SIGKILL a broker
and restart it, SIGSTOP a broker and SIGCONT it, SIGKILL the active controller and restart
it, SIGSTOP the active controller and SIGCONT it. Only one node is ever down: each round
heals (node back, every replica in sync) before the next. Then the topics are read back
with confluent-kafka and the checker of tests/cluster (``checker.check``) compares each
producer's history with the log: zero acknowledged records lost, zero duplicates, zero
reorderings per partition, every send's outcome reported exactly once, nothing refused for
good found stored. The consumer's reads must all be in the final log at the offsets read
(a consumer never sees a record the cluster later loses: reads stop at the high watermark).
The counts are printed.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from cluster.checker import History, check
from cluster.conftest import heal, read_partitions, wait_for

from sdk import AdminClient, AsyncProducer, Consumer, NewTopic, Producer, TopicPartition
from server_ref.cluster import EmbeddedCluster

ROUNDS = max(20, int(os.environ.get("DURABILITY_ROUNDS", "20")))
PARTITIONS = 4
RATE = 150.0  # records per second per producer
SEED = int(os.environ.get("DURABILITY_SEED", str(int(time.time()))))
CONFIG = {
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    # As tests/cluster: a silent broker is fenced after 6 s (faults of 1-8 s: some heal
    # before, some after a failover), a follower not caught up for 4 s leaves the ISR.
    "broker.session.timeout.ms": "6000",
    "broker.heartbeat.interval.ms": "1000",
    "replica.lag.time.max.ms": "4000",
    "group.initial.rebalance.delay.ms": "0",
}
PRODUCER: dict[str, Any] = {"acks": "all", "enable_idempotence": True, "linger_ms": 5,
                            "request_timeout_ms": 3000, "retry_backoff_ms": 100,
                            "delivery_timeout_ms": 120_000}


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(brokers=3, controllers=3, config=CONFIG) as running:
        yield running


class Sender:
    """One producer face sending 0, 1, 2, ... (the value is the sequence) until stopped."""

    def __init__(self, face: str, bootstrap: str, topic: str) -> None:
        self.face, self.topic = face, topic
        self.settings = {"bootstrap_servers": bootstrap, **PRODUCER}
        self.history = History()
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, daemon=True, name=f"send-{face}")

    def _main(self) -> None:
        try:
            if self.face == "sync":
                self._sync()
            else:
                asyncio.run(self._async())
        except BaseException as exc:
            self.error = exc

    def _pause(self, seq: int, started: float) -> float:
        return max(0.0, started + (seq + 1) / RATE - time.monotonic()) if seq % 10 == 0 else 0

    def _sync(self) -> None:
        p = Producer(**self.settings)
        try:
            started, seq = time.monotonic(), 0
            while not self.stop.is_set():
                record = self.history.sent(seq, f"k{seq % 24}".encode())
                record.future = p.send(self.topic, str(seq).encode(), key=record.key,
                                       on_delivery=self.history.callback_for(record))
                time.sleep(self._pause(seq, started))
                seq += 1
            p.flush(timeout=180)
        finally:
            p.close(timeout=10)

    async def _async(self) -> None:
        p = AsyncProducer(**self.settings)
        await p.start()
        try:
            started, seq = time.monotonic(), 0
            while not self.stop.is_set():
                record = self.history.sent(seq, f"k{seq % 24}".encode())
                record.future = await p.send(self.topic, str(seq).encode(), key=record.key,
                                             on_delivery=self.history.callback_for(record))
                pause = self._pause(seq, started)
                if pause or seq % 10 == 0:
                    await asyncio.sleep(pause)
                seq += 1
            await p.flush(timeout=180)
        finally:
            await p.close(timeout=10)


class Reader:
    """Reads both topics as they grow; remembers (topic, partition, offset) -> value."""

    def __init__(self, bootstrap: str, topics: list[str]) -> None:
        self.bootstrap, self.topics = bootstrap, topics
        self.seen: dict[tuple[str, int, int], bytes] = {}
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, daemon=True, name="reader")

    def _main(self) -> None:
        try:
            with Consumer(bootstrap_servers=self.bootstrap, group_id=None,
                          auto_offset_reset="earliest", request_timeout_ms=5000) as consumer:
                consumer.assign([TopicPartition(t, p) for t in self.topics
                                 for p in range(PARTITIONS)])
                while not self.stop.is_set():
                    for records in consumer.poll(timeout_ms=200).values():
                        for r in records:
                            self.seen[(r.topic, r.partition, r.offset)] = r.value
        except BaseException as exc:
            self.error = exc


def _nemesis(cluster: EmbeddedCluster, topics: list[str], rng: random.Random,
             log: list[str]) -> None:
    kind = rng.choice(["kill-broker", "pause-broker", "kill-controller", "pause-controller"])
    if kind.endswith("broker"):
        victim = rng.choice([n.node_id for n in cluster.brokers])
    else:
        victim = wait_for(cluster.active_controller, 30, "an active controller")
    down_s = rng.uniform(1.0, 8.0)
    log.append(f"{kind} {victim} for {down_s:.1f} s")
    print(f"round {len(log)}: {log[-1]}", flush=True)
    if kind.startswith("kill"):
        cluster.kill(victim)
        time.sleep(down_s)
        cluster.start(victim, wait=False)
    else:
        cluster.pause(victim)
        time.sleep(down_s)
        cluster.resume(victim)
    try:
        heal(cluster, timeout_s=90)
        converge(cluster, topics)
    except TimeoutError as exc:
        raise AssertionError(f"not healed after {log[-1]}: {_state(cluster)}") from exc


def converge(cluster: EmbeddedCluster, topics: list[str], timeout_s: float = 60) -> None:
    """Until every broker's metadata image says the same about ``topics`` (a broker that
    was paused serves its old view until its Raft observer catches up)."""
    def same() -> bool:
        views = [[cluster.partition_states(n.node_id, t) for t in topics]
                 for n in cluster.brokers]
        return all(view == views[0] for view in views) and all(views[0])
    wait_for(same, timeout_s, "every broker's metadata agreeing")


def _state(cluster: EmbeddedCluster) -> str:
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        topics = admin.describe_topics(None, timeout_ms=10_000)
        return "; ".join(f"{name}-{p.partition} leader {p.leader} isr {list(p.isr)}"
                         for name in topics for p in topics[name].partitions
                         if set(p.isr) != set(p.replicas) or p.leader is None)


@pytest.mark.timeout(900)
def test_acknowledged_records_survive_the_nemesis(cluster: EmbeddedCluster) -> None:
    bootstrap = cluster.bootstrap_servers
    topics = [f"durable-{face}-{SEED}" for face in ("sync", "async")]
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(t, PARTITIONS, 3, {"min.insync.replicas": "2"})
                             for t in topics]).raise_if_failed()
    heal(cluster)
    senders = [Sender("sync", bootstrap, topics[0]), Sender("async", bootstrap, topics[1])]
    reader = Reader(bootstrap, topics)
    for worker in (*senders, reader):
        worker.thread.start()
    rng = random.Random(SEED)
    rounds: list[str] = []
    try:
        time.sleep(1.0)
        for _ in range(ROUNDS):
            _nemesis(cluster, topics, rng, rounds)
            time.sleep(rng.uniform(0.2, 1.0))
    finally:
        for sender in senders:
            sender.stop.set()
        for sender in senders:
            sender.thread.join(240)
        time.sleep(1.0)  # the reader catches up with the last acknowledgements
        reader.stop.set()
        reader.thread.join(30)
    for worker in (*senders, reader):
        assert worker.error is None, f"{worker.thread.name}: {worker.error!r}"

    converge(cluster, topics)
    counts: dict[str, Any] = {"rounds": len(rounds), "seed": SEED}
    problems = []
    for sender in senders:
        log = read_partitions(bootstrap, sender.topic, PARTITIONS)
        verdict = check(sender.history, log)
        counts[sender.face] = {
            "sent": len(sender.history.records), "acknowledged": verdict.acknowledged,
            "failed": len(verdict.failed), "lost": len(verdict.lost),
            "duplicated": len(verdict.duplicated), "reordered": len(verdict.reordered),
            "unreported": len(verdict.unreported),
            "failed_but_stored": len(verdict.failed_but_stored),
            "misplaced": len(verdict.misplaced)}
        if not verdict.ok or not verdict.acknowledged:
            problems.append(f"{sender.face}: {verdict.summary()}")
        stored = {(sender.topic, r.partition, r.offset): r.value
                  for records in log.values() for r in records}
        vanished = [k for k, v in reader.seen.items()
                    if k[0] == sender.topic and stored.get(k) != v]
        counts[sender.face]["consumed"] = sum(1 for k in reader.seen if k[0] == sender.topic)
        counts[sender.face]["consumed_not_in_log"] = len(vanished)
        if vanished:
            problems.append(f"{sender.face}: consumed but not in the final log: {vanished[:10]}")
    print(f"\ndurability checker: {counts}\nnemesis: {'; '.join(rounds)}")
    assert not problems, "\n".join(problems)


