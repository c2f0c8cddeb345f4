"""Process control for a cluster of node processes on loopback, shared by our cluster
(``launcher.py``'s ``EmbeddedCluster``) and Apache Kafka's (``tools/apache_kafka.py``'s
``ApacheKafkaCluster``), so a test drives both alike.

What is shared: free ports and Kafka-form cluster ids, starting a node process with its
output in ``<node dir>/stdout.log`` and a session of its own (a signal to the test runner
does not reach it), readiness (every running broker listed in every running broker's
Metadata), ``kill`` (SIGKILL), ``stop`` (SIGTERM, then SIGKILL), ``start`` (same data and
port), ``pause``/``resume`` (SIGSTOP/SIGCONT), ``leader_of``, ``close``, the ``node ID
role=... pid=... port=...`` lines and the command line's run-until-signalled loop. What
differs (the command line of a node, formatting storage, timeouts) stays with each cluster.

The standard library only, except the Metadata and DescribeQuorum probes, which speak the
Kafka protocol through the shared codecs (``sdk.protocol``) and import them when called:
``tools/apache_kafka.py fetch`` and ``classpath`` need nothing of this project.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["HOST", "FIRST_CONTROLLER_ID", "NodeProcess", "NodeProcesses", "StopSignals",
           "ask", "free_port", "metadata", "new_cluster_id", "replicated_internal_topics",
           "repo_pythonpath", "run_until_signalled", "spawn"]

HOST = "127.0.0.1"
FIRST_CONTROLLER_ID = 101
_Cluster = TypeVar("_Cluster", bound="NodeProcesses")


# Ports for node processes come from below the kernel's ephemeral range: a port found by
# binding to 0 and released can be taken by any outgoing connection, or handed to another
# picker, before the child process binds it, and under parallel tests that happened
# (EADDRINUSE, and once a paused broker's port answered for another). Each pytest-xdist
# worker draws from its own slice, in turn from a random start, and a port is given out only
# if it binds at that moment (without SO_REUSEADDR, so nothing lingering holds it either).
_PORTS_FROM = 10000
_PORT_SLICES = 8
_port_cursor: int | None = None  # this process's next place in its slice


def _ephemeral_floor() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default; other systems start theirs higher


def _port_slice() -> range | None:
    floor = _ephemeral_floor()
    width = (floor - _PORTS_FROM) // _PORT_SLICES
    if width < 200:
        return None  # the ephemeral range starts too low to keep ports out of its way
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    # gw0..gw6 get slices 0..6; more workers share them; a run outside xdist gets the last
    index = int(worker[2:]) % (_PORT_SLICES - 1) if worker[2:].isdigit() else _PORT_SLICES - 1
    start = _PORTS_FROM + index * width
    return range(start, start + width)


def _binds(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def free_port(host: str = HOST) -> int:
    """A port on ``host`` nothing is bound to, for a process about to listen on it."""
    ports = _port_slice()
    if ports is None:
        with socket.socket() as s:
            s.bind((host, 0))
            return int(s.getsockname()[1])
    global _port_cursor
    cursor = _port_cursor
    if cursor is None:
        cursor = int.from_bytes(os.urandom(2), "big") % len(ports)
    for step in range(len(ports)):
        port = ports[(cursor + step) % len(ports)]
        if _binds(host, port):
            _port_cursor = (cursor + step + 1) % len(ports)
            return port
    raise OSError(f"no free port in {ports.start}-{ports.stop - 1}")


def new_cluster_id() -> str:
    """Kafka's cluster id form: a UUID as 22 characters of URL-safe base64, never starting
    with '-' (Kafka's rule too: the storage tool would read such an id as an option)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def replicated_internal_topics(brokers: int) -> dict[str, str]:
    """Internal topics replicated as far as the cluster allows, with fewer partitions than
    Kafka's defaults (each is a replica set to keep in sync and a coordinator to load at
    every start; clients see no difference)."""
    replication = str(min(3, brokers))
    return {
        "offsets.topic.replication.factor": replication,
        "offsets.topic.num.partitions": "10",
        "transaction.state.log.replication.factor": replication,
        "transaction.state.log.min.isr": str(min(2, brokers)),
        "transaction.state.log.num.partitions": "10",
    }


def spawn(argv: Sequence[str], log: Path, env: dict[str, str] | None = None
          ) -> subprocess.Popen[bytes]:
    """Start a node process appending its stdout and stderr to ``log``, in a session of its
    own."""
    out = open(log, "ab")  # the child inherits it
    try:
        return subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, env=env)
    finally:
        out.close()


def ask(port: int, request: Any, version: int, timeout_s: float = 5.0,
        client_id: str = "server_ref-cluster") -> Any:
    """One request to ``HOST:port`` on a connection of its own; the decoded response."""
    from sdk.protocol.framing import ClientFraming

    framing = ClientFraming(client_id=client_id)
    with socket.create_connection((HOST, port), timeout=timeout_s) as sock:
        sock.settimeout(timeout_s)
        sock.sendall(framing.encode_request(request, version)[1])
        while True:
            data = sock.recv(1 << 16)
            if not data:
                raise ConnectionError(f"port {port} closed the connection")
            for _correlation, response in framing.feed(data):
                return response


def metadata(port: int, topic: str | None = None, timeout_s: float = 5.0,
             client_id: str = "server_ref-cluster") -> tuple[list[int], dict[int, int]]:
    """(registered broker ids, {partition: leader id} of ``topic``) as the broker at
    ``port`` answers Metadata v12."""
    from sdk.protocol.messages.metadata import MetadataRequest

    topics = None if topic is None else [MetadataRequest.MetadataRequestTopic(name=topic)]
    request = MetadataRequest(topics=topics, allow_auto_topic_creation=False)
    response = ask(port, request, 12, timeout_s, client_id)
    leaders = {}
    for t in response.topics:
        if t.name == topic and t.error_code == 0:
            leaders = {p.partition_index: p.leader_id for p in t.partitions}
    return [b.node_id for b in response.brokers], leaders


class NodeProcess:
    """What every node of either cluster has (its dataclass declares the fields). ``port``
    is the client listener of a broker, the controller listener of a controller."""

    node_id: int
    role: str  # "broker", "controller" or (Apache Kafka, one node) "combined"
    port: int
    directory: Path
    proc: subprocess.Popen[bytes] | None
    paused: bool
    listeners: dict[str, tuple[str, int]]  # extra client listeners: name -> (host, port)

    @property
    def is_broker(self) -> bool:
        return self.role in ("broker", "combined")

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def shown_role(self) -> str:
        return "broker" if self.is_broker else "controller"


class NodeProcesses:
    """Life cycle of the nodes in ``self.nodes`` (a context manager). A subclass gives
    ``start_all`` and ``_launch`` (how one node starts) and may set the class attributes."""

    nodes: dict[int, Any]  # node id -> its NodeProcess subclass
    _own_dir: bool  # a temporary data directory, removed at close (nodes are then SIGKILLed)
    data_dir: Path
    start_timeout_s = 60.0
    stop_timeout_s = 20.0
    ready_poll_s = 0.1
    client_id = "server_ref-cluster"  # of the Metadata probes
    label = "brokers"  # names the cluster in a readiness timeout

    # ------------------------------------------------------------------ addresses

    @property
    def brokers(self) -> list[Any]:
        return [n for n in self.nodes.values() if n.is_broker]

    @property
    def controllers(self) -> list[Any]:
        return [n for n in self.nodes.values() if n.role != "broker"]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{HOST}:{n.port}" for n in self.brokers)

    def address_of(self, node_id: int) -> str:
        return f"{HOST}:{self.nodes[node_id].port}"

    def listener_address(self, name: str, node_id: int | None = None) -> str:
        """``host:port`` of an extra client listener on a broker (the first one by default)."""
        node = self.nodes[node_id] if node_id is not None else self.brokers[0]
        host, port = node.listeners[name.upper()]
        return f"{host}:{port}"

    def listener_bootstrap(self, name: str) -> str:
        """Bootstrap servers of an extra client listener on every broker."""
        return ",".join(self.listener_address(name, n.node_id) for n in self.brokers)

    def describe(self) -> list[str]:
        """One ``node ID role=... pid=... port=...`` line per node (controllers first), with
        ``NAME=host:port`` per extra listener."""
        return [f"node {n.node_id} role={n.shown_role} pid={n.pid} port={n.port}"
                + "".join(f" {name}={host}:{port}" for name, (host, port) in n.listeners.items())
                for n in sorted(self.nodes.values(), key=lambda n: (n.role == "broker",
                                                                    n.node_id))]

    # ------------------------------------------------------------------ life cycle

    def start_all(self, timeout_s: float | None = None) -> None:
        raise NotImplementedError

    def _launch(self, node: Any) -> None:
        raise NotImplementedError

    def __enter__(self: _Cluster) -> _Cluster:
        try:
            self.start_all()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _exit_detail(self, node: Any) -> str:
        """Why a node that exited did (the end of its output)."""
        path = node.directory / "stdout.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def wait_ready(self, timeout_s: float | None = None) -> None:
        """Until every running broker is registered and unfenced (listed in Metadata by
        every running broker) and answers."""
        timeout_s = self.start_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        expected = {n.node_id for n in self.brokers if n.running and not n.paused}
        last_error: Exception | None = None
        while True:
            for node in self.nodes.values():
                if node.proc is not None and node.proc.poll() is not None:
                    raise RuntimeError(f"node {node.node_id} exited with "
                                       f"{node.proc.returncode}: {self._exit_detail(node)}")
            try:
                if all(expected <= set(self._metadata(n)[0]) for n in self.brokers
                       if n.node_id in expected):
                    return
            except OSError as exc:
                last_error = exc
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.label} {sorted(expected)} not ready after "
                                   f"{timeout_s} s (last error: {last_error})")
            time.sleep(self.ready_poll_s)

    def _wait_or_kill(self, node: Any, timeout_s: float) -> None:
        assert node.proc is not None
        try:
            node.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            node.proc.kill()
            node.proc.wait(self.stop_timeout_s)

    def kill(self, node_id: int) -> None:
        """SIGKILL the node (a crash); ``start`` brings it back on the same data and port."""
        node = self.nodes[node_id]
        if node.proc is not None:
            if node.paused:
                node.proc.send_signal(signal.SIGCONT)
            node.proc.kill()
            node.proc.wait(self.stop_timeout_s)
        node.proc, node.paused = None, False

    def stop(self, node_id: int, timeout_s: float | None = None) -> None:
        """SIGTERM (a controlled shutdown), SIGKILL if it has not ended after ``timeout_s``."""
        node = self.nodes[node_id]
        if node.proc is None:
            return
        if node.paused:
            node.proc.send_signal(signal.SIGCONT)
        node.proc.terminate()
        self._wait_or_kill(node, self.stop_timeout_s if timeout_s is None else timeout_s)
        node.proc, node.paused = None, False

    def start(self, node_id: int, *, wait: bool = True, timeout_s: float | None = None
              ) -> None:
        """Start a stopped or killed node again with its data and port."""
        node = self.nodes[node_id]
        if node.running:
            return
        self._launch(node)
        if wait:
            self.wait_ready(timeout_s)

    def pause(self, node_id: int) -> None:
        """SIGSTOP: the node hangs with its sockets open, as a stuck broker does."""
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
                    self._wait_or_kill(node, self.stop_timeout_s)
                    node.proc = None
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    # ------------------------------------------------------------------ metadata

    def _live_brokers(self) -> list[Any]:
        return [n for n in self.brokers if n.running and not n.paused]

    def _metadata(self, node: Any, topic: str | None = None, timeout_s: float = 5.0
                  ) -> tuple[list[int], dict[int, int]]:
        """(registered broker ids, {partition: leader id}) as ``node`` answers Metadata."""
        return metadata(node.port, topic, timeout_s, self.client_id)

    def leader_of(self, topic: str, partition: int) -> int:
        """The leader's node id as a live broker answers Metadata (-1: no leader now)."""
        last: Exception | None = None
        for node in self._live_brokers():
            try:
                return self._metadata(node, topic)[1].get(partition, -1)
            except OSError as exc:
                last = exc
        raise RuntimeError(f"no live broker answered Metadata: {last}")


class StopSignals:
    """SIGTERM and SIGINT set ``requested`` (installed at construction)."""

    def __init__(self) -> None:
        self.requested = False
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, frame: object) -> None:
        self.requested = True


def run_until_signalled(cluster: NodeProcesses, name: str, stop: StopSignals) -> None:
    """The command line's loop over a started cluster: print ``NAME ready
    bootstrap_servers=...`` and the node lines, then wait for ``stop``, reporting on stderr
    every node that exits meanwhile."""
    print(f"{name} ready bootstrap_servers={cluster.bootstrap_servers}", flush=True)
    for line in cluster.describe():
        print(line, flush=True)
    while not stop.requested:
        time.sleep(0.2)
        for node in cluster.nodes.values():
            if node.proc is not None and node.proc.poll() is not None:
                print(f"node {node.node_id} exited with {node.proc.returncode}",
                      file=sys.stderr, flush=True)
                node.proc = None


def repo_pythonpath(root: Path) -> dict[str, str]:
    """This process's environment with ``root`` first on PYTHONPATH (a node runs ``python
    -m`` from the repository whatever the current directory)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH", "")) if p)
    return env
