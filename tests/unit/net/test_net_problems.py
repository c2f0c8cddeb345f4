"""Problems told once (sdk.net.problems): unreachable brokers, missing topics and partitions
without a leader reach a WARNING with the real cause and ``on_error``, against a closed port
or the reference broker."""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from typing import Any

import pytest

from sdk.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    UnknownTopicOrPartitionError,
)
from sdk.net import CommonConfig, NetClient
from sdk.protocol.api import ApiKey
from sdk.protocol.messages.metadata import MetadataResponse
from tests.unit.net.missing_topic import give_up_once


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _client(servers: str, errors: list[KafkaError], **kw: Any) -> NetClient:
    kw.setdefault("reconnect_backoff_ms", 10)
    kw.setdefault("reconnect_backoff_max_ms", 20)
    kw.setdefault("retry_backoff_ms", 10)
    cfg = CommonConfig.build(bootstrap_servers=servers, on_error=errors.append, **kw)
    return NetClient(cfg, allow_auto_topic_creation=False)


async def _until(predicate: Any, timeout_s: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and r.name == "sdk.net.problems"]


async def test_refused_connection_is_told_once_with_the_os_reason(
        caplog: pytest.LogCaptureFixture) -> None:
    port = _closed_port()
    errors: list[KafkaError] = []
    client = _client(f"127.0.0.1:{port}", errors)
    caplog.set_level(logging.WARNING)
    await client.start()
    try:
        # Reconnects every ~20 ms: many failures, one report.
        await _until(lambda: client._failures.get(-1, 0) >= 10)
        with pytest.raises(KafkaTimeoutError) as info:
            await client.wait_for_topic("t", timeout_s=0.5)
    finally:
        await client.close()
    expected = f"connection to 127.0.0.1:{port} refused (ECONNREFUSED)"
    assert len(errors) == 1
    assert isinstance(errors[0], KafkaConnectionError)
    assert expected in str(errors[0])
    assert [w for w in _warnings(caplog) if expected in w] == [
        f"{client.config.client_id}: {errors[0]}"]
    # The timeout says why, not only that the node is backing off.
    assert expected in str(info.value)


async def test_recovered_then_failed_again_is_told_again() -> None:
    from server_ref import EmbeddedBroker

    port = _closed_port()
    errors: list[KafkaError] = []
    client = _client(f"127.0.0.1:{port}", errors)
    await client.start()
    try:
        await _until(lambda: len(errors) == 1)
        broker = EmbeddedBroker(data_dir=None, port=port).start()
        try:  # connected: the problem ended (the first tries may find -1 backing off)
            await _until(lambda: client.ready_connection(-1) is not None
                         or bool(client.metadata.brokers))
        finally:
            broker.close()
        # Within the 30 s a lasting problem is held back for: a new failure is told.
        with pytest.raises(KafkaError):
            await client.refresh_metadata(timeout_s=10)
    finally:
        await client.close()
    assert len(errors) == 2
    assert all(f"127.0.0.1:{port} refused" in str(e) for e in errors)


async def test_a_tracked_topic_that_does_not_exist_is_told_with_the_fix(
        embedded_broker: Any, caplog: pytest.LogCaptureFixture) -> None:
    errors: list[KafkaError] = []
    client = _client(embedded_broker.bootstrap_servers, errors)
    caplog.set_level(logging.WARNING)
    topic = f"missing-{uuid.uuid4().hex[:8]}"
    await client.start()
    try:
        client.add_topics([topic])
        await _until(lambda: bool(errors))  # after the grace of a few seconds
    finally:
        await client.close()
    assert len(errors) == 1 and isinstance(errors[0], UnknownTopicOrPartitionError)
    text = str(errors[0])
    assert f"topic {topic!r} does not exist" in text
    assert "create_topics" in text and "auto.create.topics.enable" in text
    assert any(topic in w for w in _warnings(caplog))


async def test_a_partition_without_a_leader_is_told(embedded_broker: Any, control: Any) -> None:
    topic = f"leaderless-{uuid.uuid4().hex[:8]}"
    host, port = embedded_broker.bootstrap_servers.split(":")

    def leaderless(ctx: Any, request: Any) -> MetadataResponse:
        R = MetadataResponse
        return R(brokers=[R.MetadataResponseBroker(node_id=0, host=host, port=int(port))],
                 controller_id=0, cluster_id="c",
                 topics=[R.MetadataResponseTopic(
                     name=topic, error_code=0, topic_id=uuid.uuid4(),
                     partitions=[R.MetadataResponsePartition(
                         error_code=5, partition_index=0, leader_id=-1,
                         replica_nodes=[0], isr_nodes=[], offline_replicas=[0])])])

    control.answer_next(ApiKey.METADATA, leaderless, times=1000)
    errors: list[KafkaError] = []
    client = _client(embedded_broker.bootstrap_servers, errors)
    await client.start()
    try:
        client.add_topics([topic])
        await _until(lambda: bool(errors))
    finally:
        await client.close()
    assert len(errors) == 1 and isinstance(errors[0], LeaderNotAvailableError)
    assert f"partition {topic}-0 has had no leader" in str(errors[0])


async def test_a_wait_for_a_missing_topic_is_remembered(embedded_broker: Any) -> None:
    """The first wait waits (the topic may be being created); the next fails at once with
    the fix, and a created topic ends it."""
    from sdk.admin import AsyncAdminClient
    from sdk.types import NewTopic

    errors: list[KafkaError] = []
    client = _client(embedded_broker.bootstrap_servers, errors)
    topic = f"missing-{uuid.uuid4().hex[:8]}"
    await client.start()
    try:
        first = await give_up_once(client, topic)
        assert isinstance(first.__cause__, UnknownTopicOrPartitionError)
        assert "auto.create.topics.enable" in str(first)
        # A long timeout: only a remembered answer makes this fail at once (a wait would end
        # in KafkaTimeoutError, not this error).
        with pytest.raises(UnknownTopicOrPartitionError) as again:
            await client.wait_for_topic(topic, timeout_s=60)
        assert "not waiting for it again" in str(again.value)
        async with AsyncAdminClient(bootstrap_servers=embedded_broker.bootstrap_servers) as admin:
            await admin.create_topics([NewTopic(topic, 1, 1)])
        # The remembered answer stands for retry_backoff_ms (10 ms here) after the last
        # metadata answer, which a background refresh may have renewed just before the
        # creation; past that, the next wait asks again and sees the topic.
        await asyncio.sleep(0.05)
        info = await client.wait_for_topic(topic, timeout_s=30)
        assert info.partition_ids == (0,)
    finally:
        await client.close()


def test_on_error_must_be_callable() -> None:
    from sdk.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        CommonConfig.build(bootstrap_servers="h:1", on_error="print")
    assert info.value.key == "on_error"
    assert CommonConfig.build({"bootstrap.servers": "h:1", "error_cb": print}).on_error is print
