"""Shared fixtures for the Spark tests: one local SparkSession for the whole run (a JVM start
costs seconds), one reference broker per module, and helpers to produce and read back."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Spark's Python workers must run this interpreter and import this checkout.
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ["PYTHONPATH"] = os.pathsep.join(
    dict.fromkeys([str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from sdk import AdminClient, NewTopic, Producer  # noqa: E402
from sdk.types import RecordMetadata  # noqa: E402
from server_ref import EmbeddedBroker  # noqa: E402


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    from sdk.spark import register

    session = (SparkSession.builder.master("local[2]").appName("kafka-sdk-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def kafka_bootstrap() -> Iterator[str]:
    """A reference broker for the module (in this process; Spark's workers reach it by TCP)."""
    with EmbeddedBroker() as broker:
        yield broker.bootstrap_servers


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(name, num_partitions=partitions,
                                      replication_factor=1)]).raise_if_failed()


def produce(bootstrap: str, topic: str, records: list[dict[str, Any]]) -> list[RecordMetadata]:
    """Send records (dicts of Producer.send arguments) and return their metadata, in order."""
    with Producer(bootstrap_servers=bootstrap, linger_ms=2) as producer:
        futures = [producer.send(topic, **record) for record in records]
        producer.flush(timeout=30)
        return [f.result(timeout=30) for f in futures]


def read_with_confluent(bootstrap: str, topic: str, partitions: int,
                        timeout_s: float = 30.0) -> list[tuple[Any, ...]]:
    """Every record of ``topic`` read by confluent-kafka (a third-party client), as
    (partition, offset, key, value, headers) sorted by partition and offset."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "spark-tests-readback",
        "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        ends = {p: consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p),
                                                  timeout=10)[1]
                for p in range(partitions)}
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        got: list[tuple[Any, ...]] = []
        deadline = time.monotonic() + timeout_s
        while len(got) < sum(ends.values()) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            got.append((message.partition(), message.offset(), message.key(), message.value(),
                        message.headers() or []))
        return sorted(got)
    finally:
        consumer.close()


def read_with_kafka_python(bootstrap: str, topic: str) -> list[tuple[Any, ...]]:
    """Every record of ``topic`` read by kafka-python, as (partition, offset, key, value)."""
    import kafka

    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                   consumer_timeout_ms=3000)
    try:
        partitions = [kafka.TopicPartition(topic, p)
                      for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(partitions)
        consumer.seek_to_beginning()
        return sorted((m.partition, m.offset, m.key, m.value) for m in consumer)
    finally:
        consumer.close()
