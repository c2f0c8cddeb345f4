"""The reference broker as a subprocess, for third-party clients to talk to."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
READY = re.compile(r"server_ref ready bootstrap_servers=(\S+) data_dir=")
TEST_CONFIG = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "5",
    "group.min.session.timeout.ms": "1000",
}
CODECS = ("gzip", "snappy", "lz4", "zstd")


class BrokerProcess:
    """``python -m server_ref`` on a fixed port (so a restart keeps the address)."""

    def __init__(self, data_dir: Path, *, fsync: bool = False,
                 config: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.fsync = fsync
        self.config = {**TEST_CONFIG, **(config or {})}
        self.port = 0
        self.bootstrap = ""
        self.proc: subprocess.Popen[str] | None = None
        self.stderr_lines: list[str] = []
        self.log_level = "INFO"

    def start(self) -> BrokerProcess:
        args = [sys.executable, "-m", "server_ref", "--port", str(self.port),
                "--data-dir", str(self.data_dir), "--log-level", self.log_level]
        for key, value in self.config.items():
            args += ["--config", f"{key}={value}"]
        if self.fsync:
            args.append("--fsync")
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env, cwd=ROOT)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        threading.Thread(target=self._collect, args=(self.proc.stderr,), daemon=True).start()
        line = self.proc.stdout.readline()
        match = READY.match(line)
        if not match:
            self.proc.kill()
            raise RuntimeError(f"broker did not start: {line!r}\n{''.join(self.stderr_lines)}")
        self.bootstrap = match[1]
        self.port = int(self.bootstrap.rsplit(":", 1)[1])
        return self

    def _collect(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self.stderr_lines.append(line)

    def stop(self) -> int:
        """SIGTERM and wait: a clean shutdown."""
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(60)
        self.proc = None
        return code

    def kill(self) -> None:
        """SIGKILL: a crash, nothing flushed that was not already."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(60)
            self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def log_text(self) -> str:
        return "".join(self.stderr_lines)


def wait_until(predicate: Callable[[], bool], timeout: float = 30.0,
               interval: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        time.sleep(interval)


def expected_records(codec: str, count: int) -> list[tuple[bytes, bytes, list[tuple[str, bytes]]]]:
    return [(f"{codec}-key-{i}".encode(), f"{codec}-value-{i}".encode() * 3,
             [("codec", codec.encode()), ("index", str(i).encode())]) for i in range(count)]


def as_sorted(items: Sequence[tuple[bytes, bytes, Sequence[tuple[str, bytes]]]]) -> list:
    return sorted((k, v, tuple(h)) for k, v, h in items)


def split_between(assignments: list[set], partitions: int) -> bool:
    """True once every member holds partitions and together they hold each exactly once."""
    union = set().union(*assignments)
    return all(assignments) and len(union) == partitions == sum(map(len, assignments))


class GroupRun:
    """What the member threads of a group test share: ``got`` (records received, under
    ``lock``), ``current`` (each member's assigned partitions) and ``done`` (stop)."""

    def __init__(self, members: int) -> None:
        self.got: list = []
        self.current: list[set] = [set() for _ in range(members)]
        self.lock = threading.Lock()
        self.done = threading.Event()

    def drive(self, member: Callable[[int], None], produce: Callable[[], list], *,
              partitions: int, receive_timeout: float) -> list:
        """Run ``member(i)`` on a thread per member; once they have split the partitions,
        call ``produce`` and wait until everything it sent was received; then stop the
        members. Returns what ``produce`` sent."""
        threads = [threading.Thread(target=member, args=(i,)) for i in range(len(self.current))]
        for t in threads:
            t.start()
        try:
            wait_until(lambda: split_between(self.current, partitions), timeout=60)
            sent = produce()
            wait_until(lambda: len(self.got) >= len(sent), timeout=receive_timeout)
        finally:
            self.done.set()
            for t in threads:
                t.join(30)
        return sent
