"""Our cluster with an authenticated inter-broker listener: ``inter.broker.listener.name=
SASL_SSL`` with ``sasl.mechanism.inter.broker.protocol`` PLAIN or SCRAM-SHA-512, so brokers
fetch from each other over TLS as ``User:broker`` (a super user), or an SSL listener with
mutual TLS, the brokers being their certificate's subject; ``User:ANONYMOUS`` (the PLAINTEXT listener)
is not one. ``acks=all`` on a ``min.insync.replicas=3`` topic is answered only once both
followers fetched the batch, which they can only do as ``User:broker``; the same holds after
the leader's SIGKILL and restart (new connections log in again). Apache Kafka's test cluster
keeps PLAINTEXT as its inter-broker listener, so this one is ours alone.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from sdk import AdminClient, Consumer, Producer
from sdk.admin.acl_types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePattern,
    ResourceType,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from sdk.errors import KafkaError, TopicAuthorizationFailedError
from sdk.types import NewTopic
from server_ref.cluster import EmbeddedCluster

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="broker" password="broker-secret" user_broker="broker-secret" '
        'user_admin="admin-secret";')
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="broker" password="broker-secret";')


@pytest.fixture(scope="module")
def tls_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("inter-broker-tls")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(root / "ca.pem"))
    issued = ca.issue_cert("localhost", "127.0.0.1")
    key = serialization.load_pem_private_key(issued.private_key_pem.bytes(), password=None)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    (root / "keystore.pem").write_bytes(
        pem + b"".join(blob.bytes() for blob in issued.cert_chain_pems))
    return root


def certificate_principal(tls_dir: Path) -> str:
    """``User:<subject DN>``: who a broker is when it logs in with its certificate."""
    from cryptography import x509

    cert = x509.load_pem_x509_certificate((tls_dir / "keystore.pem").read_bytes())
    return "User:" + cert.subject.rfc4514_string()


@pytest.fixture(scope="module", params=["PLAIN", "SCRAM-SHA-512", "SSL"])
def cluster(request: pytest.FixtureRequest, tls_dir: Path) -> Iterator[EmbeddedCluster]:
    """PLAIN and SCRAM: the brokers log in on SASL_SSL as ``User:broker``; with SCRAM
    that user is made through the controller once the cluster runs (as Kafka's
    ``kafka-storage format --add-scram`` would before): until then their fetches from each
    other fail to log in, then replication starts. SSL: mutual TLS on an SSL listener
    (``ssl.client.auth=required``), the brokers being their certificate's subject."""
    mechanism = request.param
    inter = "MTLS" if mechanism == "SSL" else "SASL_SSL"
    config = {
        "inter.broker.listener.name": inter,
        "sasl.mechanism.inter.broker.protocol": mechanism if inter == "SASL_SSL" else "",
        "listener.name.mtls.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tls_dir / "keystore.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls_dir / "ca.pem"),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:broker;User:admin;{certificate_principal(tls_dir)}",
        "min.insync.replicas": "3",
    }
    with EmbeddedCluster(brokers=3, controllers=1, config=config,
                         listeners={"SASL_SSL": "SASL_SSL", "MTLS": "SSL"}) as c:
        # The launcher reads leaders over PLAINTEXT: ANONYMOUS may describe topics, no more.
        with AdminClient(config=admin_settings(c, tls_dir)) as admin:
            if mechanism == "SCRAM-SHA-512":
                assert admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                    "broker", ScramMechanism.SCRAM_SHA_512, "broker-secret")]).ok
            assert admin.create_acls([AclBinding(
                ResourcePattern(ResourceType.TOPIC, "*"), "User:ANONYMOUS", "*",
                AclOperation.DESCRIBE, AclPermissionType.ALLOW)]).ok
        yield c


def admin_settings(cluster: EmbeddedCluster, tls_dir: Path) -> dict[str, Any]:
    return {"bootstrap.servers": cluster.listener_bootstrap("SASL_SSL"),
            "security.protocol": "SASL_SSL", "ssl.ca.location": str(tls_dir / "ca.pem"),
            "sasl.mechanism": "PLAIN", "sasl.username": "admin",
            "sasl.password": "admin-secret"}


def produce(settings: dict[str, Any], topic: str, values: list[bytes]) -> None:
    with Producer(config={**settings, "acks": "all", "request.timeout.ms": 10000,
                          "delivery.timeout.ms": 30000}) as producer:
        for future in [producer.send(topic, v, partition=i % 3)
                       for i, v in enumerate(values)]:
            future.result(timeout=40)


def test_brokers_replicate_as_their_own_principal(cluster: EmbeddedCluster,
                                                  tls_dir: Path) -> None:
    topic = f"ib-{uuid.uuid4().hex[:8]}"
    admin = admin_settings(cluster, tls_dir)
    with AdminClient(config=admin) as client:
        assert client.create_topics([NewTopic(topic, 3, 3)]).ok
    first = [f"a-{i}".encode() for i in range(30)]
    produce(admin, topic, first)  # min.insync.replicas=3: both followers fetched each batch
    leader = cluster.leader_of(topic, 0)
    cluster.kill(leader)
    cluster.start(leader)
    then = [f"b-{i}".encode() for i in range(30)]
    deadline = time.monotonic() + 60
    while True:  # until the restarted broker is back in every ISR (its fetches log in)
        states = cluster.partition_states(1, topic)
        if all(isr == [1, 2, 3] for _leader, _epoch, isr in states.values()):
            break
        assert time.monotonic() < deadline, states
        time.sleep(0.2)
    produce(admin, topic, then)
    got: list[bytes] = []
    with Consumer(topic, config={**admin, "group.id": topic,
                                 "auto.offset.reset": "earliest"}) as consumer:
        deadline = time.monotonic() + 60
        while len(got) < 60 and time.monotonic() < deadline:
            got += [r.value for rs in consumer.poll(timeout_ms=500).values() for r in rs]
    assert sorted(got) == sorted(first + then)


def test_the_plaintext_listener_is_not_privileged(cluster: EmbeddedCluster,
                                                tls_dir: Path) -> None:
    """User:ANONYMOUS (PLAINTEXT) is no super user here: its writes are refused."""
    topic = f"anon-{uuid.uuid4().hex[:8]}"
    with AdminClient(config=admin_settings(cluster, tls_dir)) as client:
        assert client.create_topics([NewTopic(topic, 1, 3)]).ok
    with Producer(bootstrap_servers=cluster.bootstrap_servers, acks="all",
                  enable_idempotence=False, max_block_ms=10000, request_timeout_ms=10000,
                  delivery_timeout_ms=20000) as producer:
        with pytest.raises(KafkaError) as refused:
            producer.send(topic, b"x").result(timeout=30)
    assert isinstance(refused.value, TopicAuthorizationFailedError)
