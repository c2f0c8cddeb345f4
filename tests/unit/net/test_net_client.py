"""NetClient against the reference broker: bootstrap, routing, retries, dead brokers."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from sdk.errors import (
    KafkaTimeoutError,
    NoBrokersAvailableError,
    NotControllerError,
    raise_for_code,
)
from sdk.net import (
    ANY_NODE,
    CONTROLLER,
    BrokerInfo,
    CommonConfig,
    Coordinator,
    LeaderOf,
    NetClient,
)
from sdk.protocol.api import ApiKey
from sdk.protocol.messages.create_topics import CreateTopicsRequest
from sdk.protocol.messages.metadata import MetadataRequest


def _dead_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def _config(servers: str, **kw: Any) -> CommonConfig:
    kw.setdefault("reconnect_backoff_ms", 10)
    kw.setdefault("retry_backoff_ms", 10)
    kw.setdefault("request_timeout_ms", 5000)
    return CommonConfig.build(bootstrap_servers=servers, **kw)


@pytest.fixture
async def client(embedded_broker: Any) -> AsyncIterator[NetClient]:
    c = NetClient(_config(embedded_broker.bootstrap_servers), allow_auto_topic_creation=True)
    await c.start()
    yield c
    await c.close()


async def test_bootstrap_routes_around_a_dead_server(embedded_broker: Any) -> None:
    servers = f"{_dead_address()},{_dead_address()},{embedded_broker.bootstrap_servers}"
    c = NetClient(_config(servers))
    try:
        md = await c.bootstrap(timeout_s=10)
        assert md.brokers and md.cluster_id
        assert md.controller_id in md.brokers
    finally:
        await c.close()


async def test_wait_for_topic_auto_creates_and_routes_to_leader(client: NetClient) -> None:
    topic = f"net-{uuid.uuid4().hex[:8]}"
    seen: list[int] = []
    client.add_listener(lambda: seen.append(client.metadata.version))
    info = await client.wait_for_topic(topic, 10)
    assert info.partition_ids and topic in client.tracked_topics
    assert seen, "listeners run after metadata updates"
    leader = await client.resolve(LeaderOf(topic, 0))
    assert leader == client.metadata.leader_for(topic, 0)
    assert await client.resolve(CONTROLLER) == client.metadata.controller_id
    assert await client.resolve(ANY_NODE) in client.metadata.brokers


async def test_wait_for_missing_topic_names_the_problem(embedded_broker: Any) -> None:
    c = NetClient(_config(embedded_broker.bootstrap_servers))  # no auto-creation
    await c.start()
    try:
        with pytest.raises(KafkaTimeoutError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            await c.wait_for_topic(f"absent-{uuid.uuid4().hex[:8]}", 0.5)
    finally:
        await c.close()


async def test_call_retries_a_retriable_error(client: NetClient, control: Any) -> None:
    control.fail_next(ApiKey.FIND_COORDINATOR, 15, times=2)  # COORDINATOR_NOT_AVAILABLE
    node = await client.find_coordinator(f"group-{uuid.uuid4().hex[:6]}")
    assert node in client.metadata.brokers
    assert control.pending(ApiKey.FIND_COORDINATOR) == 0


async def test_call_raises_a_non_retriable_error_at_once(client: NetClient, control: Any) -> None:
    control.fail_next(ApiKey.FIND_COORDINATOR, 30)  # GROUP_AUTHORIZATION_FAILED
    from sdk.errors import GroupAuthorizationFailedError

    with pytest.raises(GroupAuthorizationFailedError):
        await client.find_coordinator("denied")


async def test_coordinator_target_and_forgetting(client: NetClient) -> None:
    group = f"g-{uuid.uuid4().hex[:6]}"

    def check(response: Any) -> None:
        raise_for_code(response.error_code)

    from sdk.protocol.messages.describe_groups import DescribeGroupsRequest

    response = await client.call(DescribeGroupsRequest(groups=[group]), Coordinator(group),
                                 check=lambda r: raise_for_code(r.groups[0].error_code))
    assert response.groups[0].group_id == group
    client.forget_coordinator(group)
    assert await client.resolve(Coordinator(group)) in client.metadata.brokers


async def test_reconnects_after_the_broker_restarts(embedded_broker: Any) -> None:
    c = NetClient(_config(embedded_broker.bootstrap_servers))
    await c.start()
    try:
        await c.refresh_metadata()
        embedded_broker.restart()
        response = await c.call(MetadataRequest(topics=[]), timeout_s=20)
        assert response.brokers
    finally:
        await c.close()


async def test_every_broker_dead_fails_fast_and_typed() -> None:
    c = NetClient(_config(f"{_dead_address()},{_dead_address()}", reconnect_backoff_ms=50))
    await c.start()
    try:
        with pytest.raises(NoBrokersAvailableError, match="no broker answered"):
            await c.refresh_metadata(timeout_s=5)
        with pytest.raises(KafkaTimeoutError):
            await c.call(MetadataRequest(topics=[]), timeout_s=0.3)
        assert c.least_loaded_node() is None or c.backoff_remaining(-1) >= 0
    finally:
        await c.close()
    assert c.closed


async def test_not_controller_refreshes_metadata_and_resolves_the_controller_again(
        client: NetClient, control: Any) -> None:
    await client.refresh_metadata()
    controller = client.metadata.controller_id
    host, port = client.address_of(controller)  # type: ignore[misc]
    # A stale view: the controller is "node 7" (the same broker under an old id).
    client.metadata.brokers[7] = BrokerInfo(7, host, port)
    client.metadata.controller_id = 7
    resolved: list[int] = []
    refreshed_after: list[int] = []
    resolve, refresh = client.resolve, client.refresh_metadata

    async def spy_resolve(target: Any, **kwargs: Any) -> int:
        node = await resolve(target, **kwargs)
        resolved.append(node)
        return node

    async def spy_refresh(**kwargs: Any) -> Any:
        refreshed_after.append(len(resolved))
        return await refresh(**kwargs)

    client.resolve = spy_resolve  # type: ignore[method-assign]
    client.refresh_metadata = spy_refresh  # type: ignore[method-assign]
    control.fail_next(ApiKey.CREATE_TOPICS, NotControllerError.errno)
    request = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=f"ctl-{uuid.uuid4().hex[:8]}", num_partitions=1, replication_factor=1)],
        timeout_ms=5000)
    response = await client.call(request, CONTROLLER,
                                 check=lambda r: raise_for_code(r.topics[0].error_code))
    assert response.topics[0].error_code == 0
    assert resolved == [7, controller]  # the retry went to the controller the refresh named
    assert refreshed_after == [1]  # one refresh, between the two attempts


async def test_a_failed_connection_attempt_asks_for_fresh_metadata(client: NetClient) -> None:
    """A leader that died stays in the metadata until the controller fences it; every failed
    attempt to reach it must ask again (Java's NetworkClient does), not only the first lost
    connection, or a producer waits for metadata_max_age_ms before it finds the new leader."""
    await client.refresh_metadata()
    host, port = _dead_address().split(":")
    client.metadata.brokers[7] = BrokerInfo(7, host, int(port))  # a stale leader, now dead
    before = client.metadata.version
    assert client.ensure_connecting(7) == 0.0
    for _ in range(200):
        if client.metadata.version > before:
            break
        await asyncio.sleep(0.01)
    assert client.backoff_remaining(7) > 0 or client.last_error(7) is not None
    assert client.metadata.version > before, "no metadata refresh after a failed connection"


async def test_a_node_hanging_in_its_handshake_keeps_the_metadata_fresh(client: NetClient) -> None:
    """A stopped broker (SIGSTOP) accepts TCP connections and never answers ApiVersions. A
    caller that wants it (the producer's sender, each pass) must keep the metadata fresh
    while the attempt hangs: the cluster names a new leader long before the attempt times out."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # the kernel completes connections; nobody reads or answers
        host, port = silent.getsockname()
        await client.refresh_metadata()
        client.metadata.brokers[7] = BrokerInfo(7, host, port)
        assert client.ensure_connecting(7) == 0.0
        before = client.metadata.version
        for _ in range(100):
            assert client.ensure_connecting(7) == 0.0  # still connecting
            if client.metadata.version > before:
                break
            await asyncio.sleep(0.02)
        assert client.ready_connection(7) is None
        assert client.metadata.version > before, "no metadata refresh while the node hangs"


async def test_a_refresh_asks_another_node_while_one_hangs(embedded_broker: Any) -> None:
    """The first node asked hangs in its handshake (a stopped broker); the refresh must not
    wait for its connect timeout (10 s) but ask the next node as well and take its answer."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        host, port = silent.getsockname()
        c = NetClient(_config(f"{host}:{port},{embedded_broker.bootstrap_servers}"))
        c._refresh_candidates = lambda: [-1, -2]  # type: ignore[method-assign]  # hung one first
        await c.start()
        try:
            metadata = await c.refresh_metadata(timeout_s=4)
            assert metadata.brokers
            assert c.ready_connection(-1) is None
        finally:
            await c.close()
