"""How long importing the SDK takes: min of N fresh interpreters, and the top -X importtime
entries.

Targets: ``import sdk`` well under 200 ms, ``from sdk import Producer, Consumer,
AdminClient`` under 100 ms. Each statement is timed inside the child interpreter, so
start-up is not counted (it is shown alone for reference). The minimum is quoted because
this machine's CPU speed drifts; the median is shown beside it.

The children run as an installed package does: with bytecode caches (in a temporary
``PYTHONPYCACHEPREFIX``, warmed by one untimed run), even when the environment sets
``PYTHONDONTWRITEBYTECODE`` (then every import compiles its source, which roughly doubles
the figures and is not what users see).

    .venv/bin/python bench/import_time.py [--runs 10] [--top 12]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FACES = "from sdk import Producer, Consumer, AdminClient"
TARGETS_MS = {"import sdk": 200.0, FACES: 100.0}

STATEMENTS = [
    "import sdk",
    FACES,
    "from sdk import TopicPartition, RecordMetadata, ConsumerRecord, errors",
    "import sdk.protocol.framing, sdk.protocol.versions",
    "from sdk.protocol.api import request_class; request_class(0); request_class(1)",
]

TIMER = (
    "import time\n"
    "t0 = time.perf_counter()\n"
    "{statement}\n"
    "print((time.perf_counter() - t0) * 1000)\n"
)


_CACHE_DIR = tempfile.TemporaryDirectory(prefix="kafka-sdk-pycache-")
ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
       "PYTHONPYCACHEPREFIX": _CACHE_DIR.name}


def fresh_ms(statement: str) -> float:
    """Milliseconds one fresh interpreter spends on ``statement`` (imports only, no start-up)."""
    out = subprocess.run([sys.executable, "-c", TIMER.format(statement=statement)],
                         capture_output=True, text=True, cwd=ROOT, check=True, env=ENV)
    return float(out.stdout.strip().splitlines()[-1])


def startup_ms() -> float:
    import time

    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True, cwd=ROOT, env=ENV)
    return (time.perf_counter() - t0) * 1000


def importtime_top(statement: str, top: int) -> list[tuple[int, int, str]]:
    """(self us, cumulative us, module) of the ``top`` largest cumulative entries."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", statement],
                         capture_output=True, text=True, cwd=ROOT, check=True, env=ENV)
    rows: list[tuple[int, int, str]] = []
    for line in out.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cumulative_us, name = (part.strip() for part in line[12:].split("|"))
        rows.append((int(self_us), int(cumulative_us), name))
    rows.sort(key=lambda r: r[1], reverse=True)
    return rows[:top]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args()

    print(f"python {sys.version.split()[0]}, {args.runs} fresh interpreters per statement")
    base = sorted(startup_ms() for _ in range(args.runs))
    print(f"interpreter start-up alone (wall): min {base[0]:.1f} ms, "
          f"median {statistics.median(base):.1f} ms\n")
    width = max(map(len, STATEMENTS))
    print(f"{'statement':<{width}} {'min ms':>8} {'median':>8}")
    verdict = 0
    verdicts: list[str] = []
    for statement in STATEMENTS:
        fresh_ms(statement)  # untimed: writes the bytecode caches
        times = sorted(fresh_ms(statement) for _ in range(args.runs))
        print(f"{statement:<{width}} {times[0]:8.2f} {statistics.median(times):8.2f}")
        target = TARGETS_MS.get(statement)
        if target is not None:
            over = times[0] >= target
            verdict |= over
            verdicts.append(f"`{statement}` target: under {target:.0f} ms -> "
                            f"{'OVER' if over else 'OK'}")

    for statement in STATEMENTS[:3]:
        print(f"\n-X importtime, top {args.top} by cumulative time: {statement}")
        print(f"{'self us':>9} {'cumul us':>9}  module")
        for self_us, cumulative_us, name in importtime_top(statement, args.top):
            print(f"{self_us:9d} {cumulative_us:9d}  {name}")

    print()
    print("\n".join(verdicts))
    return int(verdict)


if __name__ == "__main__":
    sys.exit(main())
