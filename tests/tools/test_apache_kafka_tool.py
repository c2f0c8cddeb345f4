"""tools/apache_kafka.py: its command line and the process control it shares with our
cluster (server_ref/cluster/processes.py), on one combined Apache Kafka node (the cheapest
JVM cluster: the 3-broker shape runs in tests/cluster/).

* ``python tools/apache_kafka.py start --brokers 2 --controllers 3`` prints ``apache-kafka
  ready bootstrap_servers=...`` and one ``node ID role=... pid=... port=...`` line per node,
  serves, and on SIGTERM stops every JVM and removes the data directory it made.
* ``ApacheKafkaCluster``: ``describe``, ``leader_of``, ``pause`` (the broker stops
  answering) and ``resume``, ``kill`` (the process is gone) and ``start`` (back on the
  same port, with the topic it had).
* Without ``java`` and ``mvn`` the Apache targets skip with that reason, and ``fetch
  --optional`` (``make test``) says so and succeeds; under ``REQUIRE_APACHE_KAFKA=1``
  (``.ci/run``) both fail instead.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from apache_support import apache_cluster, require_apache_kafka

from sdk import AdminClient, NewTopic, Producer
from server_ref.cluster.processes import metadata
from tools import apache_kafka

ROOT = Path(__file__).resolve().parents[2]
NODE_LINE = re.compile(r"node (\d+) role=(broker|controller) pid=(\d+) port=(\d+)")


def _gone(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_command_line_start_and_sigterm(tmp_path: Path) -> None:
    """``start --brokers 2 --controllers 3``: a dedicated quorum of three controllers (101..103)
    and brokers 1 and 2, each its own JVM, in a temporary directory that SIGTERM removes."""
    require_apache_kafka()
    temp = tmp_path / "tmp"  # where the command makes its data directory
    temp.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "tools/apache_kafka.py", "start", "--brokers", "2",
         "--controllers", "3", "--config", "group.initial.rebalance.delay.ms=0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "TMPDIR": str(temp)})
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        assert ready.startswith("apache-kafka ready bootstrap_servers="), (
            ready, proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
        bootstrap = ready.strip().split("=", 1)[1]
        nodes = [NODE_LINE.fullmatch(proc.stdout.readline().strip()) for _ in range(5)]
        assert all(nodes), nodes
        roles = [(n[1], n[2]) for n in nodes if n is not None]
        assert roles == [("101", "controller"), ("102", "controller"), ("103", "controller"),
                         ("1", "broker"), ("2", "broker")]
        brokers = [n for n in nodes if n is not None and n[2] == "broker"]
        assert bootstrap == ",".join(f"127.0.0.1:{n[4]}" for n in brokers)
        (data_dir,) = temp.iterdir()  # one directory, a subdirectory per node
        assert sorted(d.name for d in data_dir.iterdir()) == [
            f"node-{i}" for i in ("1", "101", "102", "103", "2")]
        assert (data_dir / "node-1" / "server.log").exists()  # log4j2: logs beside the data
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([NewTopic("cli-topic", 2, 2)]).raise_if_failed()
            assert {b.node_id for b in admin.describe_cluster().brokers} == {1, 2}
        with Producer(bootstrap_servers=bootstrap, acks="all") as producer:
            assert producer.send("cli-topic", b"x", partition=1).result(timeout=60).offset == 0
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(90) == 0
        deadline = time.monotonic() + 30
        for node in nodes:  # every JVM stopped with the command
            assert node is not None
            while not _gone(int(node[3])):
                assert time.monotonic() < deadline, f"node {node[1]}'s JVM outlived the command"
                time.sleep(0.2)
        assert list(temp.iterdir()) == []  # the data directory it made is gone
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def test_process_control() -> None:
    with apache_cluster(brokers=1) as cluster:
        assert cluster.describe() == [
            f"node 1 role=broker pid={cluster.nodes[1].pid} port={cluster.nodes[1].port}"]
        with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("control", 1, 1)]).raise_if_failed()
        deadline = time.monotonic() + 30
        while cluster.leader_of("control", 0) != 1:
            assert time.monotonic() < deadline, "no leader for control-0"
            time.sleep(0.2)

        cluster.pause(1)
        assert cluster.nodes[1].paused and cluster.nodes[1].running
        with pytest.raises((socket.timeout, TimeoutError)):
            metadata(cluster.nodes[1].port, timeout_s=1.0)  # a stopped JVM never answers
        cluster.resume(1)
        assert metadata(cluster.nodes[1].port, "control", 10.0)[1] == {0: 1}

        pid, port = cluster.nodes[1].pid, cluster.nodes[1].port
        assert pid is not None
        cluster.kill(1)
        assert not cluster.nodes[1].running and cluster.nodes[1].pid is None
        assert _gone(pid)
        cluster.start(1)  # waits until the broker is registered again
        assert cluster.nodes[1].port == port and cluster.nodes[1].pid != pid
        deadline = time.monotonic() + 60
        while cluster.leader_of("control", 0) != 1:  # the topic survived the crash
            assert time.monotonic() < deadline, "control-0 has no leader after the restart"
            time.sleep(0.2)


def test_without_java_or_maven_the_apache_targets_skip_with_the_reason_or_fail_in_ci(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # neither java nor mvn on it
    monkeypatch.setenv("KAFKA_SDK_CACHE", str(tmp_path / "cache"))  # nothing fetched there
    monkeypatch.delenv("REQUIRE_APACHE_KAFKA", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        require_apache_kafka()
    assert str(skipped.value) == ("Apache Kafka cannot run here: java and mvn not found on "
                                  "PATH")
    with pytest.raises(pytest.skip.Exception):  # the fixtures' way in skips the same way
        with apache_cluster(brokers=1):
            pass  # pragma: no cover - never reached
    # make test's fetch step says why and lets the suite run (the Apache tests then skip).
    assert apache_kafka.main(["fetch", "--optional"]) == 0
    assert capsys.readouterr().out == (
        "Apache Kafka not fetched (java and mvn not found on PATH): its tests will skip\n")

    monkeypatch.setenv("REQUIRE_APACHE_KAFKA", "1")  # what .ci/run sets
    with pytest.raises(pytest.fail.Exception) as failed:
        require_apache_kafka()
    assert str(failed.value) == ("Apache Kafka cannot run here: java and mvn not found on "
                                 "PATH (REQUIRE_APACHE_KAFKA is set)")
    with pytest.raises(apache_kafka.ApacheKafkaUnavailable, match="java and mvn not found"):
        apache_kafka.main(["fetch", "--optional"])  # a failed fetch fails CI's make test
    assert not (tmp_path / "cache").exists()


def test_a_cache_fetched_from_an_older_pom_is_fetched_again(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    """The cache records which pom it was resolved from: a cache made before the pom gained
    a jar (here: Kafka's storage test jar, for LocalTieredStorage) is resolved again, and a
    current one is used as it is."""
    require_apache_kafka()
    monkeypatch.setenv("KAFKA_SDK_CACHE", str(tmp_path))
    home = apache_kafka.install_dir()
    (home / "libs").mkdir(parents=True)
    (home / ".complete").write_text(f"{apache_kafka.DEFAULT_VERSION}\n")  # the old marker
    assert apache_kafka.fetch() == home
    assert any((home / "test-libs").glob("kafka-storage-*-test.jar"))
    assert not any((home / "libs").glob("*-test.jar"))  # its log4j2.yaml: not for tools
    marker = (home / ".complete").read_text()
    assert marker.startswith(apache_kafka.DEFAULT_VERSION + " ")
    (home / "libs" / "kafka_2.13-extra.jar").write_text("")  # a current cache is kept
    assert apache_kafka.fetch() == home
    assert (home / "libs" / "kafka_2.13-extra.jar").exists()
