"""ACLs through our admin client, and their enforcement, on our broker and on Apache Kafka
(one KRaft node), with the same steps and the same expected answers.

Both brokers run Kafka's StandardAuthorizer settings with ``allow.everyone.if.no.acl.found``
true and no super users: our PLAINTEXT connections are ``User:ANONYMOUS`` (so are the KRaft
controller's, which is why Apache Kafka needs either that or ANONYMOUS as a super user), so
resources no ACL names stay open and DENY bindings for ANONYMOUS show the refusals. Apache
Kafka applies an ACL change from its metadata log a little after CreateAcls / DeleteAcls
return; the steps wait until DescribeAcls shows the change before relying on it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
from apache_support import apache_cluster

from sdk import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    OffsetSpec,
    PatternType,
    Producer,
    ResourcePattern,
    ResourceType,
    TopicPartition,
)
from sdk.errors import (
    GroupAuthorizationFailedError,
    GroupIdNotFoundError,
    InvalidRequestError,
    SecurityDisabledError,
    TopicAuthorizationFailedError,
)
from server_ref import EmbeddedBroker

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTH_CONFIG = {"authorizer.class.name": STANDARD, "allow.everyone.if.no.acl.found": "true"}
ANON = "User:ANONYMOUS"
T = TypeVar("T")


def wait_for(condition: Callable[[], T], what: str, timeout_s: float = 30.0) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@pytest.fixture(scope="module", params=["ref", "kafka"])
def bootstrap(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "ref":
        with EmbeddedBroker(data_dir=None, port=0, config=AUTH_CONFIG) as broker:
            yield broker.bootstrap_servers
    else:
        with apache_cluster(1, 1, config=AUTH_CONFIG) as cluster:
            yield cluster.bootstrap_servers


@pytest.fixture
def admin(bootstrap: str) -> Iterator[AdminClient]:
    with AdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000) as client:
        yield client


def _id() -> str:
    return uuid.uuid4().hex[:8]


def _topic(name: str, op: AclOperation, permission: AclPermissionType = AclPermissionType.DENY,
           pattern: PatternType = PatternType.LITERAL, principal: str = ANON) -> AclBinding:
    return AclBinding(ResourcePattern(ResourceType.TOPIC, name, pattern), principal,
                      operation=op, permission=permission)


def _shown(admin: AdminClient, bindings: list[AclBinding]) -> bool:
    now = set(admin.describe_acls())
    return all(b in now for b in bindings)


def _gone(admin: AdminClient, bindings: list[AclBinding]) -> bool:
    now = set(admin.describe_acls())
    return not any(b in now for b in bindings)


def test_create_describe_delete_with_filters(admin: AdminClient) -> None:
    n = _id()
    lit = _topic(f"orders-{n}", AclOperation.READ, AclPermissionType.ALLOW,
                 principal="User:alice")
    pre = _topic(f"ord-{n}", AclOperation.WRITE, pattern=PatternType.PREFIXED,
                 principal="User:bob")
    wild = AclBinding(ResourcePattern(ResourceType.GROUP, "*"), "User:*", host="10.1.2.3",
                      operation=AclOperation.READ)
    bad = AclBinding(ResourcePattern(ResourceType.CLUSTER, "not-the-cluster"), "User:x",
                     operation=AclOperation.ALTER)
    created = admin.create_acls([lit, pre, wild, bad])
    assert created[lit].error is None and created[pre].error is None
    assert created[wild].error is None
    assert isinstance(created[bad].error, InvalidRequestError)  # both brokers refuse it
    assert "kafka-cluster" in str(created[bad].error)
    wait_for(lambda: _shown(admin, [lit, pre, wild]), "the new ACLs")

    # MATCH: every binding that applies to the named topic (literal and prefixed).
    match = AclBindingFilter(ResourceType.TOPIC, f"ord-{n}-x", PatternType.MATCH)
    assert set(admin.describe_acls(match)) == {pre}
    match_orders = AclBindingFilter(ResourceType.TOPIC, f"orders-{n}", PatternType.MATCH)
    assert set(admin.describe_acls(match_orders)) == {lit}
    assert admin.describe_acls(AclBindingFilter(principal="User:bob", name=f"ord-{n}",
                                                pattern_type=PatternType.PREFIXED)) == [pre]
    assert set(admin.describe_acls(AclBindingFilter(
        ResourceType.GROUP, host="10.1.2.3"))) >= {wild}

    # Delete: per filter, the bindings it removed; a filter matching nothing removes nothing.
    f_pre = AclBindingFilter.of(pre)
    f_none = AclBindingFilter(principal=f"User:nobody-{n}")
    deleted = admin.delete_acls([f_pre, f_none])
    assert deleted[f_pre].deleted == (pre,) and deleted[f_pre].error is None
    assert deleted[f_none].deleted == ()
    again = admin.delete_acls([AclBindingFilter.of(lit), AclBindingFilter.of(wild)])
    assert [r.deleted for r in again.values()] == [(lit,), (wild,)]
    wait_for(lambda: _gone(admin, [lit, pre, wild]), "the deleted ACLs to go")


def test_refused_produce_stores_nothing(admin: AdminClient, bootstrap: str) -> None:
    n = _id()
    secret, open_ = f"secret-{n}", f"open-{n}"
    admin.create_topics([NewTopic(secret, 1, 1), NewTopic(open_, 1, 1)]).raise_if_failed()
    deny = _topic(secret, AclOperation.WRITE)
    # Once an ACL names the topic, allow.everyone.if.no.acl.found no longer applies to it
    # (Kafka's rule, on both brokers): without this ALLOW, DESCRIBE (ListOffsets) is refused too.
    read = _topic(secret, AclOperation.READ, AclPermissionType.ALLOW)
    admin.create_acls([deny, read]).raise_if_failed()
    wait_for(lambda: _shown(admin, [deny, read]), "the ACLs")
    with Producer(bootstrap_servers=bootstrap, linger_ms=0) as producer:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(secret, b"must not be stored").result(timeout=30)
        producer.send(open_, b"fine").result(timeout=30)
        tp = TopicPartition(secret, 0)
        assert admin.list_offsets({tp: OffsetSpec.LATEST})[tp].offset == 0  # nothing stored
        # Removing only the DENY would not do: the ALLOW READ still names the topic, so
        # WRITE stays refused (no ALLOW for it). Both go, and the topic is open again.
        removed = admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, secret)])
        assert set(next(iter(removed.values())).deleted) == {deny, read}
        wait_for(lambda: _gone(admin, [deny, read]), "the ACLs to go")

        def written() -> bool:
            try:
                producer.send(secret, b"now allowed").result(timeout=30)
            except TopicAuthorizationFailedError:
                return False  # Apache Kafka: the removal not applied yet
            return True

        wait_for(written, "a produce after the ACLs were removed")
    assert admin.list_offsets({tp: OffsetSpec.LATEST})[tp].offset == 1  # only the new one


def test_metadata_shows_only_describable_topics(admin: AdminClient) -> None:
    n = _id()
    hidden, shown = f"hidden-{n}-a", f"shown-{n}"
    admin.create_topics([NewTopic(hidden, 1, 1), NewTopic(shown, 1, 1)]).raise_if_failed()
    deny = _topic(f"hidden-{n}", AclOperation.DESCRIBE, pattern=PatternType.PREFIXED)
    admin.create_acls([deny]).raise_if_failed()
    wait_for(lambda: _shown(admin, [deny]), "the DENY")
    wait_for(lambda: hidden not in admin.list_topics(), "the topic to be hidden")
    assert shown in admin.list_topics()
    described = admin.describe_topics([hidden, shown])
    assert isinstance(described[hidden].error, TopicAuthorizationFailedError)
    assert described[shown].error is None
    admin.delete_acls([AclBindingFilter.of(deny)]).raise_if_failed()
    wait_for(lambda: hidden in admin.list_topics(), "the topic to show again")


def test_group_refusal(admin: AdminClient) -> None:
    n = _id()
    topic, group = f"g-topic-{n}", f"group-{n}"
    admin.create_topics([NewTopic(topic, 1, 1)]).raise_if_failed()
    pattern = ResourcePattern(ResourceType.GROUP, group)
    deny = AclBinding(pattern, ANON, operation=AclOperation.READ,
                      permission=AclPermissionType.DENY)
    # DESCRIBE stays allowed (finding the coordinator needs it): the group has ACLs now, so
    # allow.everyone.if.no.acl.found no longer covers it.
    describe = AclBinding(pattern, ANON, operation=AclOperation.DESCRIBE)
    admin.create_acls([deny, describe]).raise_if_failed()
    wait_for(lambda: _shown(admin, [deny, describe]), "the ACLs")
    tp = TopicPartition(topic, 0)
    committed = admin.alter_consumer_group_offsets(group, {tp: 0})
    assert isinstance(committed[tp].error, GroupAuthorizationFailedError)
    # DESCRIBE is allowed: no authorization error. The group has no members nor offsets:
    # under DescribeGroups v6 (Apache Kafka 4.3.1) that is GROUP_ID_NOT_FOUND, under v5 (our
    # broker's top) a Dead group without an error.
    described = admin.describe_consumer_groups([group])[group].error
    assert described is None or isinstance(described, GroupIdNotFoundError), described
    removed = admin.delete_acls([AclBindingFilter(ResourceType.GROUP, group)])
    assert set(next(iter(removed.values())).deleted) == {deny, describe}
    wait_for(lambda: _gone(admin, [deny, describe]), "the ACLs to go")
    assert admin.alter_consumer_group_offsets(group, {tp: 0})[tp].error is None


def test_acl_apis_without_an_authorizer_are_disabled() -> None:
    """Our broker without ``authorizer.class.name`` answers as Kafka does (its code and
    name: SECURITY_DISABLED); Apache's side of this is not started here (one more JVM)."""
    with EmbeddedBroker(data_dir=None, port=0) as broker, \
            AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        with pytest.raises(SecurityDisabledError):
            admin.describe_acls()
        result = admin.create_acls([_topic("t", AclOperation.READ)])
        assert isinstance(next(iter(result.values())).error, SecurityDisabledError)
        deleted = admin.delete_acls(AclBindingFilter())
        assert isinstance(next(iter(deleted.values())).error, SecurityDisabledError)
