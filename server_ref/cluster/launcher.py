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

Client listeners with TLS or SASL run beside PLAINTEXT on every broker, each on a port of
its own per node (``listeners={"SASL_SSL": "SASL_SSL"}`` as ``ApacheKafkaCluster`` takes
them, or a ``listeners`` config with ports 0; ``cluster_listeners.py``); PLAINTEXT stays
the inter-broker listener. ``listener_address(name)`` / ``listener_bootstrap(name)`` give
their addresses.

``metrics_port=0`` serves every node's Prometheus metrics on a free port of its own
(``metrics_url(node_id)``; a port P: P, P+1, ... in the order of ``describe()``):
brokers their broker metrics, controllers the controller metrics (``server_ref.metrics``).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from server_ref.cluster.cluster_listeners import (
    extra_listeners,
    inter_broker_warning,
    listener_settings,
)
from server_ref.cluster.processes import (
    FIRST_CONTROLLER_ID,
    HOST,
    NodeProcess,
    NodeProcesses,
    StopSignals,
    ask,
    free_port,
    new_cluster_id,
    replicated_internal_topics,
    repo_pythonpath,
    run_until_signalled,
    spawn,
)

__all__ = ["EmbeddedCluster", "ClusterNode"]

log = logging.getLogger(__name__)

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
REPO_ROOT = Path(__file__).resolve().parents[2]


def cluster_defaults(brokers: int) -> dict[str, str]:
    """As ``tools/apache_kafka.py``: internal topics replicated as far as the cluster
    allows, fewer of their partitions (each is a replica set to keep in sync)."""
    return replicated_internal_topics(brokers)


@dataclass
class ClusterNode(NodeProcess):
    node_id: int
    role: str  # "broker" or "controller"
    port: int
    directory: Path
    proc: subprocess.Popen[bytes] | None = None
    paused: bool = False
    listeners: dict[str, tuple[str, int]] = field(default_factory=dict)
    metrics_port: int | None = None


class EmbeddedCluster(NodeProcesses):
    """Brokers and a controller quorum of our broker, one process each (a context manager)."""

    start_timeout_s = START_TIMEOUT_S
    stop_timeout_s = STOP_TIMEOUT_S

    def __init__(self, brokers: int = 3, controllers: int = 1, *,
                 data_dir: str | os.PathLike[str] | None = None,
                 config: Mapping[str, Any] | None = None, fsync: bool = False,
                 log_level: str = "WARNING", listeners: Mapping[str, str] | None = None,
                 metrics_port: int | None = None) -> None:
        if brokers < 1:
            raise ValueError(f"brokers must be at least 1, got {brokers}")
        if controllers not in (1, 3):
            raise ValueError(f"controllers must be 1 or 3, got {controllers}")
        self.cluster_id = new_cluster_id()
        self.config = {**cluster_defaults(brokers),
                       **{k: str(v) for k, v in (config or {}).items()}}
        # name -> (protocol, bind host) of the client listeners beside PLAINTEXT
        self.extra_listeners = extra_listeners(self.config, listeners or {}, HOST)
        warning = inter_broker_warning(self.config)
        if warning is not None:
            log.warning("cluster mode: %s", warning)
        self.fsync = fsync
        self.log_level = log_level
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir else Path(
            tempfile.mkdtemp(prefix="server_ref-cluster-"))
        self.nodes: dict[int, ClusterNode] = {}
        for index in range(controllers):
            node_id = FIRST_CONTROLLER_ID + index
            self.nodes[node_id] = ClusterNode(node_id, "controller", free_port(),
                                              self.data_dir / f"node-{node_id}")
        for node_id in range(1, brokers + 1):
            self.nodes[node_id] = ClusterNode(node_id, "broker", free_port(),
                                              self.data_dir / f"node-{node_id}")
            self.nodes[node_id].listeners = {name: (host, free_port(host)) for name, (_p, host)
                                             in self.extra_listeners.items()}
        if metrics_port is not None:
            if isinstance(metrics_port, bool) or not 0 <= metrics_port <= 65535:
                raise ValueError(f"metrics_port must be 0 to 65535, got {metrics_port}")
            ordered = sorted(self.nodes.values(), key=lambda n: (n.role == "broker", n.node_id))
            for index, node in enumerate(ordered):
                node.metrics_port = metrics_port + index if metrics_port else free_port()

    # ------------------------------------------------------------------ addresses

    def describe(self) -> list[str]:
        """One line per node, then ``listener NAME node=ID protocol=P port=PORT`` per
        client listener of each broker."""
        return super().describe() + [
            f"listener {name} node={n.node_id} protocol={protocol} port={n.listeners[name][1]}"
            for name, (protocol, _h) in self.extra_listeners.items() for n in self.brokers] + [
            f"metrics node={n.node_id} url={self.metrics_url(n.node_id)}"
            for n in sorted(self.nodes.values(), key=lambda n: (n.role == "broker", n.node_id))
            if n.metrics_port is not None]

    def metrics_url(self, node_id: int) -> str:
        """Where node ``node_id``'s Prometheus metrics are served (``metrics_port`` given)."""
        port = self.nodes[node_id].metrics_port
        if port is None:
            raise ValueError("the cluster was started without metrics_port")
        return f"http://{HOST}:{port}/metrics"

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
                response = ask(node.port, request, 1)
            except OSError:
                continue
            for topic in response.topics:
                for p in topic.partitions:
                    if p.error_code == 0 and p.leader_id >= 0:
                        return int(p.leader_id)
        return None

    # ------------------------------------------------------------------ life cycle

    def start_all(self, timeout_s: float | None = None) -> None:
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
            for item in listener_settings(HOST, node.port, node.listeners,
                                          self.extra_listeners):
                command += ["--config", item]
        if node.metrics_port is not None:
            command += ["--metrics-port", str(node.metrics_port)]
        if self.fsync:
            command.append("--fsync")
        for key, value in self.config.items():
            command += ["--config", f"{key}={value}"]
        return command

    def _launch(self, node: ClusterNode) -> None:
        node.directory.mkdir(parents=True, exist_ok=True)
        node.proc = spawn(self._command(node), node.directory / "stdout.log",
                          repo_pythonpath(REPO_ROOT))
        node.paused = False

    # ------------------------------------------------------------------ metadata

    def partition_states(self, node_id: int, topic: str) -> dict[int, tuple[int, int, list[int]]]:
        """{partition: (leader, leader epoch, ISR)} as broker ``node_id``'s metadata image
        says: brokers learn changes from the metadata log one by one, so tests compare them
        before trusting any one broker's view."""
        from sdk.protocol.messages.metadata import MetadataRequest

        request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                  allow_auto_topic_creation=False)
        response = ask(self.nodes[node_id].port, request, 12)
        return {p.partition_index: (p.leader_id, p.leader_epoch, sorted(p.isr_nodes))
                for t in response.topics if t.name == topic and t.error_code == 0
                for p in t.partitions}


def run_cluster(brokers: int, controllers: int, data_dir: Path | None, config: list[str], *,
                fsync: bool = False, log_level: str = "WARNING",
                metrics_port: int | None = None) -> int:
    """``python -m server_ref --brokers N``: run until SIGTERM/SIGINT, then stop every node."""
    settings = {}
    for item in config:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            print(f"error: --config takes key=value, got {item!r}", file=sys.stderr)
            return 2
        settings[key.strip()] = value.strip()
    stop = StopSignals()
    try:
        cluster = EmbeddedCluster(brokers, controllers, data_dir=data_dir, config=settings,
                                  fsync=fsync, log_level=log_level, metrics_port=metrics_port)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with cluster:
        run_until_signalled(cluster, "server_ref", stop)
    return 0
