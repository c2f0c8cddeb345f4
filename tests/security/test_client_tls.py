"""The SDK over TLS against Apache Kafka (one node; listeners SSL, MTLS with
ssl.client.auth=required, and WRONGHOST on 127.0.0.2, an address its certificate does not
name; see apache_secured).

Each way of giving the files (our names, Java's PEM store names, librdkafka's, inline PEM,
an ssl.SSLContext) carries a producer, a consumer group and admin calls. An untrusted
certificate, a wrong host name and a missing client certificate are SslAuthenticationError,
raised at once and not retried in a storm.
"""

from __future__ import annotations

import logging
import ssl
import time
from typing import Any

import pytest
from security.apache_secured import roundtrip, secured_apache

from sdk import AdminClient, Producer
from sdk.errors import AuthenticationError, KafkaError, SslAuthenticationError
from tools.apache_kafka import ApacheKafkaCluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kafka(tls: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    with secured_apache(tls, tmp_path_factory.mktemp("tls-kafka")) as cluster:
        yield cluster


def _ways(kafka: ApacheKafkaCluster, tls: Any) -> dict[str, dict[str, Any]]:
    ssl_ = {"bootstrap.servers": kafka.listener_bootstrap("SSL"), "security.protocol": "SSL"}
    mtls = {"bootstrap.servers": kafka.listener_bootstrap("MTLS"), "security.protocol": "SSL"}
    context = ssl.create_default_context(cafile=str(tls.ca_file))
    context.load_cert_chain(str(tls.client_cert), str(tls.client_key))
    return {
        "ssl-python-names": {**ssl_, "ssl_cafile": str(tls.ca_file)},
        "ssl-java-inline-truststore": {**ssl_, "ssl.truststore.type": "PEM",
                                       "ssl.truststore.certificates": tls.ca_file.read_text()},
        "mtls-java-keystore-file": {**mtls, "ssl.truststore.type": "PEM",
                                    "ssl.truststore.location": str(tls.ca_file),
                                    "ssl.keystore.type": "PEM",
                                    "ssl.keystore.location": str(tls.client_keystore)},
        "mtls-java-inline-keystore": {**mtls, "ssl.truststore.location": str(tls.ca_file),
                                      "ssl.keystore.type": "PEM",
                                      "ssl.keystore.key": tls.client_key.read_text(),
                                      "ssl.keystore.certificate.chain":
                                          tls.client_cert.read_text()},
        "mtls-librdkafka-names": {**mtls, "ssl.ca.location": str(tls.ca_file),
                                  "ssl.certificate.location": str(tls.client_cert),
                                  "ssl.key.location": str(tls.client_key)},
        "mtls-ssl-context": {**mtls, "ssl_context": context},
        "wrong-host-unchecked": {"bootstrap.servers": kafka.listener_bootstrap("WRONGHOST"),
                                 "security.protocol": "SSL", "ssl_cafile": str(tls.ca_file),
                                 "ssl.endpoint.identification.algorithm": ""},
    }


WAYS = ["ssl-python-names", "ssl-java-inline-truststore", "mtls-java-keystore-file",
        "mtls-java-inline-keystore", "mtls-librdkafka-names", "mtls-ssl-context",
        "wrong-host-unchecked"]


@pytest.mark.parametrize("way", WAYS)
def test_produce_consume_admin_over_tls(kafka: ApacheKafkaCluster, tls: Any, way: str) -> None:
    roundtrip(_ways(kafka, tls)[way], records=30)


def _refusals(kafka: ApacheKafkaCluster, tls: Any) -> dict[str, tuple[dict[str, Any], str]]:
    return {
        "untrusted-certificate": ({"bootstrap.servers": kafka.listener_bootstrap("SSL"),
                                   "security.protocol": "SSL",
                                   "ssl_cafile": str(tls.untrusted_ca_file)},
                                  "unable to get local issuer certificate"),
        "wrong-host-name": ({"bootstrap.servers": kafka.listener_bootstrap("WRONGHOST"),
                             "security.protocol": "SSL", "ssl_cafile": str(tls.ca_file)},
                            "127.0.0.2"),
        "no-client-certificate": ({"bootstrap.servers": kafka.listener_bootstrap("MTLS"),
                                   "security.protocol": "SSL",
                                   "ssl_cafile": str(tls.ca_file)}, "CERTIFICATE"),
    }


@pytest.mark.parametrize("case", ["untrusted-certificate", "wrong-host-name",
                                  "no-client-certificate"])
def test_tls_refusals_are_typed_and_not_retried_in_a_storm(
        kafka: ApacheKafkaCluster, tls: Any, case: str,
        caplog: pytest.LogCaptureFixture) -> None:
    settings, words = _refusals(kafka, tls)[case]
    told: list[KafkaError] = []
    caplog.set_level(logging.INFO, logger="sdk.net.client")
    settings = {**settings, "reconnect.backoff.ms": 1, "reconnect.backoff.max.ms": 1500,
                "on_error": told.append}
    with Producer(dict(settings), max_block_ms=10_000) as producer:
        with pytest.raises(SslAuthenticationError) as info:
            producer.send("any-topic", b"x").result(timeout=10)
        assert "TLS handshake with" in str(info.value) and words in str(info.value)
        window_end = time.monotonic() + 4.0
        while time.monotonic() < window_end:
            with pytest.raises(AuthenticationError):
                producer.send("any-topic", b"x").result(timeout=10)
            time.sleep(0.05)
    attempts = sum(1 for r in caplog.records if r.name == "sdk.net.client"
                   and "unreachable" in r.getMessage() and "TLS handshake" in r.getMessage())
    assert 1 <= attempts <= 4, f"{attempts} TLS handshakes in a 4 s window"
    assert any(isinstance(e, SslAuthenticationError) for e in told)
    with AdminClient({k: v for k, v in settings.items() if k != "on_error"}) as admin:
        with pytest.raises(SslAuthenticationError):
            admin.list_topics()


def test_plaintext_client_on_a_tls_listener_says_so(kafka: ApacheKafkaCluster) -> None:
    with AdminClient(bootstrap_servers=kafka.listener_bootstrap("SSL"),
                     default_api_timeout_ms=3000) as admin:
        with pytest.raises(KafkaError, match="TLS listener"):
            admin.list_topics()
