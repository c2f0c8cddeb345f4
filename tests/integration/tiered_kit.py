"""Helpers of the tiered-storage tests: a tiered reference broker, records to produce, three
independent clients reading a partition from offset 0, raw ListOffsets / Fetch calls, and an
S3 API server process (moto's server mode) the tests start, pause and kill."""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sdk.net.client import LeaderOf, NetClient
from sdk.net.config import CommonConfig
from sdk.protocol.messages.fetch import FetchRequest
from sdk.protocol.messages.list_offsets import ListOffsetsRequest
from server_ref import EmbeddedBroker
from server_ref.cluster.processes import free_port

EARLIEST, EARLIEST_LOCAL, LATEST_TIERED = -2, -4, -5

Record = tuple[bytes | None, bytes, list[tuple[str, bytes]]]  # key, value, headers


def tiered_broker(data_dir: Path | None = None, **extra: Any) -> EmbeddedBroker:
    config = {"remote.log.storage.system.enable": "true",
              "remote.log.manager.task.interval.ms": "100",
              "log.retention.check.interval.ms": "100"}
    config.update(extra)
    return EmbeddedBroker(data_dir=data_dir, config=config).start()


def tiered_topic_configs(**extra: str) -> dict[str, str]:
    """Small segments, little kept locally: most of the topic ends up only remote."""
    configs = {"remote.storage.enable": "true", "segment.bytes": "16384",
               "local.retention.bytes": "20000"}
    configs.update(extra)
    return configs


def make_records(count: int, seed: str = "r") -> list[Record]:
    """Varied keys (some null), values of 1-600 bytes, headers on some."""
    out: list[Record] = []
    for i in range(count):
        digest = hashlib.sha256(f"{seed}{i}".encode()).digest()
        value = (digest * 20)[: 1 + digest[0] * 2 + digest[1] % 90]
        key = None if i % 7 == 0 else f"k{i % 13}".encode()
        headers = [("h", digest[:4])] if i % 5 == 0 else []
        out.append((key, value, headers))
    return out


def produce(bootstrap: str, topic: str, records: list[Record]) -> None:
    from sdk import Producer

    with Producer(bootstrap_servers=bootstrap, linger_ms=2, batch_size=4096) as producer:
        for key, value, headers in records:
            producer.send(topic, value, key=key, headers=headers or None, partition=0)
        producer.flush()


def wait_until(check: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


# ----------------------------------------------------------------------------- readers


def read_sdk(bootstrap: str, topic: str, count: int, start: int = 0) -> list[Record]:
    from sdk import Consumer
    from sdk.types import TopicPartition

    out: list[Record] = []
    with Consumer(bootstrap_servers=bootstrap, enable_auto_commit=False) as consumer:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, start)
        deadline = time.monotonic() + 60
        while len(out) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                out.extend((r.key, r.value, [(k, bytes(v)) for k, v in (r.headers or [])])
                           for r in records)
    return out


def read_confluent(bootstrap: str, topic: str, count: int, start: int = 0) -> list[Record]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "fetch.queue.backoff.ms": 10})
    out: list[Record] = []
    try:
        consumer.assign([TopicPartition(topic, 0, start)])
        deadline = time.monotonic() + 60
        while len(out) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                continue  # (a retriable fetch error: librdkafka goes on by itself)
            out.append((message.key(), message.value(),
                        [(k, bytes(v)) for k, v in (message.headers() or [])]))
    finally:
        consumer.close()
    return out


def read_kafka_python(bootstrap: str, topic: str, count: int, start: int = 0) -> list[Record]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             group_id=None)
    out: list[Record] = []
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, start)
        deadline = time.monotonic() + 60
        while len(out) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                out.extend((r.key, r.value, [(k, bytes(v)) for k, v in (r.headers or [])])
                           for r in records)
    finally:
        consumer.close()
    return out


# ----------------------------------------------------------------------------- raw calls


async def _call(bootstrap: str, topic: str, request: Any, max_version: int) -> Any:
    client = NetClient(CommonConfig.build(bootstrap_servers=bootstrap))
    try:
        await client.start()
        return await client.call(request, LeaderOf(topic, 0), max_version=max_version,
                                 timeout_s=30)
    finally:
        await client.close()


def list_offset(bootstrap: str, topic: str, timestamp: int) -> tuple[int, int]:
    """(error code, offset) of ListOffsets v9 for partition 0."""
    request = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(
            partition_index=0, timestamp=timestamp)])])
    response = asyncio.run(_call(bootstrap, topic, request, 9))
    result = response.topics[0].partitions[0]
    return result.error_code, result.offset


def produce_idempotent_raw(bootstrap: str, topic: str, producer_id: int, count: int,
                           timestamp_ms: int) -> tuple[int, int]:
    """One idempotent batch (epoch 0, sequences 0..count-1, every record stamped
    ``timestamp_ms``) to partition 0, sent as is: (error code, base offset) of the answer.
    Sending it again with the same arguments is a producer's retry (the same bytes)."""
    from sdk.protocol.messages.produce import ProduceRequest
    from sdk.records.builder import RecordBatchBuilder

    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=0, base_sequence=0)
    for i in range(count):
        builder.append(None, timestamp_ms, None, b"retried-%d" % i)
    request = ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=builder.build())])])
    answer = asyncio.run(_call(bootstrap, topic, request, 11))
    part = answer.responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def fetch_once(bootstrap: str, topic: str, offset: int) -> tuple[int, bytes, int]:
    """(error code, records, log start offset) of one Fetch v12 at ``offset``."""
    request = FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[
        FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])])
    response = asyncio.run(_call(bootstrap, topic, request, 12))
    data = response.responses[0].partitions[0]
    return data.error_code, bytes(data.records or b""), data.log_start_offset


# ----------------------------------------------------------------------------- S3 server


class MotoServer:
    """moto's S3 API server as a child process (``moto_server -p PORT``): its state lives in
    that process, so a restart starts it empty."""

    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> MotoServer:
        exe = shutil.which("moto_server", path=str(Path(sys.executable).parent)) or \
            shutil.which("moto_server")
        if exe is None:
            raise RuntimeError("moto_server not found: pip install 'moto[server]'")
        self.process = subprocess.Popen([exe, "-p", str(self.port)], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.1)

    def pause(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGCONT)

    def kill(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait()
            self.process = None

    def client(self) -> Any:
        import boto3

        return boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint, region_name="us-east-1",
            aws_access_key_id="testing", aws_secret_access_key="testing")

    def keys(self, bucket: str) -> list[str]:
        answer = self.client().list_objects_v2(Bucket=bucket)
        return sorted(obj["Key"] for obj in answer.get("Contents", []))


def s3_broker_config(moto: MotoServer, bucket: str) -> dict[str, str]:
    return {"remote.log.storage.uri": f"s3://{bucket}/tiered",
            "remote.log.storage.s3.endpoint": moto.endpoint,
            "remote.log.storage.s3.access.key.id": "testing",
            "remote.log.storage.s3.secret.access.key": "testing"}
