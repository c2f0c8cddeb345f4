"""What client metrics cost: send and poll throughput with ``metrics_enabled`` on vs off.

    python bench/metrics_bench.py                    # the reference broker, 15 rounds
    python bench/metrics_bench.py --rounds 25 --count 300000
    python bench/metrics_bench.py --bootstrap-server HOST:PORT

Each measurement runs in a fresh subprocess (no shared imports or heap). A round measures
both settings, in alternating order (on/off, then off/on, ...), for

* **send**: the blocking ``Producer.send`` of ``--count`` records of ``--size`` bytes to a
  6-partition topic, from the first send until ``flush`` returns (linger 5 ms, defaults
  otherwise: idempotence, acks=all);
* **poll**: the blocking ``Consumer.poll`` (assigned partitions, no group) reading those
  records back, from the first poll until the last record.

The broker (``python -m server_ref`` in its own process, unless ``--bootstrap-server``)
is shared by both settings. The machine is noisy (other processes come and go), so the
report gives, per case, the median rate and the min-max spread of each setting, and the
median of the per-round ratios on/off (each ratio compares two runs made seconds apart),
which is the overhead figure.

``--profile`` measures the same cost another way, less at the mercy of the machine's
noise: the asyncio faces (everything on one thread) send and then read the records once
with metrics on under ``cProfile``, which reports the share of the time spent in
``sdk/metrics`` code itself (an upper bound: the profiler inflates many small calls most).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS = 6


def _work_send(a: argparse.Namespace, metrics: bool) -> tuple[float, float]:
    from sdk import Producer

    value = b"x" * a.size
    with Producer(bootstrap_servers=a.bootstrap, linger_ms=5,
                  metrics_enabled=metrics) as producer:
        producer.send(a.topic, b"warm-up").result(30)
        send = producer.send
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(a.count):
            send(a.topic, value)
        producer.flush()
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        if metrics:  # the counters saw every record (and are read once, untimed)
            sent = [v for m, v in producer.metrics().items()
                    if m.name == "record-send-total" and m.group == "producer-metrics"]
            assert sent == [a.count + 1], sent
    return a.count / elapsed, a.count / cpu


def _work_poll(a: argparse.Namespace, metrics: bool) -> tuple[float, float]:
    from sdk import Consumer, TopicPartition

    consumer = Consumer(bootstrap_servers=a.bootstrap, auto_offset_reset="earliest",
                        metrics_enabled=metrics)
    try:
        consumer.assign([TopicPartition(a.topic, p) for p in range(PARTITIONS)])
        want = a.count + 1  # the warm-up record too
        seen = 0
        start, cpu = time.perf_counter(), time.process_time()
        while seen < want:
            for records in consumer.poll(timeout_ms=1000).values():
                seen += len(records)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    finally:
        consumer.close()
    return seen / elapsed, seen / cpu


def worker_main(a: argparse.Namespace) -> None:
    work = _work_send if a.worker == "send" else _work_poll
    rate, per_cpu = work(a, a.metrics == "on")
    print(json.dumps({"rate": rate, "per_cpu": per_cpu}))


def _run(a: argparse.Namespace, bootstrap: str, case: str, topic: str, metrics: str
         ) -> tuple[float, float]:
    cmd = [sys.executable, __file__, "--worker", case, "--metrics", metrics,
           "--bootstrap-server", bootstrap, "--topic", topic, "--count", str(a.count),
           "--size", str(a.size)]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600,
                         check=False)
    if out.returncode != 0:
        raise SystemExit(f"{case} (metrics {metrics}) failed:\n{out.stderr[-2000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return float(result["rate"]), float(result["per_cpu"])


def _profile(a: argparse.Namespace, bootstrap: str) -> None:
    import cProfile
    import pstats

    from sdk import AsyncConsumer, AsyncProducer, TopicPartition
    from tests.integration.conftest import create_topic

    async def run() -> tuple[cProfile.Profile, cProfile.Profile]:
        topic = f"bench-metrics-{uuid.uuid4().hex[:8]}"
        await create_topic(bootstrap, topic, PARTITIONS)
        value = b"x" * a.size
        sending, polling = cProfile.Profile(), cProfile.Profile()
        async with AsyncProducer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
            await (await producer.send(topic, b"warm-up"))
            sending.enable()
            for _ in range(a.count):
                await producer.send(topic, value)
            await producer.flush()
            sending.disable()
        consumer = AsyncConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
            seen = 0
            polling.enable()
            while seen < a.count + 1:
                for records in (await consumer.getmany(timeout_ms=1000)).values():
                    seen += len(records)
            polling.disable()
        finally:
            await consumer.close()
        return sending, polling

    for case, prof in zip(("send", "poll"), asyncio.run(run())):
        stats = pstats.Stats(prof)
        total = stats.total_tt  # type: ignore[attr-defined]
        ours = sum(v[2] for k, v in stats.stats.items()  # type: ignore[attr-defined]
                   if "sdk/metrics" in k[0])
        print(f"{case}: {total:.3f} s profiled, sdk/metrics code {ours * 1000:.1f} ms "
              f"= {100 * ours / total:.2f}%")


def _start_broker() -> tuple[subprocess.Popen[bytes], str, str]:
    import tempfile

    sys.path.insert(0, str(ROOT))
    from tests.integration.conftest import free_port, wait_for_port

    port = free_port()
    data_dir = tempfile.mkdtemp(prefix="bench-metrics-")
    proc = subprocess.Popen([sys.executable, "-m", "server_ref", "--host", "127.0.0.1",
                             "--port", str(port), "--data-dir", data_dir], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port("127.0.0.1", port, 30)
    return proc, f"127.0.0.1:{port}", data_dir


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", choices=["send", "poll"])
    p.add_argument("--metrics", choices=["on", "off"], default="on")
    p.add_argument("--topic")
    p.add_argument("--bootstrap-server", dest="bootstrap")
    p.add_argument("--count", type=int, default=200_000)
    p.add_argument("--size", type=int, default=100)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--profile", action="store_true",
                   help="the share of time in sdk/metrics code under cProfile instead")
    a = p.parse_args()
    if a.worker:
        worker_main(a)
        return
    sys.path.insert(0, str(ROOT))
    from tests.integration.conftest import create_topic

    proc = data_dir = None
    bootstrap = a.bootstrap
    if bootstrap is None:
        proc, bootstrap, data_dir = _start_broker()
    rates: dict[tuple[str, str], list[float]] = {}  # (case, setting) -> rec/s
    ratios: dict[str, list[float]] = {}  # case -> per-round on/off ratios
    try:
        if a.profile:
            _profile(a, bootstrap)
            return
        print(f"metrics on vs off: {a.count} records of {a.size} B, {a.rounds} rounds, "
              f"broker {'server_ref' if proc else bootstrap}", flush=True)
        for r in range(a.rounds):
            order = ["on", "off"] if r % 2 == 0 else ["off", "on"]
            topics = {}
            for setting in order:  # each setting sends into its own topic, then reads it
                topics[setting] = f"bench-metrics-{uuid.uuid4().hex[:8]}"
                asyncio.run(create_topic(bootstrap, topics[setting], PARTITIONS))
            got: dict[tuple[str, str], float] = {}
            for case in ("send", "poll"):
                for setting in order:
                    rate, per_cpu = _run(a, bootstrap, case, topics[setting], setting)
                    got[(case, setting)], got[(case + "/cpu", setting)] = rate, per_cpu
                for kind in (case, case + "/cpu"):
                    for setting in order:
                        rates.setdefault((kind, setting), []).append(got[(kind, setting)])
                    ratios.setdefault(kind, []).append(got[(kind, "on")] / got[(kind, "off")])
            print(f"  round {r + 1:2d}: " + "  ".join(
                f"{case} on {got[(case, 'on')]:>9,.0f} off {got[(case, 'off')]:>9,.0f}"
                for case in ("send", "poll", "send/cpu", "poll/cpu")), flush=True)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
        if data_dir is not None:
            import shutil

            shutil.rmtree(data_dir, ignore_errors=True)
    print()
    print("rec/s (wall clock); /cpu: records per CPU-second of the client process, which "
          "other processes on the machine disturb less")
    print(f"{'case':8} {'metrics on: median (min-max)':>36} {'metrics off: median (min-max)':>36}"
          f" {'on/off per round: median (min-max)':>38}")
    for case in ("send", "poll", "send/cpu", "poll/cpu"):
        cells = []
        for setting in ("on", "off"):
            values = rates[(case, setting)]
            cells.append(f"{statistics.median(values):>10,.0f} ({min(values):,.0f}-"
                         f"{max(values):,.0f})")
        rs = ratios[case]
        print(f"{case:8} {cells[0]:>36} {cells[1]:>36} "
              f"{statistics.median(rs):>14.3f} ({min(rs):.3f}-{max(rs):.3f})")


if __name__ == "__main__":
    main()
