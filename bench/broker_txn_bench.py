"""Transactional throughput of the brokers: confluent-kafka's transactional producer against
our reference broker and against Apache Kafka 4.3.1 (one combined node), same run, rounds
alternating (as bench/broker_bench.py, whose broker processes this reuses).

Each round: a fresh 6-partition topic, ``--records`` records of 100 B in transactions of
100, 1,000 and 10,000 records (round-robin over the partitions, linger 5 ms), each
committed; then a read_committed consumer checks that exactly those records are there.
Reported: medians of records/s and transactions/s, and the broker's CPU seconds.

    .venv/bin/python bench/broker_txn_bench.py [--rounds 3] [--records 100000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import broker_bench as bb
import java_peers
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

SIZES = (100, 1000, 10000)


def run(broker: bb.BrokerProcess, per_txn: int, records: int) -> None:
    topic = f"txn-bench-{per_txn}-{uuid.uuid4().hex[:8]}"
    bb.create_topic(broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5,
                         "transactional.id": f"bench-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(60)
    value = os.urandom(100)
    transactions = records // per_txn
    cpu0 = bb.cpu_seconds(broker.pid)
    started = time.perf_counter()
    for t in range(transactions):
        producer.begin_transaction()
        for i in range(per_txn):
            while True:
                try:
                    producer.produce(topic, value, partition=(t * per_txn + i) % bb.PARTITIONS)
                    break
                except BufferError:
                    producer.poll(0.005)
        producer.commit_transaction(120)
    elapsed = time.perf_counter() - started
    cpu = bb.cpu_seconds(broker.pid) - cpu0
    _check(broker.bootstrap, topic, transactions * per_txn)
    rate = transactions * per_txn / elapsed
    broker.results.setdefault(str(per_txn), []).append((rate, cpu))
    print(f"  {broker.name:10s} {per_txn:6d}/txn  {rate:10,.0f} rec/s "
          f"{transactions / elapsed:8,.1f} txn/s  (broker cpu {cpu:5.2f} s)", flush=True)


def _check(bootstrap: str, topic: str, expected: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"c-{uuid.uuid4()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(bb.PARTITIONS)])
    got = 0
    deadline = time.monotonic() + 120
    try:
        while got < expected and time.monotonic() < deadline:
            got += sum(1 for m in consumer.consume(10000, 0.5) if not m.error())
    finally:
        consumer.close()
    if got != expected:
        raise RuntimeError(f"read_committed saw {got} records of {expected}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=100_000,
                        help="records per size and round (default: %(default)s)")
    args = parser.parse_args()
    missing = java_peers.unavailable()
    if missing is not None:
        print(f"apache broker: unavailable ({missing})", file=sys.stderr)
        return 2
    data_dir = Path(tempfile.mkdtemp(prefix="broker-txn-bench-"))
    try:
        with bb.ours(data_dir) as reference, bb.apache() as other:
            for broker in (reference, other):  # untimed: coordinators and JIT warmed up
                run(broker, 1000, 20_000)
                broker.results.clear()
            for round_no in range(args.rounds):
                print(f"round {round_no + 1}/{args.rounds}", flush=True)
                for per_txn in SIZES:
                    pair = (reference, other) if round_no % 2 == 0 else (other, reference)
                    for broker in pair:
                        run(broker, per_txn, args.records)
            print("\nmedians: records/s (broker cpu s)")
            for per_txn in SIZES:
                key = str(per_txn)
                cells = []
                for broker in (reference, other):
                    rate = statistics.median(r for r, _ in broker.results[key])
                    cpu = statistics.median(c for _, c in broker.results[key])
                    cells.append(f"{broker.name} {rate:10,.0f} ({cpu:5.2f} s)")
                print(f"  {per_txn:6d}/txn  " + "  ".join(cells))
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
