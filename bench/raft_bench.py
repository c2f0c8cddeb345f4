"""The metadata quorum's commit path: 3 voters (+ 1 observer) as processes on loopback.

Phases: sequential appends (one batch in flight: the commit latency a controller sees for
one metadata change — leader write, follower fetch, HW advance, the follower's next fetch
not needed) and pipelined appends (many batches in flight: entries committed per second).
Also the time to elect a new leader after SIGKILL of the leader is printed per round, with
the settings used (it is dominated by the randomized election timeout, by design).

    .venv/bin/python bench/raft_bench.py [--entries 2000] [--kills 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from raft_ref.procs import Quorum  # the tests' process driver


def sequential(quorum: Quorum, leader: int, n: int) -> list[float]:
    out = []
    for i in range(n):
        t = time.perf_counter()
        quorum.append(leader, [f"seq-{i}"])
        out.append(time.perf_counter() - t)
    return out


def pipelined(quorum: Quorum, leader: int, n: int) -> float:
    node = quorum.nodes[leader]
    since = len(node.events)
    t = time.perf_counter()
    for i in range(n):
        node.send("append " + f"pipe-{i}".encode().hex())
    while sum(1 for e in node.events[since:] if e.startswith("appended")) < n:
        time.sleep(0.005)
    return n / (time.perf_counter() - t)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--kills", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, \
            Quorum(Path(tmp), election_timeout_ms=400, fetch_timeout_ms=1000,
                   log_level="WARNING") as quorum:
        leader, epoch = quorum.wait_leader()
        sequential(quorum, leader, 50)  # warm-up
        lat = sequential(quorum, leader, args.entries // 4)
        lat.sort()
        print(f"sequential: {len(lat)} appends, commit latency p50 "
              f"{statistics.median(lat) * 1000:.2f} ms, p99 "
              f"{lat[int(len(lat) * 0.99)] * 1000:.2f} ms")
        rate = pipelined(quorum, leader, args.entries)
        print(f"pipelined: {args.entries} appends, {rate:,.0f} committed batches/s")
        for k in range(args.kills):
            t = time.perf_counter()
            quorum.nodes[leader].kill()
            new, epoch = quorum.wait_leader(above_epoch=epoch)
            print(f"kill {k + 1}: leader {leader} killed, {new} leads epoch {epoch} after "
                  f"{time.perf_counter() - t:.2f} s (election timeout 400-800 ms, fetch "
                  "timeout 1000 ms)")
            quorum.nodes[leader].start()
            leader = new


if __name__ == "__main__":
    main()
