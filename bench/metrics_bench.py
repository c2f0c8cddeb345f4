"""What client metrics cost: send and poll with ``metrics_enabled`` on vs off.

    python bench/metrics_bench.py --rounds 30        # the reference broker; the full report
    python bench/metrics_bench.py --rounds 30 --no-profile --bootstrap-server HOST:PORT
    python bench/metrics_bench.py --micro            # only the recording calls, timed

Issue 19 asks that send and poll do not drop by more than 3% with metrics on. The machine
this runs on is shared and noisy (two cores, other processes' JVMs come and go), so the
report gives three figures that the noise disturbs less and less:

1. **CPU per record, interleaved rounds.** Each measurement runs in a fresh subprocess and
   counts the CPU time of the whole client process (``time.process_time``: the
   application thread and the client's event-loop thread), which other processes disturb
   far less than the wall clock. A round measures both settings back to back, in
   alternating order (on/off, then off/on, ...), for **send** (the blocking
   ``Producer.send`` of ``--count`` records of ``--size`` bytes to a 6-partition topic,
   until ``flush`` returns; linger 5 ms, otherwise defaults: idempotence, acks=all) and
   **poll** (the blocking ``Consumer.poll``, assigned partitions, reading them back,
   ``--poll-passes`` times: a poll costs a third of a send, a longer run is steadier). Both
   start after ``--warmup`` records sent or read untimed (``--segments N`` also times N
   parts of each run and reports the fastest part's figure). The figure is the median of the
   per-round ratios of records per CPU-second, on / off (1.0: no cost; 0.97: 3% fewer),
   with the interquartile range and a 95% confidence interval of the median (order
   statistics, no assumption on the noise's distribution). Wall-clock ratios are shown too.
2. **Profile share.** The asyncio faces (everything on one thread) send and read the
   records once with metrics on under ``cProfile``: the time inside ``sdk/metrics`` calls
   made from elsewhere (inclusive: the builtins they call count too), as a share of all.
   An upper bound: the profiler inflates many small calls most.
3. **Recording calls, timed.** ``timeit`` of the real observer calls a Produce request,
   a Fetch and a poll make (per-request network recording, the producer's per-request
   batch recording with the batches per request the runs had, the fetch and poll
   recording), times how many of each the metrics-on runs made, over their CPU time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import subprocess
import sys
import time
import timeit
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS = 6
Result = dict[str, float]


# ---------------------------------------------------------------------- workers


def _counts(metrics: dict[Any, float], *names: str) -> Result:
    """Client-wide (untagged but client-id) metrics ``names``, by name."""
    out: Result = {}
    for m, v in metrics.items():
        if m.name in names and set(m.tags) == {"client-id"}:
            out[m.name] = v
    return out


def _segments(count: int, segments: int) -> list[int]:
    """``count`` split into ``segments`` nearly equal parts (none empty)."""
    segments = max(1, min(segments, count))
    return [count // segments + (i < count % segments) for i in range(segments)]


def _work_send(a: argparse.Namespace, metrics: bool) -> Result:
    from sdk import Producer

    value = b"x" * a.size
    with Producer(bootstrap_servers=a.bootstrap, linger_ms=5,
                  metrics_enabled=metrics) as producer:
        producer.send(a.topic, b"warm-up").result(30)
        send = producer.send
        for _ in range(a.warmup):
            send(a.topic, value)
        producer.flush()
        before = _counts(producer.metrics(), "produce-request-total", "request-total")
        fastest = math.inf
        start, cpu = time.perf_counter(), time.process_time()
        for part in _segments(a.count, a.segments):
            at = time.process_time()
            for _ in range(part):
                send(a.topic, value)
            producer.flush()
            fastest = min(fastest, (time.process_time() - at) / part)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        out: Result = {"records": a.count, "wall": elapsed, "cpu": cpu, "fastest": fastest}
        if metrics:  # what the timed part recorded (read untimed)
            snap = producer.metrics()
            sent = [v for m, v in snap.items()
                    if m.name == "record-send-total" and m.group == "producer-metrics"]
            assert sent == [a.count + a.warmup + 1], sent  # the counters saw every record
            after = _counts(snap, "produce-request-total", "request-total")
            out.update({k: after[k] - before[k] for k in after})
            batches = sum(v for m, v in snap.items() if m.name == "byte-total"
                          and m.group == "producer-topic-metrics")
            out["records-per-batch"] = (a.count + a.warmup + 1) / max(
                1.0, batches / _counts(snap, "batch-size-avg")["batch-size-avg"])
            out["records-per-request"] = _counts(
                snap, "records-per-request-avg")["records-per-request-avg"]
    return out


def _work_poll(a: argparse.Namespace, metrics: bool) -> Result:
    from sdk import Consumer, TopicPartition

    consumer = Consumer(bootstrap_servers=a.bootstrap, auto_offset_reset="earliest",
                        metrics_enabled=metrics)
    names = ("fetch-total", "request-total", "records-consumed-total")
    try:
        consumer.assign([TopicPartition(a.topic, p) for p in range(PARTITIONS)])
        in_topic = a.count + a.warmup + 1  # the warm-up records too
        # the topic is read --poll-passes times (poll is cheap: a longer run, less noise)
        want = in_topic * a.poll_passes
        seen = 0
        while seen < a.warmup + 1:  # untimed
            for records in consumer.poll(timeout_ms=1000).values():
                seen += len(records)
        before = _counts(consumer.metrics(), *names)
        timed_from = seen
        fastest = math.inf
        start, cpu = time.perf_counter(), time.process_time()
        until = seen
        for part in _segments(want - seen, a.segments):
            until += part
            if seen >= until:  # the last poll went past this part too
                continue
            at, began = time.process_time(), seen
            while seen < until:
                got = consumer.poll(timeout_ms=10_000)
                if not got:
                    raise SystemExit(f"no records for 10 s at {seen} of {want}")
                for records in got.values():
                    seen += len(records)
                if seen % in_topic == 0 and seen < want:  # the end: read it again
                    consumer.seek_to_beginning()
            fastest = min(fastest, (time.process_time() - at) / (seen - began))
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        out: Result = {"records": seen - timed_from, "wall": elapsed, "cpu": cpu,
                       "fastest": fastest}
        if metrics:
            after = _counts(consumer.metrics(), *names, "records-per-poll-avg")
            out.update({k: after[k] - before[k] for k in before})
            # the fetcher's hand-outs (the blocking face takes big slices, then serves
            # its polls from them): the calls of ConsumerObserver.consumed
            out["drains"] = out["records-consumed-total"] / after["records-per-poll-avg"]
    finally:
        consumer.close()
    return out


def worker_main(a: argparse.Namespace) -> None:
    work = _work_send if a.worker == "send" else _work_poll
    print(json.dumps(work(a, a.metrics == "on")))


def _run(a: argparse.Namespace, bootstrap: str, case: str, topic: str, metrics: str
         ) -> Result:
    cmd = [sys.executable, __file__, "--worker", case, "--metrics", metrics,
           "--bootstrap-server", bootstrap, "--topic", topic, "--count", str(a.count),
           "--size", str(a.size), "--warmup", str(a.warmup), "--segments", str(a.segments),
           "--poll-passes", str(a.poll_passes)]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600,
                         check=False)
    if out.returncode != 0:
        raise SystemExit(f"{case} (metrics {metrics}) failed:\n{out.stderr[-2000:]}")
    result: Result = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# ---------------------------------------------------------------------- figures


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """Lower quartile, median, upper quartile."""
    if len(values) < 2:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def median_ci(values: list[float], level: float = 0.95) -> tuple[float, float]:
    """A distribution-free confidence interval of the median: the order statistics
    ``k`` and ``n + 1 - k`` with ``P(Binomial(n, 1/2) < k) <= (1 - level) / 2``."""
    xs = sorted(values)
    n = len(xs)
    tail, k, cumulative = (1 - level) / 2, 0, 0.0
    while k < n:
        p = math.comb(n, k) / 2 ** n
        if cumulative + p > tail:
            break
        cumulative += p
        k += 1
    if k == 0:  # too few rounds for this level: the whole range
        return xs[0], xs[-1]
    return xs[k - 1], xs[n - k]


def _ratio_line(label: str, ratios: list[float]) -> str:
    q1, med, q3 = quartiles(ratios)
    lo, hi = median_ci(ratios)
    return (f"  {label:<22} {med:6.3f}   IQR {q1:.3f}-{q3:.3f}   95% CI of the median "
            f"{lo:.3f}-{hi:.3f}   (min {min(ratios):.3f}, max {max(ratios):.3f})")


# ---------------------------------------------------------------------- profile


def _metrics_share(prof: Any) -> tuple[float, float]:
    """(all seconds, seconds inside sdk/metrics calls made from outside it)."""
    import pstats

    stats = pstats.Stats(prof)
    table = stats.stats  # type: ignore[attr-defined]
    total = stats.total_tt  # type: ignore[attr-defined]
    ours = 0.0
    for func, (_, _, _, _, callers) in table.items():
        if "sdk/metrics" not in func[0]:
            continue
        for caller, edge in callers.items():
            if "sdk/metrics" not in caller[0]:
                ours += edge[3]  # the cumulative time of the calls along this edge
    return total, ours


def _profile(a: argparse.Namespace, bootstrap: str) -> dict[str, float]:
    import cProfile

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

    shares = {}
    for case, prof in zip(("send", "poll"), asyncio.run(run())):
        total, ours = _metrics_share(prof)
        shares[case] = ours / total
        print(f"  {case}: {total:.3f} s profiled, in sdk/metrics calls {ours * 1000:.1f} ms "
              f"= {100 * ours / total:.2f}%")
    return shares


# ---------------------------------------------------------------------- recording calls


class _Conn:
    """What NetworkObserver reads of a connection."""

    def __init__(self, node_id: int) -> None:
        self.node_id, self.host, self.port = node_id, "localhost", 9092
        self.sent_at: dict[int, tuple[float, int, int]] = {}
        self.last_used = time.monotonic()


class _Batch:
    """What ProducerObserver reads of a batch."""

    __slots__ = ("attempts", "count", "created", "partition", "payload", "topic")

    def __init__(self, partition: int, count: int, size: int) -> None:
        self.topic, self.partition, self.count, self.attempts = "t", partition, count, 1
        self.payload = b"x" * size
        self.created = time.monotonic()


def recording_costs(batches_per_request: int = 6, records_per_batch: int = 150,
                    size: int = 100) -> dict[str, float]:
    """Seconds per call of what the hot paths record, each with metrics on: a request's
    network recording (written, answered), a Produce request's batches, a Fetch
    (partitions' bytes, the answer) and a hand-out of records to the application."""
    from sdk.metrics.consumer import ConsumerObserver
    from sdk.metrics.hooks import HookSet
    from sdk.metrics.network import NetworkObserver
    from sdk.metrics.producer import ProducerObserver
    from sdk.metrics.registry import MetricsRegistry

    reg = MetricsRegistry({"client-id": "bench"})
    net = NetworkObserver(reg, HookSet([]), "producer")
    producer = ProducerObserver(reg, HookSet([]))
    consumer = ConsumerObserver(reg, HookSet([]), None, lambda: {})
    conns = [_Conn(n) for n in (1, 2, 3)]
    batches = [_Batch(p, records_per_batch, records_per_batch * (size + 8) + 61)
               for p in range(batches_per_request)]
    handed = {p: [None] * 84 for p in range(PARTITIONS)}
    cid = 0

    def request() -> None:  # as BrokerConnection.send_request and _on_data call it
        nonlocal cid
        cid += 1
        conn = conns[cid % 3]
        conn.last_used = time.monotonic()
        net.sent(conn, 0, 11, cid, 30_000, True)
        net.received(conn, [(cid, None)], 200)

    def produce() -> None:  # the sender's pass time is taken anyway
        producer.sent(batches, time.monotonic())

    def fetch() -> None:
        for _ in range(PARTITIONS):
            consumer.fetched_bytes(100_000)
        consumer.fetch_done(time.monotonic())

    def drain() -> None:
        consumer.consumed(handed, 500)

    def baseline() -> None:  # the time calls the callers make anyway
        time.monotonic()

    out = {}
    number = 50_000
    for name, fn in (("request", request), ("produce", produce), ("fetch", fetch),
                     ("drain", drain), ("baseline", baseline)):
        out[name] = min(timeit.repeat(fn, number=number, repeat=7)) / number
    base = out.pop("baseline")
    out["request"] -= base
    out["produce"] -= base
    out["fetch"] -= base
    return out


def _micro(a: argparse.Namespace) -> None:
    costs = recording_costs(a.batches_per_request, a.records_per_batch, a.size)
    print(f"recording calls (metrics on; {a.batches_per_request} batches of "
          f"{a.records_per_batch} records per Produce request), best of 7 x 50,000:")
    for name, what in (("request", "per request: network sent + received"),
                       ("produce", "per Produce request: its batches"),
                       ("fetch", f"per Fetch: {PARTITIONS} partitions' bytes + answer"),
                       ("drain", "per hand-out of records to the application")):
        print(f"  {what:<46} {costs[name] * 1e6:6.2f} us")


def _modelled(results: dict[tuple[str, str], list[Result]]) -> None:
    """Recording calls, timed, times the calls the metrics-on runs made, over their CPU."""
    sends, polls = results[("send", "on")], results[("poll", "on")]
    per_batch = statistics.median(r["records-per-batch"] for r in sends)
    per_request = statistics.median(r["records-per-request"] for r in sends)
    batches = max(1, round(per_request / per_batch))
    costs = recording_costs(batches, round(per_batch))
    print(f"  per request (network) {costs['request'] * 1e6:.2f} us, per Produce request "
          f"({batches} batches) {costs['produce'] * 1e6:.2f} us, per Fetch "
          f"{costs['fetch'] * 1e6:.2f} us, per hand-out {costs['drain'] * 1e6:.2f} us")
    for case, runs in (("send", sends), ("poll", polls)):
        shares = []
        for r in runs:
            spent = r["request-total"] * costs["request"]
            if case == "send":
                spent += r["produce-request-total"] * costs["produce"]
            else:
                spent += r["fetch-total"] * costs["fetch"] + r["drains"] * costs["drain"]
            shares.append(spent / r["cpu"])
        calls = ("produce-request-total" if case == "send" else "fetch-total")
        print(f"  {case}: {statistics.median(r[calls] for r in runs):,.0f} "
              f"{'Produce' if case == 'send' else 'Fetch'} requests, "
              f"{statistics.median(r['request-total'] for r in runs):,.0f} requests in "
              f"all per run: {100 * statistics.median(shares):.2f}% of the client's CPU")


# ---------------------------------------------------------------------- main


def _start_broker() -> tuple[subprocess.Popen[bytes], str, str]:
    import tempfile

    from tests.integration.conftest import free_port, wait_for_port

    port = free_port()
    data_dir = tempfile.mkdtemp(prefix="bench-metrics-")
    proc = subprocess.Popen([sys.executable, "-m", "server_ref", "--host", "127.0.0.1",
                             "--port", str(port), "--data-dir", data_dir], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port("127.0.0.1", port, 30)
    return proc, f"127.0.0.1:{port}", data_dir


def _rounds(a: argparse.Namespace, bootstrap: str
            ) -> dict[tuple[str, str], list[Result]]:
    from tests.integration.conftest import create_topic

    results: dict[tuple[str, str], list[Result]] = {}
    for r in range(a.rounds):
        order = ["on", "off"] if r % 2 == 0 else ["off", "on"]
        topics = {}
        for setting in order:  # each setting sends into its own topic, then reads it
            topics[setting] = f"bench-metrics-{uuid.uuid4().hex[:8]}"
            asyncio.run(create_topic(bootstrap, topics[setting], PARTITIONS))
        line = []
        for case in ("send", "poll"):
            got = {s: _run(a, bootstrap, case, topics[s], s) for s in order}
            for s in order:
                results.setdefault((case, s), []).append(got[s])
            on, off = got["on"], got["off"]
            line.append(f"{case} CPU us/rec on {1e6 * on['cpu'] / on['records']:.3f} "
                        f"off {1e6 * off['cpu'] / off['records']:.3f}")
        print(f"  round {r + 1:2d} ({'/'.join(order)}): " + "   ".join(line), flush=True)
    return results


def _report(results: dict[tuple[str, str], list[Result]], segments: int) -> None:
    print("\nrecords per CPU-second of the client process (median of the rounds), and the "
          "per-round ratio metrics on / off (1.000: no cost; 0.970: 3% fewer):")
    for case in ("send", "poll"):
        on, off = results[(case, "on")], results[(case, "off")]
        fastest = [f["fastest"] / o["fastest"] for o, f in zip(on, off)]
        per_cpu = [o["records"] / o["cpu"] / (f["records"] / f["cpu"]) for o, f in zip(on, off)]
        wall = [o["records"] / o["wall"] / (f["records"] / f["wall"]) for o, f in zip(on, off)]
        print(f"  {case}: on {statistics.median(o['records'] / o['cpu'] for o in on):,.0f} "
              f"rec/CPU-s, off {statistics.median(f['records'] / f['cpu'] for f in off):,.0f}")
        print(_ratio_line(f"{case} CPU per record", per_cpu))
        if segments > 1:  # (poll's parts are lumpy: a Fetch, then hand-outs from a buffer)
            print(_ratio_line(f"{case} fastest part", fastest))
        print(_ratio_line(f"{case} wall clock", wall))


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--worker", choices=["send", "poll"], help=argparse.SUPPRESS)
    p.add_argument("--metrics", choices=["on", "off"], default="on", help=argparse.SUPPRESS)
    p.add_argument("--topic", help=argparse.SUPPRESS)
    p.add_argument("--bootstrap-server", dest="bootstrap")
    p.add_argument("--count", type=int, default=200_000, help="timed records per run")
    p.add_argument("--warmup", type=int, default=20_000, help="untimed records first")
    p.add_argument("--size", type=int, default=100, help="value bytes")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--poll-passes", type=int, default=3,
                   help="poll reads the topic this many times (seeking back to its start)")
    p.add_argument("--segments", type=int, default=1,
                   help="timed parts per run, also reported by the fastest part")
    p.add_argument("--no-profile", action="store_true", help="skip the cProfile share")
    p.add_argument("--profile", action="store_true", help="only the cProfile share")
    p.add_argument("--micro", action="store_true", help="only the recording calls, timed")
    p.add_argument("--batches-per-request", type=int, default=6, help="for --micro")
    p.add_argument("--records-per-batch", type=int, default=150, help="for --micro")
    a = p.parse_args()
    if a.worker:
        worker_main(a)
        return
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    if a.micro:
        _micro(a)
        return
    proc = data_dir = None
    bootstrap = a.bootstrap
    if bootstrap is None:
        proc, bootstrap, data_dir = _start_broker()
    try:
        results = None
        if not a.profile:
            print(f"metrics on vs off: {a.count:,} records of {a.size} B per run after "
                  f"{a.warmup:,} untimed, {a.rounds} rounds, broker "
                  f"{'server_ref' if proc else bootstrap}", flush=True)
            results = _rounds(a, bootstrap)
        if results is not None:
            _report(results, a.segments)
        if not a.no_profile:
            print("\nshare of the time in sdk/metrics under cProfile (async faces, "
                  f"{a.count:,} records):")
            _profile(a, bootstrap)
        if results is not None:
            print("\nrecording calls timed (timeit) x the calls the metrics-on runs made:")
            _modelled(results)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
        if data_dir is not None:
            import shutil

            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
