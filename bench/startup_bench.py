"""Start-up of our clients in a fresh process: construct, then the first answer.

Each sample is one fresh interpreter that imports the face (outside the clock, as
``bench/import_time.py`` measures it), then times

* ``construct``: the constructor (``Producer(...)``, ``AsyncProducer(...)`` with its
  ``start()``, ``Consumer(...)`` + ``assign``, ``AdminClient(...)``), and
* ``first``: from there to the first record acknowledged (producers, ``acks=all``,
  ``linger_ms=5``), the first record delivered (the consumer, earliest offset of one
  partition) or the first answer (admin: ``describe_cluster``).

Clients take turns within a round and the order rotates each round (interleaved), so a
drift of the shared machine's speed hits every client alike. Medians with the lowest and
highest. The children get bytecode caches (a temporary ``PYTHONPYCACHEPREFIX``, warmed by
one untimed round) even when the environment sets ``PYTHONDONTWRITEBYTECODE``.

    .venv/bin/python bench/startup_bench.py [--rounds 9] [--bootstrap host:port]
        [--tree DIR --tree DIR2 ...]   # checkouts to compare (e.g. a git archive export
                                       # of the commit before a change), interleaved too

Without ``--bootstrap`` a reference broker is started in its own process for the run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOPIC = "startup-bench"
CLIENTS = ("Producer", "AsyncProducer", "Consumer", "AdminClient")

CHILD = r'''
import asyncio, json, sys, time
boot, topic, client = sys.argv[1:4]
if client == "Producer":
    from sdk import Producer
    t0 = time.perf_counter()
    p = Producer(bootstrap_servers=boot, linger_ms=5)
    t1 = time.perf_counter()
    p.send(topic, b"x" * 100).result(30)
    t2 = time.perf_counter()
    p.close()
elif client == "AsyncProducer":
    from sdk import AsyncProducer
    async def run():
        t0 = time.perf_counter()
        p = AsyncProducer(bootstrap_servers=boot, linger_ms=5)
        await p.start()
        t1 = time.perf_counter()
        await p.send_and_wait(topic, b"x" * 100)
        t2 = time.perf_counter()
        await p.close()
        return t0, t1, t2
    t0, t1, t2 = asyncio.run(run())
elif client == "Consumer":
    from sdk import Consumer, TopicPartition
    from datetime import timedelta
    t0 = time.perf_counter()
    c = Consumer(bootstrap_servers=boot, auto_offset_reset="earliest")
    c.assign([TopicPartition(topic, 0)])
    t1 = time.perf_counter()
    while not c.poll(timedelta(milliseconds=100)):
        if time.perf_counter() - t1 > 30:
            raise SystemExit("no record in 30 s")
    t2 = time.perf_counter()
    c.close()
else:
    from sdk import AdminClient
    t0 = time.perf_counter()
    a = AdminClient(bootstrap_servers=boot)
    t1 = time.perf_counter()
    a.describe_cluster()
    t2 = time.perf_counter()
    a.close()
print(json.dumps({"construct": t1 - t0, "first": t2 - t1}))
'''


def child_env(tree: Path, cache: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = cache
    env["PYTHONPATH"] = str(tree)
    return env


def sample(tree: Path, env: dict[str, str], boot: str, client: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, boot, TOPIC, client], cwd=tree,
                         env=env, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"{client} failed:\n{out.stderr[-2000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def start_broker() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "server_ref", "--port", "0"], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "bootstrap_servers=" not in line:
        proc.kill()
        raise RuntimeError(f"the reference broker did not start: {line!r}")
    return proc, line.split("bootstrap_servers=")[1].split()[0]


def seed(tree: Path, env: dict[str, str], boot: str) -> None:
    """The topic, with a record in partition 0 for the consumer."""
    code = ("import sys; from sdk import Producer\n"
            "with Producer(bootstrap_servers=sys.argv[1]) as p:\n"
            "    p.send(sys.argv[2], b'seed', partition=0).result(30)\n")
    subprocess.run([sys.executable, "-c", code, boot, TOPIC], cwd=tree, env=env, check=True,
                   timeout=120)


def spread(values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    return f"{statistics.median(ms):6.1f} ms ({ms[0]:.1f}-{ms[-1]:.1f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--bootstrap", help="a running broker (default: start our reference broker)")
    ap.add_argument("--tree", type=Path, action="append",
                    help="an SDK checkout the children run (repeat to compare; default: this one)")
    ap.add_argument("--clients", default=",".join(CLIENTS))
    args = ap.parse_args()
    clients = args.clients.split(",")
    unknown = set(clients) - set(CLIENTS)
    if unknown:
        ap.error(f"unknown client(s) {sorted(unknown)}; choose from {', '.join(CLIENTS)}")

    trees = [t.resolve() for t in (args.tree or [ROOT])]
    cases = [(tree, client) for tree in trees for client in clients]
    broker = None
    boot = args.bootstrap
    if boot is None:
        broker, boot = start_broker()
    try:
        with tempfile.TemporaryDirectory(prefix="kafka-sdk-pycache-") as cache:
            envs = {tree: child_env(tree, f"{cache}/{i}") for i, tree in enumerate(trees)}
            seed(trees[0], envs[trees[0]], boot)
            for tree, client in cases:  # untimed: bytecode caches
                sample(tree, envs[tree], boot, client)
            results: dict[tuple[Path, str], list[dict[str, float]]] = {c: [] for c in cases}
            for r in range(args.rounds):
                order = cases[r % len(cases):] + cases[:r % len(cases)]
                for tree, client in order:
                    results[tree, client].append(sample(tree, envs[tree], boot, client))
                time.sleep(0.05)
    finally:
        if broker is not None:
            broker.terminate()
            broker.wait(30)

    print(f"broker {boot}, {args.rounds} interleaved rounds; median (lowest-highest)")
    for tree in trees:
        print(f"\ntree {tree}")
        print(f"{'client':<14} {'construct':>26} {'to first answer':>26} {'total':>26}")
        for client in clients:
            runs = results[tree, client]
            print(f"{client:<14} {spread([x['construct'] for x in runs]):>26} "
                  f"{spread([x['first'] for x in runs]):>26} "
                  f"{spread([x['construct'] + x['first'] for x in runs]):>26}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
