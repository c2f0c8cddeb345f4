"""BrokerConnection against the reference broker: handshake, pipelining, timeouts, closes."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from sdk.errors import KafkaConnectionError, KafkaTimeoutError, UnsupportedVersionError
from sdk.net.connection import BrokerConnection, RequestTimeoutError
from sdk.protocol.api import ApiKey
from sdk.protocol.messages.metadata import MetadataRequest, MetadataResponse


async def _open(broker: Any, timeout: float = 5.0) -> BrokerConnection:
    return await BrokerConnection.open(broker.host, broker.port, node_id=0, client_id="t",
                                       request_timeout_s=timeout, connect_timeout_s=5)


async def test_handshake_learns_the_broker_versions(embedded_broker: Any) -> None:
    conn = await _open(embedded_broker)
    try:
        assert ApiKey.PRODUCE in conn.api_versions
        assert conn.version_for(ApiKey.PRODUCE, min_version=3) >= 3
        assert conn.version_for(ApiKey.METADATA, max_version=4) == 4
        with pytest.raises(UnsupportedVersionError, match="v99"):
            conn.version_for(ApiKey.METADATA, min_version=99)
    finally:
        conn.close()


async def test_pipelined_requests_get_their_own_responses(embedded_broker: Any) -> None:
    conn = await _open(embedded_broker)
    try:
        futures = [conn.send_nowait(MetadataRequest(topics=[]), 1 + i % 12) for i in range(40)]
        assert conn.in_flight == 40
        responses = await asyncio.gather(*futures)  # type: ignore[arg-type]
        assert all(isinstance(r, MetadataResponse) and r.brokers for r in responses)
        assert conn.in_flight == 0
    finally:
        conn.close()


async def test_request_timeout_closes_the_connection_and_fails_the_others(
        embedded_broker: Any, control: Any) -> None:
    conn = await _open(embedded_broker, timeout=0.3)
    closed: list[BrokerConnection] = []
    conn.add_close_callback(closed.append)
    control.drop_next(ApiKey.METADATA, times=2)
    first = conn.send_nowait(MetadataRequest(topics=[]), 1)
    second = conn.send_nowait(MetadataRequest(topics=[]), 1, timeout_s=30)
    with pytest.raises(RequestTimeoutError) as info:
        await first  # type: ignore[misc]
    assert isinstance(info.value, KafkaTimeoutError) and info.value.retriable
    with pytest.raises(KafkaConnectionError):
        await second  # type: ignore[misc]
    assert conn.closed and closed == [conn]
    with pytest.raises(KafkaConnectionError, match="closed"):
        conn.send_nowait(MetadataRequest(topics=[]), 1)


async def test_broker_closing_the_connection_fails_waiting_requests(
        embedded_broker: Any, control: Any) -> None:
    conn = await _open(embedded_broker)
    control.close_next(ApiKey.METADATA)
    with pytest.raises(KafkaConnectionError):
        await conn.send(MetadataRequest(topics=[]), 1)
    assert conn.closed and conn.close_reason is not None


async def test_no_response_expected_and_barrier(embedded_broker: Any) -> None:
    from sdk.protocol.messages.produce import ProduceRequest

    conn = await _open(embedded_broker)
    try:
        request = ProduceRequest(acks=0, timeout_ms=1000, topic_data=[])
        assert await conn.send(request, 3, expect_response=False) is None
        await conn.barrier(5)  # the broker has read the produce request
        assert conn.in_flight == 0 and not conn.closed
    finally:
        conn.close()


async def test_unreachable_address() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound but not listening: connection refused
        with pytest.raises(KafkaConnectionError, match=r"refused \(ECONNREFUSED\)"):
            await BrokerConnection.open("127.0.0.1", port, node_id=5, client_id=None,
                                        request_timeout_s=1, connect_timeout_s=2)
