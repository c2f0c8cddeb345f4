"""AsyncConsumer.topics() against the reference broker in this process."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from sdk import AsyncConsumer, TopicPartition
from sdk.net import NetClient
from sdk.net.config import CommonConfig
from sdk.protocol.api import ApiKey
from sdk.protocol.messages.create_topics import CreateTopicsRequest


async def _create_topics(servers: str, *names: str) -> None:
    client = NetClient(CommonConfig.build(bootstrap_servers=servers))
    await client.start()
    try:
        topics = [CreateTopicsRequest.CreatableTopic(name=n, num_partitions=1,
                                                     replication_factor=1) for n in names]
        response = await client.call(CreateTopicsRequest(topics=topics, timeout_ms=10_000))
        assert all(t.error_code == 0 for t in response.topics)
    finally:
        await client.close()


async def test_topics_is_complete_while_a_tracked_topics_refresh_runs(embedded_broker: Any) -> None:
    servers = embedded_broker.bootstrap_servers
    tracked, other = f"tracked-{uuid.uuid4().hex[:8]}", f"other-{uuid.uuid4().hex[:8]}"
    await _create_topics(servers, tracked, other)
    consumer = AsyncConsumer(bootstrap_servers=servers)
    await consumer.start()
    try:
        consumer.assign([TopicPartition(tracked, 0)])
        client = consumer._client
        await client.wait_for_topic(tracked, 10)
        # A refresh of the tracked topics only is in flight (the broker holds its answer)
        # when topics() is called: topics() must not settle for that refresh's answer.
        embedded_broker.control.delay_next(ApiKey.METADATA, 0.3)
        refresh = asyncio.ensure_future(client.refresh_metadata())
        for _ in range(100):
            if embedded_broker.control.pending(ApiKey.METADATA) == 0:
                break
            await asyncio.sleep(0.01)
        found = await consumer.topics()
        await refresh
        assert {tracked, other} <= found
        assert not client.metadata_all_topics  # the background refresh keeps its scope
    finally:
        await consumer.close()
        embedded_broker.control.clear()
