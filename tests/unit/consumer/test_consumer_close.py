"""AsyncConsumer.close against the reference broker when the coordinator does not answer."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from sdk import AsyncConsumer, Producer
from sdk.protocol.api import ApiKey


async def test_close_cut_short_by_its_timeout_stops_the_group_tasks(
        embedded_broker: Any, control: Any) -> None:
    """LeaveGroup goes unanswered past the close timeout: close returns at its timeout and
    the member's heartbeat and join tasks end with it (they outlived the close before)."""
    topic = f"close-{uuid.uuid4().hex[:8]}"
    with Producer(bootstrap_servers=embedded_broker.bootstrap_servers) as producer:
        producer.send(topic, b"one").result(timeout=10)
    consumer = AsyncConsumer(topic, bootstrap_servers=embedded_broker.bootstrap_servers,
                             group_id=f"g-{uuid.uuid4().hex[:8]}",
                             auto_offset_reset="earliest", heartbeat_interval_ms=100)
    await consumer.start()
    records: list[Any] = []
    for _ in range(100):
        for batch in (await consumer.getmany(timeout_ms=100)).values():
            records.extend(batch)
        if records:
            break
    assert [r.value for r in records] == [b"one"]
    control.delay_next(ApiKey.LEAVE_GROUP, 5.0)
    await consumer.close(timeout_ms=300)
    group_tasks = [t for t in asyncio.all_tasks()
                   if t.get_name() in ("kafka-sdk-heartbeat", "kafka-sdk-join") and not t.done()]
    assert not group_tasks, f"still running after close: {group_tasks}"
