"""Share-consumer throughput: 1, 2 and 4 members of one share group reading ONE partition,
on our reference broker and on Apache Kafka 4.3.1 (one combined node), same run.

Queue semantics scale past the partition count: every member acquires its own records of
the same partition. Each measurement: a fresh one-partition topic holding ``--records``
records of 100 B (written first by our Producer), a fresh group reading from the earliest
offset (group config ``share.auto.offset.reset``), N consumer *processes*
(``AsyncShareConsumer``, implicit acknowledgement, ``max.poll.records`` 500), started
together; the clock runs from the moment all of them have joined and been assigned the
partition until they have been handed ``--records`` records between them (every poll acknowledges the previous one, so
the broker's work per record — acquire, lock, acknowledge, journal — is all counted).
Reported: records/s (median of ``--rounds``) and how many records were delivered more than
once (at-least-once: none expected without failures or lock timeouts).

    .venv/bin/python bench/share_bench.py [--rounds 1] [--records 20000]
        [--brokers ref,apache] [--consumers 1,2,4]

On a 2-core machine the consumers, the broker and the producer share the two cores:
more consumers than cores measure contention as much as the broker's share coordinator.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
import uuid
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import broker_bench as bb

VALUE = b"x" * 100


def _consumer(bootstrap: str, topic: str, group: str, total: int, counter: Synchronized,
              barrier: Any, seen: Any) -> None:
    from sdk import AsyncShareConsumer

    async def run() -> None:
        async with AsyncShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                      config={"max.poll.records": 500}) as c:
            while not c.assignment():  # joined and assigned: the clock starts after
                await asyncio.sleep(0.01)
            await asyncio.to_thread(barrier.wait)
            offsets: list[int] = []
            while counter.value < total:
                records = await c.poll(200)
                if records:
                    with counter.get_lock():
                        counter.value += len(records)
                    offsets.extend(r.offset for r in records)
            await c.commit_sync()
            seen.put(offsets)

    asyncio.run(run())


def measure(bootstrap: str, consumers: int, records: int) -> tuple[float, int]:
    from sdk import AdminClient, ConfigResource, NewTopic, Producer
    from sdk.admin import ConfigResourceType

    topic, group = f"share-bench-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)]).raise_if_failed()
        admin.alter_configs({ConfigResource(ConfigResourceType.GROUP, group):
                             {"share.auto.offset.reset": "earliest"}}).raise_if_failed()
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        for _ in range(records):
            producer.send(topic, VALUE)
        producer.flush()
    ctx = mp.get_context("spawn")
    counter = ctx.Value("q", 0)
    barrier = ctx.Barrier(consumers + 1)
    seen = ctx.Queue()
    procs = [ctx.Process(target=_consumer, args=(bootstrap, topic, group, records, counter,
                                                 barrier, seen)) for _ in range(consumers)]
    for p in procs:
        p.start()
    barrier.wait(timeout=120)
    started = time.perf_counter()
    deadline = time.monotonic() + 600
    while counter.value < records and time.monotonic() < deadline:
        time.sleep(0.005)
    elapsed = time.perf_counter() - started
    offsets = [o for _ in procs for o in seen.get(timeout=120)]
    for p in procs:
        p.join(60)
    if counter.value < records:
        raise RuntimeError(f"only {counter.value} of {records} records in 600 s")
    return records / elapsed, len(offsets) - len(set(offsets))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--brokers", default="ref,apache")
    parser.add_argument("--consumers", default="1,2,4")
    args = parser.parse_args()
    counts = [int(c) for c in args.consumers.split(",")]
    results: dict[tuple[str, int], list[float]] = {}
    repeats: dict[tuple[str, int], int] = {}
    for broker in args.brokers.split(","):
        if broker == "ref":
            context = bb.ours(Path(tempfile.mkdtemp(prefix="share-bench-")))
        elif broker == "apache":
            context = bb.apache()
        else:
            raise SystemExit(f"unknown broker {broker!r} (ref, apache)")
        with context as running:
            for _ in range(args.rounds):
                for n in counts:
                    rate, twice = measure(running.bootstrap, n, args.records)
                    results.setdefault((broker, n), []).append(rate)
                    repeats[(broker, n)] = repeats.get((broker, n), 0) + twice
                    print(f"{broker:7} {n} consumer(s): {rate:10,.0f} rec/s"
                          f"  (delivered twice: {twice})", flush=True)
    print("\nmedians (records/s), one partition:")
    print(f"{'broker':8}" + "".join(f"{n:>14} cons." for n in counts))
    for broker in args.brokers.split(","):
        print(f"{broker:8}" + "".join(
            f"{statistics.median(results[(broker, n)]):>20,.0f}" for n in counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
