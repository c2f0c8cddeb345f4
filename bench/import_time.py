"""How long ``import sdk`` takes: min of N fresh interpreters, and the top -X importtime entries.

The target is well under 200 ms for ``import sdk``. Each statement is timed inside the child
interpreter, so start-up is not counted (it is shown alone for reference). The minimum is
quoted because this machine's CPU speed drifts; the median is shown beside it.

    .venv/bin/python bench/import_time.py [--runs 10] [--top 12]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_MS = 200.0

STATEMENTS = [
    "import sdk",
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


def fresh_ms(statement: str) -> float:
    """Milliseconds one fresh interpreter spends on ``statement`` (imports only, no start-up)."""
    out = subprocess.run([sys.executable, "-c", TIMER.format(statement=statement)],
                         capture_output=True, text=True, cwd=ROOT, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def startup_ms() -> float:
    import time

    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True, cwd=ROOT)
    return (time.perf_counter() - t0) * 1000


def importtime_top(statement: str, top: int) -> list[tuple[int, int, str]]:
    """(self us, cumulative us, module) of the ``top`` largest cumulative entries."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", statement],
                         capture_output=True, text=True, cwd=ROOT, check=True)
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
    for statement in STATEMENTS:
        times = sorted(fresh_ms(statement) for _ in range(args.runs))
        print(f"{statement:<{width}} {times[0]:8.2f} {statistics.median(times):8.2f}")
        if statement == "import sdk" and times[0] >= TARGET_MS:
            verdict = 1

    for statement in STATEMENTS[:2]:
        print(f"\n-X importtime, top {args.top} by cumulative time: {statement}")
        print(f"{'self us':>9} {'cumul us':>9}  module")
        for self_us, cumulative_us, name in importtime_top(statement, args.top):
            print(f"{self_us:9d} {cumulative_us:9d}  {name}")

    status = "OK" if verdict == 0 else "OVER"
    print(f"\n`import sdk` target: under {TARGET_MS:.0f} ms -> {status}")
    return verdict


if __name__ == "__main__":
    sys.exit(main())
