"""The Java client and the Apache Kafka broker as peers in the benchmarks.

The Java client is Kafka's own perf tools, run as their users run them
(``kafka-producer-perf-test.sh``, ``kafka-consumer-perf-test.sh``):

* ``org.apache.kafka.tools.ProducerPerformance`` sends ``warm-up + count`` records and prints
  two summary lines. The whole-run line covers the time from just after the producer is
  built to the end of ``close()``: the first metadata lookup and connection, the JIT
  warming up, every send and the final flush. The steady-state line
  (``--warmup-records``) covers the last ``count`` records only, from the send of the first
  of them to the end of ``close()``. Neither includes starting the JVM, loading classes or
  building the producer; that is the process's wall time minus the whole-run time.
* ``org.apache.kafka.tools.ConsumerPerformance`` subscribes with a consumer group and reads
  ``count`` records. Its summary splits the time from creating the consumer to the last
  record into the group join (``rebalance.time.ms``: FindCoordinator, JoinGroup, SyncGroup,
  plus the broker's initial rebalance delay on Apache Kafka) and the rest (``fetch.time.ms``:
  the offset lookups and fetching, with the JIT warming up: the tool has no warm-up
  option). The fetch-phase rate compares with our consumers' figure (they assign partitions,
  so they never join a group); the whole rate and the join are reported beside it. The JVM's
  start-up, closing the consumer (leaving the group) and the exit are the wall time minus
  both.

The JVM gets the options ``kafka-run-class.sh`` gives every tool (G1, a 512 MB heap as the
perf-test scripts set, the full JIT) instead of ``tools.apache_kafka.java_command``'s quick
start-up defaults for one-shot tools (C1 only, serial GC), which would handicap a throughput
run; the jars and the classpath are ``java_command``'s.

The Apache Kafka broker is a single combined (broker + controller) node from
``tools.apache_kafka.ApacheKafkaCluster`` with ``kafka-server-start.sh``'s 1 GB heap. A
running broker is warm, so a fresh JVM first gets an untimed produce and read
(``warm_up_broker``) for its JIT to compile the hot paths.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # last: a benchmark worker's PYTHONPATH keeps its own sdk

from tools.apache_kafka import (  # noqa: E402  (the repo root is put on sys.path above)
    ApacheKafkaCluster,
    ApacheKafkaUnavailable,
    fetch,
    java_command,
    missing_tools,
)

PRODUCER_MAIN = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_MAIN = "org.apache.kafka.tools.ConsumerPerformance"
TOOL_HEAP = "512m"  # kafka-producer-perf-test.sh / kafka-consumer-perf-test.sh
BROKER_HEAP = "1g"  # kafka-server-start.sh
# kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS; the first two undo java_command's
# start-up choices (serial GC, C1 only). A later -XX flag wins over an earlier one.
TOOL_JVM_OPTIONS = ("-XX:-UseSerialGC", "-XX:TieredStopAtLevel=4", "-server", "-XX:+UseG1GC",
                    "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
                    "-XX:+ExplicitGCInvokesConcurrent")
LINGER_MS = 5


def unavailable() -> str | None:
    """Why Kafka's Java tools cannot run here, or None (fetches the jars when mvn can)."""
    reason = missing_tools()
    if reason is not None:
        return f"Apache Kafka's Java tools need Java and Maven: {reason}"
    try:
        fetch()
    except ApacheKafkaUnavailable as exc:
        return str(exc)
    return None


def _java(main_class: str, *args: str) -> list[str]:
    return java_command(main_class, *args, heap=TOOL_HEAP, jvm_options=TOOL_JVM_OPTIONS)


def _run(argv: list[str], timeout_s: float) -> tuple[str, float]:
    """Run a Java tool; (stdout, wall seconds from launching the JVM to its exit)."""
    started = time.perf_counter()
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"timed out after {timeout_s:.0f} s") from None
    wall = time.perf_counter() - started
    if out.returncode != 0:
        detail = (out.stderr.strip() or out.stdout.strip()).splitlines()
        raise RuntimeError(f"exit {out.returncode}: {' | '.join(detail[-3:])}")
    return out.stdout, wall


# ============================================================================ producer


@dataclass
class JavaProducerRun:
    rate: float  # steady state: the last ``count`` records, records/s
    whole_rate: float  # warm-up + count records from the first send, records/s
    startup_s: float  # JVM start, class loading, building the producer, JVM exit


_SENT = re.compile(r"^(\d+) (steady state )?records sent, ([\d.]+) records/sec", re.M)


def parse_producer_output(text: str) -> tuple[tuple[int, float], tuple[int, float] | None]:
    """((records, rate) of the whole run, (records, rate) of the steady state or None)."""
    whole: tuple[int, float] | None = None
    steady: tuple[int, float] | None = None
    for match in _SENT.finditer(text):
        line = text[match.start():text.find("\n", match.start())]
        if "latency," not in line or "99.9th" not in line:
            continue  # a progress window, not a summary
        if match[2]:
            steady = int(match[1]), float(match[3])
        else:
            whole = int(match[1]), float(match[3])
    if whole is None:
        raise RuntimeError(f"no summary line in ProducerPerformance's output: {text[-500:]!r}")
    return whole, steady


def java_producer(bootstrap: str, topic: str, count: int, size: int, acks: str, codec: str,
                  batch_size: int | None, warmup: int, timeout_s: float) -> JavaProducerRun:
    """``warmup + count`` records of ``size`` bytes through ProducerPerformance.

    Every record is ``size`` bytes of ``x``, as the Python clients send: given a payload file
    of one such line, the tool picks it for each record. (With ``--record-size`` it would
    fill every record with fresh random letters inside the timed loop, work the others do
    not do, and a payload that compresses differently.)"""
    props = [f"acks={acks}", f"linger.ms={LINGER_MS}", f"compression.type={codec}"]
    if batch_size:
        props.append(f"batch.size={batch_size}")  # else Java's default, 16 KB like ours
    with tempfile.NamedTemporaryFile("w", prefix="bench-payload-", suffix=".txt") as payload:
        payload.write("x" * size)
        payload.flush()
        args = ["--bootstrap-server", bootstrap, "--topic", topic,
                "--num-records", str(warmup + count), "--payload-file", payload.name,
                "--throughput", "-1", "--reporting-interval", "3600000"]
        if warmup:
            args += ["--warmup-records", str(warmup)]
        args += ["--command-property", *props]  # takes every argument after it
        stdout, wall = _run(_java(PRODUCER_MAIN, *args), timeout_s)
    (whole_n, whole_rate), steady = parse_producer_output(stdout)
    if whole_n != warmup + count:  # failed sends are printed, not counted
        raise RuntimeError(f"only {whole_n} of {warmup + count} records were acknowledged")
    if warmup and steady is None:
        raise RuntimeError(f"no steady-state line in ProducerPerformance's output: {stdout!r}")
    rate = steady[1] if steady is not None else whole_rate
    return JavaProducerRun(rate, whole_rate, max(0.0, wall - whole_n / whole_rate))


# ============================================================================ consumer


@dataclass
class JavaConsumerRun:
    rate: float  # records/s over fetch.time.ms (after the group join)
    whole_rate: float  # records/s from creating the consumer to the last record
    join_s: float  # rebalance.time.ms
    startup_s: float  # JVM start, class loading, closing the consumer (leaving the group), exit


def parse_consumer_output(text: str) -> dict[str, str]:
    """ConsumerPerformance's summary as {column: value}, from its header and data line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for index, line in enumerate(lines):
        if line.startswith("start.time,") and index + 1 < len(lines):
            names = [n.strip() for n in line.split(",")]
            values = [v.strip() for v in lines[index + 1].split(",")]
            if len(values) == len(names):
                return dict(zip(names, values, strict=True))
    raise RuntimeError(f"no summary in ConsumerPerformance's output: {text[-500:]!r}")


def java_consumer(bootstrap: str, topic: str, count: int, timeout_s: float) -> JavaConsumerRun:
    """Read ``count`` records of ``topic`` from the beginning with ConsumerPerformance."""
    args = ["--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(count),
            "--group", f"bench-java-{uuid.uuid4().hex[:8]}", "--timeout", "30000",
            "--reporting-interval", "3600000"]
    stdout, wall = _run(_java(CONSUMER_MAIN, *args), timeout_s)
    if "WARNING: Exiting before consuming" in stdout:
        raise RuntimeError(stdout.strip().splitlines()[0])
    summary = parse_consumer_output(stdout)
    read = int(summary["data.consumed.in.nMsg"])
    if read < count:
        raise RuntimeError(f"read only {read} of {count} records")
    join_ms = int(summary["rebalance.time.ms"])
    fetch_ms = int(summary["fetch.time.ms"])
    elapsed_s = (join_ms + fetch_ms) / 1000
    return JavaConsumerRun(rate=read / max(fetch_ms / 1000, 1e-3),
                           whole_rate=read / max(elapsed_s, 1e-3), join_s=join_ms / 1000,
                           startup_s=max(0.0, wall - elapsed_s))


# ============================================================================ broker


class ApacheBroker:
    """A single-node Apache Kafka (combined broker and controller JVM) for a benchmark run."""

    name = "apache"

    def __init__(self, heap: str = BROKER_HEAP) -> None:
        self.heap = heap
        self.cluster: ApacheKafkaCluster | None = None
        self.bootstrap = ""

    def start(self) -> None:
        reason = unavailable()
        if reason is not None:
            raise ApacheKafkaUnavailable(reason)
        cluster = ApacheKafkaCluster(brokers=1, heap=self.heap)
        cluster.__enter__()  # closes what it started if it fails
        self.cluster = cluster
        self.bootstrap = cluster.bootstrap_servers

    @property
    def pid(self) -> int:
        """The broker JVM's process id (for its CPU time in /proc)."""
        pid = self.cluster.nodes[1].pid if self.cluster is not None else None
        if pid is None:
            raise RuntimeError("the Apache Kafka broker is not running")
        return pid

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.close()
            self.cluster = None


def warm_up_broker(bootstrap: str, records: int = 100_000, size: int = 100) -> None:
    """An untimed produce and read-back through confluent-kafka (a scratch topic), so a
    fresh JVM broker's JIT has compiled its produce and fetch paths before the clock."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"bench-warm-up-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 6, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": LINGER_MS})
    value = os.urandom(size)
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120):
        raise RuntimeError("the broker warm-up produce did not finish")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(6)])
    deadline = time.monotonic() + 120
    read = 0
    try:
        while read < records and time.monotonic() < deadline:
            read += sum(1 for m in consumer.consume(10_000, 1.0) if m.error() is None)
    finally:
        consumer.close()
    admin.delete_topics([topic])
