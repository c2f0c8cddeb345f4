"""Tiered storage on the reference broker: upload throughput to the remote tier, and consume
throughput from the remote tier against local reads of the same data, in the same run.

    .venv/bin/python bench/tiered_bench.py                       # directory and S3 tiers
    .venv/bin/python bench/tiered_bench.py --backends dir --records 100000 --size 1000

Per backend one embedded broker gets two topics with the same records (one partition,
``--segment-mb`` segments): ``local`` (no tiering) and ``tiered`` (remote.storage.enable,
local.retention.bytes=0, so once copied every closed segment is only remote). The copy task
is held back while producing, then woken: upload throughput is the bytes copied over the
time until every closed segment is in the remote tier. Our blocking Consumer then reads
each topic from offset 0 to its end (manual assignment), after one untimed warm-up read, in
interleaved rounds (median shown): ``local``, ``remote cold`` (the read cache emptied first:
every chunk fetched from the store) and ``remote warm`` (again at once: what the bounded
cache, ``remote.log.storage.cache.bytes``, holds). The S3 tier is moto's S3
server process on this machine (Python, single-threaded): its figures measure our path
plus that server, not a real object store.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sdk import AdminClient, Consumer, Producer
from sdk.types import NewTopic, TopicPartition
from server_ref import EmbeddedBroker
from tests.integration.tiered_kit import MotoServer, s3_broker_config

HOUR_MS = 3_600_000


def _produce(bootstrap: str, topic: str, count: int, size: int) -> None:
    payload = os.urandom(size)
    with Producer(bootstrap_servers=bootstrap, linger_ms=5, batch_size=256 * 1024) as p:
        for i in range(count):
            p.send(topic, payload[i % 7:] + payload[:i % 7], partition=0)
        p.flush()


def _consume(bootstrap: str, topic: str, count: int) -> tuple[float, int]:
    """(seconds, bytes) to read ``count`` records from offset 0."""
    got = nbytes = 0
    start = time.perf_counter()
    with Consumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                  max_partition_fetch_bytes=4 << 20, fetch_max_bytes=16 << 20) as consumer:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        while got < count:
            for records in consumer.poll(timeout_ms=1000).values():
                got += len(records)
                nbytes += sum(len(r.value) for r in records)
            if time.perf_counter() - start > 600:
                raise TimeoutError(f"read {got} of {count} records of {topic}")
    return time.perf_counter() - start, nbytes


def _wait(check, what: str, timeout_s: float = 600) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.02)


def run(backend: str, count: int, size: int, segment_mb: int, rounds: int
        ) -> list[tuple[str, str, str]]:
    moto = MotoServer().start() if backend == "s3" else None
    extra: dict[str, str] = {}
    if moto is not None:
        moto.client().create_bucket(Bucket="bench")
        extra = s3_broker_config(moto, "bench")
    data_dir = tempfile.mkdtemp(prefix="tiered-bench-")
    broker = EmbeddedBroker(data_dir=data_dir, config={
        "remote.log.storage.system.enable": "true",
        "remote.log.manager.task.interval.ms": str(HOUR_MS),  # woken by hand below
        "log.retention.check.interval.ms": "100", **extra}).start()
    rows = []
    try:
        bootstrap = broker.bootstrap_servers
        segment = str(segment_mb << 20)
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([
                NewTopic("local", 1, 1, {"segment.bytes": segment}),
                NewTopic("tiered", 1, 1, {"segment.bytes": segment, "remote.storage.enable":
                                          "true", "local.retention.bytes": "0"})])
        _produce(bootstrap, "local", count, size)
        _produce(bootstrap, "tiered", count, size)
        part = broker.broker.topics.get("tiered").partitions[0]
        remote = broker.broker.remote

        def copied() -> bool:
            return remote.highest_tiered_offset(part) == part.log.active_segment.base_offset - 1

        start = time.perf_counter()
        broker.call(remote.wake)
        _wait(copied, "copies")
        upload_s = time.perf_counter() - start
        _wait(lambda: part.log.log_start_offset == part.log.active_segment.base_offset,
              "local deletion")
        up = remote.copied_bytes
        rows.append((backend, "upload", f"{up / upload_s / 1e6:,.1f} MB/s ({up / 1e6:,.0f} MB "
                     f"in {upload_s:.2f} s)"))
        remote_part = part.log.active_segment.base_offset  # records only in the remote tier
        _consume(bootstrap, "local", count)  # warm-up, untimed
        times: dict[str, list[float]] = {}
        for _ in range(rounds):  # interleaved: this machine's speed drifts
            times.setdefault("consume local", []).append(_consume(bootstrap, "local", count)[0])
            broker.call(remote.cache.clear)
            for label in ("consume remote cold", "consume remote warm"):
                times.setdefault(label, []).append(_consume(bootstrap, "tiered", count)[0])
        for label, seconds_list in times.items():
            seconds = statistics.median(seconds_list)
            rows.append((backend, label, f"{count / seconds:,.0f} rec/s, "
                                         f"{count * size / seconds / 1e6:,.1f} MB/s"))
        rows.append((backend, "records only remote", f"{remote_part:,} of {count:,}"))
        cache = remote.cache
        rows.append((backend, "cache", f"{cache.hits:,} hits, {cache.misses:,} misses, "
                                       f"{cache.size / 1e6:,.1f} MB held"))
    finally:
        broker.close()
        if moto is not None:
            moto.kill()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="dir,s3")
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--size", type=int, default=1000, help="value bytes")
    parser.add_argument("--segment-mb", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3, help="reads per figure (median)")
    args = parser.parse_args()
    print(f"{args.records:,} records of {args.size} B, {args.segment_mb} MiB segments")
    rows = []
    for backend in args.backends.split(","):
        rows.extend(run(backend, args.records, args.size, args.segment_mb, args.rounds))
    width = max(len(r[1]) for r in rows)
    for backend, what, figure in rows:
        print(f"{backend:4} {what:{width}}  {figure}")


if __name__ == "__main__":
    main()
