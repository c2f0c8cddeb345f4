"""The kafka_sdk Spark format over SASL_SSL: ``kafka.``-prefixed options carry Java's TLS and
SASL property names to the SDK clients in Spark's tasks (one Apache Kafka node with a
SASL_SSL listener; certificates made here with trustme)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import trustme
from security.apache_secured import USERS, scram_jaas, secured_apache

from sdk.errors import SaslAuthenticationFailedError
from tools.apache_kafka import ApacheKafkaCluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ApacheKafkaCluster, Path]]:
    root = tmp_path_factory.mktemp("spark-tls")
    ca = trustme.CA()
    broker = ca.issue_cert("localhost", "127.0.0.1")
    ca.cert_pem.write_to_path(str(root / "ca.pem"))
    broker.private_key_pem.write_to_path(str(root / "broker.key"))
    for i, blob in enumerate(broker.cert_chain_pems):
        blob.write_to_path(str(root / "broker.pem"), append=i > 0)
    files = SimpleNamespace(ca_file=root / "ca.pem", broker_key=root / "broker.key",
                            broker_cert=root / "broker.pem")
    with secured_apache(files, root) as cluster:
        yield cluster, files.ca_file


def _options(cluster: ApacheKafkaCluster, ca_file: Path, password: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": cluster.listener_bootstrap("SASL_SSL"),
            "kafka.security.protocol": "SASL_SSL", "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": str(ca_file),
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": scram_jaas("alice").replace(USERS["alice"], password)}


def test_spark_write_and_read_over_sasl_ssl(spark: Any,
                                            secured: tuple[ApacheKafkaCluster, Path]) -> None:
    cluster, ca_file = secured
    options = _options(cluster, ca_file, USERS["alice"])
    topic = f"spark-sasl-{uuid.uuid4().hex[:8]}"
    rows = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(40)]
    frame = spark.createDataFrame(rows, "key binary, value binary")
    # The sink creates nothing: the topic appears through the broker's auto-creation.
    frame.write.format("kafka_sdk").options(**options).option("topic", topic) \
        .mode("append").save()
    read = spark.read.format("kafka_sdk").options(**options).option("subscribe", topic).load()
    assert sorted((bytes(r.key), bytes(r.value)) for r in read.collect()) == sorted(rows)


def test_spark_wrong_password_fails_with_the_sasl_error(
        spark: Any, secured: tuple[ApacheKafkaCluster, Path]) -> None:
    cluster, ca_file = secured
    options = _options(cluster, ca_file, "not-alices-password")
    with pytest.raises(Exception) as info:  # Spark wraps the driver-side error
        spark.read.format("kafka_sdk").options(**options).option("subscribe", "t").load() \
            .collect()
    text = str(info.value)
    assert SaslAuthenticationFailedError.name in text or "SaslAuthenticationFailed" in text
    assert "not-alices-password" not in text
