"""What TLS + SASL cost: producer and consumer throughput over SASL_SSL against PLAINTEXT,
for our SDK and confluent-kafka, on the same Apache Kafka broker in the same run.

    .venv/bin/python bench/security_bench.py                   # 3 rounds, 100 B and 1 KB
    .venv/bin/python bench/security_bench.py --quick           # 1 round, 1/4 of the records
    .venv/bin/python bench/security_bench.py --mechanism SCRAM-SHA-512

One single-node Apache Kafka 4.3.1 (tools/apache_kafka.py) listens on PLAINTEXT and on
SASL_SSL (TLS with a test CA made here by trustme, SASL PLAIN or SCRAM with one user). Both
clients get the very same settings dict, in librdkafka's names (``security.protocol``,
``ssl.ca.location``, ``sasl.mechanisms``, ``sasl.username``, ``sasl.password``), which
ours reads as aliases. Each measurement runs in a fresh subprocess:

* produce: N records to a new 6-partition topic, acks=all, linger.ms=5, from the first
  send until every record is acknowledged (flush);
* consume: the topic the SDK producer just wrote, read from the beginning with a manual
  assignment, from creating the consumer to the last record.

Clients and protocols take turns in a rotated order per round; the medians of the rounds
are reported, with SASL_SSL as a share of PLAINTEXT for each client. The connection set-up
(TLS handshake, SASL exchange) is inside the consume figure and inside neither producer
figure beyond the first record (a warm-up record is sent before the clock starts).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PARTITIONS = 6
LINGER_MS = 5
USER, PASSWORD = "bench", "bench-secret"
CLIENTS = ["sdk", "confluent"]
PROTOCOLS = ["PLAINTEXT", "SASL_SSL"]


# ============================================================================ workers


def _produce_sdk(settings: dict[str, Any], topic: str, count: int, value: bytes) -> float:
    from sdk import Producer

    with Producer(dict(settings), acks="all", linger_ms=LINGER_MS) as p:
        p.send(topic, b"warm-up").result(30)
        send = p.send
        start = time.perf_counter()
        for _ in range(count):
            send(topic, value)
        p.flush(timeout=120)
        return time.perf_counter() - start


def _produce_confluent(settings: dict[str, Any], topic: str, count: int, value: bytes) -> float:
    from confluent_kafka import Producer

    p = Producer({**settings, "acks": "all", "linger.ms": LINGER_MS,
                  "partitioner": "murmur2_random"})
    p.produce(topic, b"warm-up")
    p.flush(30)
    produce, poll = p.produce, p.poll
    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                produce(topic, value)
                break
            except BufferError:  # the local queue is full: serve delivery reports
                poll(0.005)
        if i % 1000 == 0:
            poll(0)
    p.flush()
    return time.perf_counter() - start


def _consume_sdk(settings: dict[str, Any], topic: str, count: int) -> float:
    from sdk import Consumer, TopicPartition

    start = time.perf_counter()
    consumer = Consumer(dict(settings), auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    seen = 0
    while seen < count:
        for records in consumer.poll(timeout_ms=1000).values():
            seen += len(records)
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed


def _consume_confluent(settings: dict[str, Any], topic: str, count: int) -> float:
    import confluent_kafka as ck

    start = time.perf_counter()
    consumer = ck.Consumer({**settings, "group.id": f"bench-{uuid.uuid4().hex[:6]}",
                            "enable.auto.commit": False, "auto.offset.reset": "earliest",
                            "fetch.queue.backoff.ms": 10})
    consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING)
                     for p in range(PARTITIONS)])
    seen = 0
    while seen < count:
        for message in consumer.consume(num_messages=500, timeout=1.0):
            if message.error() is None:
                seen += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed


def worker_main(a: argparse.Namespace) -> None:
    settings = json.loads(a.settings)
    if a.worker == "produce":
        fn = _produce_sdk if a.client == "sdk" else _produce_confluent
        seconds = fn(settings, a.topic, a.count, b"x" * a.size)
    else:
        fn2 = _consume_sdk if a.client == "sdk" else _consume_confluent
        # The topic holds the warm-up record too.
        seconds = fn2(settings, a.topic, a.count + 1)
    print(json.dumps({"rate": a.count / seconds}))


# ============================================================================ driver


def _secured_cluster(directory: Path, mechanism: str) -> tuple[Any, Path]:
    import trustme
    from cryptography.hazmat.primitives import serialization

    from tools.apache_kafka import ApacheKafkaCluster

    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    ca_file = directory / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), password=None)
    keystore = directory / "broker-keystore.pem"  # Kafka's PEM store reads PKCS#8 keys
    keystore.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()) + b"".join(c.bytes() for c in cert.cert_chain_pems))
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule"
              if mechanism == "PLAIN" else "org.apache.kafka.common.security.scram.ScramLoginModule")
    jaas = f'{module} required user_{USER}="{PASSWORD}";' if mechanism == "PLAIN" \
        else f"{module} required;"
    config = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore),
              "sasl.enabled.mechanisms": mechanism,
              f"listener.name.sasl_ssl.{mechanism.lower()}.sasl.jaas.config": jaas}
    scram = [] if mechanism == "PLAIN" else [f"{mechanism}=[name={USER},password={PASSWORD}]"]
    cluster = ApacheKafkaCluster(1, config=config, listeners={"SASL_SSL": "SASL_SSL"},
                                 scram_users=scram, data_dir=directory / "kafka")
    cluster.start_all()
    return cluster, ca_file


def _create_topic(plaintext: str, topic: str) -> None:
    from sdk import AdminClient
    from sdk.types import NewTopic

    with AdminClient(bootstrap_servers=plaintext) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).raise_if_failed()
        for _ in range(100):
            if topic in admin.list_topics():
                return
            time.sleep(0.1)


def _run(a: argparse.Namespace, worker: str, client: str, settings: dict[str, Any],
         topic: str, count: int, size: int) -> float | None:
    cmd = [sys.executable, __file__, "--worker", worker, "--client", client, "--topic", topic,
           "--count", str(count), "--size", str(size), "--settings", json.dumps(settings)]
    try:
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        print(f"  {worker} {client}: timed out", file=sys.stderr)
        return None
    if out.returncode != 0:
        print(f"  {worker} {client} failed: {out.stderr[-800:]}", file=sys.stderr)
        return None
    return float(json.loads(out.stdout.strip().splitlines()[-1])["rate"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="1 round, 1/4 of the records")
    parser.add_argument("--cases", default="100:200000,1000:100000", metavar="SIZE:COUNT,...")
    parser.add_argument("--mechanism", default="PLAIN",
                        choices=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
    parser.add_argument("--json", default=None, help="write all results to this file")
    parser.add_argument("--worker", choices=["produce", "consume"], help=argparse.SUPPRESS)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--settings", help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.worker:
        worker_main(a)
        return
    rounds = 1 if a.quick else a.rounds
    cases = [(int(s), int(n) // (4 if a.quick else 1))
             for s, n in (c.split(":") for c in a.cases.split(","))]
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="security-bench-") as tmp:
        cluster, ca_file = _secured_cluster(Path(tmp), a.mechanism)
        try:
            settings = {
                "PLAINTEXT": {"bootstrap.servers": cluster.bootstrap_servers},
                "SASL_SSL": {"bootstrap.servers": cluster.listener_bootstrap("SASL_SSL"),
                             "security.protocol": "SASL_SSL", "ssl.ca.location": str(ca_file),
                             "sasl.mechanisms": a.mechanism, "sasl.username": USER,
                             "sasl.password": PASSWORD},
            }
            plaintext = cluster.bootstrap_servers
            # Warm the broker's JIT (untimed).
            warm = f"warm-{uuid.uuid4().hex[:6]}"
            _create_topic(plaintext, warm)
            _run(a, "produce", "confluent", settings["PLAINTEXT"], warm, 50_000, 100)
            print(f"Apache Kafka 4.3.1, SASL_SSL with {a.mechanism}; {rounds} round(s); "
                  "medians in records/s", flush=True)
            for size, count in cases:
                for r in range(rounds):
                    pairs = [(c, p) for c in CLIENTS for p in PROTOCOLS]
                    pairs = pairs[r % len(pairs):] + pairs[:r % len(pairs)]
                    for client, protocol in pairs:
                        topic = f"bench-{client}-{protocol}-{uuid.uuid4().hex[:6]}"
                        _create_topic(plaintext, topic)
                        rate = _run(a, "produce", client, settings[protocol], topic, count,
                                    size)
                        if rate is not None:
                            results.setdefault(f"produce {size} {client} {protocol}",
                                               []).append(rate)
                            crate = _run(a, "consume", client, settings[protocol], topic,
                                         count, size)
                            if crate is not None:
                                results.setdefault(f"consume {size} {client} {protocol}",
                                                   []).append(crate)
                _report(results, size, count)
        finally:
            cluster.close()
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=2))


def _report(results: dict[str, list[float]], size: int, count: int) -> None:
    print(f"\n{size} B x {count}")
    print(f"  {'':<10}{'client':<11}{'PLAINTEXT':>12}{'SASL_SSL':>12}{'share':>8}")
    for worker in ("produce", "consume"):
        for client in CLIENTS:
            plain = results.get(f"{worker} {size} {client} PLAINTEXT")
            secured = results.get(f"{worker} {size} {client} SASL_SSL")
            if not plain or not secured:
                print(f"  {worker:<10}{client:<11}{'(failed)':>12}")
                continue
            p, s = statistics.median(plain), statistics.median(secured)
            print(f"  {worker:<10}{client:<11}{p:>12,.0f}{s:>12,.0f}{s / p:>7.0%}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
