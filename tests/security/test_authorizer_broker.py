"""The authorizer with real principals, on our broker and on Apache Kafka (one KRaft node),
the same steps and the same answers: alice and bob log in with SASL PLAIN on a
SASL_PLAINTEXT listener, and the PLAINTEXT listener's User:ANONYMOUS is the super user that
manages ACLs and reads back what was (not) stored (on Apache Kafka the KRaft controller's
connections are ANONYMOUS too, so it has to be). ``allow.everyone.if.no.acl.found`` is false
(Kafka's default): a principal may do only what an ACL allows.

Apache Kafka applies an ACL change from its metadata log a little after the admin call
returns (our broker at once): ``settle`` waits until DescribeAcls shows it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from apache_support import apache_cluster

from sdk import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AdminClient,
    ConfigResource,
    Consumer,
    ElectionType,
    NewTopic,
    OffsetSpec,
    PatternType,
    Producer,
    ResourcePattern,
    ResourceType,
    TopicPartition,
    UserScramCredentialUpsertion,
)
from sdk.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    KafkaError,
    TopicAuthorizationFailedError,
)
from server_ref import EmbeddedBroker

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret" user_bob="bob-secret";')
SECURITY = {
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
    "group.initial.rebalance.delay.ms": "0",
}
ALICE = "User:alice"


@dataclass
class Target:
    kind: str
    plaintext: Callable[[], str]  # addresses change on neither broker's restart
    sasl: Callable[[], str]
    restart: Callable[[], None]


@pytest.fixture(scope="module", params=["ref", "kafka"])
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    if request.param == "ref":
        config = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                  **SECURITY}
        with EmbeddedBroker(data_dir=None, port=0, config=config) as broker:
            yield Target("ref", lambda: broker.listener_address("PLAINTEXT"),
                         lambda: broker.listener_address("SASL_PLAINTEXT"), broker.restart)
    else:
        with apache_cluster(1, config=SECURITY,
                            listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT"}) as cluster:
            def restart() -> None:
                cluster.stop(1)
                cluster.start(1)

            yield Target("kafka", lambda: cluster.bootstrap_servers,
                         lambda: cluster.listener_address("SASL_PLAINTEXT"), restart)


def as_user(target: Target, user: str) -> dict[str, Any]:
    return {"bootstrap_servers": target.sasl(), "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN", "sasl_username": user,
            "sasl_password": f"{user}-secret"}


@pytest.fixture
def root(target: Target) -> Iterator[AdminClient]:
    """The super user (PLAINTEXT: User:ANONYMOUS)."""
    with AdminClient(bootstrap_servers=target.plaintext()) as admin:
        yield admin


@pytest.fixture
def alice_admin(target: Target) -> Iterator[AdminClient]:
    with AdminClient(**as_user(target, "alice"), request_timeout_ms=10000) as admin:
        yield admin


def grant(root: AdminClient, bindings: list[AclBinding]) -> None:
    """Create ``bindings`` and wait until the broker's authorizer has them."""
    root.create_acls(bindings).raise_if_failed()
    deadline = time.monotonic() + 30
    while not set(bindings) <= set(root.describe_acls()):
        assert time.monotonic() < deadline, "the ACLs never showed"
        time.sleep(0.1)


def wait_topic(admin: AdminClient, topic: str) -> None:
    """Apache Kafka's broker knows a new topic a moment after CreateTopics returns."""
    deadline = time.monotonic() + 30
    while topic not in admin.list_topics():
        assert time.monotonic() < deadline, f"{topic} never showed"
        time.sleep(0.1)


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def allow(kind: ResourceType, resource: str, *ops: AclOperation, principal: str = ALICE,
          pattern: PatternType = PatternType.LITERAL) -> list[AclBinding]:
    return [AclBinding(ResourcePattern(kind, resource, pattern), principal, operation=op)
            for op in ops]


def test_unauthorized_produce_fails_and_stores_nothing(target: Target,
                                                       root: AdminClient) -> None:
    secret = name("secret")
    root.create_topics([NewTopic(secret, 1, 1)]).raise_if_failed()
    wait_topic(root, secret)
    # WRITE on topics of her own: enough for an idempotent producer id (KIP-679), not for
    # the secret topic.
    own = allow(ResourceType.TOPIC, "alice-own-", AclOperation.WRITE,
                pattern=PatternType.PREFIXED)
    grant(root, own + allow(ResourceType.TOPIC, secret, AclOperation.DESCRIBE))
    tp = TopicPartition(secret, 0)
    with Producer(**as_user(target, "alice"), linger_ms=0) as producer:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(secret, b"not for alice").result(timeout=30)
        assert root.list_offsets({tp: OffsetSpec.LATEST})[tp].offset == 0  # nothing stored
        grant(root, allow(ResourceType.TOPIC, secret, AclOperation.WRITE))
        producer.send(secret, b"now allowed").result(timeout=30)
    assert root.list_offsets({tp: OffsetSpec.LATEST})[tp].offset == 1

    # bob has no ACL at all: even the idempotent producer id is refused, as Kafka does
    # (IDEMPOTENT_WRITE on the cluster or WRITE on some topic is needed).
    with Producer(**as_user(target, "bob"), linger_ms=0) as producer:
        with pytest.raises((ClusterAuthorizationFailedError, TopicAuthorizationFailedError)):
            producer.send(secret, b"bob").result(timeout=30)
    assert root.list_offsets({tp: OffsetSpec.LATEST})[tp].offset == 1


def test_metadata_lists_only_describable_topics(target: Target, root: AdminClient,
                                                alice_admin: AdminClient) -> None:
    prefix = name("vis")
    seen, unseen = f"{prefix}-a", name("invisible")
    root.create_topics([NewTopic(seen, 1, 1), NewTopic(unseen, 1, 1)]).raise_if_failed()
    grant(root, allow(ResourceType.TOPIC, prefix, AclOperation.READ,
                      pattern=PatternType.PREFIXED))  # READ implies DESCRIBE
    wait_topic(root, unseen)
    listed = alice_admin.list_topics()
    assert seen in listed and unseen not in listed
    assert unseen in root.list_topics()
    described = alice_admin.describe_topics([seen, unseen])
    assert described[seen].error is None
    assert isinstance(described[unseen].error, TopicAuthorizationFailedError)


def test_auto_creation_needs_create(target: Target, root: AdminClient) -> None:
    prefix = name("auto")
    topic = f"{prefix}-x"
    grant(root, allow(ResourceType.TOPIC, prefix, AclOperation.WRITE,
                      pattern=PatternType.PREFIXED))
    with Producer(**as_user(target, "alice"), linger_ms=0, max_block_ms=5000) as producer:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(topic, b"x").result(timeout=30)
    assert topic not in root.list_topics()  # the refused auto-creation made nothing
    grant(root, allow(ResourceType.TOPIC, prefix, AclOperation.CREATE,
                      pattern=PatternType.PREFIXED))
    # A new producer: the first one remembers the topic's refusal for a while (sdk.net).
    with Producer(**as_user(target, "alice"), linger_ms=0, max_block_ms=5000) as producer:
        producer.send(topic, b"x").result(timeout=30)
    wait_topic(root, topic)


def test_group_refusal(target: Target, root: AdminClient,
                       alice_admin: AdminClient) -> None:
    topic, group = name("gt"), name("group")
    root.create_topics([NewTopic(topic, 1, 1)]).raise_if_failed()
    grant(root, allow(ResourceType.TOPIC, topic, AclOperation.READ))
    wait_topic(root, topic)
    tp = TopicPartition(topic, 0)
    refused = alice_admin.alter_consumer_group_offsets(group, {tp: 0})
    assert isinstance(refused[tp].error, GroupAuthorizationFailedError)
    grant(root, allow(ResourceType.GROUP, group, AclOperation.READ))
    assert alice_admin.alter_consumer_group_offsets(group, {tp: 0})[tp].error is None
    assert alice_admin.list_consumer_group_offsets(group)[tp].offset == 0
    # Committing needs READ on the topic too.
    other = name("gt-other")
    root.create_topics([NewTopic(other, 1, 1)]).raise_if_failed()
    wait_topic(root, other)
    otp = TopicPartition(other, 0)
    mixed = alice_admin.alter_consumer_group_offsets(group, {tp: 0, otp: 0})
    assert mixed[tp].error is None
    assert isinstance(mixed[otp].error, TopicAuthorizationFailedError)


def test_cluster_refusals(target: Target, root: AdminClient,
                          alice_admin: AdminClient) -> None:
    mine = allow(ResourceType.TOPIC, "x", AclOperation.READ)
    with pytest.raises(ClusterAuthorizationFailedError):
        alice_admin.describe_acls()
    assert isinstance(alice_admin.create_acls(mine)[mine[0]].error,
                      ClusterAuthorizationFailedError)
    deleted = alice_admin.delete_acls(AclBindingFilter())
    assert isinstance(next(iter(deleted.values())).error, ClusterAuthorizationFailedError)
    with pytest.raises(ClusterAuthorizationFailedError):
        alice_admin.describe_user_scram_credentials()
    upsert = UserScramCredentialUpsertion("mallory", "SCRAM-SHA-256", "pw")
    assert isinstance(alice_admin.alter_user_scram_credentials([upsert])["mallory"].error,
                      ClusterAuthorizationFailedError)
    node = ConfigResource.broker(root.describe_cluster().brokers[0].node_id)
    assert isinstance(alice_admin.describe_configs([node])[node].error,
                      ClusterAuthorizationFailedError)
    topic = name("nope")
    created = alice_admin.create_topics([NewTopic(topic, 1, 1)])
    assert isinstance(created[topic].error, TopicAuthorizationFailedError)


def test_acls_survive_a_restart(target: Target, root: AdminClient) -> None:
    marker = allow(ResourceType.TRANSACTIONAL_ID, name("txn"), AclOperation.WRITE,
                   principal="User:carol")
    grant(root, marker)
    before = set(root.describe_acls())
    target.restart()
    with AdminClient(bootstrap_servers=target.plaintext()) as again:
        assert set(again.describe_acls()) == before
        assert marker[0] in before
        again.delete_acls([AclBindingFilter.of(marker[0])]).raise_if_failed()
        deadline = time.monotonic() + 30
        while marker[0] in set(again.describe_acls()):
            assert time.monotonic() < deadline, "the deleted ACL stayed"
            time.sleep(0.1)


def test_create_topics_with_create_but_not_describe_configs(root: AdminClient,
                                                            alice_admin: AdminClient) -> None:
    prefix = name("mine")
    grant(root, allow(ResourceType.TOPIC, prefix, AclOperation.CREATE,
                      pattern=PatternType.PREFIXED))
    hidden = f"{prefix}-a"
    created = alice_admin.create_topics([NewTopic(hidden, 2, 1)])
    assert created[hidden].error is None
    assert created[hidden].configs == {}  # no DESCRIBE_CONFIGS: the configs are withheld
    grant(root, allow(ResourceType.TOPIC, prefix, AclOperation.DESCRIBE_CONFIGS,
                      pattern=PatternType.PREFIXED))
    shown = f"{prefix}-b"
    created = alice_admin.create_topics([NewTopic(shown, 2, 1)])
    assert created[shown].error is None
    assert created[shown].configs.get("cleanup.policy") == "delete"


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_consumer_group_needs_read_on_the_group(target: Target, root: AdminClient,
                                                protocol: str) -> None:
    """READ on the group for both group protocols (JoinGroup; ConsumerGroupHeartbeat)."""
    topic, group = name("ct"), name("cg")
    root.create_topics([NewTopic(topic, 1, 1)]).raise_if_failed()
    wait_topic(root, topic)
    with Producer(bootstrap_servers=target.plaintext()) as producer:
        producer.send(topic, b"hello").result(timeout=30)
    grant(root, allow(ResourceType.TOPIC, topic, AclOperation.READ))
    settings = {**as_user(target, "alice"), "group_id": group, "auto_offset_reset": "earliest",
                "group_protocol": protocol}
    with pytest.raises(GroupAuthorizationFailedError):
        with Consumer(topic, **settings) as consumer:
            for _ in range(20):
                consumer.poll(timeout_ms=500)
    grant(root, allow(ResourceType.GROUP, group, AclOperation.READ))
    got: list[bytes | None] = []
    with Consumer(topic, **settings) as consumer:
        deadline = time.monotonic() + 60
        while not got and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [r.value for r in records]
        consumer.commit()
    assert got == [b"hello"]
    tp = TopicPartition(topic, 0)
    assert root.list_consumer_group_offsets(group)[tp].offset == 1


def _error(call: Callable[[], Any]) -> BaseException | None:
    """The error of a one-item admin call: raised, or in its single result."""
    try:
        result = call()
    except KafkaError as exc:
        return exc
    if isinstance(result, Mapping):
        (item,) = result.values()
        return item.error  # type: ignore[no-any-return]
    return None


def test_topic_group_and_cluster_refusals_per_api(target: Target, root: AdminClient,
                                                  alice_admin: AdminClient) -> None:
    topic, group = name("ro"), name("rg")
    root.create_topics([NewTopic(topic, 1, 1)]).raise_if_failed()
    wait_topic(root, topic)
    tp = TopicPartition(topic, 0)
    root.alter_consumer_group_offsets(group, {tp: 0}).raise_if_failed()
    # alice may only DESCRIBE the topic and the group.
    grant(root, allow(ResourceType.TOPIC, topic, AclOperation.DESCRIBE)
          + allow(ResourceType.GROUP, group, AclOperation.DESCRIBE))
    topic_refused = {
        "DeleteTopics": lambda: alice_admin.delete_topics([topic]),
        "CreatePartitions": lambda: alice_admin.create_partitions({topic: 2}),
        "DeleteRecords": lambda: alice_admin.delete_records({tp: 0}),
        "DescribeConfigs (topic)": lambda: alice_admin.describe_configs(
            [ConfigResource.topic(topic)]),
        "IncrementalAlterConfigs (topic)": lambda: alice_admin.alter_configs(
            {ConfigResource.topic(topic): {"retention.ms": "1000"}}),
    }
    for api, call in topic_refused.items():
        assert isinstance(_error(call), TopicAuthorizationFailedError), api
    assert _error(lambda: alice_admin.list_offsets({tp: OffsetSpec.LATEST})) is None
    assert isinstance(_error(lambda: alice_admin.delete_consumer_groups([group])),
                      GroupAuthorizationFailedError)
    assert _error(lambda: alice_admin.describe_consumer_groups([group])) is None
    assert _error(lambda: alice_admin.list_consumer_group_offsets(group)) is None
    node = ConfigResource.broker(root.describe_cluster().brokers[0].node_id)
    cluster_refused = {
        "IncrementalAlterConfigs (broker)": lambda: alice_admin.alter_configs(
            {node: {"log.cleaner.backoff.ms": "20000"}}),
        "ElectLeaders": lambda: alice_admin.elect_leaders(ElectionType.PREFERRED, [tp]),
        "ListPartitionReassignments": lambda: alice_admin.list_partition_reassignments(),
        "AlterPartitionReassignments": lambda: alice_admin.alter_partition_reassignments(
            {tp: [1]}),
    }
    for api, call in cluster_refused.items():
        assert isinstance(_error(call), ClusterAuthorizationFailedError), api
    assert topic in root.list_topics()  # nothing was deleted
    assert root.list_offsets({tp: OffsetSpec.EARLIEST})[tp].offset == 0
