"""Consumer throughput as users run it: ours (blocking and async faces) against aiokafka,
kafka-python, confluent-kafka and Kafka's Java client, on the same broker, interleaved.

    .venv/bin/python bench/consumer_bench.py                          # ref, tansu, apache
    .venv/bin/python bench/consumer_bench.py --broker tansu --rounds 3 --modes group
    .venv/bin/python bench/consumer_bench.py --bootstrap 127.0.0.1:9092   # a running broker
    .venv/bin/python bench/consumer_bench.py --baseline /tmp/old --clients \
        base-sync,ours-sync,base-async,ours-async,aiokafka     # before/after, interleaved
    .venv/bin/python bench/consumer_bench.py --broker ref --rounds 7 \
        --clients pure-sync,ours-sync,pure-async,ours-async    # pure vs compiled decode

Per broker (``--broker``, comma separated: ref is our reference broker, tansu with memory
storage, apache a single-node Apache Kafka 4.3.1 from tools/apache_kafka.py, warmed up
untimed) and per size (200k records of 100 B, 100k of 1 KB), a topic of 6 partitions is
filled once by confluent-kafka; then in each round every client reads it all from the
beginning, once with assigned partitions (``assign``: no group) and once as a member of a
fresh consumer group (``group``: subscribe, each broker's default join, with
``group.initial.rebalance.delay.ms`` of 3 s on ref and apache), each run in a fresh process.
Each client reports its start-up (constructing the consumer to the first record delivered:
connecting, metadata, the group join, offsets) and its steady state (first record to last:
the rate of the records after its first poll, and the process's CPU time per record over
that span); bench/throughput_rounds.py has the clock, the rounds and the table.

Clients, tuned as their users tune them for throughput:

* ``ours-sync`` (``Consumer.poll``), ``ours-async`` (``AsyncConsumer.getmany``): defaults.
* ``aiokafka`` (``getmany``), ``kafka-python`` (``poll``): defaults (kafka-python with
  crc32c installed, as its docs advise).
* ``confluent``: ``consume(num_messages=500)`` (the batch call: per-message ``poll`` is
  slower) and ``fetch.queue.backoff.ms=10`` (its default of 1000 pauses fetching for a
  second whenever 100k messages are queued; PEERS.md).
* ``java``: ``KafkaConsumer.poll`` with Java's defaults (bench/java/ThroughputDriver.java,
  in a JVM with the perf-test scripts' options: G1, 512 MB heap; its JIT warms up inside the
  steady state, as in any freshly started Java consumer).

Every client starts from the earliest offset (``auto.offset.reset=earliest``); group members
keep their default auto-commit. ``pure-sync`` and ``pure-async`` are ours with
``KAFKA_SDK_PURE_PYTHON=1``; ``base-*`` are ours from ``--baseline``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import uuid
from collections.abc import Callable
from typing import Any

import throughput_rounds as shared
from throughput_rounds import PARTITIONS, Sample

CLIENTS = ["ours-sync", "ours-async", "aiokafka", "kafka-python", "confluent", "java"]
MODES = ("assign", "group")
SIZES = {100: 200_000, 1000: 100_000}
REFS = ("aiokafka", "confluent")
BASELINE_CLIENTS = {"base-sync": "ours-sync", "base-async": "ours-async"}
PURE_CLIENTS = {"pure-sync": "ours-sync", "pure-async": "ours-async"}


# ============================================================================ workers
# Each gets (bootstrap, topic, count, group id or None to assign every partition) and returns
# its Tally's result: the clock starts just before the consumer is made; imports are left out.


def work_ours_sync(bootstrap: str, topic: str, count: int, group: str | None) -> dict[str, Any]:
    from sdk import Consumer, TopicPartition

    tally = shared.Tally(shared.Clock(), count)
    consumer = Consumer(bootstrap_servers=bootstrap, group_id=group,
                        auto_offset_reset="earliest")
    if group:
        consumer.subscribe([topic])
    else:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    while tally.add(sum(map(len, consumer.poll(timeout_ms=1000).values()))):
        pass
    consumer.close()
    return tally.result()


def work_ours_async(bootstrap: str, topic: str, count: int, group: str | None) -> dict[str, Any]:
    from sdk import AsyncConsumer, TopicPartition

    async def run() -> dict[str, Any]:
        tally = shared.Tally(shared.Clock(), count)
        consumer = AsyncConsumer(bootstrap_servers=bootstrap, group_id=group,
                                 auto_offset_reset="earliest")
        await consumer.start()
        if group:
            consumer.subscribe([topic])
        else:
            consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])

        while tally.add(sum(map(len, (await consumer.getmany(timeout_ms=1000)).values()))):
            pass
        await consumer.close()
        return tally.result()

    return asyncio.run(run())


def work_aiokafka(bootstrap: str, topic: str, count: int, group: str | None) -> dict[str, Any]:
    import aiokafka

    async def run() -> dict[str, Any]:
        tally = shared.Tally(shared.Clock(), count)
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                             auto_offset_reset="earliest")
        await consumer.start()
        if group:
            consumer.subscribe([topic])
        else:
            consumer.assign([aiokafka.TopicPartition(topic, p) for p in range(PARTITIONS)])

        while tally.add(sum(map(len, (await consumer.getmany(timeout_ms=1000)).values()))):
            pass
        await consumer.stop()
        return tally.result()

    return asyncio.run(run())


def work_kafka_python(bootstrap: str, topic: str, count: int,
                      group: str | None) -> dict[str, Any]:
    import kafka

    tally = shared.Tally(shared.Clock(), count)
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                   auto_offset_reset="earliest")
    if group:
        consumer.subscribe([topic])
    else:
        consumer.assign([kafka.TopicPartition(topic, p) for p in range(PARTITIONS)])
    while tally.add(sum(map(len, consumer.poll(timeout_ms=1000).values()))):
        pass
    consumer.close()
    return tally.result()


def work_confluent(bootstrap: str, topic: str, count: int, group: str | None) -> dict[str, Any]:
    import confluent_kafka as ck

    tally = shared.Tally(shared.Clock(), count)
    # librdkafka needs a group id even to assign; an assigning run never joins it
    consumer = ck.Consumer({"bootstrap.servers": bootstrap,
                            "group.id": group or f"bench-assign-{os.getpid()}",
                            "enable.auto.commit": bool(group), "auto.offset.reset": "earliest",
                            "fetch.queue.backoff.ms": 10})
    if group:
        consumer.subscribe([topic])
    else:
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING)
                         for p in range(PARTITIONS)])

    while True:
        batch = consumer.consume(num_messages=500, timeout=1.0)
        for message in batch:
            if message.error() is not None:
                raise RuntimeError(f"confluent: {message.error()}")
        if not tally.add(len(batch)):
            break
    consumer.close()
    return tally.result()


WORKERS: dict[str, Callable[[str, str, int, str | None], dict[str, Any]]] = {
    "ours-sync": work_ours_sync,
    "ours-async": work_ours_async,
    "aiokafka": work_aiokafka,
    "kafka-python": work_kafka_python,
    "confluent": work_confluent,
}


# ============================================================================ driver


def fill_topic(bootstrap: str, topic: str, size: int, count: int) -> None:
    import confluent_kafka as ck

    shared.create_topic(bootstrap, topic)
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


def run_client(client: str, bootstrap: str, topic: str, count: int, mode: str,
               baseline: str | None) -> Sample:
    group = f"bench-{client}-{uuid.uuid4().hex[:8]}" if mode == "group" else None
    if client == "java":
        return shared.run_java(["consume", bootstrap, topic, str(count), str(PARTITIONS),
                         group or "-"], timeout_s=600)
    worker, pythonpath = client, None
    if client in BASELINE_CLIENTS:
        if baseline is None:
            raise SystemExit(f"{client} needs --baseline DIR (a tree holding sdk/)")
        worker, pythonpath = BASELINE_CLIENTS[client], baseline
    worker = PURE_CLIENTS.get(worker, worker)
    env = shared.worker_env(pythonpath, pure=client in PURE_CLIENTS)
    result = shared.run_python([__file__, "--worker", worker, "--bootstrap", bootstrap, "--topic",
                         topic, "--count", str(count), "--group", group or ""], env, 600)
    want = "pure" if client in PURE_CLIENTS else "compiled"
    if worker.startswith("ours") and not baseline and result.get("path") not in (want, None):
        print(f"  note: {client} ran the {result.get('path')} record loop", flush=True)
    return Sample.parse(result)


def worker_main(args: argparse.Namespace) -> None:
    result = WORKERS[args.worker](args.bootstrap, args.topic, args.count, args.group or None)
    if args.worker.startswith("ours"):
        try:  # which record loop ran (a --baseline tree may predate sdk.records.fast_path)
            from sdk.records import fast_path
            result["path"] = fast_path.IMPLEMENTATION
        except ImportError:
            pass
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--broker", default="ref,tansu,apache",
                        help="comma separated, of ref, tansu, apache (default: %(default)s)")
    parser.add_argument("--bootstrap", help="use this running broker instead")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", default=",".join(MODES),
                        help="assign, group or both (default: %(default)s)")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)),
                        help="record sizes, of 100 and 1000 (default: %(default)s)")
    parser.add_argument("--clients", default=",".join(CLIENTS),
                        help="comma separated (default: %(default)s; also pure-sync, "
                             "pure-async, and base-sync, base-async with --baseline)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply record counts")
    parser.add_argument("--baseline", help="a directory holding another sdk/ (e.g. an older "
                        "checkout) for the base-sync and base-async clients")
    parser.add_argument("--json", help="write every sample to this file")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--group", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker_main(args)
        return

    clients = [c for c in args.clients.split(",") if c]
    known = CLIENTS + list(BASELINE_CLIENTS) + list(PURE_CLIENTS)
    unknown = sorted(set(clients) - set(known))
    if unknown:
        parser.error(f"unknown clients {unknown}; choose from {known}")
    modes = [m for m in args.modes.split(",") if m]
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if set(modes) - set(MODES) or set(sizes) - set(SIZES):
        parser.error(f"--modes from {MODES}, --sizes from {list(SIZES)}")
    kinds = ["given"] if args.bootstrap else shared.parse_brokers(args.broker)
    clients, kinds = shared.without_java(clients, kinds)
    cases: list[dict[str, Any]] = []
    for kind in kinds:
        with shared.started(kind, args.bootstrap or "") as broker:
            for size in sizes:
                cases += measure_size(broker, size, clients, modes, args)
    print(f"\n{PARTITIONS} partitions; median (lowest-highest) of {args.rounds} interleaved "
          f"rounds; steady = first record to last; CPU = client process user+sys per record "
          f"over the steady state; start-up = consumer created to first record")
    for case in cases:
        print(f"\n{case['broker']}, {case['size']} B x {case['count']}, {case['mode']}")
        for line in shared.table(case["samples"], case["size"], REFS):
            print(line)
    shared.write_json(args.json, cases)


def measure_size(broker: shared.Broker, size: int, clients: list[str], modes: list[str],
                 args: argparse.Namespace) -> list[dict[str, Any]]:
    """Fill one topic, then interleaved rounds of every (client, mode)."""
    count = max(1000, int(SIZES[size] * args.scale))
    topic = f"consumer-bench-{size}b-{uuid.uuid4().hex[:8]}"
    fill_topic(broker.bootstrap, topic, size, count)
    samples: dict[str, dict[str, list[Sample]]] = {m: {c: [] for c in clients} for m in modes}
    runs = [(c, m) for m in modes for c in clients]
    for round_no, run in shared.rotations([f"{c}/{m}" for c, m in runs], args.rounds):
        client, mode = run.split("/")
        try:
            sample = run_client(client, broker.bootstrap, topic, count, mode, args.baseline)
        except RuntimeError as exc:
            print(f"  {broker.kind} {size:>5} B round {round_no + 1} {run:<20} failed: {exc}",
                  flush=True)
            continue
        samples[mode][client].append(sample)
        print(f"  {broker.kind} {size:>5} B round {round_no + 1} {run:<20} "
              f"{sample.rate:>10,.0f} rec/s  {sample.cpu_us:5.2f} µs CPU/rec  "
              f"start-up {sample.startup_s:5.2f} s", flush=True)
    return [{"broker": broker.kind, "size": size, "count": count, "mode": mode,
             "samples": samples[mode]} for mode in modes]


if __name__ == "__main__":
    main()
