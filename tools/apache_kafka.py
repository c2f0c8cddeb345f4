"""Apache Kafka as plain JVM processes: its own jars from Maven Central, a KRaft cluster on loopback.

Nothing here needs Docker. ``fetch`` resolves ``kafka_2.13`` and ``kafka-tools`` with their
runtime dependencies (``tools/apache_kafka_pom/pom.xml``, ``mvn dependency:copy-dependencies``)
into a cache outside the repository; once cached, nothing touches the network. ``start`` (and
``ApacheKafkaCluster`` from Python) formats each node's storage and runs every node as its own
JVM with a small heap: one combined node when ``brokers == 1``, otherwise a dedicated controller
quorum of 1 or 3 nodes and N brokers. Node ids are Kafka's: brokers ``1..N``, controllers
``101..``, so a broker id read from Metadata names its node here.

    python tools/apache_kafka.py fetch [--version 4.3.1]
    python tools/apache_kafka.py start --brokers 3 [--controllers 3] [--data-dir DIR] \\
        [--config key=value ...]
    python tools/apache_kafka.py classpath          # for running Kafka's Java tools by hand
    python tools/apache_kafka.py start --listener SASL_SSL=SASL_SSL \\
        --add-scram 'SCRAM-SHA-256=[name=alice,password=alice-secret]' \\
        --config listener.name.sasl_ssl.ssl.keystore.type=PEM ...

Extra client listeners (``listeners={"SASL_SSL": "SASL_SSL", "MTLS": "SSL"}``, a listener
name to its security protocol, optionally ``"SSL@127.0.0.2"`` to bind another loopback
address) run beside PLAINTEXT on every broker; PLAINTEXT stays the inter-broker listener and
CONTROLLER the controllers'. Their TLS and SASL settings are ordinary ``config`` entries
(``listener.name.<name>.ssl.keystore.location``, ``listener.name.<name>.plain.sasl.jaas.config``
...). ``listener_address(name)`` / ``listener_bootstrap(name)`` give their ports.
``scram_users`` are ``kafka-storage format --add-scram`` arguments
(``'SCRAM-SHA-256=[name=alice,password=...]'``): the credentials exist from the first start.

The cache is ``$KAFKA_SDK_CACHE/apache-kafka-<version>/`` (default ``~/.cache/kafka-sdk``).
Process control (starting, readiness, kill/stop/start/pause/resume, ``leader_of``, the node
lines) is ``server_ref/cluster/processes.py``'s, shared with our own cluster
(``server_ref.EmbeddedCluster``); it uses the standard library, except ``leader_of`` and the
readiness check, which speak the Kafka protocol through this project's own codecs
(``sdk.protocol``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a script: the repository root holds server_ref
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from server_ref.cluster.processes import (
    FIRST_CONTROLLER_ID,
    HOST,
    NodeProcess,
    NodeProcesses,
    StopSignals,
    free_port,
    new_cluster_id,
    replicated_internal_topics,
    run_until_signalled,
    spawn,
)

DEFAULT_VERSION = "4.3.1"
POM = Path(__file__).resolve().parent / "apache_kafka_pom" / "pom.xml"
DEFAULT_HEAP = "384m"
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0

# Kafka's own defaults, except where a small cluster needs otherwise: internal topics are
# replicated as far as the cluster allows, and there are fewer offsets and transaction state
# partitions (each costs a replica set and a coordinator load at every start; clients see no
# difference). Any of them can be overridden with ``config``.
def _cluster_defaults(brokers: int) -> dict[str, str]:
    replication = str(min(3, brokers))
    return {
        **replicated_internal_topics(brokers),
        "share.coordinator.state.topic.replication.factor": replication,
        "share.coordinator.state.topic.min.isr": str(min(2, brokers)),
        "log.segment.bytes": str(64 * 1024 * 1024),
    }


LOG4J2_YAML = """\
# Written by tools/apache_kafka.py: each node logs into its own directory (kafka.logs.dir).
Configuration:
  name: kafka-sdk-apache-kafka
  Appenders:
    RollingFile:
      name: server
      fileName: "${sys:kafka.logs.dir}/server.log"
      filePattern: "${sys:kafka.logs.dir}/server.log.%i"
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
      Policies:
        SizeBasedTriggeringPolicy:
          size: 20MB
      DefaultRolloverStrategy:
        max: 2
  Loggers:
    Root:
      level: INFO
      AppenderRef:
        - ref: server
    Logger:
      - name: kafka.request.logger
        level: WARN
      - name: org.apache.kafka.controller
        level: INFO
      - name: state.change.logger
        level: INFO
"""


class ApacheKafkaUnavailable(RuntimeError):
    """Java, Maven or the jars are missing, so Apache Kafka cannot run on this machine."""


# ----------------------------------------------------------------------------- the jars


def cache_root() -> Path:
    return Path(os.environ.get("KAFKA_SDK_CACHE") or Path.home() / ".cache" / "kafka-sdk")


def install_dir(version: str = DEFAULT_VERSION) -> Path:
    return cache_root() / f"apache-kafka-{version}"


def missing_tools() -> str | None:
    """Why Apache Kafka cannot run here (``java`` or ``mvn`` missing), or None."""
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    return f"{' and '.join(missing)} not found on PATH" if missing else None


def fetch(version: str = DEFAULT_VERSION, *, quiet: bool = True) -> Path:
    """Resolve Kafka ``version``'s jars into the cache (idempotent) and return its directory."""
    home = install_dir(version)
    libs = home / "libs"
    marker = home / ".complete"
    if marker.exists() and marker.read_text() == _marker_text(version):
        return home  # resolved from this very pom (an older one lacks jars now needed)
    if shutil.which("mvn") is None or shutil.which("java") is None:
        raise ApacheKafkaUnavailable(f"cannot fetch Apache Kafka {version}: {missing_tools()}")
    home.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="libs-", dir=home))
    command = ["mvn", "-B", "-f", str(POM), f"-Dkafka.version={version}",
               "dependency:copy-dependencies", "-DincludeScope=runtime",
               f"-DoutputDirectory={staging}"]
    if quiet:
        command.insert(1, "-q")
    result = subprocess.run(command, capture_output=quiet, text=True)
    if result.returncode != 0 or not any(staging.glob("kafka_2.13-*.jar")):
        shutil.rmtree(staging, ignore_errors=True)
        detail = (result.stdout or "")[-2000:] + (result.stderr or "")[-2000:] if quiet else ""
        raise ApacheKafkaUnavailable(
            f"mvn could not resolve Apache Kafka {version} (exit {result.returncode}): {detail}")
    # Kafka's test jar (LocalTieredStorage) carries its own log4j2.yaml, which would take
    # over the tools' logging: it goes on the brokers' classpath only.
    test_libs = home / "test-libs"
    shutil.rmtree(test_libs, ignore_errors=True)
    test_libs.mkdir()
    for jar in staging.glob("*-test.jar"):
        jar.rename(test_libs / jar.name)
    shutil.rmtree(libs, ignore_errors=True)
    staging.rename(libs)
    (home / "log4j2.yaml").write_text(LOG4J2_YAML)
    marker.write_text(_marker_text(version))
    return home


CACHE_LAYOUT = 2  # 2: test jars in test-libs/, off the tools' classpath


def _marker_text(version: str) -> str:
    pom = hashlib.sha256(POM.read_bytes()).hexdigest()[:16]
    return f"{version} {pom} layout{CACHE_LAYOUT}\n"


def classpath(version: str = DEFAULT_VERSION) -> str:
    libs = install_dir(version) / "libs"
    jars = sorted(libs.glob("*.jar"))
    if not jars:
        raise ApacheKafkaUnavailable(f"Apache Kafka {version} is not fetched (run fetch)")
    return os.pathsep.join(str(jar) for jar in jars)


def broker_classpath(version: str = DEFAULT_VERSION) -> str:
    """The tools' classpath plus Kafka's test jars (LocalTieredStorage for tiering)."""
    tests = sorted((install_dir(version) / "test-libs").glob("*.jar"))
    return os.pathsep.join([classpath(version), *map(str, tests)])


def java_command(main_class: str, *args: str, version: str = DEFAULT_VERSION,
                 heap: str = "256m", jvm_options: tuple[str, ...] = ()) -> list[str]:
    """The argv that runs one of Kafka's Java entry points (a tool or the server).

    Tools log warnings only, to stderr (Kafka's own tools-log4j2 setting)."""
    return ["java", f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true", "-Dlog4j2.level=WARN", *jvm_options,
            "-cp", classpath(version), main_class, *args]


# ----------------------------------------------------------------------------- the cluster


@dataclass
class Node(NodeProcess):
    """One JVM of the cluster. ``port`` is the client listener (brokers and the combined
    node) or the controller listener (dedicated controllers)."""

    node_id: int
    role: str  # "broker", "controller" or "combined"
    port: int
    controller_port: int | None
    directory: Path
    proc: subprocess.Popen[bytes] | None = None
    listeners: dict[str, tuple[str, int]] = field(default_factory=dict)  # extra: (host, port)
    paused: bool = False
    properties: dict[str, str] = field(default_factory=dict)


class ApacheKafkaCluster(NodeProcesses):
    """A KRaft cluster of Apache Kafka JVMs on loopback (a context manager).

    ``brokers == 1`` runs one combined broker+controller node (id 1); otherwise ``controllers``
    (1 or 3) dedicated controllers (ids 101..) and ``brokers`` brokers (ids 1..N). ``config``
    is added to every node's ``server.properties`` (after the test-friendly defaults). With
    ``data_dir=None`` a temporary directory is used and removed at ``close()``.
    """

    start_timeout_s = START_TIMEOUT_S
    stop_timeout_s = STOP_TIMEOUT_S
    ready_poll_s = 0.2
    client_id = "apache-kafka-tool"
    label = "Apache Kafka brokers"

    def __init__(self, brokers: int = 1, controllers: int = 1, *,
                 version: str = DEFAULT_VERSION, data_dir: str | os.PathLike[str] | None = None,
                 config: Mapping[str, Any] | None = None, heap: str = DEFAULT_HEAP,
                 listeners: Mapping[str, str] | None = None,
                 scram_users: Sequence[str] = (),
                 features: Mapping[str, int] | None = None) -> None:
        if brokers < 1:
            raise ValueError(f"brokers must be at least 1, got {brokers}")
        if controllers not in (1, 3):
            raise ValueError(f"controllers must be 1 or 3, got {controllers}")
        self.version = version
        self.heap = heap
        self.cluster_id = new_cluster_id()
        self.config = {key: str(value) for key, value in (config or {}).items()}
        self.extra_listeners: dict[str, tuple[str, str]] = {}  # name -> (protocol, host)
        for name, spec in (listeners or {}).items():
            protocol, _, host = spec.partition("@")
            if name.upper() in ("PLAINTEXT", "CONTROLLER"):
                raise ValueError(f"listener name {name!r} is taken")
            self.extra_listeners[name.upper()] = (protocol.upper(), host or HOST)
        self.scram_users = list(scram_users)
        # Feature levels fixed at format time, e.g. {"transaction.version": 1}.
        self.features = {name: int(level) for name, level in (features or {}).items()}
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="kafka-"))
        self.nodes: dict[int, Node] = {}
        if brokers == 1:
            self._add(1, "combined")
        else:
            for index in range(controllers):
                self._add(FIRST_CONTROLLER_ID + index, "controller")
            for broker_id in range(1, brokers + 1):
                self._add(broker_id, "broker")
        self._defaults = _cluster_defaults(brokers)
        self._started = False

    def _add(self, node_id: int, role: str) -> None:
        port = free_port()
        controller_port = free_port() if role == "combined" else None
        node = Node(node_id, role, port, controller_port, self.data_dir / f"node-{node_id}")
        if role != "controller":
            node.listeners = {name: (host, free_port(host))
                              for name, (_protocol, host) in self.extra_listeners.items()}
        self.nodes[node_id] = node

    # ------------------------------------------------------------------ addresses

    def _listener_entries(self, node: Node) -> tuple[str, str]:
        """(",NAME://host:port..." for listeners and advertised.listeners, ",NAME:PROTO...")"""
        addresses = "".join(f",{name}://{host}:{port}"
                            for name, (host, port) in node.listeners.items())
        protocols = "".join(f",{name}:{protocol}"
                            for name, (protocol, _host) in self.extra_listeners.items())
        return addresses, protocols

    def _controller_listener_port(self, node: Node) -> int:
        return node.controller_port if node.role == "combined" else node.port  # type: ignore[return-value]

    def _voters(self) -> str:
        return ",".join(f"{n.node_id}@{HOST}:{self._controller_listener_port(n)}"
                        for n in self.controllers)

    def _properties(self, node: Node) -> dict[str, str]:
        props: dict[str, str] = {
            "node.id": str(node.node_id),
            "controller.quorum.voters": self._voters(),
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
                                              + self._listener_entries(node)[1],
            "log.dirs": str(node.directory / "data"),
        }
        extra = self._listener_entries(node)[0]
        if node.role == "combined":
            props.update({
                "process.roles": "broker,controller",
                "listeners": f"PLAINTEXT://{HOST}:{node.port},CONTROLLER://{HOST}:{node.controller_port}"
                             + extra,
                "advertised.listeners": f"PLAINTEXT://{HOST}:{node.port}" + extra,
                "inter.broker.listener.name": "PLAINTEXT",
            })
        elif node.role == "controller":
            props.update({
                "process.roles": "controller",
                "listeners": f"CONTROLLER://{HOST}:{node.port}",
            })
        else:
            props.update({
                "process.roles": "broker",
                "listeners": f"PLAINTEXT://{HOST}:{node.port}" + extra,
                "advertised.listeners": f"PLAINTEXT://{HOST}:{node.port}" + extra,
                "inter.broker.listener.name": "PLAINTEXT",
            })
        return {**self._defaults, **props, **self.config}

    # ------------------------------------------------------------------ life cycle

    def start_all(self, timeout_s: float | None = None) -> None:
        """Fetch (cached), format every node's storage, start every JVM, wait until ready."""
        if missing_tools():
            raise ApacheKafkaUnavailable(f"Apache Kafka needs Java and Maven: {missing_tools()}")
        home = fetch(self.version)
        self._log4j = home / "log4j2.yaml"
        for node in self.nodes.values():
            node.directory.mkdir(parents=True, exist_ok=True)
            node.properties = self._properties(node)
            path = node.directory / "server.properties"
            path.write_text("".join(f"{k}={v}\n" for k, v in node.properties.items()))
            self._format(node, path)
        for node in self.controllers:
            self._launch(node)
        for node in self.brokers:
            if not node.running:
                self._launch(node)
        self._started = True
        self.wait_ready(timeout_s)

    def _format(self, node: Node, properties: Path) -> None:
        scram: list[str] = []
        if node.role != "broker":  # the bootstrap metadata the controllers start from
            for user in self.scram_users:
                scram += ["--add-scram", user]
            for name, level in self.features.items():
                scram += ["--feature", f"{name}={level}"]
        result = subprocess.run(
            java_command("kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                         "-c", str(properties), "--ignore-formatted", *scram,
                         version=self.version),
            capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"formatting node {node.node_id} failed: "
                               f"{result.stdout[-2000:]}{result.stderr[-2000:]}")

    def _launch(self, node: Node) -> None:
        node.proc = spawn(
            ["java", f"-Xmx{self.heap}", f"-Xms{self.heap}", "-XX:+UseG1GC",
             "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true",
             f"-Dkafka.logs.dir={node.directory}",
             f"-Dlog4j2.configurationFile={self._log4j}",
             "-cp", broker_classpath(self.version), "kafka.Kafka",
             str(node.directory / "server.properties")],
            node.directory / "stdout.log")
        node.paused = False

    def _exit_detail(self, node: Node) -> str:
        for name in ("stdout.log", "server.log"):
            path = node.directory / name
            if path.exists():
                return (f"see {node.directory / 'server.log'}: "
                        f"{path.read_text(errors='replace')[-1500:]}")
        return f"see {node.directory / 'server.log'}"


@contextlib.contextmanager
def running_cluster(**kwargs: Any) -> Iterator[ApacheKafkaCluster]:
    with ApacheKafkaCluster(**kwargs) as cluster:
        yield cluster


# ----------------------------------------------------------------------------- command line


def _parse_config(items: list[str]) -> dict[str, str]:
    config = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--config takes key=value, got {item!r}")
        config[key.strip()] = value.strip()
    return config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="apache_kafka.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_fetch = sub.add_parser("fetch", help="resolve Kafka's jars into the cache")
    p_fetch.add_argument("--version", default=DEFAULT_VERSION)
    p_fetch.add_argument("--optional", action="store_true",
                         help="without java or mvn, say so and exit 0 (unless "
                              "REQUIRE_APACHE_KAFKA is set): the Apache tests then skip")
    p_cp = sub.add_parser("classpath", help="print the classpath of the cached jars")
    p_cp.add_argument("--version", default=DEFAULT_VERSION)
    p_start = sub.add_parser("start", help="run a KRaft cluster until SIGTERM/SIGINT")
    p_start.add_argument("--version", default=DEFAULT_VERSION)
    p_start.add_argument("--brokers", type=int, default=1)
    p_start.add_argument("--controllers", type=int, default=1, choices=(1, 3))
    p_start.add_argument("--data-dir", default=None)
    p_start.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    p_start.add_argument("--listener", action="append", default=[], metavar="NAME=PROTOCOL",
                         help="an extra client listener, e.g. SASL_SSL=SASL_SSL")
    p_start.add_argument("--add-scram", action="append", default=[], metavar="SPEC",
                         help="a SCRAM credential at format time, e.g. "
                              "'SCRAM-SHA-256=[name=alice,password=secret]'")
    args = parser.parse_args(argv)

    if args.command == "fetch":
        required = os.environ.get("REQUIRE_APACHE_KAFKA", "") not in ("", "0")
        if args.optional and not required and missing_tools():
            print(f"Apache Kafka not fetched ({missing_tools()}): its tests will skip")
            return 0
        print(fetch(args.version, quiet=True))
        return 0
    if args.command == "classpath":
        print(classpath(args.version))
        return 0
    stop = StopSignals()
    with ApacheKafkaCluster(args.brokers, args.controllers, version=args.version,
                            data_dir=args.data_dir, config=_parse_config(args.config),
                            listeners=_parse_config(args.listener),
                            scram_users=args.add_scram) as cluster:
        run_until_signalled(cluster, "apache-kafka", stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
