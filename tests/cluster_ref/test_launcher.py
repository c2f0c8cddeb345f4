"""Running our broker as a cluster: the command line and the controller quorum.

* ``python -m server_ref --brokers 3 --controllers 3 --data-dir DIR`` prints the ready line
  and one ``node ID role=... pid=... port=...`` line per node, as ``tools/apache_kafka.py
  start`` does; every node serves; SIGTERM stops them all.
* With 3 controllers, killing (then pausing) the active controller elects another; topics
  created before are still there, new ones can be created, and brokers keep serving.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from cluster.conftest import wait_for

from sdk import AdminClient, NewTopic, Producer
from server_ref.cluster import EmbeddedCluster

ROOT = Path(__file__).resolve().parents[2]
NODE_LINE = re.compile(r"node (\d+) role=(broker|controller) pid=(\d+) port=(\d+)")


def test_command_line_cluster(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "server_ref", "--brokers", "3", "--controllers", "3",
         "--data-dir", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        assert ready.startswith("server_ref ready bootstrap_servers="), ready
        bootstrap = ready.strip().split("=", 1)[1]
        nodes = [NODE_LINE.fullmatch(proc.stdout.readline().strip()) for _ in range(6)]
        assert all(nodes), nodes
        roles = {int(m[1]): m[2] for m in nodes if m}
        assert roles == {101: "controller", 102: "controller", 103: "controller",
                         1: "broker", 2: "broker", 3: "broker"}
        pids = [int(m[3]) for m in nodes if m]
        assert bootstrap == ",".join(f"127.0.0.1:{m[4]}" for m in nodes
                                     if m and m[2] == "broker")
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([NewTopic("cli", 3, 3)]).raise_if_failed()
        with Producer(bootstrap_servers=bootstrap, acks="all") as producer:
            assert producer.send("cli", b"x").result(timeout=30).offset == 0
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        for pid in pids:  # every node stopped with the launcher
            wait_for(lambda pid=pid: not Path(f"/proc/{pid}").exists() or
                     Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z", 30,
                     f"node process {pid} gone")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def test_active_controller_failover() -> None:
    config = {"broker.session.timeout.ms": "6000", "broker.heartbeat.interval.ms": "1000"}
    with EmbeddedCluster(brokers=3, controllers=3, config=config) as cluster:
        bootstrap = cluster.bootstrap_servers
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([NewTopic("before", 3, 3)]).raise_if_failed()
        for fault in ("kill", "pause"):
            active = wait_for(cluster.active_controller, 30, "an active controller")
            (cluster.kill if fault == "kill" else cluster.pause)(active)
            successor = wait_for(lambda a=active: (lambda c: c if c not in (None, a)
                                                   else None)(cluster.active_controller()),
                                 30, "another active controller")
            assert successor != active
            with AdminClient(bootstrap_servers=bootstrap) as admin:
                admin.create_topics([NewTopic(f"after-{fault}", 3, 3)]).raise_if_failed()
                names = set(admin.list_topics())
            assert {"before", f"after-{fault}"} <= names
            with Producer(bootstrap_servers=bootstrap, acks="all") as producer:
                producer.send(f"after-{fault}", b"x").result(timeout=30)
            if fault == "kill":
                cluster.start(active)
            else:
                cluster.resume(active)
            time.sleep(0.5)
        cluster.wait_ready()
