"""Per-API authorization on the wire, for what the SDK's clients do not send (transactional
ids, several groups in one OffsetFetch, batched FindCoordinator, a follower's fetch) or do
not show (partial answers), on our broker and on Apache Kafka (one KRaft node) with the same
expected answers: each request from User:alice, logged in with SASL PLAIN on the
SASL_PLAINTEXT listener; ACLs set by the super user, User:ANONYMOUS on PLAINTEXT;
``allow.everyone.if.no.acl.found`` is false. Kafka's codes: 29 TOPIC_, 30 GROUP_,
53 TRANSACTIONAL_ID_ AUTHORIZATION_FAILED."""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from apache_support import apache_cluster

sys.path.insert(0, str(Path(__file__).parent))  # importlib mode: the helpers beside us
from raw_wire import Wire

from sdk import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AdminClient,
    NewTopic,
    OffsetSpec,
    PatternType,
    ResourcePattern,
    ResourceType,
    TopicPartition,
)
from sdk.protocol.messages.describe_cluster import DescribeClusterRequest
from sdk.protocol.messages.describe_groups import DescribeGroupsRequest
from sdk.protocol.messages.fetch import FetchRequest
from sdk.protocol.messages.find_coordinator import FindCoordinatorRequest
from sdk.protocol.messages.init_producer_id import InitProducerIdRequest
from sdk.protocol.messages.list_groups import ListGroupsRequest
from sdk.protocol.messages.metadata import MetadataRequest
from sdk.protocol.messages.offset_commit import OffsetCommitRequest
from sdk.protocol.messages.offset_fetch import OffsetFetchRequest
from sdk.protocol.messages.produce import ProduceRequest
from sdk.records.builder import RecordBatchBuilder
from server_ref import EmbeddedBroker

TOPIC_DENIED, GROUP_DENIED, TXN_DENIED = 29, 30, 53
ALICE = "User:alice"
SECURITY = {
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config":
        'org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret";',
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
    "group.initial.rebalance.delay.ms": "0",
}


class Setup:
    def __init__(self, sasl_address: str, root: AdminClient) -> None:
        self.sasl_address = sasl_address
        self.root = root
        n = uuid.uuid4().hex[:8]
        self.open, self.closed = f"open-{n}", f"closed-{n}"
        self.readonly = f"readonly-{n}"
        self.group, self.other_group = f"g-{n}", f"h-{n}"
        root.create_topics([NewTopic(self.open, 1, 1), NewTopic(self.closed, 1, 1),
                            NewTopic(self.readonly, 1, 1)]).raise_if_failed()
        bindings = [acl(ResourceType.TOPIC, self.open, AclOperation.ALL),
                    acl(ResourceType.TOPIC, self.readonly, AclOperation.READ),
                    acl(ResourceType.GROUP, self.group, AclOperation.READ),
                    acl(ResourceType.TRANSACTIONAL_ID, "tx-allowed", AclOperation.WRITE)]
        root.create_acls(bindings).raise_if_failed()
        # Apache Kafka applies both a moment after the calls return.
        wait(lambda: set(bindings) <= set(root.describe_acls())
             and {self.open, self.closed, self.readonly} <= set(root.list_topics()))

    def wire(self) -> Wire:
        w = Wire(self.sasl_address)
        assert w.plain("alice", "alice-secret").error_code == 0
        return w

    def end_offset(self, topic: str) -> int:
        tp = TopicPartition(topic, 0)
        return self.root.list_offsets({tp: OffsetSpec.LATEST})[tp].offset


def wait(condition: Callable[[], bool], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the broker never got there"
        time.sleep(0.1)


def acl(kind: ResourceType, name: str, op: AclOperation, *,
        pattern: PatternType = PatternType.LITERAL) -> AclBinding:
    return AclBinding(ResourcePattern(kind, name, pattern), ALICE, operation=op)


@pytest.fixture(scope="module", params=["ref", "kafka"])
def setup(request: pytest.FixtureRequest) -> Iterator[Setup]:
    if request.param == "ref":
        config = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                  **SECURITY}
        with EmbeddedBroker(data_dir=None, port=0, config=config) as broker, \
                AdminClient(bootstrap_servers=broker.listener_address("PLAINTEXT")) as root:
            yield Setup(broker.listener_address("SASL_PLAINTEXT"), root)
    else:
        with apache_cluster(1, config=SECURITY,
                            listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT"}) as cluster, \
                AdminClient(bootstrap_servers=cluster.bootstrap_servers) as root:
            yield Setup(cluster.listener_address("SASL_PLAINTEXT"), root)


def _batch(transactional: bool = False) -> bytes:
    builder = RecordBatchBuilder(0, producer_id=5 if transactional else -1,
                                 producer_epoch=0 if transactional else -1,
                                 base_sequence=0 if transactional else -1,
                                 is_transactional=transactional)
    builder.append(None, int(time.time() * 1000), b"k", b"v", ())
    return builder.build()


def _produce(topics: list[str], transactional_id: str | None = None) -> ProduceRequest:
    records = _batch(transactional=transactional_id is not None)
    return ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=5000,
                          topic_data=[ProduceRequest.TopicProduceData(name=t, partition_data=[
                              ProduceRequest.PartitionProduceData(index=0, records=records)])
                              for t in topics])


NOT_READY = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS / _NOT_AVAILABLE, NOT_COORDINATOR


def until_ready(call: Callable[[], Any], codes: Callable[[Any], list[int]]) -> Any:
    """Apache Kafka's coordinators need a moment after start (the internal topics are made
    on first use): repeat while an answer says so."""
    deadline = time.monotonic() + 60
    while True:
        response = call()
        if not NOT_READY & set(codes(response)) or time.monotonic() > deadline:
            return response
        time.sleep(0.2)


def test_produce_per_topic_and_transactional_id(setup: Setup) -> None:
    with setup.wire() as w:
        response = w.call(_produce([setup.open, setup.closed]), 9)
        codes = {t.name: t.partition_responses[0].error_code for t in response.responses}
        assert codes == {setup.open: 0, setup.closed: TOPIC_DENIED}
        # Transactional records under an id it may not use: the whole request is refused.
        response = w.call(_produce([setup.open], transactional_id="tx-denied"), 9)
        assert [p.error_code for t in response.responses for p in t.partition_responses] == \
            [TXN_DENIED]
    assert setup.end_offset(setup.open) == 1 and setup.end_offset(setup.closed) == 0


def test_init_producer_id(setup: Setup) -> None:
    with setup.wire() as w:
        denied = w.call(InitProducerIdRequest(transactional_id="tx-denied",
                                              transaction_timeout_ms=60000), 4)
        assert denied.error_code == TXN_DENIED
        # No transactional id: WRITE on some topic (the open one) is enough (KIP-679).
        idempotent = until_ready(lambda: w.call(InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=-1), 4), lambda r: [r.error_code])
        assert idempotent.error_code == 0 and idempotent.producer_id >= 0


def test_find_coordinator_per_key(setup: Setup) -> None:
    with setup.wire() as w:
        groups = until_ready(lambda: w.call(FindCoordinatorRequest(
            key_type=0, coordinator_keys=[setup.group, setup.other_group]), 4),
            lambda r: [c.error_code for c in r.coordinators])
        codes = {c.key: c.error_code for c in groups.coordinators}
        assert codes == {setup.group: 0, setup.other_group: GROUP_DENIED}
        txn = w.call(FindCoordinatorRequest(key="tx-denied", key_type=1), 3)
        assert txn.error_code == TXN_DENIED
        old = w.call(FindCoordinatorRequest(key=setup.other_group, key_type=0), 2)
        assert old.error_code == GROUP_DENIED


def test_fetch_per_topic(setup: Setup) -> None:
    def part() -> list[FetchRequest.FetchPartition]:
        return [FetchRequest.FetchPartition(partition=0, fetch_offset=0,
                                            partition_max_bytes=1 << 20)]

    with setup.wire() as w:
        response = w.call(FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0,
                                       max_bytes=1 << 20, topics=[
                                           FetchRequest.FetchTopic(topic=setup.open,
                                                                   partitions=part()),
                                           FetchRequest.FetchTopic(topic=setup.closed,
                                                                   partitions=part())]), 12)
        codes = {t.topic: t.partitions[0].error_code for t in response.responses}
        assert codes == {setup.open: 0, setup.closed: TOPIC_DENIED}
        # A follower's fetch needs CLUSTER_ACTION: every partition refused.
        follower = w.call(FetchRequest(replica_id=7, max_wait_ms=0, min_bytes=0,
                                       max_bytes=1 << 20, topics=[FetchRequest.FetchTopic(
                                           topic=setup.open, partitions=part())]), 12)
        assert [p.error_code for t in follower.responses for p in t.partitions] == \
            [TOPIC_DENIED]
        assert follower.error_code == 0


def test_metadata_all_and_named(setup: Setup) -> None:
    with setup.wire() as w:
        every = w.call(MetadataRequest(topics=None), 12)
        names = {t.name for t in every.topics}
        assert setup.open in names and setup.closed not in names
        named = w.call(MetadataRequest(topics=[
            MetadataRequest.MetadataRequestTopic(name=setup.closed),
            MetadataRequest.MetadataRequestTopic(name="never-made")],
            allow_auto_topic_creation=True), 12)
        assert {t.name: t.error_code for t in named.topics} == {
            setup.closed: TOPIC_DENIED, "never-made": TOPIC_DENIED}
        assert all(t.partitions == [] for t in named.topics)
    assert "never-made" not in setup.root.list_topics()  # no CREATE: nothing auto-created
    # (Apache Kafka would have made it by now: its topics show within a second or so.)


def test_offsets_and_groups(setup: Setup) -> None:
    with setup.wire() as w:
        commit = until_ready(lambda: w.call(OffsetCommitRequest(
            group_id=setup.group, generation_id_or_member_epoch=-1, member_id="",
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=[
                OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0,
                                                                 committed_offset=0)])
                for t in (setup.open, setup.closed)]), 8),
            lambda r: [p.error_code for t in r.topics for p in t.partitions])
        assert {t.name: t.partitions[0].error_code for t in commit.topics} == {
            setup.open: 0, setup.closed: TOPIC_DENIED}
        fetched = w.call(OffsetFetchRequest(groups=[
            OffsetFetchRequest.OffsetFetchRequestGroup(group_id=setup.group, topics=None),
            OffsetFetchRequest.OffsetFetchRequestGroup(group_id=setup.other_group,
                                                       topics=None)]), 8)
        by_group = {g.group_id: g for g in fetched.groups}
        assert by_group[setup.other_group].error_code == GROUP_DENIED
        assert [t.name for t in by_group[setup.group].topics] == [setup.open]
        listed = w.call(ListGroupsRequest(), 4)
        assert {g.group_id for g in listed.groups} <= {setup.group}  # DESCRIBE only
        described = w.call(DescribeGroupsRequest(groups=[setup.group, setup.other_group]), 5)
        assert {g.group_id: g.error_code for g in described.groups} == {
            setup.group: 0, setup.other_group: GROUP_DENIED}


def bits(*ops: AclOperation) -> int:
    return sum(1 << int(op) for op in ops)


def test_authorized_operations(setup: Setup) -> None:
    """The operations fields show what the principal may do (Kafka's KIP-430)."""
    op = AclOperation
    with setup.wire() as w:
        meta = w.call(MetadataRequest(topics=[
            MetadataRequest.MetadataRequestTopic(name=t) for t in (setup.open, setup.readonly)],
            allow_auto_topic_creation=False, include_cluster_authorized_operations=True,
            include_topic_authorized_operations=True), 10)
        ops = {t.name: t.topic_authorized_operations for t in meta.topics}
        assert ops == {setup.open: bits(op.READ, op.WRITE, op.CREATE, op.DELETE, op.ALTER,
                                        op.DESCRIBE, op.DESCRIBE_CONFIGS, op.ALTER_CONFIGS),
                       setup.readonly: bits(op.READ, op.DESCRIBE)}  # READ implies DESCRIBE
        assert meta.cluster_authorized_operations == 0  # no DESCRIBE on the cluster
        groups = w.call(DescribeGroupsRequest(groups=[setup.group],
                                              include_authorized_operations=True), 5)
        assert groups.groups[0].authorized_operations == bits(op.READ, op.DESCRIBE)
        cluster = w.call(DescribeClusterRequest(include_cluster_authorized_operations=True), 1)
        assert cluster.error_code == 0 and cluster.cluster_authorized_operations == 0


def test_revoking_read_stops_an_incremental_fetch_session(setup: Setup) -> None:
    """Data stops flowing to a fetch session once READ is taken away. Apache Kafka checks
    the session's partitions on every fetch (TOPIC_AUTHORIZATION_FAILED in the incremental
    answer); our broker drops every session at an ACL change (FETCH_SESSION_ID_NOT_FOUND),
    and the full fetch that starts a new session is refused per topic."""
    topic = f"session-{uuid.uuid4().hex[:8]}"
    setup.root.create_topics([NewTopic(topic, 1, 1)]).raise_if_failed()
    read = acl(ResourceType.TOPIC, topic, AclOperation.READ)
    setup.root.create_acls([read]).raise_if_failed()
    wait(lambda: read in set(setup.root.describe_acls())
         and topic in setup.root.list_topics())

    def fetch(session_id: int, epoch: int, full: bool) -> Any:
        topics = [FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])] if full else []
        return w.call(FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0,
                                   max_bytes=1 << 20, session_id=session_id,
                                   session_epoch=epoch, topics=topics), 12)

    with setup.wire() as w:
        first = until_ready(lambda: fetch(0, 0, True),
                            lambda r: [p.error_code for t in r.responses for p in t.partitions])
        assert first.error_code == 0 and first.session_id > 0
        assert [p.error_code for t in first.responses for p in t.partitions] == [0]
        setup.root.delete_acls([AclBindingFilter.of(read)]).raise_if_failed()
        wait(lambda: read not in set(setup.root.describe_acls()))

        def refused() -> bool:
            r = fetch(first.session_id, 1, False)
            if r.error_code == 70:  # FETCH_SESSION_ID_NOT_FOUND: ours
                return True
            codes = [p.error_code for t in r.responses for p in t.partitions]
            return codes == [TOPIC_DENIED]  # Apache Kafka's answer

        wait(refused)
        again = fetch(0, 0, True)  # a new session: the topic is refused
        assert [p.error_code for t in again.responses for p in t.partitions] == [TOPIC_DENIED]
