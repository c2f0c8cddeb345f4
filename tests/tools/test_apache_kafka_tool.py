"""tools/apache_kafka.py: its command line and the process control it shares with our
cluster (server_ref/cluster/processes.py), on one combined Apache Kafka node (the cheapest
JVM cluster: the 3-broker shape runs in tests/cluster/).

* ``python tools/apache_kafka.py start`` prints ``apache-kafka ready bootstrap_servers=...``
  and one ``node ID role=... pid=... port=...`` line per node, serves, and stops on SIGTERM.
* ``ApacheKafkaCluster``: ``describe``, ``leader_of``, ``pause`` (the broker stops
  answering) and ``resume``, ``kill`` (the process is gone) and ``start`` (back on the
  same port, with the topic it had).
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

ROOT = Path(__file__).resolve().parents[2]
NODE_LINE = re.compile(r"node (\d+) role=(broker|controller) pid=(\d+) port=(\d+)")


def _gone(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_command_line_start_and_sigterm(tmp_path: Path) -> None:
    require_apache_kafka()
    proc = subprocess.Popen(
        [sys.executable, "tools/apache_kafka.py", "start", "--brokers", "1",
         "--data-dir", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env=dict(os.environ))
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        assert ready.startswith("apache-kafka ready bootstrap_servers="), (
            ready, proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
        bootstrap = ready.strip().split("=", 1)[1]
        node = NODE_LINE.fullmatch(proc.stdout.readline().strip())
        assert node is not None
        assert (node[1], node[2]) == ("1", "broker")  # the combined node shows as a broker
        assert bootstrap == f"127.0.0.1:{node[4]}"
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([NewTopic("cli-topic", 1, 1)]).raise_if_failed()
        with Producer(bootstrap_servers=bootstrap) as producer:
            assert producer.send("cli-topic", b"x").result(timeout=60).offset == 0
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(90) == 0
        deadline = time.monotonic() + 30
        while not _gone(int(node[3])):  # the JVM stopped with the command
            assert time.monotonic() < deadline, "the node's JVM outlived the command"
            time.sleep(0.2)
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
