"""``kafka-sdk top``: ``--once --json`` against a group with a known lag on each kind of
cluster (our broker, tansu, Apache Kafka), and the live view read through a real
pseudo-terminal (frames redrawn in place, the trend of a growing lag, ``q`` to quit)."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from integration.conftest import Target, start_target

from sdk import AdminClient, NewTopic, Producer
from sdk.types import TopicPartition

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
# Records per partition and the group's committed offsets: lag 0, 15 and 30 (total 45).
PRODUCED = {0: 10, 1: 20, 2: 30}
COMMITTED = {0: 10, 1: 5, 2: 0}
LAGS = {p: PRODUCED[p] - COMMITTED[p] for p in PRODUCED}


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def command(bootstrap: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "sdk", "top", "--bootstrap-server", bootstrap, *args]


def env() -> dict[str, str]:
    out = {**os.environ, "PYTHONPATH": str(ROOT)}
    out.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    return out


def produce(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    # One record per batch: tansu reports wrong high watermarks after multi-record batches
    # (../shared/PEERS.md), and end offsets are what lag is computed from.
    with Producer(bootstrap_servers=bootstrap, linger_ms=0) as producer:
        for partition, count in counts.items():
            for i in range(count):
                producer.send(topic, f"{partition}-{i}".encode(), partition=partition)
                producer.flush()


def lagging_group(bootstrap: str) -> tuple[str, str]:
    """A topic with PRODUCED records and a group (no members) committed at COMMITTED."""
    topic, group = name("top"), name("g")
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, len(PRODUCED), 1)]).raise_if_failed()
        produce(bootstrap, topic, PRODUCED)
        admin.alter_consumer_group_offsets(
            group, {TopicPartition(topic, p): o for p, o in COMMITTED.items()}
        ).raise_if_failed()
    return topic, group


@pytest.fixture(scope="module", params=["ref", "tansu", "kafka"])
def cluster(request: pytest.FixtureRequest) -> Iterator[Target]:
    with start_target(request.param) as target:
        yield target


def test_once_json_reports_the_exact_lag_of_a_known_group(cluster: Target) -> None:
    topic, group = lagging_group(cluster.bootstrap_servers)
    run = subprocess.run(command(cluster.bootstrap_servers, "--once", "--json", "--interval",
                                 "0", "--topic", topic, "--group", group),
                         capture_output=True, text=True, cwd=ROOT, env=env(), timeout=120)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert [t["topic"] for t in doc["topics"]] == [topic]
    assert doc["topics"][0]["partitions"] == 3
    assert doc["topics"][0]["end_offset"] == sum(PRODUCED.values())
    assert doc["topics"][0]["produce_rate"] is None  # one sample: no rates
    [entry] = doc["groups"]
    assert entry["group"] == group
    assert entry["total_lag"] == sum(LAGS.values())
    assert {p["partition"]: (p["committed"], p["end_offset"], p["lag"])
            for p in entry["partitions"]} == {
        p: (COMMITTED[p], PRODUCED[p], LAGS[p]) for p in PRODUCED}
    # A group with committed offsets and no members is Empty on Kafka and ours; tansu's
    # ListGroups v5 answers its state as "Unknown" (it keeps no state for such groups).
    assert entry["state"] == ("Unknown" if cluster.name == "tansu" else "Empty")
    assert doc["errors"] == []


def test_once_json_rates_come_from_two_samples(cluster: Target) -> None:
    topic, group = lagging_group(cluster.bootstrap_servers)
    done = threading.Event()

    def keep_producing() -> None:
        while not done.is_set():
            produce(cluster.bootstrap_servers, topic, {0: 5})

    writer = threading.Thread(target=keep_producing, daemon=True)
    writer.start()
    try:
        run = subprocess.run(command(cluster.bootstrap_servers, "--once", "--json",
                                     "--interval", "1", "--topic", topic, "--group", group),
                             capture_output=True, text=True, cwd=ROOT, env=env(), timeout=120)
    finally:
        done.set()
        writer.join(60)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["interval_s"] > 0
    [t] = doc["topics"]
    assert t["produce_rate"] > 0  # records were written between the two samples
    assert t["consume_rate"] == 0  # and the group committed nothing
    [entry] = doc["groups"]
    assert entry["consume_rate"] == 0
    assert entry["total_lag"] > sum(LAGS.values())
    assert entry["trend"] == "up"


# ---------------------------------------------------------------------------- the terminal


class Terminal:
    """The CLI on the slave side of a pseudo-terminal; the test reads the master side."""

    def __init__(self, argv: list[str]) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        os.set_blocking(self.master, False)

        def controlling_terminal() -> None:  # as a shell does: Ctrl-C becomes SIGINT
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=ROOT,
                                     env={**env(), "TERM": "xterm"},
                                     preexec_fn=controlling_terminal)
        os.close(slave)
        self.output = b""

    def read_until(self, pattern: str, timeout_s: float = 60.0) -> str:
        """Everything read so far, once ``pattern`` (a regex) appears in the last frame."""
        deadline = time.monotonic() + timeout_s
        while True:
            frame = self.last_frame()
            if re.search(pattern, frame, re.MULTILINE):
                return frame
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                raise AssertionError(f"no frame matching {pattern!r}; last one:\n{frame}")
            ready, _, _ = select.select([self.master], [], [], min(left, 0.5))
            if ready:
                try:
                    self.output += os.read(self.master, 1 << 16)
                except OSError:  # the slave side closed
                    pass

    def drain(self) -> None:
        """Read what the exited process left in the terminal."""
        while True:
            ready, _, _ = select.select([self.master], [], [], 1.0)
            if not ready:
                return
            try:
                data = os.read(self.master, 1 << 16)
            except OSError:
                return
            if not data:
                return
            self.output += data

    def last_frame(self) -> str:
        text = self.output.decode("utf-8", "replace").replace("\r\n", "\n")
        return text.rsplit("\x1b[H\x1b[2J", 1)[-1]

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
        os.close(self.master)


@pytest.fixture(scope="module")
def ref() -> Iterator[Target]:
    with start_target("ref") as target:
        yield target


def test_live_view_redraws_shows_a_growing_lag_and_quits_on_q(ref: Target) -> None:
    topic, group = lagging_group(ref.bootstrap_servers)
    other = name("other")  # a group the --group filter leaves out
    with AdminClient(bootstrap_servers=ref.bootstrap_servers) as admin:
        admin.alter_consumer_group_offsets(other, {TopicPartition(topic, 0): 1}
                                           ).raise_if_failed()
    term = Terminal(command(ref.bootstrap_servers, "--interval", "0.3", "--topic", topic,
                            "--group", group))
    try:
        first = term.read_until(rf"^{group}\s+Empty\s+45\b")
        assert re.search(rf"^{topic}\s+3\s+60\b", first, re.MULTILINE)
        assert re.search(rf"^  {topic}-1\s+15\b", first, re.MULTILINE)
        assert re.search(rf"^  {topic}-2\s+30\b", first, re.MULTILINE)
        assert other not in first
        # Lag grows by 7 on partition 1: the next frames show it with an upward arrow.
        produce(ref.bootstrap_servers, topic, {1: 7})
        grown = term.read_until(rf"^{group}\s+Empty\s+52\s+↑")
        assert re.search(rf"^  {topic}-1\s+22\s+↑", grown, re.MULTILINE)
        assert re.search(rf"^  {topic}-0\s+0\s+→", grown, re.MULTILINE)
        # Nothing changes: the arrows settle.
        term.read_until(rf"^{group}\s+Empty\s+52\s+→")
        assert term.output.count(b"\x1b[H\x1b[2J") >= 3  # redrawn in place, frame by frame
        assert b"\x1b[?25l" in term.output  # cursor hidden while drawing
        term.type(b"q")
        assert term.proc.wait(30) == 0
        term.drain()
        assert term.output.rstrip().endswith(b"\x1b[?25h")  # and shown again at exit
    finally:
        term.close()


def test_live_view_ends_cleanly_on_ctrl_c(ref: Target) -> None:
    topic, group = lagging_group(ref.bootstrap_servers)
    term = Terminal(command(ref.bootstrap_servers, "--topic", topic, "--group", group))
    try:
        term.read_until(rf"^{group}\s+Empty\s+45\b")
        term.type(b"\x03")  # the terminal turns Ctrl-C into SIGINT for the process group
        assert term.proc.wait(30) == 0
    finally:
        term.close()


def test_many_groups_by_pattern(ref: Target) -> None:
    topic, _ = lagging_group(ref.bootstrap_servers)
    prefix = name("many")
    with AdminClient(bootstrap_servers=ref.bootstrap_servers) as admin:
        for i in range(12):  # group i committed offset i on partition 2 (lag 30 - i)
            admin.alter_consumer_group_offsets(f"{prefix}-{i}", {TopicPartition(topic, 2): i}
                                               ).raise_if_failed()
    run = subprocess.run(command(ref.bootstrap_servers, "--once", "--json", "--interval", "0",
                                 "--group", f"{prefix}-*"),
                         capture_output=True, text=True, cwd=ROOT, env=env(), timeout=120)
    assert run.returncode == 0, run.stderr
    lags = {g["group"]: g["total_lag"] for g in json.loads(run.stdout)["groups"]}
    assert lags == {f"{prefix}-{i}": PRODUCED[2] - i for i in range(12)}


def test_usage_errors(ref: Target) -> None:
    run = subprocess.run(command(ref.bootstrap_servers, "--interval", "-1"),
                         capture_output=True, text=True, cwd=ROOT, env=env(), timeout=60)
    assert run.returncode == 2
    assert "--interval" in run.stderr and "must be a finite number >= 0" in run.stderr
    run = subprocess.run(command(ref.bootstrap_servers, "--interval", "0"),
                         capture_output=True, text=True, cwd=ROOT, env=env(), timeout=60)
    assert run.returncode == 2
    assert run.stderr.strip() == ("kafka-sdk: error: --interval must be > 0 for the live "
                                  "view (0 only with --once)")


# ---------------------------------------------------------------------------- the view alone


def test_view_rates_trends_and_unknowns() -> None:
    from sdk.cli.top import Sample, build_view, render

    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    first = Sample(10.0, ends={a: 100, b: 50}, groups={"g": "Stable"},
                   committed={"g": {a: 90, b: 50}})
    second = Sample(12.0, ends={a: 140, b: 50, TopicPartition("t", 2): 0},
                    groups={"g": "Stable"},
                    committed={"g": {a: 100, b: 50, TopicPartition("gone", 0): 7}})
    doc = build_view("host:1", second, first).document
    [topic] = doc["topics"]
    # A partition appeared between the samples: no produce rate this time.
    assert topic["partitions"] == 3 and topic["produce_rate"] is None
    assert topic["consume_rate"] == 5.0  # 10 committed offsets in 2 s
    [group] = doc["groups"]
    assert group["consume_rate"] == 5.0
    lags = {(p["topic"], p["partition"]): (p["lag"], p["trend"]) for p in group["partitions"]}
    assert lags == {("t", 0): (40, "up"), ("t", 1): (0, "steady"),
                    ("gone", 0): (None, None)}  # a topic no longer listed: lag unknown
    assert group["total_lag"] is None and group["trend"] is None
    third = Sample(13.0, ends={a: 140, b: 50}, groups={"g": "Stable"},
                   committed={"g": {a: 130, b: 50}})
    doc = build_view("host:1", third, Sample(12.0, ends={a: 140, b: 50},
                                             committed={"g": {a: 100, b: 50}}))
    assert doc.document["topics"][0]["produce_rate"] == 0.0
    assert doc.document["groups"][0]["total_lag"] == 10
    assert doc.document["groups"][0]["trend"] == "down"
    frame = "\n".join(render(doc, 1.0))
    assert re.search(r"^g\s+Stable\s+10\s+↓\s+30\.0$", frame, re.MULTILINE)
    assert re.search(r"^  t-0\s+10\s+↓$", frame, re.MULTILINE)
