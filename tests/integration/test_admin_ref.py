"""Admin behaviour that needs the reference broker: its control surface makes brokers answer
with stale-routing errors, drop connections or stall, so the per-item retries can be
checked; and its end offsets are right after multi-record batches, so lag can be checked
(tansu's are not: PEERS.md)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from sdk import AdminClient, AsyncAdminClient, NewTopic, Producer, TopicPartition
from sdk.admin import OffsetSpec
from sdk.consumer import AsyncConsumer
from sdk.errors import KafkaTimeoutError, NotControllerError, WakeupError
from sdk.protocol.messages import ApiKey
from sdk.protocol.messages.create_topics import CreateTopicsResponse
from server_ref import EmbeddedBroker

from .conftest import new_topic


@pytest.fixture(scope="module")
def ref() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir=None, port=0) as broker:
        yield broker


@pytest.fixture
async def admin(ref: EmbeddedBroker) -> AsyncIterator[AsyncAdminClient]:
    ref.control.clear()
    async with AsyncAdminClient(bootstrap_servers=ref.bootstrap_servers,
                                retry_backoff_ms=20, retry_backoff_max_ms=100) as client:
        yield client
    ref.control.clear()


# ============================================================================ retries


async def test_not_controller_refreshes_and_retries(admin: AsyncAdminClient,
                                                    ref: EmbeddedBroker) -> None:
    name = new_topic("ctl")
    before = ref.control.seen(ApiKey.CREATE_TOPICS)
    ref.control.fail_next(ApiKey.CREATE_TOPICS, NotControllerError.errno)
    result = await admin.create_topics([NewTopic(name, 1, 1)])
    assert result[name].error is None
    assert ref.control.seen(ApiKey.CREATE_TOPICS) - before == 2
    assert name in await admin.list_topics()


async def test_not_coordinator_finds_the_coordinator_again(admin: AsyncAdminClient,
                                                           ref: EmbeddedBroker) -> None:
    group = new_topic("grp")
    await admin.describe_consumer_groups([group])  # the coordinator is now cached
    lookups = ref.control.seen(ApiKey.FIND_COORDINATOR)
    ref.control.fail_next(ApiKey.DESCRIBE_GROUPS, 16)  # NOT_COORDINATOR
    result = await admin.describe_consumer_groups([group])
    assert result[group].error is None
    assert ref.control.seen(ApiKey.FIND_COORDINATOR) > lookups


async def test_not_leader_and_lost_connections_are_retried(admin: AsyncAdminClient,
                                                           ref: EmbeddedBroker) -> None:
    name = new_topic("lead")
    (await admin.create_topics([NewTopic(name, 2, 1)])).raise_if_failed()
    ref.control.fail_next(ApiKey.LIST_OFFSETS, 6)  # NOT_LEADER_OR_FOLLOWER
    ref.control.close_next(ApiKey.LIST_OFFSETS)
    tps = [TopicPartition(name, 0), TopicPartition(name, 1)]
    result = await admin.list_offsets(dict.fromkeys(tps, OffsetSpec.LATEST))
    assert result.ok, result.errors
    ref.control.close_next(ApiKey.DELETE_TOPICS)
    assert (await admin.delete_topics([name])).ok


async def test_an_item_that_keeps_failing_does_not_fail_the_others(
        admin: AsyncAdminClient, ref: EmbeddedBroker) -> None:
    stuck, fine = new_topic("stuck"), new_topic("fine")

    def answer(_ctx: Any, request: Any) -> CreateTopicsResponse:
        return CreateTopicsResponse(topics=[
            CreateTopicsResponse.CreatableTopicResult(
                name=t.name, error_code=NotControllerError.errno if t.name == stuck else 0)
            for t in request.topics])

    ref.control.answer_next(ApiKey.CREATE_TOPICS, answer, times=1000)
    result = await admin.create_topics([NewTopic(stuck, 1, 1), NewTopic(fine, 1, 1)],
                                       timeout_ms=1500)
    assert result[fine].error is None
    error = result[stuck].error
    assert isinstance(error, KafkaTimeoutError)
    assert isinstance(error.__cause__, NotControllerError)
    assert "NOT_CONTROLLER" in str(error)
    assert set(result.errors) == {stuck}


# ============================================================================ lag


async def test_lag_after_partial_consume(admin: AsyncAdminClient, ref: EmbeddedBroker) -> None:
    name, group = new_topic("lag"), new_topic("grp")
    (await admin.create_topics([NewTopic(name, 3, 1)])).raise_if_failed()

    def produce() -> None:
        with Producer(bootstrap_servers=ref.bootstrap_servers, linger_ms=20) as p:
            for i in range(300):  # multi-record batches
                p.send(name, b"v%d" % i, key=b"k%d" % i)
            p.flush(timeout=30)

    await asyncio.to_thread(produce)
    consumed = 0
    async with AsyncConsumer(name, bootstrap_servers=ref.bootstrap_servers, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False) as c:
        while consumed < 120:
            batch = await c.getmany(timeout_ms=1000, max_records=120 - consumed)
            consumed += sum(len(records) for records in batch.values())
        await c.commit()

    lag = await admin.consumer_group_lag(group)
    assert lag.state == "Empty"
    assert lag.total_lag == 300 - 120
    ends = await admin.list_offsets({TopicPartition(name, p): OffsetSpec.LATEST
                                     for p in range(3)})
    assert sum(r.offset for r in ends.values()) == 300
    committed = await admin.list_consumer_group_offsets(group)
    for row in lag.partitions:
        tp = row.topic_partition
        assert row.end_offset == ends[tp].offset
        assert row.committed == committed[tp].offset
        assert row.lag == ends[tp].offset - committed[tp].offset


# ============================================================================ blocking face


def test_blocking_face_and_wakeup(ref: EmbeddedBroker) -> None:
    name = new_topic("sync")
    with AdminClient(config={"bootstrap.servers": ref.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(name, 2, 1)]).raise_if_failed()
        assert admin.describe_topics([name])[name].partitions[1].partition == 1
        assert admin.list_offsets({TopicPartition(name, 0): OffsetSpec.LATEST}).ok

        ref.control.delay_next(ApiKey.METADATA, 3.0)  # longer than the wakeup below
        timer = threading.Timer(0.3, admin.wakeup)
        timer.start()
        try:
            with pytest.raises(WakeupError):
                admin.list_topics()
        finally:
            timer.cancel()
            ref.control.clear()
        assert name in admin.list_topics(timeout_ms=30_000)  # still usable afterwards
