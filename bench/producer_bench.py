"""Producer throughput as users run it: ours (blocking and async faces, per record and in bulk)
against aiokafka, kafka-python, confluent-kafka and Kafka's Java client, on the same broker,
interleaved.

    .venv/bin/python bench/producer_bench.py                       # ref, tansu, apache
    .venv/bin/python bench/producer_bench.py --broker tansu --rounds 3
    .venv/bin/python bench/producer_bench.py --bootstrap-server HOST:PORT --quick
    .venv/bin/python bench/producer_bench.py --broker apache --batch-size 1000000 \
        --clients sdk-sync,sdk-async,confluent,java              # equal batch sizes
    .venv/bin/python bench/producer_bench.py --broker ref --rounds 7 \
        --clients pure-sdk-sync,sdk-sync,pure-sdk-batch,sdk-batch   # pure vs compiled encoding

Per broker (``--broker``, comma separated: ref is our reference broker, tansu with memory
storage, restarted after every round as it never frees memory, apache a single-node Apache
Kafka 4.3.1 from tools/apache_kafka.py, warmed up untimed) and per case (``--cases``:
200k records of 100 B and 100k of 1 KB; ``--acks-list``, ``--codecs``), each client in a
fresh process sends to a new 6-partition topic: one record, waited for, then N keyless
records and a flush. Start-up is constructing the producer to that first acknowledgement
(connecting, metadata, the producer id); steady state is the send of the first of the N to
the acknowledgement of the last (flush), and the process's CPU time per record over that
span. bench/throughput_rounds.py has the clock, the rounds and the table.

Clients, as their users run them:

* ``sdk-sync`` (``Producer.send`` per record), ``sdk-async`` (``await AsyncProducer.send``
  per record), ``sdk-batch`` / ``sdk-async-batch`` (``send_many``): defaults (idempotence
  on with acks=all).
* ``aiokafka`` (``await send`` per record, futures gathered), ``aiokafka-batch``
  (``create_batch`` / ``send_batch`` round-robin over the partitions), ``kafka-python``
  (``send`` per record, crc32c installed): defaults.
* ``confluent``: ``produce`` per record, ``poll(0)`` every 1000 and on a full local queue
  (``BufferError``), as its docs advise; ``partitioner=murmur2_random`` (Java's placement).
* ``java``: ``KafkaProducer.send`` with a callback (bench/java/ThroughputDriver.java, in a
  JVM with the perf-test scripts' options: G1, 512 MB heap); Java's defaults otherwise. Its
  JIT warms up inside the steady state, as in any freshly started Java producer.

Every producer gets the case's acks and codec and ``linger.ms=5`` (Java's default since
Kafka 4.0). Batch sizes are each client's default (16 KB: ours, aiokafka, kafka-python,
Java; 1 MB: confluent-kafka) unless ``--batch-size N`` gives every client the same one, the
comparison the per-record goal is stated at. ``pure-sdk-*`` are ours with
``KAFKA_SDK_PURE_PYTHON=1`` (the pure-Python record loops).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid
from collections.abc import Callable
from typing import Any

import throughput_rounds as shared
from throughput_rounds import LINGER_MS, PARTITIONS, Sample

CLIENTS = ["sdk-sync", "sdk-async", "sdk-batch", "sdk-async-batch", "aiokafka", "aiokafka-batch",
           "kafka-python", "confluent", "java"]
PURE_CLIENTS = {"pure-sdk-sync": "sdk-sync", "pure-sdk-async": "sdk-async",
                "pure-sdk-batch": "sdk-batch", "pure-sdk-async-batch": "sdk-async-batch"}
REFS = ("confluent", "aiokafka")


# ============================================================================ workers
# Each gets the worker's arguments and N records' value and returns Clock.result.


def _batching(a: argparse.Namespace, name: str) -> dict[str, int]:
    """``{name: --batch-size}`` when one batch size is given to every client, else {}."""
    return {name: a.batch_size} if a.batch_size else {}


def _sdk_options(a: argparse.Namespace) -> dict[str, Any]:
    return {"bootstrap_servers": a.bootstrap, "acks": a.acks, "compression_type": a.codec,
            "linger_ms": LINGER_MS, **_batching(a, "batch_size")}


def _sdk_sync(a: argparse.Namespace, value: bytes, bulk: bool) -> dict[str, Any]:
    from sdk import Producer

    clock = shared.Clock()
    with Producer(**_sdk_options(a)) as p:
        p.send(a.topic, value).result(30)
        clock.first()
        if bulk:
            p.send_many(a.topic, [value] * a.count)
        else:
            send = p.send
            for _ in range(a.count):
                send(a.topic, value)
        p.flush()
        return clock.result(a.count)


def _sdk_async(a: argparse.Namespace, value: bytes, bulk: bool) -> dict[str, Any]:
    from sdk import AsyncProducer

    async def run() -> dict[str, Any]:
        clock = shared.Clock()
        async with AsyncProducer(**_sdk_options(a)) as p:
            await p.send_and_wait(a.topic, value)
            clock.first()
            if bulk:
                await p.send_many(a.topic, [value] * a.count)
            else:
                send = p.send
                for _ in range(a.count):
                    await send(a.topic, value)
            await p.flush()
            return clock.result(a.count)

    return asyncio.run(run())


def _aiokafka(a: argparse.Namespace, value: bytes, bulk: bool) -> dict[str, Any]:
    from aiokafka import AIOKafkaProducer

    async def run() -> dict[str, Any]:
        clock = shared.Clock()
        p = AIOKafkaProducer(bootstrap_servers=a.bootstrap,
                             acks="all" if a.acks == "all" else int(a.acks),
                             compression_type=None if a.codec == "none" else a.codec,
                             linger_ms=LINGER_MS, **_batching(a, "max_batch_size"))
        await p.start()
        try:
            await p.send_and_wait(a.topic, value)
            clock.first()
            futures = await (_aiokafka_batches(p, a, value) if bulk else
                             _aiokafka_records(p, a, value))
            await asyncio.gather(*futures)
            return clock.result(a.count)
        finally:
            await p.stop()

    return asyncio.run(run())


async def _aiokafka_records(p: Any, a: argparse.Namespace, value: bytes) -> list[Any]:
    return [await p.send(a.topic, value) for _ in range(a.count)]


async def _aiokafka_batches(p: Any, a: argparse.Namespace, value: bytes) -> list[Any]:
    """aiokafka's bulk API: fill a batch, hand it to the next partition in turn."""
    partitions = sorted(await p.partitions_for(a.topic))
    futures: list[Any] = []
    batch = p.create_batch()
    for _ in range(a.count):
        if batch.append(key=None, value=value, timestamp=None) is None:  # full
            partition = partitions[len(futures) % len(partitions)]
            futures.append(await p.send_batch(batch, a.topic, partition=partition))
            batch = p.create_batch()
            batch.append(key=None, value=value, timestamp=None)
    partition = partitions[len(futures) % len(partitions)]
    futures.append(await p.send_batch(batch, a.topic, partition=partition))
    return futures


def _kafka_python(a: argparse.Namespace, value: bytes, bulk: bool) -> dict[str, Any]:
    from kafka import KafkaProducer

    clock = shared.Clock()
    p = KafkaProducer(bootstrap_servers=a.bootstrap,
                      acks="all" if a.acks == "all" else int(a.acks),
                      compression_type=None if a.codec == "none" else a.codec,
                      linger_ms=LINGER_MS, **_batching(a, "batch_size"))
    try:
        p.send(a.topic, value).get(30)
        clock.first()
        send = p.send
        for _ in range(a.count):
            send(a.topic, value)
        p.flush()
        return clock.result(a.count)
    finally:
        p.close()


def _confluent(a: argparse.Namespace, value: bytes, bulk: bool) -> dict[str, Any]:
    from confluent_kafka import KafkaException, Producer

    failed: list[Any] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failed.append(error)

    clock = shared.Clock()
    p = Producer({"bootstrap.servers": a.bootstrap, "acks": a.acks, "linger.ms": LINGER_MS,
                  "compression.type": a.codec, "partitioner": "murmur2_random",
                  "delivery.report.only.error": True, "on_delivery": delivered,
                  **_batching(a, "batch.size")})
    p.produce(a.topic, value)
    if p.flush(30):
        raise RuntimeError("the first record was not acknowledged in 30 s")
    clock.first()
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
    if p.flush(120):
        raise RuntimeError("records left unacknowledged after 120 s")
    result = clock.result(a.count)
    if failed:
        raise KafkaException(failed[0])
    return result


WORKERS: dict[str, tuple[Callable[[argparse.Namespace, bytes, bool], dict[str, Any]], bool]] = {
    "sdk-sync": (_sdk_sync, False), "sdk-batch": (_sdk_sync, True),
    "sdk-async": (_sdk_async, False), "sdk-async-batch": (_sdk_async, True),
    "aiokafka": (_aiokafka, False), "aiokafka-batch": (_aiokafka, True),
    "kafka-python": (_kafka_python, False), "confluent": (_confluent, False),
}


def worker_main(a: argparse.Namespace) -> None:
    work, bulk = WORKERS[a.worker]
    result = work(a, b"x" * a.size, bulk)
    if a.worker.startswith("sdk"):
        from sdk.records import fast_path

        result["path"] = fast_path.IMPLEMENTATION
    print(json.dumps(result))


# ============================================================================ driver


def run_client(broker: shared.Broker, client: str, count: int, size: int, acks: str, codec: str,
               batch_size: int | None) -> Sample:
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    shared.create_topic(broker.bootstrap, topic)
    timeout_s = max(120, count / 5000)
    if client == "java":
        return shared.run_java(["produce", broker.bootstrap, topic, str(count), str(size), acks, codec,
                         str(LINGER_MS), str(batch_size or 0)], timeout_s)
    worker = PURE_CLIENTS.get(client, client)
    argv = [__file__, "--worker", worker, "--bootstrap-server", broker.bootstrap, "--topic",
            topic, "--count", str(count), "--size", str(size), "--acks", acks, "--codec", codec]
    if batch_size:
        argv += ["--batch-size", str(batch_size)]
    result = shared.run_python(argv, shared.worker_env(pure=client in PURE_CLIENTS), timeout_s)
    want = "pure" if client in PURE_CLIENTS else "compiled"
    if "path" in result and result["path"] != want:
        print(f"  note: {client} ran the {result['path']} record loops", flush=True)
    return Sample.parse(result)


def measure_case(broker: shared.Broker, clients: list[str], rounds: int, size: int, count: int,
                 acks: str, codec: str, batch_size: int | None) -> dict[str, list[Sample]]:
    samples: dict[str, list[Sample]] = {c: [] for c in clients}
    last_round = 0
    for round_no, client in shared.rotations(clients, rounds):
        if round_no != last_round:
            broker.free_memory()
            last_round = round_no
        label = f"  {broker.kind} {size:>5} B acks={acks} {codec} round {round_no + 1} {client:<16}"
        try:
            sample = run_client(broker, client, count, size, acks, codec, batch_size)
        except RuntimeError as exc:
            print(f"{label} failed: {exc}", flush=True)
            continue
        samples[client].append(sample)
        print(f"{label} {sample.rate:>10,.0f} rec/s  {sample.cpu_us:5.2f} µs CPU/rec  "
              f"start-up {sample.startup_s:5.2f} s", flush=True)
    broker.free_memory()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--broker", default="ref,tansu,apache",
                        help="comma separated, of ref, tansu, apache (default: %(default)s)")
    parser.add_argument("--bootstrap-server", default=None, help="use a running broker")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="1 round, 1/4 of the records")
    parser.add_argument("--clients", default=",".join(CLIENTS),
                        help="comma separated (default: %(default)s; also "
                             + ", ".join(PURE_CLIENTS) + ")")
    parser.add_argument("--cases", default="100:200000,1000:100000",
                        help="size:count pairs, comma separated (default: %(default)s)")
    parser.add_argument("--acks-list", default="all", help="default: %(default)s")
    parser.add_argument("--codecs", default="none", help="default: %(default)s")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="give every client this batch size (bytes) instead of its own "
                             "default (16 KB; 1 MB for confluent-kafka)")
    parser.add_argument("--json", default=None, help="write every sample to this file")
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
    kinds = ["given"] if a.bootstrap_server else shared.parse_brokers(a.broker)
    clients, kinds = shared.without_java(clients, kinds)
    results: list[dict[str, Any]] = []
    for kind in kinds:
        with shared.started(kind, a.bootstrap_server or "") as broker:
            for size, count in cases:
                count = count // 4 if a.quick else count
                for acks in a.acks_list.split(","):
                    for codec in a.codecs.split(","):
                        samples = measure_case(broker, clients, rounds, size, count, acks,
                                               codec, a.batch_size)
                        results.append({"broker": kind, "size": size, "count": count,
                                        "acks": acks, "codec": codec,
                                        "batch_size": a.batch_size, "samples": samples})
    batches = f"batch size {a.batch_size} B for all" if a.batch_size else "default batch sizes"
    print(f"\n{PARTITIONS} partitions, linger.ms={LINGER_MS}, {batches}; median "
          f"(lowest-highest) of {rounds} interleaved rounds; steady = first record sent to the "
          f"last acknowledged; CPU = client process user+sys per record over the steady "
          f"state; start-up = producer created to the first record acknowledged")
    for case in results:
        print(f"\n{case['broker']}, {case['size']} B x {case['count']}, acks={case['acks']}, "
              f"{case['codec']}")
        for line in shared.table(case["samples"], case["size"], REFS):
            print(line)
    shared.write_json(a.json, results)


if __name__ == "__main__":
    main()
