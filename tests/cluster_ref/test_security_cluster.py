"""Security and dynamic broker configs in cluster mode: our broker and Apache Kafka 4.3.1,
each as 3 brokers and 1 controller, the same test on both.

Every broker runs a SASL_SSL listener (PLAIN, SCRAM-SHA-256/512) beside the PLAINTEXT one,
which stays the inter-broker listener; Kafka's StandardAuthorizer is on, with ``User:admin``
and the inter-broker principal (``User:ANONYMOUS`` on PLAINTEXT) as super users. ACLs,
SCRAM users and dynamic broker configs go through the controller into the metadata log, so
what one broker was asked holds on the others and after a restart. Each broker learns a
change when it replays the log (Kafka answers once the controller committed it; ours also
waits for the broker that was asked), so a check of another broker first waits, bounded,
until that broker describes the change over its own PLAINTEXT port, then asserts what its
clients get. The command-line tests at the end are ours alone.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from apache_support import apache_cluster, require_apache_kafka
from cryptography.hazmat.primitives import serialization

from sdk import AdminClient, Consumer, Producer
from sdk.admin.acl_types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from sdk.admin.results import ConfigResource, ConfigSource
from sdk.errors import InvalidRequestError, KafkaError, TopicAuthorizationFailedError
from sdk.protocol.framing import ClientFraming
from sdk.protocol.messages.describe_acls import DescribeAclsRequest
from sdk.protocol.messages.describe_configs import DescribeConfigsRequest
from sdk.protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
)
from sdk.protocol.messages.metadata import MetadataRequest
from sdk.types import NewTopic
from server_ref.cluster import EmbeddedCluster

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret";')
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
DEADLINE_S = 60.0
SETTLE_S = 30.0
Cluster = Any  # EmbeddedCluster or tools.apache_kafka.ApacheKafkaCluster: the same methods


@pytest.fixture(scope="module")
def tls_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cluster-tls")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(root / "ca.pem"))
    issued = ca.issue_cert("localhost", "127.0.0.1")
    # PKCS#8 key + chain: Kafka's PEM key store reads no other key form (ours reads both).
    key = serialization.load_pem_private_key(issued.private_key_pem.bytes(), password=None)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    chain = b"".join(blob.bytes() for blob in issued.cert_chain_pems)
    (root / "broker-keystore.pem").write_bytes(pem + chain)
    return root


def security_config(tls_dir: Path) -> dict[str, str]:
    return {
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tls_dir / "broker-keystore.pem"),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS",
        "offsets.topic.replication.factor": "3",
        "default.replication.factor": "3",
        "min.insync.replicas": "2",
        "group.initial.rebalance.delay.ms": "0",
    }


@pytest.fixture(scope="module", params=["ref", "kafka"])
def cluster(request: pytest.FixtureRequest, tls_dir: Path) -> Iterator[Cluster]:
    config = security_config(tls_dir)
    listeners = {"SASL_SSL": "SASL_SSL"}
    if request.param == "ref":
        with EmbeddedCluster(brokers=3, controllers=1, config=config,
                             listeners=listeners) as ours:
            yield ours
    else:
        with apache_cluster(3, 1, config=config, listeners=listeners) as apache:
            yield apache


# ---------------------------------------------------------------------------- helpers


def ask(cluster: Cluster, node: int, request: Any, version: int) -> Any:
    """One request to broker ``node``'s PLAINTEXT port (a super user there)."""
    framing = ClientFraming(client_id="security-test")
    with socket.create_connection(("127.0.0.1", cluster.nodes[node].port), timeout=10) as s:
        s.settimeout(10)
        s.sendall(framing.encode_request(request, version)[1])
        while True:
            data = s.recv(1 << 16)
            if not data:
                raise ConnectionError(f"broker {node} closed the connection")
            for _cid, response in framing.feed(data):
                return response


def settle(read: Callable[[], Any], expected: Any, what: str) -> None:
    """Wait (bounded) until ``read()`` gives ``expected``: a broker replaying the log."""
    deadline = time.monotonic() + SETTLE_S
    seen: Any = None
    while time.monotonic() < deadline:
        try:
            seen = read()
        except OSError as exc:  # a broker still starting
            seen = exc
        if seen == expected:
            return
        time.sleep(0.02)
    raise AssertionError(f"{what}: still {seen!r}, expected {expected!r}")


def acls_on(cluster: Cluster, node: int, principal: str) -> set[tuple[str, int, int]]:
    """(resource name, operation, permission) of ``principal``'s bindings as ``node`` holds
    them (DescribeAcls answers from the broker's authorizer)."""
    response = ask(cluster, node, DescribeAclsRequest(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=principal, host_filter=None, operation=1, permission_type=1), 3)
    assert response.error_code == 0, response
    return {(r.resource_name, a.operation, a.permission_type)
            for r in response.resources for a in r.acls}


def scram_users_on(cluster: Cluster, node: int) -> set[str]:
    response = ask(cluster, node, DescribeUserScramCredentialsRequest(users=None), 0)
    return {r.user for r in response.results if r.error_code == 0}


def config_on(cluster: Cluster, node: int, key: str, resource: str | None = None
              ) -> tuple[str | None, int] | None:
    """(value, source) of a broker config as broker ``node`` describes it for its own id
    (or ``resource``, e.g. "" for the cluster default); None when not listed."""
    name = str(node) if resource is None else resource
    response = ask(cluster, node, DescribeConfigsRequest(resources=[
        DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=4, resource_name=name, configuration_keys=[key])]), 4)
    result = response.results[0]
    assert result.error_code == 0, result
    return next(((c.value, c.config_source) for c in result.configs if c.name == key), None)


def sasl(cluster: Cluster, tls_dir: Path, user: str, password: str,
         mechanism: str = "SCRAM-SHA-256", node: int | None = None) -> dict[str, Any]:
    """SDK settings for the SASL_SSL listener (of one broker, or of all of them)."""
    servers = (cluster.listener_bootstrap("SASL_SSL") if node is None
               else cluster.listener_address("SASL_SSL", node))
    return {"bootstrap.servers": servers, "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(tls_dir / "ca.pem"), "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}


def admin_on(cluster: Cluster, tls_dir: Path, node: int) -> AdminClient:
    """The super user's admin client, bootstrapped on one broker only."""
    return AdminClient(config=sasl(cluster, tls_dir, "admin", "admin-secret", "PLAIN", node))


def add_user(cluster: Cluster, tls_dir: Path, node: int, user: str, password: str,
             mechanism: str = "SCRAM-SHA-256") -> None:
    """A SCRAM user made through broker ``node``, then seen by every running broker."""
    from sdk.admin.acl_types import ScramMechanism, UserScramCredentialUpsertion

    with admin_on(cluster, tls_dir, node) as admin:
        result = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            user, ScramMechanism[mechanism.replace("-", "_")], password)])
        assert result.ok, result.errors
    for other in running(cluster):
        settle(lambda other=other: user in scram_users_on(cluster, other), True,
               f"user {user} on broker {other}")


def running(cluster: Cluster) -> list[int]:
    return [n.node_id for n in cluster.brokers if n.running]


def create_acls(cluster: Cluster, tls_dir: Path, node: int, bindings: list[AclBinding]
                ) -> float:
    """Bindings made through broker ``node``, then held by every running broker; the
    seconds from the answer until they all held them (reported, never asserted)."""
    with admin_on(cluster, tls_dir, node) as admin:
        done = admin.create_acls(bindings)
        answered = time.monotonic()
        assert done.ok, done.errors
    for b in bindings:
        wanted = (b.pattern.name, int(b.operation), int(b.permission))
        for other in running(cluster):
            settle(lambda other=other, b=b, wanted=wanted:
                   wanted in acls_on(cluster, other, b.principal), True,
                   f"{b} on broker {other}")
    return time.monotonic() - answered


def binding(principal: str, resource_type: ResourceType, name: str,
            operation: AclOperation = AclOperation.ALL,
            permission: AclPermissionType = AclPermissionType.ALLOW,
            pattern: PatternType = PatternType.LITERAL) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern), principal, "*",
                      operation, permission)


def make_topic(cluster: Cluster, tls_dir: Path, name: str, partitions: int) -> None:
    with admin_on(cluster, tls_dir, 2) as admin:
        assert admin.create_topics([NewTopic(name, partitions, 3)]).ok
    for node in running(cluster):  # a leader on every broker's metadata
        settle(lambda node=node: all(
            leader >= 0 for leader in cluster._metadata(cluster.nodes[node], name)[1]
            .values()) and len(cluster._metadata(cluster.nodes[node], name)[1]) == partitions,
               True, f"{name} on broker {node}")


def round_trip(settings: dict[str, Any], topic: str, count: int = 30) -> list[bytes]:
    values = [f"{topic}-{i}".encode() for i in range(count)]
    with Producer(config={**settings, "acks": "all"}) as producer:
        for future in [producer.send(topic, v, partition=i % 3)
                       for i, v in enumerate(values)]:
            future.result(timeout=30)
    got: list[bytes] = []
    with Consumer(topic, config={**settings, "group.id": f"g-{topic}",
                                 "auto.offset.reset": "earliest"}) as consumer:
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < count and time.monotonic() < deadline:
            got += [r.value for rs in consumer.poll(timeout_ms=500).values() for r in rs]
    return got


def _produce_error(settings: dict[str, Any], topic: str) -> type[KafkaError] | None:
    """The error one record's send ends with (None: written). Not idempotent: with a DENY
    on the only topic erin may write, InitProducerId is refused (CLUSTER_AUTHORIZATION_FAILED,
    on a single broker and in Kafka) before the produce could be."""
    with Producer(config={**settings, "acks": "all", "enable.idempotence": False,
                          "delivery.timeout.ms": 20000, "request.timeout.ms": 10000,
                          "max.block.ms": 20000}) as producer:
        try:
            producer.send(topic, b"x").result(timeout=30)
        except KafkaError as exc:
            return type(exc)
    return None


# ---------------------------------------------------------------------------- listeners


def test_metadata_answers_the_listener_a_client_came_in_on(cluster: Cluster,
                                                          tls_dir: Path) -> None:
    with admin_on(cluster, tls_dir, 2) as admin:
        described = admin.describe_cluster()
    assert {b.node_id: b.port for b in described.brokers} == {
        n.node_id: n.listeners["SASL_SSL"][1] for n in cluster.brokers}
    # The PLAINTEXT listener lists the PLAINTEXT ports.
    answer = ask(cluster, 1, MetadataRequest(topics=[], allow_auto_topic_creation=False), 12)
    assert {b.node_id: b.port for b in answer.brokers} == {
        n.node_id: n.port for n in cluster.brokers}


# ---------------------------------------------------------------------------- SCRAM users


def test_scram_user_made_on_one_broker_authenticates_on_every_broker(
        cluster: Cluster, tls_dir: Path) -> None:
    add_user(cluster, tls_dir, 1, "bob", "bob-secret")
    add_user(cluster, tls_dir, 2, "carol", "carol-secret", "SCRAM-SHA-512")
    for node in (1, 2, 3):
        with AdminClient(config=sasl(cluster, tls_dir, "bob", "bob-secret", node=node)) as a:
            assert a.describe_cluster().cluster_id
        with AdminClient(config=sasl(cluster, tls_dir, "carol", "carol-secret",
                                     "SCRAM-SHA-512", node)) as a:
            assert a.describe_cluster().cluster_id


def test_a_restarted_broker_authenticates_users_made_while_it_was_down(
        cluster: Cluster, tls_dir: Path) -> None:
    cluster.kill(3)
    add_user(cluster, tls_dir, 1, "frank", "frank-secret")
    cluster.start(3)
    settle(lambda: "frank" in scram_users_on(cluster, 3), True, "frank on broker 3")
    with AdminClient(config=sasl(cluster, tls_dir, "frank", "frank-secret", node=3)) as a:
        assert a.describe_cluster().cluster_id


# ---------------------------------------------------------------------------- ACLs


def test_sdk_produces_and_consumes_across_brokers_under_acls(cluster: Cluster,
                                                            tls_dir: Path) -> None:
    topic = f"acl-{uuid.uuid4().hex[:8]}"
    add_user(cluster, tls_dir, 3, "dave", "dave-secret")
    make_topic(cluster, tls_dir, topic, 3)
    create_acls(cluster, tls_dir, 1, [binding("User:dave", ResourceType.TOPIC, topic),
                                      binding("User:dave", ResourceType.GROUP, "*")])
    # Three partitions led by the three brokers: the records cross all of them.
    got = round_trip(sasl(cluster, tls_dir, "dave", "dave-secret"), topic)
    assert sorted(got) == sorted(f"{topic}-{i}".encode() for i in range(30))


def _topic_for_grace(cluster: Cluster, tls_dir: Path, prefix: str) -> str:
    """A 3-partition RF=3 topic (leaders on all brokers) grace may use, as her groups."""
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    make_topic(cluster, tls_dir, topic, 3)
    create_acls(cluster, tls_dir, 2, [
        binding("User:grace", ResourceType.TOPIC, prefix, pattern=PatternType.PREFIXED),
        binding("User:grace", ResourceType.GROUP, prefix, pattern=PatternType.PREFIXED)])
    return topic


def test_confluent_kafka_across_brokers_over_sasl_ssl(cluster: Cluster,
                                                      tls_dir: Path) -> None:
    from confluent_kafka import Consumer as CKConsumer
    from confluent_kafka import Producer as CKProducer

    add_user(cluster, tls_dir, 3, "grace", "grace-secret", "SCRAM-SHA-512")
    topic = _topic_for_grace(cluster, tls_dir, "ck")
    conf = {"bootstrap.servers": cluster.listener_address("SASL_SSL", 1),
            "security.protocol": "SASL_SSL", "ssl.ca.location": str(tls_dir / "ca.pem"),
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "grace",
            "sasl.password": "grace-secret"}
    producer = CKProducer({**conf, "acks": "all"})
    values = [f"ck-{i}".encode() for i in range(30)]
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % 3)
    assert producer.flush(30) == 0
    consumer = CKConsumer({**conf, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < len(values) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    assert sorted(got) == sorted(values)


def test_kafka_python_across_brokers_over_sasl_ssl(cluster: Cluster, tls_dir: Path) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    add_user(cluster, tls_dir, 1, "grace", "grace-secret", "SCRAM-SHA-512")
    topic = _topic_for_grace(cluster, tls_dir, "kp")
    conf: dict[str, Any] = {
        "bootstrap_servers": cluster.listener_address("SASL_SSL", 3),
        "security_protocol": "SASL_SSL", "ssl_cafile": str(tls_dir / "ca.pem"),
        "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "grace",
        "sasl_plain_password": "grace-secret"}
    producer = KafkaProducer(acks="all", **conf)
    values = [f"kp-{i}".encode() for i in range(30)]
    for i, value in enumerate(values):
        producer.send(topic, value, partition=i % 3).get(30)
    producer.close()
    consumer = KafkaConsumer(topic, group_id=topic, auto_offset_reset="earliest",
                             consumer_timeout_ms=30000, **conf)
    got: list[bytes] = []
    for message in consumer:  # stops at the last record (or after 30 s without one)
        got.append(message.value)
        if len(got) == len(values):
            break
    consumer.close()
    assert sorted(got) == sorted(values)


def test_an_acl_made_on_one_broker_denies_on_the_others(cluster: Cluster, tls_dir: Path,
                                                       failover_report: list[str]) -> None:
    topic = f"deny-{uuid.uuid4().hex[:8]}"
    add_user(cluster, tls_dir, 1, "erin", "erin-secret")
    make_topic(cluster, tls_dir, topic, 1)
    leader = cluster.leader_of(topic, 0)
    elsewhere = next(n for n in (1, 2, 3) if n != leader)
    erin = sasl(cluster, tls_dir, "erin", "erin-secret")
    # No binding names the topic: denied (allow.everyone.if.no.acl.found is false).
    assert _produce_error(erin, topic) is TopicAuthorizationFailedError
    create_acls(cluster, tls_dir, elsewhere, [
        binding("User:erin", ResourceType.TOPIC, topic, AclOperation.WRITE)])
    assert _produce_error(erin, topic) is None  # the leader replayed the ALLOW
    spread = create_acls(cluster, tls_dir, elsewhere, [
        binding("User:erin", ResourceType.TOPIC, topic, AclOperation.WRITE,
                AclPermissionType.DENY)])
    kind = "ours" if isinstance(cluster, EmbeddedCluster) else "Apache Kafka"
    failover_report.append(f"{kind}: a DENY answered by broker {elsewhere} was held by all "
                           f"3 brokers {spread * 1000:.0f} ms later (DescribeAcls polled "
                           "every 20 ms)")
    assert _produce_error(erin, topic) is TopicAuthorizationFailedError
    # A killed and restarted leader still enforces it (replayed from its log).
    cluster.kill(leader)
    cluster.start(leader)
    both = {(topic, int(AclOperation.WRITE), int(AclPermissionType.ALLOW)),
            (topic, int(AclOperation.WRITE), int(AclPermissionType.DENY))}
    settle(lambda: acls_on(cluster, leader, "User:erin"), both, "erin's bindings, restarted")
    assert _produce_error(sasl(cluster, tls_dir, "erin", "erin-secret", node=leader),
                          topic) is TopicAuthorizationFailedError
    with admin_on(cluster, tls_dir, leader) as admin:
        deleted = admin.delete_acls(AclBindingFilter(
            resource_type=ResourceType.TOPIC, name=topic,
            permission=AclPermissionType.DENY))
        assert deleted.ok, deleted.errors
    for node in (1, 2, 3):
        settle(lambda node=node: acls_on(cluster, node, "User:erin"),
               {(topic, int(AclOperation.WRITE), int(AclPermissionType.ALLOW))},
               f"erin's bindings on broker {node}")
    assert _produce_error(erin, topic) is None


# ---------------------------------------------------------------------------- configs

DYNAMIC_BROKER = int(ConfigSource.DYNAMIC_BROKER_CONFIG)
DYNAMIC_DEFAULT = int(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
DEFAULT = int(ConfigSource.DEFAULT_CONFIG)


def settle_configs(cluster: Cluster, key: str, wanted: dict[int, tuple[str | None, int]]
                   ) -> None:
    for node, expected in wanted.items():
        settle(lambda node=node: config_on(cluster, node, key), expected,
               f"{key} on broker {node}")


def test_dynamic_broker_configs_cluster_wide_and_per_broker(cluster: Cluster,
                                                           tls_dir: Path) -> None:
    key = "log.cleaner.backoff.ms"
    with admin_on(cluster, tls_dir, 1) as admin:
        done = admin.alter_configs({ConfigResource.broker(""): {key: "16000"}})
        assert done.ok, done.errors
        done = admin.alter_configs({ConfigResource.broker(3): {key: "17000"}})
        assert done.ok, done.errors
    settle_configs(cluster, key, {1: ("16000", DYNAMIC_DEFAULT), 2: ("16000", DYNAMIC_DEFAULT),
                                  3: ("17000", DYNAMIC_BROKER)})
    assert config_on(cluster, 2, key, "") == ("16000", DYNAMIC_DEFAULT)
    # A restart replays them from the metadata log.
    cluster.kill(3)
    cluster.kill(2)
    cluster.start(2, wait=False)
    cluster.start(3)
    settle_configs(cluster, key, {2: ("16000", DYNAMIC_DEFAULT), 3: ("17000", DYNAMIC_BROKER)})
    # So does a restarted controller, which then takes the next change.
    cluster.kill(101)
    cluster.start(101)
    with admin_on(cluster, tls_dir, 1) as admin:
        done = admin.alter_configs({ConfigResource.broker(1): {key: "18000"}})
        assert done.ok, done.errors
    settle_configs(cluster, key, {1: ("18000", DYNAMIC_BROKER)})
    # Kafka's refusals, whichever broker is asked.
    with admin_on(cluster, tls_dir, 2) as admin:
        refused = admin.alter_configs({ConfigResource.broker(1): {"broker.id": "9"}})
        error = refused.errors[ConfigResource.broker(1)]
        assert isinstance(error, InvalidRequestError)
        assert "Cannot update these configs dynamically" in str(error)
        cleared = admin.alter_configs({ConfigResource.broker(""): {key: None},
                                       ConfigResource.broker(1): {key: None},
                                       ConfigResource.broker(3): {key: None}})
        assert cleared.ok, cleared.errors
    settle_configs(cluster, key, {n: ("15000", DEFAULT) for n in (1, 2, 3)})


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_legacy_alter_configs_replaces_a_broker_level_through_the_controller(
        cluster: Cluster, tls_dir: Path) -> None:
    """confluent-kafka's AlterConfigs (the whole-set API; librdkafka refuses the empty
    cluster-default name there) on broker 2: the given configs replace its level, so a
    second call without a key removes it; the other brokers keep their defaults."""
    from confluent_kafka.admin import AdminClient as CKAdmin
    from confluent_kafka.admin import ConfigResource as CKResource
    from confluent_kafka.admin import ResourceType as CKType

    admin = CKAdmin({"bootstrap.servers": cluster.listener_bootstrap("SASL_SSL"),
                     "security.protocol": "SASL_SSL",
                     "ssl.ca.location": str(tls_dir / "ca.pem"), "sasl.mechanism": "PLAIN",
                     "sasl.username": "admin", "sasl.password": "admin-secret"})
    first, second = "log.cleaner.backoff.ms", "log.cleaner.io.max.bytes.per.second"

    def replace(configs: dict[str, str]) -> None:
        for future in admin.alter_configs([CKResource(CKType.BROKER, "2",
                                                      set_config=configs)]).values():
            future.result(30)

    replace({first: "21000", second: "1000000"})
    settle_configs(cluster, second, {2: ("1000000.0", DYNAMIC_BROKER)})  # a DOUBLE
    replace({first: "22000"})
    settle_configs(cluster, first, {2: ("22000", DYNAMIC_BROKER), 1: ("15000", DEFAULT),
                                    3: ("15000", DEFAULT)})
    assert config_on(cluster, 2, second)[1] == DEFAULT  # type: ignore[index]
    replace({})
    settle_configs(cluster, first, {2: ("15000", DEFAULT)})


def java(main_class: str, *args: str) -> str:
    from tools.apache_kafka import java_command

    done = subprocess.run(java_command(main_class, *args), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, f"{main_class}: {done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done.stdout


def test_kafka_java_tools_set_broker_configs_and_acls_through_any_broker(
        cluster: Cluster) -> None:
    """kafka-configs.sh and kafka-acls.sh (Java's admin client) on the PLAINTEXT listener
    (a super user there): a cluster default set through broker 1 and a binding added through
    broker 2 are what brokers 3 and 1 describe."""
    require_apache_kafka()  # the tools' jars (Java)
    key = "log.cleaner.backoff.ms"
    on = {n: cluster.address_of(n) for n in (1, 2, 3)}
    java("kafka.admin.ConfigCommand", "--bootstrap-server", on[1], "--entity-type", "brokers",
         "--entity-default", "--alter", "--add-config", f"{key}=19000")
    settle_configs(cluster, key, {n: ("19000", DYNAMIC_DEFAULT) for n in (1, 2, 3)})
    shown = java("kafka.admin.ConfigCommand", "--bootstrap-server", on[3], "--entity-type",
                 "brokers", "--entity-name", "3", "--describe", "--all")
    assert f"{key}=19000 sensitive=false synonyms={{DYNAMIC_DEFAULT_BROKER_CONFIG:{key}=19000" \
        in shown
    java("kafka.admin.ConfigCommand", "--bootstrap-server", on[2], "--entity-type", "brokers",
         "--entity-default", "--alter", "--delete-config", key)
    settle_configs(cluster, key, {n: ("15000", DEFAULT) for n in (1, 2, 3)})
    topic = f"java-{uuid.uuid4().hex[:8]}"
    java("org.apache.kafka.tools.AclCommand", "--bootstrap-server", on[2], "--add",
         "--allow-principal", "User:zed", "--operation", "Read", "--topic", topic)
    settle(lambda: acls_on(cluster, 1, "User:zed"),
           {(topic, int(AclOperation.READ), int(AclPermissionType.ALLOW))}, "zed on broker 1")
    listed = java("org.apache.kafka.tools.AclCommand", "--bootstrap-server", on[1], "--list",
                  "--topic", topic)
    assert "principal=User:zed, host=*, operation=READ, permissionType=ALLOW" in listed


# ---------------------------------------------------------------------------- command line


def test_command_line_cluster_with_a_sasl_ssl_listener(tls_dir: Path, tmp_path: Path) -> None:
    """``python -m server_ref --brokers 2`` takes the single broker's listener settings;
    each broker gets its own ports, printed as ``listener NAME node=ID protocol=P port=N``."""
    root = Path(__file__).resolve().parents[2]
    settings = ["listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                "sasl.enabled.mechanisms=PLAIN",
                f"listener.name.sasl_ssl.plain.sasl.jaas.config={PLAIN_JAAS}",
                "ssl.keystore.type=PEM",
                f"ssl.keystore.location={tls_dir / 'broker-keystore.pem'}"]
    argv = [sys.executable, "-m", "server_ref", "--brokers", "2", "--data-dir", str(tmp_path)]
    for item in settings:
        argv += ["--config", item]
    env = dict(os.environ, PYTHONPATH=str(root))
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=root)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline().strip() for _ in range(1 + 3 + 2)]
        assert lines[0].startswith("server_ref ready bootstrap_servers="), lines
        found = [re.fullmatch(r"listener SASL_SSL node=(\d) protocol=SASL_SSL port=(\d+)",
                              line) for line in lines[4:]]
        assert all(found), lines
        ports = {int(m[1]): int(m[2]) for m in found if m}
        assert set(ports) == {1, 2}
        with AdminClient(config={
                "bootstrap.servers": f"127.0.0.1:{ports[2]}", "security.protocol": "SASL_SSL",
                "ssl.ca.location": str(tls_dir / "ca.pem"), "sasl.mechanism": "PLAIN",
                "sasl.username": "admin", "sasl.password": "admin-secret"}) as admin:
            described = admin.describe_cluster()
        assert {b.node_id: b.port for b in described.brokers} == ports
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


@pytest.mark.parametrize(("setting", "reason"), [
    ("inter.broker.listener.name=INTERNAL", "INTERNAL is not among the listeners"),
    ("listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:9999", "must use port 0")])
def test_command_line_refuses_listeners_cluster_mode_cannot_run(setting: str, reason: str
                                                                ) -> None:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "server_ref", "--brokers", "2", "--config",
         "listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0", "--config", setting],
        capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(root)), cwd=root,
        timeout=60)
    assert done.returncode == 2
    assert reason in done.stderr
