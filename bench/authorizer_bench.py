"""What the reference broker's authorizer costs: produce and consume throughput with and
without ``authorizer.class.name``, same run, and the cost of one decision.

    .venv/bin/python bench/authorizer_bench.py                 # 100k records, 5 rounds
    .venv/bin/python bench/authorizer_bench.py --count 200000 --rounds 3

Two brokers (``python -m server_ref``) run side by side: one without an authorizer, one
with Kafka's StandardAuthorizer settings, no super user, and ALLOW ALL bindings for
User:ANONYMOUS on every topic, group and the cluster, so every request of the PLAINTEXT
client goes through the per-API rules and the decision cache. Each round, on each broker
in turn: a new 6-partition topic, N records of 100 B produced by confluent-kafka (acks=1,
linger.ms=5, until flushed), then read back from the beginning with a manual assignment.
Medians of the rounds are printed (messages per second). The decision figures time
``Authorizer.authorize`` for a cached decision and ``_decide`` over 1000 literal and 50
prefixed topic bindings (the cache misses after every ACL change).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from peer_loops import confluent_produce  # noqa: E402

from sdk import AclBinding, AdminClient, NewTopic, ResourcePattern, ResourceType  # noqa: E402
from server_ref.security.acls import AclEntry, AclStore  # noqa: E402
from server_ref.security.authorizer import STANDARD_AUTHORIZER, Authorizer  # noqa: E402

PARTITIONS = 6


def start_broker(config: list[str]) -> tuple[subprocess.Popen[str], str]:
    args = [sys.executable, "-m", "server_ref", "--port", "0", "--data-dir",
            tempfile.mkdtemp(prefix="authz-bench-")]
    for item in config:
        args += ["--config", item]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "bootstrap_servers=" not in line:
        proc.kill()
        raise SystemExit(f"broker did not start: {line!r}")
    return proc, line.split("bootstrap_servers=")[1].split()[0]


def open_everything(bootstrap: str) -> None:
    every = [AclBinding(ResourcePattern(ResourceType.TOPIC, "*"), "User:ANONYMOUS"),
             AclBinding(ResourcePattern(ResourceType.GROUP, "*"), "User:ANONYMOUS"),
             AclBinding(ResourcePattern(ResourceType.CLUSTER, "kafka-cluster"),
                        "User:ANONYMOUS")]
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_acls(every).raise_if_failed()


def one_round(bootstrap: str, count: int) -> tuple[float, float]:
    topic = f"authz-{uuid.uuid4().hex[:8]}"
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).raise_if_failed()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5})
    value = b"x" * 100
    start = time.perf_counter()
    confluent_produce(producer, topic, value, count)
    producer.flush(120)
    produced = count / (time.perf_counter() - start)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "authz-bench",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got, start = 0, time.perf_counter()
    while got < count:
        got += sum(1 for m in consumer.consume(10000, 0.05) if m.error() is None)
    consumed = count / (time.perf_counter() - start)
    consumer.close()
    return produced, consumed


def decision_costs() -> tuple[float, float]:
    store = AclStore(Path(tempfile.mkdtemp(prefix="authz-acls-")))
    store.load()
    store.add([AclEntry(2, "*", 3, "User:ANONYMOUS", "*", 2, 3)]
              + [AclEntry(2, f"t{i}", 3, f"User:u{i}", "*", 3, 3) for i in range(1000)]
              + [AclEntry(2, f"p{i}-", 4, f"User:u{i}", "*", 3, 3) for i in range(50)])
    az = Authorizer(store)
    az.authorize("User:ANONYMOUS", "127.0.0.1", 4, 2, "orders")
    n = 500_000
    cached = timeit.timeit(lambda: az.authorize("User:ANONYMOUS", "127.0.0.1", 4, 2,
                                                "orders"), number=n) / n
    m = 20_000
    fresh = timeit.timeit(lambda: az._decide("User:ANONYMOUS", "127.0.0.1", 4, 2, "orders"),
                          number=m) / m
    return cached, fresh


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    plain, plain_boot = start_broker([])
    # allow.everyone lets the first bindings be created; after them every topic, group
    # and the cluster have ACLs, so it no longer applies.
    secured, secured_boot = start_broker([f"authorizer.class.name={STANDARD_AUTHORIZER}",
                                          "allow.everyone.if.no.acl.found=true"])
    results: dict[str, list[tuple[float, float]]] = {"no authorizer": [], "authorizer": []}
    try:
        open_everything(secured_boot)
        one_round(plain_boot, args.count // 10)  # warm-up
        one_round(secured_boot, args.count // 10)
        for _ in range(args.rounds):
            results["no authorizer"].append(one_round(plain_boot, args.count))
            results["authorizer"].append(one_round(secured_boot, args.count))
    finally:
        plain.terminate()
        secured.terminate()
    for name, runs in results.items():
        print(f"{name:14s} produce {statistics.median(r[0] for r in runs):>10,.0f} msg/s"
              f"   consume {statistics.median(r[1] for r in runs):>10,.0f} msg/s")
    cached, fresh = decision_costs()
    print(f"one decision: cached {cached * 1e9:.0f} ns; uncached over 1000 literal + 50 "
          f"prefixed topic ACLs {fresh * 1e6:.1f} us")


if __name__ == "__main__":
    main()
