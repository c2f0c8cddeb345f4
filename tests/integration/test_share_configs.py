"""Share-group configs that shape the share coordinator's assignments, on our broker (single
node and cluster mode) and on Apache Kafka 4.3.1.

``group.share.assignment.interval.ms`` (Kafka's one dynamic ``group.share.*`` broker config,
cluster-wide) and the group's ``share.assignment.interval.ms`` (bounded by the static
``group.share.min/max.assignment.interval.ms``) set the least time between two target
assignments of a share group: a membership change bumps the group epoch at once, and the
assignment for it is computed at a heartbeat once the interval has passed since the last
one (the first one at once). Until then members keep the last assignment and a member that
joined meanwhile has none.

The tests never wait for an interval to pass: the brokers start with an interval of 0 (each
change assigned at once), an hour is set dynamically (the broker's max is raised for it) at
the group or the cluster-default broker level, so a deferral shows that value took effect
and is certain, then 0 again, and the next heartbeat must compute the assignment. Heartbeats are sent as
raw ShareGroupHeartbeat requests, so the test decides when each member heartbeats;
ShareGroupDescribe shows the epochs and assignments.
"""

from __future__ import annotations

import base64
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest

from sdk import AdminClient, AsyncShareConsumer, ConfigResource, NewTopic, Producer
from sdk.admin import ConfigResourceType, ConfigSource
from sdk.errors import InvalidConfigError, InvalidRequestError
from sdk.protocol.framing import ClientFraming
from sdk.protocol.messages.describe_configs import DescribeConfigsRequest
from sdk.protocol.messages.find_coordinator import FindCoordinatorRequest
from sdk.protocol.messages.share_acknowledge import ShareAcknowledgeRequest
from sdk.protocol.messages.share_fetch import ShareFetchRequest
from sdk.protocol.messages.share_group_heartbeat import (
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from server_ref.cluster.processes import ask

HOUR_MS = 3600000
BROKER, GROUP = 4, 32  # config resource types
# Static interval 0: without the hour set dynamically (group or broker), every change would
# be assigned at once, so a deferral shows the dynamic value took effect.
BROKER_CONFIG = {"group.share.assignment.interval.ms": "0",
                 "group.share.max.assignment.interval.ms": str(HOUR_MS)}
T = TypeVar("T")
# Per target: (replicas, min.insync.replicas) __share_group_state gets, and the broker
# configs that ask for them. Our single node keeps one replica (no min.isr of its own);
# Apache Kafka's test node is told 1 and 1 by tools/apache_kafka.py.
STATE_TOPIC: dict[str, tuple[tuple[int, str], dict[str, str]]] = {
    "ref": ((1, "1"), {}),
    "ref-cluster": ((2, "2"), {"share.coordinator.state.topic.replication.factor": "2",
                               "share.coordinator.state.topic.min.isr": "2"}),
    "kafka": ((1, "1"), {}),
}


@dataclass
class Target:
    name: str
    bootstrap_servers: str

    @property
    def port(self) -> int:
        return int(self.bootstrap_servers.split(",")[0].rsplit(":", 1)[1])

    def admin(self) -> AdminClient:
        return AdminClient(bootstrap_servers=self.bootstrap_servers)


@pytest.fixture(scope="module", params=["ref", "ref-cluster", "kafka"])
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    if request.param == "ref":
        from server_ref import EmbeddedBroker

        with EmbeddedBroker(config=BROKER_CONFIG) as embedded:
            yield Target("ref", embedded.bootstrap_servers)
    elif request.param == "ref-cluster":
        # dynamic broker and group configs go through the controller's metadata log and
        # every broker replays them; the group's coordinator is any of the three
        from server_ref.cluster import EmbeddedCluster

        with EmbeddedCluster(brokers=3, controllers=1, config={
                **BROKER_CONFIG, **STATE_TOPIC["ref-cluster"][1]}) as cluster:
            yield Target("ref-cluster", cluster.bootstrap_servers)
    else:
        from apache_support import apache_cluster

        with apache_cluster(config=BROKER_CONFIG) as cluster:
            yield Target("kafka", cluster.bootstrap_servers)


def _member_id() -> str:
    """A member id as Java's clients make them (a base64 UUID)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _coordinator_port(port: int, group: str) -> int:
    request = FindCoordinatorRequest(key_type=0, coordinator_keys=[group])
    deadline = time.monotonic() + 30
    while True:
        found = ask(port, request, 4, 10.0).coordinators[0]
        if found.error_code == 0 or time.monotonic() > deadline:
            assert found.error_code == 0, found.error_message
            return int(found.port)
        time.sleep(0.2)


class Member:
    """One share-group member whose heartbeats the test sends."""

    def __init__(self, target: Target, group: str, topic: str) -> None:
        self.group, self.topic = group, topic
        self.member_id, self.epoch = _member_id(), 0
        self.port = _coordinator_port(target.port, group)
        self.assignment: list[int] | None = None  # partitions last told (None: never)

    def heartbeat(self) -> ShareGroupHeartbeatResponse:
        request = ShareGroupHeartbeatRequest(
            group_id=self.group, member_id=self.member_id, member_epoch=self.epoch,
            subscribed_topic_names=[self.topic] if self.epoch == 0 else None)
        deadline = time.monotonic() + 30
        while True:
            response = ask(self.port, request, 1, 10.0)
            # Kafka answers COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR while it settles
            if response.error_code not in (14, 15, 16) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert response.error_code == 0, response.error_message
        self.epoch = response.member_epoch
        if response.assignment is not None:
            self.assignment = sorted(p for t in response.assignment.topic_partitions
                                     for p in t.partitions)
        return response

    def leave(self) -> None:
        request = ShareGroupHeartbeatRequest(group_id=self.group, member_id=self.member_id,
                                             member_epoch=-1)
        ask(self.port, request, 1, 10.0)


def _topic(target: Target, partitions: int) -> str:
    name = f"share-cfg-{uuid.uuid4().hex[:8]}"
    with target.admin() as admin:
        admin.create_topics([NewTopic(name, partitions, 1)]).raise_if_failed()
    return name


def _set(target: Target, resource: ConfigResource, configs: dict[str, str | None]) -> None:
    with target.admin() as admin:
        admin.alter_configs({resource: configs}).raise_if_failed()


def _describe(target: Target, group: str) -> Any:
    with target.admin() as admin:
        return admin.describe_share_groups([group]).raise_if_failed()[group]


def _assigned(description: Any) -> dict[str, list[int]]:
    return {m.member_id: sorted(tp.partition for tp in m.assignment)
            for m in description.members}


def _until(step: Callable[[], T], done: Callable[[T], bool], timeout_s: float = 30) -> T:
    """``step()`` again until ``done`` holds of its result (or the timeout): a dynamic
    config reaches Kafka's coordinator through its metadata log, a moment after the
    admin call returned."""
    deadline = time.monotonic() + timeout_s
    while not done(result := step()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return result


def _deferred_then_assigned(target: Target, group: str, topic: str,
                            lift: Callable[[], None]) -> None:
    """The second member's assignment waits for the interval (an hour) until ``lift`` sets
    it to 0, then comes at the next heartbeat."""
    a, b = Member(target, group, topic), Member(target, group, topic)
    a.heartbeat()
    first = a.epoch
    if target.name != "kafka":
        assert a.assignment == [0, 1]  # a group's first assignment is never deferred
    else:
        # Kafka computes the first assignment at once too, but before the share-partitions'
        # state is initialized (InitializeShareGroupState, sent after that heartbeat), so
        # it is empty; once initialized, a heartbeat bumps the group epoch and the
        # assignment for it waits for the interval like any other. Ours has no such step.
        assert a.assignment == []
        described = _until(lambda: (a.heartbeat(), _describe(target, group))[1],
                           lambda d: d.group_epoch > d.assignment_epoch)
        assert (described.group_epoch, described.assignment_epoch) == (first + 1, first)
        assert a.assignment == []
    held = list(a.assignment or [])

    b.heartbeat()
    assert b.assignment == [] and b.epoch == first  # joined, nothing assigned yet
    a.heartbeat()
    assert a.assignment == held and a.epoch == first
    described = _describe(target, group)
    assert described.group_epoch > described.assignment_epoch == first
    assert _assigned(described) == {a.member_id: held, b.member_id: []}
    bumped = described.group_epoch

    lift()
    _until(b.heartbeat, lambda _: b.assignment != [])
    a.heartbeat()
    assert sorted([a.assignment, b.assignment]) == [[0], [1]]
    assert a.epoch == b.epoch == bumped
    described = _describe(target, group)
    assert (described.group_epoch, described.assignment_epoch) == (bumped, bumped)
    assert _assigned(described) == {a.member_id: a.assignment, b.member_id: b.assignment}
    a.leave()
    b.leave()


def _shown_everywhere(target: Target, resource_type: int, resource_name: str,
                     name: str) -> set[str | None]:
    """``name`` of a resource as each broker describes it (cluster mode: each broker
    replays the metadata log on its own time)."""
    request = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=resource_type, resource_name=resource_name,
        configuration_keys=[name])])
    with target.admin() as admin:
        ports = [b.port for b in admin.describe_cluster().brokers]
    seen: set[str | None] = set()
    for port in ports:
        result = ask(port, request, 4, 10.0).results[0]
        assert result.error_code == 0, result.error_message
        seen |= {c.value for c in result.configs if c.name == name}
    return seen


def test_group_assignment_interval_defers_the_next_assignment(target: Target) -> None:
    topic, group = _topic(target, 2), f"g-{uuid.uuid4().hex[:8]}"
    resource = ConfigResource(ConfigResourceType.GROUP, group)
    _set(target, resource, {"share.assignment.interval.ms": str(HOUR_MS)})
    _until(lambda: _shown_everywhere(target, GROUP, group, "share.assignment.interval.ms"),
           lambda seen: seen == {str(HOUR_MS)})
    _deferred_then_assigned(target, group, topic, lambda: _set(
        target, resource, {"share.assignment.interval.ms": "0"}))


def test_broker_assignment_interval_is_dynamic(target: Target) -> None:
    topic, group = _topic(target, 2), f"g-{uuid.uuid4().hex[:8]}"
    cluster_default = ConfigResource(ConfigResourceType.BROKER, "")
    _set(target, cluster_default, {"group.share.assignment.interval.ms": str(HOUR_MS)})
    _until(lambda: _shown_everywhere(target, BROKER, "", "group.share.assignment.interval.ms"),
           lambda seen: seen == {str(HOUR_MS)})
    # the group, which sets nothing, shows the broker's levels (Kafka's synonyms)
    resource = ConfigResource(ConfigResourceType.GROUP, group)
    with target.admin() as admin:
        entry = admin.describe_configs([resource], names=["share.assignment.interval.ms"],
                                       include_synonyms=True
                                       ).raise_if_failed()[resource].entries[
                                           "share.assignment.interval.ms"]
    assert (entry.value, entry.source) == (str(HOUR_MS),
                                           ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
        ("group.share.assignment.interval.ms", str(HOUR_MS),
         ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("group.share.assignment.interval.ms", "0", ConfigSource.STATIC_BROKER_CONFIG),
        ("group.share.assignment.interval.ms", "1000", ConfigSource.DEFAULT_CONFIG)]
    try:
        _deferred_then_assigned(target, group, topic, lambda: _set(
            target, cluster_default, {"group.share.assignment.interval.ms": "0"}))
    finally:
        _set(target, cluster_default, {"group.share.assignment.interval.ms": None})


def test_assignment_interval_bounds(target: Target) -> None:
    """A group may set share.assignment.interval.ms only within the broker's
    group.share.min/max.assignment.interval.ms (INVALID_CONFIG); the broker's own value
    must lie within them too (INVALID_REQUEST, at either broker level)."""
    group = ConfigResource(ConfigResourceType.GROUP, f"g-{uuid.uuid4().hex[:8]}")
    with target.admin() as admin:
        error = admin.alter_configs({group: {
            "share.assignment.interval.ms": str(HOUR_MS + 1)}})[group].error
        assert isinstance(error, InvalidConfigError)
        assert "share.assignment.interval.ms must be less than or equal to " \
            "group.share.max.assignment.interval.ms" in str(error)
        brokers = [ConfigResource(ConfigResourceType.BROKER, ""), ConfigResource(
            ConfigResourceType.BROKER, str(admin.describe_cluster().brokers[0].node_id))]
        for broker in brokers:
            error = admin.alter_configs({broker: {
                "group.share.assignment.interval.ms": str(HOUR_MS + 1)}})[broker].error
            assert isinstance(error, InvalidRequestError)
            assert "group.share.assignment.interval.ms must be less than or equal to " \
                "group.share.max.assignment.interval.ms" in str(error)
            error = admin.alter_configs({broker: {
                "group.share.assignment.interval.ms": "-1"}})[broker].error
            assert isinstance(error, InvalidRequestError)
            assert "Value must be at least 0" in str(error)
    assert _shown_everywhere(target, BROKER, "", "group.share.assignment.interval.ms") \
        == set()  # nothing was stored


async def test_share_state_topic_configs(target: Target) -> None:
    """share.coordinator.state.topic.replication.factor and .min.isr shape
    __share_group_state, created once a share group keeps state."""
    topic, group = _topic(target, 1), f"g-{uuid.uuid4().hex[:8]}"
    _set(target, ConfigResource(ConfigResourceType.GROUP, group),
         {"share.auto.offset.reset": "earliest"})
    with Producer(bootstrap_servers=target.bootstrap_servers) as producer:
        producer.send(topic, b"v")
        producer.flush()
    consumer: AsyncShareConsumer[bytes, bytes] = AsyncShareConsumer(
        topic, bootstrap_servers=target.bootstrap_servers, group_id=group)
    async with consumer:
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            got = list(await consumer.poll(500))
        assert [r.value for r in got] == [b"v"]

    def described() -> tuple[int, str | None]:
        state = ConfigResource(ConfigResourceType.TOPIC, "__share_group_state")
        with target.admin() as admin:
            found = admin.describe_topics(["__share_group_state"])["__share_group_state"]
            if found.error is not None or not found.partitions:
                return 0, None
            value = admin.describe_configs([state], names=["min.insync.replicas"]
                                           ).raise_if_failed()[state].value(
                                               "min.insync.replicas")
        return len(found.partitions[0].replicas), value

    assert _until(described, lambda d: d[0] > 0) == STATE_TOPIC[target.name][0]


# ---------------------------------------------------------------------------- RENEW

INVALID_REQUEST, INVALID_RECORD_STATE = 42, 121


class Connection:
    """One connection for a share session's requests (Kafka ends a share session when its
    connection closes)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=15.0)
        self.framing = ClientFraming(client_id="share-configs-test")

    def ask(self, request: Any, version: int) -> Any:
        self.sock.sendall(self.framing.encode_request(request, version)[1])
        while True:
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("the broker closed the connection")
            for _correlation, response in self.framing.feed(data):
                return response

    def close(self) -> None:
        self.sock.close()


def _fetch(conn: Connection, group: str, member: str, epoch: int, topic_id: uuid.UUID,
           acks: list[Any] | None = None, renew: bool = False, max_wait_ms: int = 0
           ) -> Any:
    """ShareFetch v2 of partition 0; a renewing one (``renew``) carries acknowledgements
    only, with every limit 0, as KIP-1222 asks."""
    r = ShareFetchRequest
    return conn.ask(r(
        group_id=group, member_id=member, share_session_epoch=epoch,
        max_wait_ms=max_wait_ms, min_bytes=0 if renew else 1,
        max_bytes=0 if renew else 1 << 20, max_records=0 if renew else 10,
        batch_size=0 if renew else 10, is_renew_ack=renew,
        topics=[r.FetchTopic(topic_id=topic_id, partitions=[r.FetchPartition(
            partition_index=0, acknowledgement_batches=acks or [])])]), 2)


def _acknowledge(conn: Connection, group: str, member: str, epoch: int, topic_id: uuid.UUID,
                 first: int, last: int, kind: int, renew: bool) -> tuple[int, int | None]:
    """ShareAcknowledge v2 of one batch: (the request's, the partition's) error code."""
    r = ShareAcknowledgeRequest
    response = conn.ask(r(
        group_id=group, member_id=member, share_session_epoch=epoch, is_renew_ack=renew,
        topics=[r.AcknowledgeTopic(topic_id=topic_id, partitions=[r.AcknowledgePartition(
            partition_index=0, acknowledgement_batches=[r.AcknowledgementBatch(
                first_offset=first, last_offset=last, acknowledge_types=[kind])])])]), 2)
    parts = [p for t in response.responses for p in t.partitions]
    return response.error_code, parts[0].error_code if parts else None


@pytest.mark.parametrize("enabled", [True, False])
def test_renew_acknowledge_enable(target: Target, enabled: bool) -> None:
    """share.renew.acknowledge.enable (group config, default true) decides whether a
    member may renew the locks of records it holds (RENEW, KIP-1222, v2 requests with
    IsRenewAck): off, RENEW is INVALID_RECORD_STATE and the records stay acquired as they
    were. RENEW without IsRenewAck is INVALID_REQUEST either way, and a renewing
    ShareFetch must ask for nothing (its limits 0)."""
    topic, group = _topic(target, 1), f"g-{uuid.uuid4().hex[:8]}"
    _set(target, ConfigResource(ConfigResourceType.GROUP, group), {
        "share.auto.offset.reset": "earliest",
        "share.renew.acknowledge.enable": "true" if enabled else "false"})
    with Producer(bootstrap_servers=target.bootstrap_servers) as producer:
        for i in range(3):
            producer.send(topic, f"r{i}".encode())
        producer.flush()
    with target.admin() as admin:
        found = admin.describe_topics([topic]).raise_if_failed()[topic]
        ports = {b.node_id: b.port for b in admin.describe_cluster().brokers}
    assert found.topic_id is not None
    topic_id, conn = found.topic_id, Connection(ports[found.partitions[0].leader])
    member = Member(target, group, topic)
    _until(member.heartbeat, lambda _: member.assignment == [0])  # Kafka: once initialized

    epoch = 0
    acquired: list[Any] = []
    deadline = time.monotonic() + 30
    while not acquired and time.monotonic() < deadline:
        response = _fetch(conn, group, member.member_id, epoch, topic_id, max_wait_ms=500)
        assert response.error_code == 0, response.error_message
        epoch += 1
        acquired = [a for t in response.responses for p in t.partitions
                    for a in p.acquired_records]
    assert [(a.first_offset, a.last_offset) for a in acquired] == [(0, 2)]

    # RENEW without IsRenewAck: a malformed request
    assert _acknowledge(conn, group, member.member_id, epoch, topic_id, 0, 0, 4,
                        renew=False) == (0, INVALID_REQUEST)
    epoch += 1
    # a renewing ShareFetch that asks for records is refused as a whole
    refused = _fetch(conn, group, member.member_id, epoch, topic_id, renew=True,
                     max_wait_ms=500)
    assert refused.error_code == INVALID_REQUEST
    # Kafka logs its reason and answers without it; ours says it
    assert refused.error_message == (None if target.name == "kafka" else
                                     "maxWaitMs must be set to 0, if isRenewAck is true.")

    # RENEW with IsRenewAck: renewed, or refused when the group turned it off
    code = _acknowledge(conn, group, member.member_id, epoch, topic_id, 0, 0, 4, renew=True)
    assert code == (0, 0 if enabled else INVALID_RECORD_STATE)
    epoch += 1
    renewing = _fetch(conn, group, member.member_id, epoch, topic_id, renew=True,
                      acks=[ShareFetchRequest.AcknowledgementBatch(
                          first_offset=1, last_offset=1, acknowledge_types=[4])])
    epoch += 1
    assert renewing.error_code == 0, renewing.error_message
    parts = [p for t in renewing.responses for p in t.partitions]
    assert [(p.acknowledge_error_code, p.acquired_records) for p in parts] == \
        [(0 if enabled else INVALID_RECORD_STATE, [])]  # nothing acquired by a renewal
    # renewed or not, the records are still the member's: accepting them works
    assert _acknowledge(conn, group, member.member_id, epoch, topic_id, 0, 2, 1,
                        renew=False) == (0, 0)
    conn.close()
    member.leave()


# ---------------------------------------------------------------------------- bounds


@pytest.mark.parametrize("kind", ["ref", "kafka"])
def test_group_override_capped_by_narrower_broker_bounds(kind: str, tmp_path: Any) -> None:
    """A group's share.heartbeat.interval.ms set within the broker's bounds, then the
    broker restarted with a lower group.share.max.heartbeat.interval.ms: the group runs
    with the new max (Kafka's GroupConfig.evaluate caps it and logs a warning)."""
    wide = {"group.share.max.heartbeat.interval.ms": "15000"}
    narrow = {"group.share.max.heartbeat.interval.ms": "10000"}

    def interval(bootstrap: str, group: str, topic: str) -> int:
        member = Member(Target(kind, bootstrap), group, topic)
        response = member.heartbeat()
        member.leave()
        return int(response.heartbeat_interval_ms)

    if kind == "ref":
        from server_ref import EmbeddedBroker
        from server_ref.config import BrokerConfig

        with EmbeddedBroker(data_dir=tmp_path, config=wide) as embedded:
            target = Target(kind, embedded.bootstrap_servers)
            topic, group = _topic(target, 1), f"g-{uuid.uuid4().hex[:8]}"
            _set(target, ConfigResource(ConfigResourceType.GROUP, group),
                 {"share.heartbeat.interval.ms": "15000"})
            assert interval(target.bootstrap_servers, group, topic) == 15000
            embedded.stop()
            embedded.config = BrokerConfig(host=embedded.host, port=embedded.port,
                                           data_dir=embedded.data_dir, properties=narrow)
            embedded.start()
            assert interval(target.bootstrap_servers, group, topic) == 10000
    else:
        from apache_support import apache_cluster

        with apache_cluster(config=wide) as cluster:
            target = Target(kind, cluster.bootstrap_servers)
            topic, group = _topic(target, 1), f"g-{uuid.uuid4().hex[:8]}"
            _set(target, ConfigResource(ConfigResourceType.GROUP, group),
                 {"share.heartbeat.interval.ms": "15000"})
            assert _until(lambda: interval(target.bootstrap_servers, group, topic),
                          lambda ms: ms == 15000) == 15000
            node = cluster.nodes[1]
            cluster.stop(1)
            path = node.directory / "server.properties"
            path.write_text(path.read_text().replace(
                "group.share.max.heartbeat.interval.ms=15000",
                "group.share.max.heartbeat.interval.ms=10000"))
            cluster.start(1)
            assert _until(lambda: interval(target.bootstrap_servers, group, topic),
                          lambda ms: ms == 10000) == 10000
