"""Transactional producer throughput: our Producer against confluent-kafka's and Kafka's
Java client, on our reference broker and on Apache Kafka 4.3.1 (one combined node), same
run, client order alternating per round.

Each measurement: a fresh 6-partition topic, ``--records`` records of 100 B sent in
transactions of 100, 1,000 and 10,000 records (keyless, placed by each client's default
partitioner; ``--explicit-partitions`` sends them round-robin with an explicit partition,
which takes our producer's general path instead of its staged fast path), linger 5 ms,
each committed; the clock runs from the first begin to the last commit. A
read_committed consumer (confluent-kafka) then checks that exactly those records are
there. Reported: medians of records/s and transactions/s.

The Java client is ``bench/java/TxnDriver.java``, compiled with ``javac`` against the cached
Apache Kafka jars (``tools/apache_kafka.py``) on first use into the cache next to them; one
JVM per measurement with ``kafka-run-class.sh``'s options (``java_peers``). It warms up
in-process (5 untimed transactions of 1,000 records to another topic, same producer) and
times the same span as the Python clients; JVM start-up is outside the clock. Both brokers
finalize transaction.version 2, so the Java client and ours speak transactions v2 (no
AddPartitionsToTxn, an epoch bump per EndTxn); confluent-kafka (librdkafka) speaks v1.

    .venv/bin/python bench/transactions_bench.py [--rounds 3] [--records 20000]
        [--brokers ref,apache] [--clients sdk,confluent,java] [--explicit-partitions]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import broker_bench as bb
import java_peers
from broker_txn_bench import _check
from peer_loops import confluent_produce

SIZES = (100, 1000, 10_000)
VALUE = os.urandom(100)
EXPLICIT = False  # --explicit-partitions


def sdk_run(bootstrap: str, topic: str, per_txn: int, transactions: int) -> float:
    from sdk import Producer

    with Producer(bootstrap_servers=bootstrap, linger_ms=5,
                  transactional_id=f"bench-{uuid.uuid4().hex[:8]}") as p:
        p.init_transactions(timeout=60)
        send = p.send
        started = time.perf_counter()
        for t in range(transactions):
            p.begin_transaction()
            base = t * per_txn
            if EXPLICIT:
                for i in range(per_txn):
                    send(topic, VALUE, partition=(base + i) % bb.PARTITIONS)
            else:
                for _ in range(per_txn):
                    send(topic, VALUE)
            p.commit_transaction(timeout=120)
        return time.perf_counter() - started


def confluent_run(bootstrap: str, topic: str, per_txn: int, transactions: int) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                  "transactional.id": f"bench-{uuid.uuid4().hex[:8]}"})
    p.init_transactions(60)
    started = time.perf_counter()
    for t in range(transactions):
        p.begin_transaction()
        confluent_produce(p, topic, VALUE, per_txn, poll_s=0.005,
                          partitions=bb.PARTITIONS if EXPLICIT else 0, first=t * per_txn)
        p.commit_transaction(120)
    return time.perf_counter() - started


JAVA_SOURCE = Path(__file__).resolve().parent / "java" / "TxnDriver.java"
_RESULT = re.compile(r"^RESULT records=(\d+) seconds=([\d.]+)", re.M)


def java_driver() -> list[str]:
    """The argv that runs TxnDriver with the perf tools' JVM options."""
    return java_peers.java_driver_argv(JAVA_SOURCE)


def java_run(bootstrap: str, topic: str, per_txn: int, transactions: int) -> float:
    warm_topic = f"{topic}-warm"
    bb.create_topic(bootstrap, warm_topic)
    argv = [*java_driver(), bootstrap, topic, str(transactions * per_txn), str(per_txn),
            str(len(VALUE)), str(EXPLICIT).lower(), str(bb.PARTITIONS), warm_topic]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    match = _RESULT.search(out.stdout)
    if out.returncode != 0 or match is None:
        detail = (out.stderr.strip() or out.stdout.strip()).splitlines()[-3:]
        raise RuntimeError(f"TxnDriver exit {out.returncode}: {' | '.join(detail)}")
    return float(match[2])


CLIENTS: dict[str, Callable[[str, str, int, int], float]] = {
    "sdk": sdk_run, "confluent": confluent_run, "java": java_run}


def measure(broker: bb.BrokerProcess, client: str, per_txn: int, records: int,
            results: dict[tuple[str, str, int], list[float]]) -> None:
    topic = f"txn-bench-{client}-{per_txn}-{uuid.uuid4().hex[:8]}"
    bb.create_topic(broker.bootstrap, topic)
    transactions = max(1, records // per_txn)
    elapsed = CLIENTS[client](broker.bootstrap, topic, per_txn, transactions)
    _check(broker.bootstrap, topic, transactions * per_txn)
    rate = transactions * per_txn / elapsed
    results.setdefault((broker.name, client, per_txn), []).append(rate)
    print(f"  {broker.name:10s} {client:10s} {per_txn:6d}/txn {rate:10,.0f} rec/s "
          f"{transactions / elapsed:8,.1f} txn/s", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=20_000,
                        help="records per measurement (at least one transaction)")
    parser.add_argument("--brokers", default="ref,apache")
    parser.add_argument("--clients", default="sdk,confluent,java")
    parser.add_argument("--explicit-partitions", action="store_true")
    args = parser.parse_args()
    global EXPLICIT
    EXPLICIT = args.explicit_partitions
    clients = args.clients.split(",")
    wanted = args.brokers.split(",")
    missing_java = java_peers.unavailable() if ("apache" in wanted or "java" in clients) \
        else None
    if missing_java is not None:
        print(f"apache broker and Java client: unavailable ({missing_java})", file=sys.stderr)
        if "apache" in wanted:
            wanted.remove("apache")
        if "java" in clients:
            clients.remove("java")
    results: dict[tuple[str, str, int], list[float]] = {}
    data_dir = Path(tempfile.mkdtemp(prefix="txn-bench-"))
    try:
        brokers: list[bb.BrokerProcess] = []
        from contextlib import ExitStack

        with ExitStack() as stack:
            if "ref" in wanted:
                brokers.append(stack.enter_context(bb.ours(data_dir)))
            if "apache" in wanted:
                brokers.append(stack.enter_context(bb.apache()))
            for broker in brokers:  # untimed: coordinators, connections and JIT warmed up
                for client in clients:
                    measure(broker, client, 1000, 5000, {})
            for round_no in range(args.rounds):
                print(f"round {round_no + 1}/{args.rounds}", flush=True)
                order = clients if round_no % 2 == 0 else clients[::-1]
                for broker in brokers:
                    for per_txn in SIZES:
                        for client in order:
                            measure(broker, client, per_txn, args.records, results)
        print("\nmedians: records/s")
        for broker in brokers:
            for per_txn in SIZES:
                cells = [f"{client} {statistics.median(results[(broker.name, client, per_txn)]):10,.0f}"
                         for client in clients]
                print(f"  {broker.name:10s} {per_txn:6d}/txn  " + "  ".join(cells))
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
