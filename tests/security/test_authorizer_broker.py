"""The reference broker's authorizer with real principals: alice and bob log in with SASL
PLAIN on a SASL_PLAINTEXT listener, and the PLAINTEXT listener's User:ANONYMOUS is the super
user that manages ACLs and reads back what was (not) stored. ``allow.everyone.if.no.acl.found``
is false (Kafka's default): a principal may do only what an ACL allows.

The same steps against Apache Kafka's authorizer are in test_acls_differential.py (with
PLAINTEXT, ANONYMOUS principals); these add what needs a second identity on the same broker.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from sdk import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AdminClient,
    ConfigResource,
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
    TopicAuthorizationFailedError,
)
from server_ref import EmbeddedBroker

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret" user_bob="bob-secret";')
CONFIG = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}
ALICE = "User:alice"


@pytest.fixture(scope="module")
def ref() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir=None, port=0, config=CONFIG) as broker:
        yield broker


def as_user(ref: EmbeddedBroker, user: str) -> dict[str, Any]:
    return {"bootstrap_servers": ref.listener_address("SASL_PLAINTEXT"),
            "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
            "sasl_username": user, "sasl_password": f"{user}-secret"}


@pytest.fixture
def root(ref: EmbeddedBroker) -> Iterator[AdminClient]:
    """The super user (PLAINTEXT: User:ANONYMOUS)."""
    with AdminClient(bootstrap_servers=ref.listener_address("PLAINTEXT")) as admin:
        yield admin


@pytest.fixture
def alice_admin(ref: EmbeddedBroker) -> Iterator[AdminClient]:
    with AdminClient(**as_user(ref, "alice"), request_timeout_ms=10000) as admin:
        yield admin


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def allow(kind: ResourceType, resource: str, *ops: AclOperation, principal: str = ALICE,
          pattern: PatternType = PatternType.LITERAL) -> list[AclBinding]:
    return [AclBinding(ResourcePattern(kind, resource, pattern), principal, operation=op)
            for op in ops]


def test_unauthorized_produce_fails_and_stores_nothing(ref: EmbeddedBroker,
                                                       root: AdminClient) -> None:
    secret = name("secret")
    root.create_topics([NewTopic(secret, 1, 1)]).raise_if_failed()
    # WRITE on topics of her own: enough for an idempotent producer id (KIP-679), not for
    # the secret topic.
    own = allow(ResourceType.TOPIC, "alice-own-", AclOperation.WRITE,
                pattern=PatternType.PREFIXED)
    root.create_acls(own + allow(ResourceType.TOPIC, secret, AclOperation.DESCRIBE)
                     ).raise_if_failed()
    tp = TopicPartition(secret, 0)
    with Producer(**as_user(ref, "alice"), linger_ms=0) as producer:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(secret, b"not for alice").result(timeout=30)
        assert root.list_offsets({tp: OffsetSpec.LATEST})[tp].offset == 0  # nothing stored
        root.create_acls(allow(ResourceType.TOPIC, secret, AclOperation.WRITE)
                         ).raise_if_failed()
        producer.send(secret, b"now allowed").result(timeout=30)  # applied at once
    assert root.list_offsets({tp: OffsetSpec.LATEST})[tp].offset == 1

    # bob has no ACL at all: even the idempotent producer id is refused, as Kafka does
    # (IDEMPOTENT_WRITE on the cluster or WRITE on some topic is needed).
    with Producer(**as_user(ref, "bob"), linger_ms=0) as producer:
        with pytest.raises((ClusterAuthorizationFailedError, TopicAuthorizationFailedError)):
            producer.send(secret, b"bob").result(timeout=30)
    assert root.list_offsets({tp: OffsetSpec.LATEST})[tp].offset == 1


def test_metadata_lists_only_describable_topics(ref: EmbeddedBroker, root: AdminClient,
                                                alice_admin: AdminClient) -> None:
    prefix = name("vis")
    seen, unseen = f"{prefix}-a", name("invisible")
    root.create_topics([NewTopic(seen, 1, 1), NewTopic(unseen, 1, 1)]).raise_if_failed()
    root.create_acls(allow(ResourceType.TOPIC, prefix, AclOperation.READ,
                           pattern=PatternType.PREFIXED)).raise_if_failed()  # READ ⇒ DESCRIBE
    listed = alice_admin.list_topics()
    assert seen in listed and unseen not in listed
    assert unseen in root.list_topics()
    described = alice_admin.describe_topics([seen, unseen])
    assert described[seen].error is None
    assert isinstance(described[unseen].error, TopicAuthorizationFailedError)


def test_auto_creation_needs_create(ref: EmbeddedBroker, root: AdminClient) -> None:
    prefix = name("auto")
    topic = f"{prefix}-x"
    root.create_acls(allow(ResourceType.TOPIC, prefix, AclOperation.WRITE,
                           pattern=PatternType.PREFIXED)).raise_if_failed()
    with Producer(**as_user(ref, "alice"), linger_ms=0, max_block_ms=5000) as producer:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(topic, b"x").result(timeout=30)
    assert topic not in root.list_topics()  # the refused auto-creation made nothing
    root.create_acls(allow(ResourceType.TOPIC, prefix, AclOperation.CREATE,
                           pattern=PatternType.PREFIXED)).raise_if_failed()
    # A new producer: the first one remembers the topic's refusal for a while (sdk.net).
    with Producer(**as_user(ref, "alice"), linger_ms=0, max_block_ms=5000) as producer:
        producer.send(topic, b"x").result(timeout=30)
    assert topic in root.list_topics()


def test_group_refusal(ref: EmbeddedBroker, root: AdminClient,
                       alice_admin: AdminClient) -> None:
    topic, group = name("gt"), name("group")
    root.create_topics([NewTopic(topic, 1, 1)]).raise_if_failed()
    root.create_acls(allow(ResourceType.TOPIC, topic, AclOperation.READ)).raise_if_failed()
    tp = TopicPartition(topic, 0)
    refused = alice_admin.alter_consumer_group_offsets(group, {tp: 0})
    assert isinstance(refused[tp].error, GroupAuthorizationFailedError)
    root.create_acls(allow(ResourceType.GROUP, group, AclOperation.READ)).raise_if_failed()
    assert alice_admin.alter_consumer_group_offsets(group, {tp: 0})[tp].error is None
    assert alice_admin.list_consumer_group_offsets(group)[tp].offset == 0
    # Committing needs READ on the topic too.
    other = name("gt-other")
    root.create_topics([NewTopic(other, 1, 1)]).raise_if_failed()
    otp = TopicPartition(other, 0)
    mixed = alice_admin.alter_consumer_group_offsets(group, {tp: 0, otp: 0})
    assert mixed[tp].error is None
    assert isinstance(mixed[otp].error, TopicAuthorizationFailedError)


def test_cluster_refusals(ref: EmbeddedBroker, root: AdminClient,
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


def test_acls_survive_a_restart(ref: EmbeddedBroker, root: AdminClient) -> None:
    marker = allow(ResourceType.TRANSACTIONAL_ID, name("txn"), AclOperation.WRITE,
                   principal="User:carol")
    root.create_acls(marker).raise_if_failed()
    before = set(root.describe_acls())
    ref.restart()
    with AdminClient(bootstrap_servers=ref.listener_address("PLAINTEXT")) as again:
        assert set(again.describe_acls()) == before
        assert marker[0] in before
        again.delete_acls([AclBindingFilter.of(marker[0])]).raise_if_failed()
        assert marker[0] not in set(again.describe_acls())
