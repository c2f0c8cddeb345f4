"""Transactions on a cluster: our 3-broker cluster (RF=3, min.insync.replicas=2, acks=all)
against our single node, optionally Apache Kafka's 3-broker cluster, same run, client order
alternating per round.

What the cluster adds to each transaction: every ``__transaction_state`` write waits for
its ISR, the markers go to the partitions' leaders on other brokers (WriteTxnMarkers) and
wait for their ISRs, and each transactional batch is verified with the coordinator by its
partition's leader. Each measurement: a fresh 6-partition topic, ``--records`` records of
100 B in transactions of 100 and 1,000 records (keyless), linger 5 ms, each committed;
then a read_committed consumer (confluent-kafka) checks exactly those records are there.
Clients: our Producer (transactions v2) and confluent-kafka's (v1). Reported: medians of
records/s and transactions/s, and the brokers' CPU seconds per 1,000 records.

    .venv/bin/python bench/cluster_txn_bench.py [--rounds 3] [--records 20000] [--apache]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import uuid
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import broker_bench as bb
from broker_txn_bench import _check
from transactions_bench import confluent_run, sdk_run

SIZES = (100, 1000)
CLIENTS = {"sdk": sdk_run, "confluent": confluent_run}


def measure(broker: bb.BrokerProcess, replication: int, client: str, per_txn: int,
            records: int, results: dict[tuple[str, str, int], list[tuple[float, float]]]
            ) -> None:
    topic = f"ctxn-{client}-{per_txn}-{uuid.uuid4().hex[:8]}"
    config = {"min.insync.replicas": "2"} if replication > 1 else {}
    bb.create_topic(broker.bootstrap, topic, replication, config)
    transactions = max(1, records // per_txn)
    cpu0 = broker.cpu()
    elapsed = CLIENTS[client](broker.bootstrap, topic, per_txn, transactions)
    cpu = broker.cpu() - cpu0
    _check(broker.bootstrap, topic, transactions * per_txn)
    rate = transactions * per_txn / elapsed
    per_k = cpu / (transactions * per_txn) * 1000
    results.setdefault((broker.name, client, per_txn), []).append((rate, per_k))
    print(f"  {broker.name:16s} {client:10s} {per_txn:5d}/txn {rate:9,.0f} rec/s "
          f"{transactions / elapsed:7,.1f} txn/s  broker CPU {per_k:.3f} s/1k rec", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--apache", action="store_true",
                        help="also Apache Kafka's 3-broker cluster (JVMs: CPU-heavy)")
    args = parser.parse_args()
    results: dict[tuple[str, str, int], list[tuple[float, float]]] = {}
    data_dir = Path(tempfile.mkdtemp(prefix="ctxn-bench-"))
    clients = list(CLIENTS)
    try:
        with ExitStack() as stack:
            single = stack.enter_context(bb.ours(data_dir))
            single.name = "server_ref 1 node"
            targets: list[tuple[bb.BrokerProcess, int]] = [(single, 1)]
            ours = stack.enter_context(bb.cluster("server_ref"))
            ours.name = "server_ref 3 RF3"
            targets.append((ours, 3))
            if args.apache:
                theirs = stack.enter_context(bb.cluster("apache"))
                theirs.name = "apache 3 RF3"
                targets.append((theirs, 3))
            for broker, replication in targets:  # untimed warm-up: coordinators, topics
                for client in clients:
                    measure(broker, replication, client, 1000, 2000, {})
            for round_no in range(args.rounds):
                print(f"round {round_no + 1}/{args.rounds}", flush=True)
                order = clients if round_no % 2 == 0 else clients[::-1]
                for broker, replication in targets:
                    for per_txn in SIZES:
                        for client in order:
                            measure(broker, replication, client, per_txn, args.records,
                                    results)
        print("\nmedians: records/s (broker CPU s per 1k records)")
        for broker, _ in targets:
            for per_txn in SIZES:
                cells = []
                for client in clients:
                    runs = results[(broker.name, client, per_txn)]
                    cells.append(f"{client} {statistics.median(r for r, _ in runs):9,.0f} "
                                 f"({statistics.median(c for _, c in runs):.3f})")
                print(f"  {broker.name:16s} {per_txn:5d}/txn  " + "  ".join(cells))
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
