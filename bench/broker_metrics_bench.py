"""What the reference broker's metrics cost: the same workload on a broker without the
metrics endpoint and on one with it (scraped once a second, as a busy Prometheus would),
rounds alternating between the two in one run.

Each round creates a fresh 6-partition topic on each broker, produces N records with
confluent-kafka (acks=1) and consumes them back (bench/broker_bench.py's phases), then
runs the *wire* phases, where the broker does nothing but the per-request path metrics
touch: ``--requests`` Produce requests of one 100-byte record each, then as many Fetch
requests of one record each, pipelined (32 in flight) on one connection. Reported:
medians of messages (or requests) per second and of the broker process's CPU seconds per
phase (user + system from /proc), and the ratio "on / off". On a shared machine those
ratios move by tens of percent from run to run, so the run starts with two steadier
figures: the metrics code's own time per request (timed in this process over 200,000
calls), and an A/B in one process: a broker on this process's loop whose metrics are
switched off and on between bursts of 500 one-record Produce and Fetch requests (the
client on the same loop), CPU time per request in each mode (``--ab-bursts``, 0 skips).

One run (2 shared cores, load 3-5): the metrics code 1.3 us per Produce and 0.8 us per Fetch
request in-process; A/B +2.4 us per one-record Produce (54.5 -> 56.9 us) and +2.0 us per
one-record Fetch (74.3 -> 76.3 us); a scrape 2.1 ms (24 KB of text). confluent-kafka's
200,000 records of 100 B at linger.ms=5 took 85 Produce and 8 Fetch requests (~0.2 ms of
metrics against ~140 ms of broker CPU); the cross-process on/off ratios swung 0.83-1.73
between rounds, noise that hides that.

    .venv/bin/python bench/broker_metrics_bench.py [--rounds 5] [--count 200000] \\
        [--size 100] [--linger-ms 5] [--requests 20000] [--scrape-interval 1.0] \\
        [--ab-bursts 40]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker_bench import consume, cpu_seconds, create_topic
from confluent_kafka import Producer

from sdk.protocol.framing import ClientFraming
from sdk.protocol.message import Message
from sdk.protocol.messages.fetch import FetchRequest
from sdk.protocol.messages.produce import ProduceRequest, ProduceResponse
from sdk.records.builder import RecordBatchBuilder

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Broker:
    name: str
    pid: int
    bootstrap: str
    metrics_url: str | None
    produce: list[tuple[float, float]] = field(default_factory=list)
    consume: list[tuple[float, float]] = field(default_factory=list)
    wire_produce: list[tuple[float, float]] = field(default_factory=list)
    wire_fetch: list[tuple[float, float]] = field(default_factory=list)
    scrapes: int = 0


@contextmanager
def broker(name: str, data_dir: Path, metrics: bool) -> Iterator[Broker]:
    argv = [sys.executable, "-m", "server_ref", "--port", "0", "--data-dir", str(data_dir)]
    if metrics:
        argv += ["--metrics-port", "0"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        match = re.search(r"bootstrap_servers=(\S+)", ready)
        if not match:
            raise RuntimeError(f"{name} did not start: {ready!r}")
        url = None
        while metrics and url is None:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"{name} printed no metrics url")
            if line.startswith("metrics url="):
                url = line.split("=", 1)[1].strip()
        yield Broker(name, proc.pid, match[1], url)
    finally:
        proc.terminate()
        proc.wait(30)


def produce(bootstrap: str, topic: str, count: int, size: int, linger_ms: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": linger_ms,
                         "enable.idempotence": False, "partitioner": "murmur2_random"})
    value = os.urandom(size)
    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, key=str(i % 1000).encode())
                break
            except BufferError:
                producer.poll(0.005)
    if producer.flush(300):
        raise RuntimeError("produce did not finish")
    return time.perf_counter() - started


WINDOW = 32  # requests in flight on the wire phases' connection


async def pipeline(bootstrap: str, request: Message, version: int, count: int) -> float:
    """Send ``request`` ``count`` times, WINDOW in flight; seconds taken. Every response
    must carry error code 0 in its first partition."""
    host, port = bootstrap.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    framing = ClientFraming(client_id="metrics-bench")
    sent = received = 0
    started = time.perf_counter()
    try:
        while received < count:
            while sent < count and sent - received < WINDOW:
                writer.write(framing.encode_request(request, version)[1])
                sent += 1
            await writer.drain()
            data = await reader.read(1 << 20)
            if not data:
                raise RuntimeError("the broker closed the connection")
            for _, response in framing.feed(data):
                received += 1
                answers: Any = response
                first = (answers.responses[0].partition_responses[0]
                         if isinstance(response, ProduceResponse)
                         else answers.responses[0].partitions[0])
                if first.error_code:
                    raise RuntimeError(f"error {first.error_code} from the broker")
        return time.perf_counter() - started
    finally:
        writer.close()


def wire_phases(target: Broker, topic: str, requests: int) -> None:
    produce_request, fetch_request = one_record_requests(topic)
    cpu0 = cpu_seconds(target.pid)
    produce_s = asyncio.run(pipeline(target.bootstrap, produce_request, 9, requests))
    cpu1 = cpu_seconds(target.pid)
    fetch_s = asyncio.run(pipeline(target.bootstrap, fetch_request, 12, requests))
    cpu2 = cpu_seconds(target.pid)
    target.wire_produce.append((requests / produce_s, cpu1 - cpu0))
    target.wire_fetch.append((requests / fetch_s, cpu2 - cpu1))
    print(f"  {target.name:12s} wire produce {requests / produce_s:8,.0f} req/s (broker cpu "
          f"{cpu1 - cpu0:5.2f} s)  wire fetch {requests / fetch_s:8,.0f} req/s (broker cpu "
          f"{cpu2 - cpu1:5.2f} s)", flush=True)


def micro(calls: int = 200_000) -> None:
    """What the metrics add per request, timed in-process, and what a scrape costs."""
    from sdk.protocol.messages.fetch import FetchResponse
    from server_ref.handlers import RequestContext
    from server_ref.metrics.registry import BrokerMetrics

    metrics = BrokerMetrics()
    builder = RecordBatchBuilder(0)
    builder.append(0, 0, None, b"x" * 100, [])
    batch = bytes(builder.build())
    data = [ProduceRequest.PartitionProduceData(index=0, records=batch)]
    answers = [ProduceResponse.PartitionProduceResponse(index=0)]
    fetched = [FetchResponse.FetchableTopicResponse(topic="t", partitions=[
        FetchResponse.PartitionData(partition_index=0, records=batch)])]
    ctx = RequestContext(None, 0, 9, 1, "bench", "peer")  # type: ignore[arg-type]
    started = time.perf_counter()
    for _ in range(calls):
        ctx.started_ns = metrics.request_started(0, 9)
        metrics.record_produce("t", data, answers)
        metrics.request_answered(ctx)
    produce_us = (time.perf_counter() - started) / calls * 1e6
    ctx.api_key = 1
    started = time.perf_counter()
    for _ in range(calls):
        ctx.started_ns = metrics.request_started(1, 12)
        metrics.record_fetch(fetched, None)  # type: ignore[arg-type]
        metrics.request_answered(ctx)
    fetch_us = (time.perf_counter() - started) / calls * 1e6
    print(f"metrics code per request (in-process): Produce {produce_us:.2f} us, "
          f"Fetch {fetch_us:.2f} us", flush=True)


def one_record_requests(topic: str) -> tuple[ProduceRequest, FetchRequest]:
    builder = RecordBatchBuilder(0)
    builder.append(0, int(time.time() * 1000), None, os.urandom(100), [])
    batch = bytes(builder.build())
    produce_request = ProduceRequest(acks=1, timeout_ms=30_000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    fetch_request = FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=len(batch),
                                 topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                                     FetchRequest.FetchPartition(
                                         partition=0, fetch_offset=0,
                                         partition_max_bytes=len(batch))])])
    return produce_request, fetch_request


async def ab(bursts: int, per_burst: int = 500) -> None:
    """One broker on this loop, metrics switched off and on between bursts."""
    from server_ref.broker import Broker as RefBroker
    from server_ref.config import BrokerConfig
    from server_ref.server import start_broker, stop_broker

    with tempfile.TemporaryDirectory(prefix="metrics-ab-") as tmp:
        ref = RefBroker(BrokerConfig(port=0, data_dir=Path(tmp)), Path(tmp))
        server = await start_broker(ref, "127.0.0.1", 0, metrics_port=0)
        metrics = ref.metrics
        ref.topics.create("ab", 1)
        produce_request, fetch_request = one_record_requests("ab")
        bootstrap = f"127.0.0.1:{ref.port}"
        spent = {(kind, on): 0.0 for kind in ("Produce", "Fetch") for on in (False, True)}
        try:
            for burst in range(bursts):
                for on in ((False, True) if burst % 2 == 0 else (True, False)):
                    ref.metrics = metrics if on else None
                    for kind, request, version in (("Produce", produce_request, 9),
                                                   ("Fetch", fetch_request, 12)):
                        cpu = time.process_time()
                        await pipeline(bootstrap, request, version, per_burst)
                        spent[(kind, on)] += time.process_time() - cpu
        finally:
            ref.metrics = metrics
            await stop_broker(ref, server)
    total = bursts * per_burst
    for kind in ("Produce", "Fetch"):
        off = spent[(kind, False)] / total * 1e6
        on = spent[(kind, True)] / total * 1e6
        print(f"A/B in one process, {kind}: off {off:.1f} us, on {on:.1f} us of CPU per "
              f"one-record request (broker + client): +{on - off:.2f} us", flush=True)


def scrape_cost(target: Broker, scrapes: int = 50) -> None:
    assert target.metrics_url is not None
    started = time.perf_counter()
    for _ in range(scrapes):
        with urllib.request.urlopen(target.metrics_url, timeout=30) as answer:
            size = len(answer.read())
    print(f"a scrape over HTTP: {(time.perf_counter() - started) / scrapes * 1e3:.2f} ms "
          f"({size:,} bytes of text)", flush=True)


class Scraper:
    """GETs /metrics every ``interval`` seconds while a round runs."""

    def __init__(self, target: Broker, interval: float) -> None:
        self.target = target
        self.interval = interval
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        assert self.target.metrics_url is not None
        while not self.stop.wait(self.interval):
            with urllib.request.urlopen(self.target.metrics_url, timeout=30) as answer:
                answer.read()
            self.target.scrapes += 1

    def __enter__(self) -> Scraper:
        if self.target.metrics_url is not None:
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(60)


def run_round(target: Broker, args: argparse.Namespace) -> None:
    topic = f"metrics-bench-{uuid.uuid4().hex[:8]}"
    create_topic(target.bootstrap, topic)
    with Scraper(target, args.scrape_interval):
        cpu0 = cpu_seconds(target.pid)
        produce_s = produce(target.bootstrap, topic, args.count, args.size, args.linger_ms)
        cpu1 = cpu_seconds(target.pid)
        consume_s = consume(target.bootstrap, topic, args.count)
        cpu2 = cpu_seconds(target.pid)
        wire_phases(target, topic, args.requests)
    target.produce.append((args.count / produce_s, cpu1 - cpu0))
    target.consume.append((args.count / consume_s, cpu2 - cpu1))
    print(f"  {target.name:12s} produce {args.count / produce_s:10,.0f} msg/s (broker cpu "
          f"{cpu1 - cpu0:5.2f} s)  consume {args.count / consume_s:10,.0f} msg/s (broker cpu "
          f"{cpu2 - cpu1:5.2f} s)", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--count", type=int, default=200_000, help="records per round")
    parser.add_argument("--size", type=int, default=100, help="record value bytes")
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--requests", type=int, default=20_000,
                        help="requests per wire phase")
    parser.add_argument("--scrape-interval", type=float, default=1.0, metavar="S")
    parser.add_argument("--ab-bursts", type=int, default=40, metavar="N")
    args = parser.parse_args()
    micro()
    if args.ab_bursts:
        asyncio.run(ab(args.ab_bursts))
    with tempfile.TemporaryDirectory(prefix="metrics-bench-") as tmp, \
            broker("metrics off", Path(tmp) / "off", metrics=False) as off, \
            broker("metrics on", Path(tmp) / "on", metrics=True) as on:
        print(f"{args.count:,} records of {args.size} B, linger.ms={args.linger_ms}, "
              f"{args.rounds} rounds; /metrics scraped every {args.scrape_interval} s")
        for round_no in range(args.rounds):
            print(f"round {round_no + 1}", flush=True)
            for target in ((off, on) if round_no % 2 == 0 else (on, off)):
                run_round(target, args)
        scrape_cost(on)
        print(f"\nmedians ({on.scrapes} scrapes):")
        for phase in ("produce", "consume", "wire_produce", "wire_fetch"):
            rate_off = statistics.median(r for r, _ in getattr(off, phase))
            rate_on = statistics.median(r for r, _ in getattr(on, phase))
            cpu_off = statistics.median(c for _, c in getattr(off, phase))
            cpu_on = statistics.median(c for _, c in getattr(on, phase))
            unit = "req/s" if phase.startswith("wire") else "msg/s"
            print(f"  {phase:12s} off {rate_off:10,.0f} {unit} cpu {cpu_off:5.2f} s | on "
                  f"{rate_on:10,.0f} {unit} cpu {cpu_on:5.2f} s | on/off rate "
                  f"{rate_on / rate_off:5.3f} cpu {cpu_on / cpu_off if cpu_off else float('nan'):5.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
