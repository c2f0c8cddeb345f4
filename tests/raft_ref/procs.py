"""Quorum nodes as real processes (``python -m server_ref.raft``), for fault tests.

Each node's stdout events are read by a thread into a list the test waits on; SIGKILL,
SIGSTOP and SIGCONT go to the real process. Ports are chosen once per quorum and kept
across restarts (voters must know each other's endpoints).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from server_ref.cluster.processes import free_port

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 30.0


def free_ports(n: int) -> list[int]:
    return [free_port() for _ in range(n)]


class NodeProc:
    def __init__(self, node_id: int, voters: str, data_dir: Path, extra: list[str]) -> None:
        self.node_id = node_id
        self.voters = voters
        self.data_dir = data_dir
        self.extra = extra
        self.proc: subprocess.Popen[str] | None = None
        self.events: list[str] = []
        self._lock = threading.Condition()
        self.lives = 0

    # ------------------------------------------------------------------ process control

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        cmd = [sys.executable, "-m", "server_ref.raft", "--node-id", str(self.node_id),
               "--voters", self.voters, "--data-dir", str(self.data_dir), *self.extra]
        log = open(self.data_dir.parent / f"node-{self.node_id}.stderr", "a")
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=log, text=True,
                                     env={**os.environ, "PYTHONPATH": str(REPO)})
        self.lives += 1
        with self._lock:
            self.events.append(f"--- life {self.lives}")
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()
        self.wait_for(lambda e: e.startswith("ready"), since=self.life_start())

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            with self._lock:
                self.events.append(line.rstrip("\n"))
                self._lock.notify_all()

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGCONT)
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def send(self, line: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    # ------------------------------------------------------------------ events

    def life_start(self) -> int:
        with self._lock:
            return max(i for i, e in enumerate(self.events) if e.startswith("--- life"))

    def wait_for(self, pred: Callable[[str], bool], since: int = 0,
                 timeout: float = WAIT_S) -> str:
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                for e in self.events[since:]:
                    if pred(e):
                        return e
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"node {self.node_id}: no matching event in {timeout}s; "
                        f"last events: {self.events[-15:]}")
                self._lock.wait(left)

    def state(self) -> tuple[int, list[str]]:
        """``(last applied offset, entries)`` of the node's list state machine, asked now."""
        since = len(self.events)
        self.send("state")
        line = self.wait_for(lambda e: e.startswith("state "), since=since)
        _, last, *rest = line.split(" ", 2)
        values = rest[0].split(",") if rest and rest[0] else []
        return int(last), [bytes.fromhex(h).decode() for h in values]

    def leader(self) -> tuple[int, int]:
        """The last ``(leader id, epoch)`` this life announced (-1, -1 if none)."""
        with self._lock:
            for e in reversed(self.events[self.life_start():]):
                if e.startswith("leader "):
                    _, lid, epoch = e.split()
                    return int(lid), int(epoch)
        return -1, -1

    def applied(self) -> list[str]:
        """The entries this life applied, in order: snapshot contents are not known here,
        so a snapshot resets the list to ``<snapshot N>`` followed by later commits."""
        out: list[str] = []
        with self._lock:
            for e in self.events[self.life_start():]:
                if e.startswith("commit "):
                    parts = e.split(" ", 3)
                    out.extend(bytes.fromhex(h).decode() for h in parts[3].split(",") if h)
                elif e.startswith("snapshot "):
                    out = [f"<snapshot {e.split()[2]}>"]
        return out


class Quorum:
    """Voters 1..n (+ observers 1001...) as processes on loopback."""

    def __init__(self, tmp: Path, voters: int = 3, observers: int = 1,
                 election_timeout_ms: int = 400, fetch_timeout_ms: int = 1000,
                 log_level: str = "INFO", cluster_id: str = "raft-test-cluster") -> None:
        ports = free_ports(voters)
        self.spec = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(ports))
        extra = ["--election-timeout-ms", str(election_timeout_ms),
                 "--fetch-timeout-ms", str(fetch_timeout_ms), "--fetch-max-wait-ms", "200",
                 "--cluster-id", cluster_id, "--log-level", log_level]
        self.nodes: dict[int, NodeProc] = {}
        for i in range(1, voters + 1):
            self.nodes[i] = NodeProc(i, self.spec, tmp / f"n{i}", extra)
        for j in range(observers):
            self.nodes[1001 + j] = NodeProc(1001 + j, self.spec, tmp / f"o{j}", extra)
        self.ports = dict(zip(range(1, voters + 1), ports, strict=True))

    def __enter__(self) -> Quorum:
        for n in self.nodes.values():
            n.data_dir.mkdir(parents=True, exist_ok=True)
        for n in self.nodes.values():
            n.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for n in self.nodes.values():
            n.stop()

    @property
    def voters(self) -> list[NodeProc]:
        return [n for i, n in self.nodes.items() if i < 1000]

    def wait_leader(self, *, above_epoch: int = -1, among: list[int] | None = None,
                    timeout: float = WAIT_S) -> tuple[int, int]:
        """Until every live node named in ``among`` (default: all live) reports the same
        leader in an epoch above ``above_epoch``; returns ``(leader, epoch)``."""
        deadline = time.monotonic() + timeout
        while True:
            ids = among if among is not None else [i for i, n in self.nodes.items() if n.alive]
            seen = {self.nodes[i].leader() for i in ids}
            if len(seen) == 1:
                lid, epoch = next(iter(seen))
                if lid >= 0 and epoch > above_epoch and lid in ids:
                    return lid, epoch
            if time.monotonic() > deadline:
                raise AssertionError(f"no agreed leader above epoch {above_epoch}: {seen}")
            time.sleep(0.05)

    def append(self, leader: int, values: list[str]) -> int:
        """Append through ``leader``; the committed last offset. If that node no longer
        leads (a load spike on a shared machine can cost an election) nothing was written,
        so the entries go to the current leader instead; any other error fails."""
        for _attempt in range(5):
            node = self.nodes[leader]
            since = len(node.events)
            node.send("append " + " ".join(v.encode().hex() for v in values))
            e = node.wait_for(lambda e: e.startswith(("appended", "append-error")),
                              since=since)
            if e.startswith("appended"):
                return int(e.split()[1])
            assert e.endswith(" RaftNotLeaderError"), e
            leader, _epoch = self.wait_leader()
        raise AssertionError(f"no leader took {values[:3]}...")

    def wait_applied(self, node_ids: list[int], expected: list[str],
                     timeout: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout
        while True:
            got = {i: self.nodes[i].applied() for i in node_ids}
            if all(v == expected for v in got.values()):
                return
            bad = {i: v for i, v in got.items() if v != expected}
            if time.monotonic() > deadline or any(v[:len(expected)] != expected[:len(v)]
                                                  for v in bad.values()):
                raise AssertionError(f"expected {len(expected)} entries "
                                     f"(last {expected[-3:]}); got {({i: v[-5:] for i, v in bad.items()})}, "
                                     f"lengths {({i: len(v) for i, v in bad.items()})}")
            time.sleep(0.05)
