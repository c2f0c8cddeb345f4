"""The missing-topic memory (sdk.net.topic_problems) ends when this process creates the
topic: a send right after ``AdminClient.create_topics`` is not refused on an answer that
predates the creation.

retry_backoff_ms is 10 s here, so the remembered answer would stand for the whole test
without the creation being told (it stands for retry_backoff_ms after the last metadata
answer, and the background refresh runs at most that often).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest

from sdk.admin import AdminClient, AsyncAdminClient
from sdk.errors import UnknownTopicOrPartitionError
from sdk.net import CommonConfig, NetClient
from sdk.producer import Producer
from sdk.types import NewTopic
from server_ref import EmbeddedBroker
from tests.unit.net.missing_topic import give_up_once, give_up_once_blocking

SLOW_BACKOFF_MS = 10_000
pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def no_auto_create() -> Iterator[EmbeddedBroker]:
    broker = EmbeddedBroker(data_dir=None, port=0, auto_create_topics_enable=False).start()
    try:
        yield broker
    finally:
        broker.close()


def _topic() -> str:
    return f"memory-{uuid.uuid4().hex[:8]}"


async def test_a_topic_created_by_this_process_is_forgotten_as_missing(
        no_auto_create: EmbeddedBroker) -> None:
    bootstrap = no_auto_create.bootstrap_servers
    client = NetClient(CommonConfig.build(bootstrap_servers=bootstrap,
                                          retry_backoff_ms=SLOW_BACKOFF_MS))
    topic = _topic()
    await client.start()
    try:
        await give_up_once(client, topic)
        with pytest.raises(UnknownTopicOrPartitionError):  # remembered: fails at once
            await client.wait_for_topic(topic, timeout_s=60)
        async with AsyncAdminClient(bootstrap_servers=bootstrap) as admin:
            (await admin.create_topics([NewTopic(topic, 2, 1)])).raise_if_failed()
        assert not client.topic_problems.is_remembered_missing(topic)
        info = await client.wait_for_topic(topic, timeout_s=30)
        assert info.partition_ids == (0, 1)
    finally:
        await client.close()


async def test_a_refresh_that_lists_the_topic_ends_the_memory(
        no_auto_create: EmbeddedBroker) -> None:
    """A topic created elsewhere (a raw CreateTopics, which tells no client): the memory
    stands until a metadata answer lists the topic, then the next wait succeeds at once."""
    from sdk.protocol.messages.create_topics import CreateTopicsRequest

    bootstrap = no_auto_create.bootstrap_servers
    client = NetClient(CommonConfig.build(bootstrap_servers=bootstrap,
                                          retry_backoff_ms=SLOW_BACKOFF_MS))
    topic = _topic()
    await client.start()
    try:
        await give_up_once(client, topic)
        creatable = CreateTopicsRequest.CreatableTopic(name=topic, num_partitions=1,
                                                       replication_factor=1)
        response = await client.call(CreateTopicsRequest(topics=[creatable], timeout_ms=10_000))
        assert response.topics[0].error_code == 0
        with pytest.raises(UnknownTopicOrPartitionError):  # nothing told this client
            await client.wait_for_topic(topic, timeout_s=60)
        await client.refresh_metadata()
        assert not client.topic_problems.is_remembered_missing(topic)
        info = await client.wait_for_topic(topic, timeout_s=0.001)
        assert info.partition_ids == (0,)
    finally:
        await client.close()


def test_a_producer_sends_right_after_the_topic_is_created(
        no_auto_create: EmbeddedBroker) -> None:
    """The blocking faces: the producer's loop runs in another thread than the admin
    client's, and the creation reaches it before the next send."""
    bootstrap = no_auto_create.bootstrap_servers
    topic = _topic()
    with Producer(bootstrap_servers=bootstrap, retry_backoff_ms=SLOW_BACKOFF_MS,
                  max_block_ms=3_600_000) as p:
        give_up_once_blocking(p, topic)
        with pytest.raises(UnknownTopicOrPartitionError):
            p.send(topic, b"refused")  # max_block_ms is an hour: only the memory refuses
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([NewTopic(topic, 1, 1)]).raise_if_failed()
        meta = p.send(topic, b"accepted").result(timeout=30)
        assert (meta.partition, meta.offset) == (0, 0)


def test_an_existing_topic_given_to_create_topics_is_forgotten_too(
        no_auto_create: EmbeddedBroker) -> None:
    """TOPIC_ALREADY_EXISTS says the topic exists as much as a creation does (it was
    created elsewhere since the cluster's last answer)."""
    bootstrap = no_auto_create.bootstrap_servers
    topic = _topic()

    async def scenario() -> None:
        client = NetClient(CommonConfig.build(bootstrap_servers=bootstrap,
                                              retry_backoff_ms=SLOW_BACKOFF_MS))
        await client.start()
        try:
            await give_up_once(client, topic)
            async with AsyncAdminClient(bootstrap_servers=bootstrap) as other:
                (await other.create_topics([NewTopic(topic, 1, 1)])).raise_if_failed()
            # As if another process had created it: this client still remembers it missing.
            client.topic_problems.remember_missing(topic)
            async with AsyncAdminClient(bootstrap_servers=bootstrap) as admin:
                result = await admin.create_topics([NewTopic(topic, 1, 1)])
            assert not result.ok
            assert not client.topic_problems.is_remembered_missing(topic)
        finally:
            await client.close()

    asyncio.run(scenario())
