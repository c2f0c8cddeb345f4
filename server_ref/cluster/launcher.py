"""EmbeddedCluster: our broker as a cluster of OS processes on loopback.

    with EmbeddedCluster(brokers=3, controllers=1) as cluster:
        producer = Producer(bootstrap_servers=cluster.bootstrap_servers)
        cluster.kill(cluster.leader_of("t", 0))      # SIGKILL; start() brings it back

The same shape as ``tools/apache_kafka.py``'s ``ApacheKafkaCluster`` (``nodes``,
``brokers``, ``controllers``, ``kill``/``stop``/``start``/``pause``/``resume``,
``leader_of``, ``wait_ready``, ``describe``), so a test can run on either. Node ids are
Kafka's: brokers ``1..N``, controllers ``101..``. Each node is ``python -m
server_ref.cluster.node`` with its own data directory and a fixed port, so a restarted node
comes back on the same data and address.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["EmbeddedCluster", "ClusterNode"]

HOST = "127.0.0.1"
FIRST_CONTROLLER_ID = 101
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
REPO_ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _cluster_id() -> str:
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def cluster_defaults(brokers: int) -> dict[str, str]:
    """As ``tools/apache_kafka.py``: internal topics replicated as far as the cluster
    allows, fewer of their partitions (each is a replica set to keep in sync)."""
    replication = str(min(3, brokers))
    return {
        "offsets.topic.replication.factor": replication,
        "offsets.topic.num.partitions": "10",
        "transaction.state.log.replication.factor": replication,
        "transaction.state.log.min.isr": str(min(2, brokers)),
        "transaction.state.log.num.partitions": "10",
    }


@dataclass
class ClusterNode:
    node_id: int
    role: str  # "broker" or "controller"
    port: int
    directory: Path
    proc: subprocess.Popen[bytes] | None = None
    paused: bool = False
    listeners: dict[str, tuple[str, int]] = field(default_factory=dict)

    @property
    def is_broker(self) -> bool:
        return self.role == "broker"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def shown_role(self) -> str:
        return self.role


class EmbeddedCluster:
    """Brokers and a controller quorum of our broker, one process each (a context manager)."""

    def __init__(self, brokers: int = 3, controllers: int = 1, *,
                 data_dir: str | os.PathLike[str] | None = None,
                 config: Mapping[str, Any] | None = None, fsync: bool = False,
                 log_level: str = "WARNING") -> None:
        if brokers < 1:
            raise ValueError(f"brokers must be at least 1, got {brokers}")
        if controllers not in (1, 3):
            raise ValueError(f"controllers must be 1 or 3, got {controllers}")
        self.cluster_id = _cluster_id()
        self.config = {**cluster_defaults(brokers),
                       **{k: str(v) for k, v in (config or {}).items()}}
        self.fsync = fsync
        self.log_level = log_level
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir else Path(
            tempfile.mkdtemp(prefix="server_ref-cluster-"))
        self.nodes: dict[int, ClusterNode] = {}
        for index in range(controllers):
            node_id = FIRST_CONTROLLER_ID + index
            self.nodes[node_id] = ClusterNode(node_id, "controller", _free_port(),
                                              self.data_dir / f"node-{node_id}")
        for node_id in range(1, brokers + 1):
            self.nodes[node_id] = ClusterNode(node_id, "broker", _free_port(),
                                              self.data_dir / f"node-{node_id}")

    # ------------------------------------------------------------------ addresses

    @property
    def brokers(self) -> list[ClusterNode]:
        return [n for n in self.nodes.values() if n.is_broker]

    @property
    def controllers(self) -> list[ClusterNode]:
        return [n for n in self.nodes.values() if not n.is_broker]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{HOST}:{n.port}" for n in self.brokers)

    def address_of(self, node_id: int) -> str:
        return f"{HOST}:{self.nodes[node_id].port}"

    @property
    def voters(self) -> str:
        return ",".join(f"{n.node_id}@{HOST}:{n.port}" for n in self.controllers)

    def active_controller(self) -> int | None:
        """The active controller's id as a live controller's DescribeQuorum tells."""
        from sdk.protocol.messages.describe_quorum import DescribeQuorumRequest

        request = DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
            topic_name="__cluster_metadata",
            partitions=[DescribeQuorumRequest.PartitionData(partition_index=0)])])
        for node in self.controllers:
            if not node.running or node.paused:
                continue
            try:
                response = _ask(node.port, request, 1)
            except OSError:
                continue
            for topic in response.topics:
                for p in topic.partitions:
                    if p.error_code == 0 and p.leader_id >= 0:
                        return int(p.leader_id)
        return None

    # ------------------------------------------------------------------ life cycle

    def __enter__(self) -> EmbeddedCluster:
        try:
            self.start_all()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start_all(self, timeout_s: float = START_TIMEOUT_S) -> None:
        for node in self.controllers:
            self._launch(node)
        for node in self.brokers:
            self._launch(node)
        self.wait_ready(timeout_s)

    def _command(self, node: ClusterNode) -> list[str]:
        command = [sys.executable, "-m", "server_ref.cluster.node", "--role", node.role,
                   "--node-id", str(node.node_id), "--voters", self.voters,
                   "--data-dir", str(node.directory / "data"), "--cluster-id", self.cluster_id,
                   "--log-level", self.log_level]
        if node.is_broker:
            command += ["--port", str(node.port)]
        if self.fsync:
            command.append("--fsync")
        for key, value in self.config.items():
            command += ["--config", f"{key}={value}"]
        return command

    def _launch(self, node: ClusterNode) -> None:
        node.directory.mkdir(parents=True, exist_ok=True)
        out = open(node.directory / "stdout.log", "ab")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        try:
            node.proc = subprocess.Popen(self._command(node), stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True,
                                         env=env)
        finally:
            out.close()
        node.paused = False

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until every running broker is registered and unfenced (listed in Metadata by
        every running broker) and answers."""
        deadline = time.monotonic() + timeout_s
        expected = {n.node_id for n in self.brokers if n.running and not n.paused}
        last_error: Exception | None = None
        while True:
            for node in self.nodes.values():
                if node.proc is not None and node.proc.poll() is not None:
                    raise RuntimeError(f"node {node.node_id} exited with "
                                       f"{node.proc.returncode}: {self._tail(node)}")
            try:
                if all(expected <= set(self._metadata(n)[0]) for n in self.brokers
                       if n.node_id in expected):
                    return
            except OSError as exc:
                last_error = exc
            if time.monotonic() > deadline:
                raise TimeoutError(f"brokers {sorted(expected)} not ready after {timeout_s} s "
                                   f"(last error: {last_error})")
            time.sleep(0.1)

    @staticmethod
    def _tail(node: ClusterNode) -> str:
        path = node.directory / "stdout.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def kill(self, node_id: int) -> None:
        """SIGKILL (a crash); ``start`` brings the node back on the same data and port."""
        node = self.nodes[node_id]
        if node.proc is not None:
            if node.paused:
                node.proc.send_signal(signal.SIGCONT)
            node.proc.kill()
            node.proc.wait(STOP_TIMEOUT_S)
        node.proc, node.paused = None, False

    def stop(self, node_id: int, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM (a controlled shutdown), SIGKILL if it has not ended after ``timeout_s``."""
        node = self.nodes[node_id]
        if node.proc is None:
            return
        if node.paused:
            node.proc.send_signal(signal.SIGCONT)
        node.proc.terminate()
        try:
            node.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            node.proc.kill()
            node.proc.wait(STOP_TIMEOUT_S)
        node.proc, node.paused = None, False

    def start(self, node_id: int, *, wait: bool = True, timeout_s: float = START_TIMEOUT_S
              ) -> None:
        node = self.nodes[node_id]
        if node.running:
            return
        self._launch(node)
        if wait:
            self.wait_ready(timeout_s)

    def pause(self, node_id: int) -> None:
        """SIGSTOP: the node hangs with its sockets open."""
        node = self.nodes[node_id]
        if node.proc is not None and not node.paused:
            node.proc.send_signal(signal.SIGSTOP)
            node.paused = True

    def resume(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.proc is not None and node.paused:
            node.proc.send_signal(signal.SIGCONT)
            node.paused = False

    def close(self) -> None:
        """Stop every node (brokers, then controllers) and remove what was created."""
        for group in (self.brokers, self.controllers):
            for node in group:
                if node.proc is not None:
                    if node.paused:
                        node.proc.send_signal(signal.SIGCONT)
                    if self._own_dir:
                        node.proc.kill()
                    else:
                        node.proc.terminate()
            for node in group:
                if node.proc is not None:
                    try:
                        node.proc.wait(STOP_TIMEOUT_S)
                    except subprocess.TimeoutExpired:
                        node.proc.kill()
                        node.proc.wait(STOP_TIMEOUT_S)
                    node.proc = None
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    # ------------------------------------------------------------------ metadata

    def _metadata(self, node: ClusterNode, topic: str | None = None, timeout_s: float = 5.0
                  ) -> tuple[list[int], dict[int, int]]:
        """(live broker ids, {partition: leader id}) as ``node`` answers Metadata."""
        from sdk.protocol.messages.metadata import MetadataRequest

        topics = None if topic is None else [MetadataRequest.MetadataRequestTopic(name=topic)]
        request = MetadataRequest(topics=topics, allow_auto_topic_creation=False)
        response = _ask(node.port, request, 12, timeout_s)
        leaders = {}
        for t in response.topics:
            if t.name == topic and t.error_code == 0:
                leaders = {p.partition_index: p.leader_id for p in t.partitions}
        return [b.node_id for b in response.brokers], leaders

    def partition_states(self, node_id: int, topic: str) -> dict[int, tuple[int, int, list[int]]]:
        """{partition: (leader, leader epoch, ISR)} as broker ``node_id``'s metadata image
        says: brokers learn changes from the metadata log one by one, so tests compare them
        before trusting any one broker's view."""
        from sdk.protocol.messages.metadata import MetadataRequest

        request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                  allow_auto_topic_creation=False)
        response = _ask(self.nodes[node_id].port, request, 12)
        return {p.partition_index: (p.leader_id, p.leader_epoch, sorted(p.isr_nodes))
                for t in response.topics if t.name == topic and t.error_code == 0
                for p in t.partitions}

    def leader_of(self, topic: str, partition: int) -> int:
        """The leader's node id as a live broker answers Metadata (-1: no leader now)."""
        last: Exception | None = None
        for node in self.brokers:
            if not node.running or node.paused:
                continue
            try:
                return self._metadata(node, topic)[1].get(partition, -1)
            except OSError as exc:
                last = exc
        raise RuntimeError(f"no live broker answered Metadata: {last}")

    def describe(self) -> list[str]:
        return [f"node {n.node_id} role={n.shown_role} pid={n.pid} port={n.port}"
                for n in sorted(self.nodes.values(), key=lambda n: (n.is_broker, n.node_id))]


def _ask(port: int, request: Any, version: int, timeout_s: float = 5.0) -> Any:
    from sdk.protocol.framing import ClientFraming

    framing = ClientFraming(client_id="server_ref-cluster")
    with socket.create_connection((HOST, port), timeout=timeout_s) as sock:
        sock.settimeout(timeout_s)
        sock.sendall(framing.encode_request(request, version)[1])
        while True:
            data = sock.recv(1 << 16)
            if not data:
                raise ConnectionError(f"port {port} closed the connection")
            for _correlation, response in framing.feed(data):
                return response


def run_cluster(brokers: int, controllers: int, data_dir: Path | None, config: list[str], *,
                fsync: bool = False, log_level: str = "WARNING") -> int:
    """``python -m server_ref --brokers N``: run until SIGTERM/SIGINT, then stop every node."""
    settings = {}
    for item in config:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            print(f"error: --config takes key=value, got {item!r}", file=sys.stderr)
            return 2
        settings[key.strip()] = value.strip()
    stop_requested = False

    def _on_signal(signum: int, frame: object) -> None:
        nonlocal stop_requested
        stop_requested = True

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        cluster = EmbeddedCluster(brokers, controllers, data_dir=data_dir, config=settings,
                                  fsync=fsync, log_level=log_level)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with cluster:
        print(f"server_ref ready bootstrap_servers={cluster.bootstrap_servers}", flush=True)
        for line in cluster.describe():
            print(line, flush=True)
        while not stop_requested:
            time.sleep(0.2)
            for node in cluster.nodes.values():
                if node.proc is not None and node.proc.poll() is not None:
                    print(f"node {node.node_id} exited with {node.proc.returncode}",
                          file=sys.stderr, flush=True)
                    node.proc = None
    return 0
