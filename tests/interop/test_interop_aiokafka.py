"""aiokafka against the reference broker: idempotent produce in every codec (InitProducerId
v0, which tansu refuses), a two-member group, commits across restarts, admin calls."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.admin.records_to_delete import RecordsToDelete
from interop_kit import CODECS, BrokerProcess, as_sorted, expected_records, split_between

TOPIC = "aio-orders"
PER_CODEC = 40


async def produce_all(bootstrap: str) -> list:
    sent = []
    for codec in CODECS:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=codec,
                                    enable_idempotence=True, linger_ms=5)
        await producer.start()
        try:
            records = expected_records(codec, PER_CODEC)
            futures = [await producer.send(TOPIC, key=k, value=v, headers=h)
                       for k, v, h in records]
            metas = await asyncio.gather(*futures)
            assert all(m.offset >= 0 for m in metas)
        finally:
            await producer.stop()
        sent += records
    return sent


async def consume_group(bootstrap: str, produce: Callable[[], Awaitable[list]]
                        ) -> tuple[list, list]:
    """Two members of one group; once they split the partitions, ``produce`` runs and they
    consume (committing) until everything it sent arrived. Returns (sent, received)."""
    consumers = [AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id="aio-group",
                                  auto_offset_reset="earliest", enable_auto_commit=False,
                                  heartbeat_interval_ms=300)
                 for _ in range(2)]
    for c in consumers:
        await c.start()
    got: list = []
    current: list[set] = [set(), set()]
    done = asyncio.Event()

    async def run(index: int) -> None:
        consumer = consumers[index]
        while not done.is_set():
            batch = await consumer.getmany(timeout_ms=100)
            current[index] = set(consumer.assignment())
            for records in batch.values():
                got.extend((r.key, r.value, list(r.headers)) for r in records)
            if batch:
                await consumer.commit()

    async def until(predicate: Callable[[], bool]) -> None:
        while not predicate():
            await asyncio.sleep(0.05)

    tasks = [asyncio.ensure_future(run(i)) for i in range(2)]
    try:
        await asyncio.wait_for(until(lambda: split_between(current, 4)), 60)
        sent = await produce()
        await asyncio.wait_for(until(lambda: len(got) >= len(sent)), 60)
    finally:
        done.set()
        await asyncio.gather(*tasks)
        for c in consumers:
            await c.stop()
    return sent, got


async def test_codecs_group_commits_and_resume(broker: BrokerProcess) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    await admin.create_topics([NewTopic(TOPIC, num_partitions=4, replication_factor=1)])
    await admin.close()
    sent, got = await consume_group(broker.bootstrap, lambda: produce_all(broker.bootstrap))
    assert as_sorted(got) == as_sorted(sent)

    await asyncio.to_thread(broker.restart)
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True)
    await producer.start()
    await producer.send_and_wait(TOPIC, b"restart", key=b"after")
    await producer.stop()
    consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=broker.bootstrap,
                                group_id="aio-group", auto_offset_reset="earliest",
                                enable_auto_commit=False)
    await consumer.start()
    try:
        batch = await consumer.getmany(timeout_ms=5000)
        while not batch:
            batch = await consumer.getmany(timeout_ms=5000)
        assert [(r.key, r.value) for rs in batch.values() for r in rs] == [(b"after",
                                                                            b"restart")]
    finally:
        await consumer.stop()


async def test_admin_calls(broker: BrokerProcess) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic("aio-admin", 2, 1)])
        assert "aio-admin" in await admin.list_topics()
        await admin.create_partitions({"aio-admin": NewPartitions(total_count=4)})
        await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "aio-admin",
                                                  configs={"cleanup.policy": "compact"})])
        (response,) = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "aio-admin")])
        entries = {e[0]: e[1] for e in response.resources[0][4]}
        assert entries["cleanup.policy"] == "compact"
        cluster = await admin.describe_cluster()
        assert [b["port"] for b in cluster["brokers"]] == [broker.port]

        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
        await producer.start()
        for i in range(6):
            await producer.send_and_wait("aio-admin", b"v", key=b"k%d" % i, partition=1)
        await producer.stop()
        partition = TopicPartition("aio-admin", 1)
        low = await admin.delete_records({partition: RecordsToDelete(2)})
        assert low[partition] == 2

        # "earliest" rather than a seek: aiokafka races a seek against its own reset.
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="aio-admin",
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        consumer.assign([partition])
        assert await consumer.beginning_offsets([partition]) == {partition: 2}
        assert await consumer.end_offsets([partition]) == {partition: 6}
        records = await consumer.getmany(partition, timeout_ms=5000)
        assert [r.offset for r in records[partition]] == [2, 3, 4, 5]
        await consumer.commit({partition: 5})
        await consumer.stop()

        groups = [g[0] for g in await admin.list_consumer_groups()]
        assert "aio-admin" in groups
        offsets = await admin.list_consumer_group_offsets("aio-admin")
        assert offsets[partition].offset == 5
        await admin.delete_topics(["aio-admin"])
        assert "aio-admin" not in await admin.list_topics()
    finally:
        await admin.close()
