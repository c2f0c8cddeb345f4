"""The Apache Kafka broker and the Java client's JVM settings as peers in the benchmarks.

Java drivers (bench/java/*.java, built by ``throughput_rounds.java_argv``) run with the
options ``kafka-run-class.sh`` gives every tool (``TOOL_JVM_OPTIONS``: G1, a 512 MB heap as
the perf-test scripts set, the full JIT) instead of ``tools.apache_kafka.java_command``'s
quick start-up defaults for one-shot tools (C1 only, serial GC), which would handicap a
throughput run; the jars and the classpath are ``java_command``'s.

The Apache Kafka broker is a single combined (broker + controller) node from
``tools.apache_kafka.ApacheKafkaCluster`` with ``kafka-server-start.sh``'s 1 GB heap. A
running broker is warm, so a fresh JVM first gets an untimed produce and read
(``warm_up_broker``) for its JIT to compile the hot paths.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # last: a benchmark worker's PYTHONPATH keeps its own sdk

from tools.apache_kafka import (  # noqa: E402  (the repo root is put on sys.path above)
    ApacheKafkaCluster,
    ApacheKafkaUnavailable,
    fetch,
    missing_tools,
)

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


def java_driver_argv(source: Path) -> list[str]:
    """The argv that runs a one-file Java driver (bench/java/<Main>.java, its class named as
    the file) with the perf tools' JVM options. It is compiled once per source and Kafka
    version into the jar cache; a staging directory renamed into place keeps a half-done
    compile from ever being taken for a finished one."""
    from tools.apache_kafka import DEFAULT_VERSION, cache_root, classpath, java_command

    main_class = source.stem
    digest = hashlib.sha256(source.read_bytes() + DEFAULT_VERSION.encode()).hexdigest()
    classes = cache_root() / "bench-java" / f"{main_class}-{digest[:16]}"
    if not (classes / f"{main_class}.class").exists():
        javac = shutil.which("javac")
        if javac is None:
            raise RuntimeError("javac not found: the Java client needs a JDK")
        staging = Path(tempfile.mkdtemp(prefix=f"{main_class}-"))
        subprocess.run([javac, "-d", str(staging), "-cp", classpath(), str(source)],
                       check=True, capture_output=True, text=True)
        classes.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(classes, ignore_errors=True)
        staging.rename(classes)
    argv = java_command(main_class, heap=TOOL_HEAP, jvm_options=TOOL_JVM_OPTIONS)
    argv[argv.index("-cp") + 1] += os.pathsep + str(classes)
    return argv


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
    from peer_loops import confluent_produce

    topic = f"bench-warm-up-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 6, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": LINGER_MS})
    value = os.urandom(size)
    confluent_produce(producer, topic, value, records)
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
