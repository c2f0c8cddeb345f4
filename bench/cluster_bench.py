"""Replication cost: acks=all on RF=3 against acks=1 on RF=1, on our cluster and Apache Kafka's.

Both clusters have 3 brokers and 1 dedicated controller on this machine and run in the same
invocation (one after the other: the machine has two cores, and CPU speed drifts, so only
figures of one run compare). Per cluster and round, confluent-kafka produces N records of
the given size to a fresh 6-partition topic with ``acks=1`` and replication factor 1, then
to another with ``acks=all``, replication factor 3 and ``min.insync.replicas=2``. Reported:
medians of messages per second and the CPU seconds all the cluster's processes spent in the
phase (user + system from /proc/<pid>/stat: our brokers and controller, or the JVMs).

    .venv/bin/python bench/cluster_bench.py [--rounds 2] [--count 100000] [--size 100]
        [--only ours|apache]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from server_ref.cluster import EmbeddedCluster  # noqa: E402
from tools.apache_kafka import ApacheKafkaCluster, missing_tools  # noqa: E402

PARTITIONS = 6
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
CONFIG = {"min.insync.replicas": "2", "broker.session.timeout.ms": "9000"}


def cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return total


def create_topic(bootstrap: str, replication: int) -> str:
    name = f"bench-rf{replication}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, PARTITIONS, replication,
                                            config={"min.insync.replicas": "2"}
                                            if replication > 1 else {})])
    futures[name].result(30)
    time.sleep(1.0)  # every broker learns the new leaders
    return name


def produce(bootstrap: str, topic: str, count: int, size: int, acks: str) -> float:
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
    if producer.flush(180):
        raise RuntimeError("produce did not finish")
    elapsed = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"{len(failures)} deliveries failed, first: {failures[0]}")
    return elapsed


def measure(name: str, cluster: Any, rounds: int, count: int, size: int
            ) -> dict[str, list[tuple[float, float]]]:
    pids = [n.pid for n in cluster.nodes.values() if n.pid is not None]
    results: dict[str, list[tuple[float, float]]] = {"acks=1 RF=1": [], "acks=all RF=3": []}
    bootstrap = cluster.bootstrap_servers
    produce(bootstrap, create_topic(bootstrap, 3), count // 5, size, "all")  # warm-up
    for r in range(rounds):
        for phase, replication, acks in (("acks=1 RF=1", 1, "1"),
                                         ("acks=all RF=3", 3, "all")):
            topic = create_topic(bootstrap, replication)
            before = cpu_seconds(pids)
            elapsed = produce(bootstrap, topic, count, size, acks)
            cpu = cpu_seconds(pids) - before
            results[phase].append((count / elapsed, cpu))
            print(f"  {name:10} round {r + 1} {phase:14} {count / elapsed:10,.0f} msg/s "
                  f"(cluster cpu {cpu:5.2f} s)", flush=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--only", choices=["ours", "apache"], default=None)
    args = parser.parse_args()
    clusters: dict[str, Callable[[], AbstractContextManager[Any]]] = {
        "server_ref": lambda: EmbeddedCluster(3, 1, config=CONFIG),
        "apache": lambda: ApacheKafkaCluster(3, 1, config=CONFIG),
    }
    if args.only == "ours":
        del clusters["apache"]
    elif args.only == "apache" or missing_tools():
        if missing_tools():
            print(f"Apache Kafka unavailable: {missing_tools()}")
        del clusters["server_ref" if args.only == "apache" else "apache"]
    results = {}
    for name, make in clusters.items():
        with make() as cluster:
            results[name] = measure(name, cluster, args.rounds, args.count, args.size)
    print(f"\nmedians, {args.count} records of {args.size} B, 3 brokers + 1 controller")
    for name, phases in results.items():
        for phase, runs in phases.items():
            rate = statistics.median(r for r, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            print(f"  {name:10} {phase:14} {rate:10,.0f} msg/s  cluster cpu {cpu:5.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
