"""A cooperative member's commit that meets a rebalance, against the reference broker.

The commit waits for the rebalance to settle and commits again what the member kept. A
partition the rebalance revokes meanwhile has its offset committed at the revocation, before
its new owner can read it; if that fails, the commit raises CommitFailedError naming it
instead of reporting success. (Dropping such offsets silently made the coordinator-failover
cluster test see records handed out again below offsets the application had been told were
committed.)
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from sdk import AdminClient, AsyncConsumer, NewTopic, Producer, TopicPartition
from sdk.errors import CommitFailedError
from sdk.protocol.api import ApiKey

REBALANCE_IN_PROGRESS = 27


def _settings(bootstrap: str, group: str, name: str) -> dict[str, Any]:
    return {"bootstrap_servers": bootstrap, "group_id": group, "client_id": name,
            "partition_assignment_strategy": "cooperative-sticky",
            "enable_auto_commit": False, "auto_offset_reset": "earliest",
            "heartbeat_interval_ms": 100}


async def _poll_until(consumer: AsyncConsumer, done: Callable[[], bool], what: str,
                      got: dict[TopicPartition, list[int]] | None = None,
                      timeout_s: float = 20.0) -> None:
    """Poll until ``done()``, adding the offsets handed out to ``got``."""
    got = {} if got is None else got
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not done():
        assert loop.time() < deadline, f"{what}: not reached in {timeout_s} s"
        for tp, records in (await consumer.getmany(timeout_ms=50)).items():
            got.setdefault(tp, []).extend(r.offset for r in records)


async def _commit_meeting_a_rebalance(
        embedded_broker: Any, control: Any, handover_error: int | None
) -> tuple[BaseException | None, dict[TopicPartition, int], dict[TopicPartition, int],
           list[int]]:
    """a reads both partitions alone; b joins; a's commit of what it read reaches the broker
    only after the group moved to generation 2 (ILLEGAL_GENERATION), so it waits for the
    rebalance, in which partition 1 goes to b (cooperative: revoked in one round, assigned
    in the next). ``handover_error``: the broker's answer to the two commits after the
    held one (the commit at the revocation, and the retry that may run alongside it).
    Returns the commit's error, the offsets it was given, the group's committed offsets,
    and the offsets b read of partition 1 (up to one more record produced at the end)."""
    bootstrap = embedded_broker.bootstrap_servers
    topic, group = f"cr-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)]).raise_if_failed()
    with Producer(bootstrap_servers=bootstrap) as producer:
        for i in range(20):
            producer.send(topic, str(i).encode(), partition=i % 2)
        producer.flush(timeout=10)
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    a = AsyncConsumer(topic, **_settings(bootstrap, group, "a"))
    b = AsyncConsumer(topic, **_settings(bootstrap, group, "b"))
    await a.start()
    await b.start()
    read: dict[TopicPartition, list[int]] = {}
    offsets: dict[TopicPartition, int] = {}
    try:
        await _poll_until(a, lambda: {p0, p1} <= set(read), "a reads both partitions", read)
        offsets = {tp: max(read[tp]) + 1 for tp in (p0, p1)}
        b_read: dict[TopicPartition, list[int]] = {}
        b_joins = asyncio.ensure_future(_poll_until(
            b, lambda: b.assignment() == {p1}, "b gets partition 1", b_read))
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            for _ in range(200):
                if admin.describe_consumer_groups([group])[group].state == "PreparingRebalance":
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("b's join did not start a rebalance")
        # a's rejoin is held 2 s by the broker, so a is still in generation 1 when it
        # commits; the commit is held 4 s, so the broker sees it after generation 2 formed.
        control.delay_next(ApiKey.JOIN_GROUP, 2.0, match=lambda r: r.member_id.startswith("a-"))
        await _poll_until(a, lambda: control.pending(ApiKey.JOIN_GROUP) == 0, "a rejoins")
        control.delay_next(ApiKey.OFFSET_COMMIT, 4.0)
        if handover_error is not None:  # the commit at the revocation and the next one
            control.fail_next(ApiKey.OFFSET_COMMIT, handover_error, times=2)
        commit = asyncio.ensure_future(a.commit(offsets, timeout_ms=15_000))
        await _poll_until(a, commit.done, "the commit ends")
        await b_joins
        assert a.assignment() == {p0}
        committed = {tp: om.offset for tp in (p0, p1)
                     if (om := await a.committed(tp)) is not None}
        # One more record: once b has it, b has read all it was going to read of partition 1.
        with Producer(bootstrap_servers=bootstrap) as producer:
            producer.send(topic, b"last", partition=1).result(timeout=10)
        await _poll_until(b, lambda: offsets[p1] in b_read.get(p1, []), "b reads the last one",
                          b_read)
        return commit.exception(), offsets, committed, sorted(b_read[p1])
    finally:
        await a.close()
        await b.close()


async def test_a_partition_revoked_while_the_commit_waits_is_committed_first(
        embedded_broker: Any, control: Any) -> None:
    error, offsets, committed, b_read = await _commit_meeting_a_rebalance(
        embedded_broker, control, handover_error=None)
    assert error is None
    assert committed == offsets
    p1 = max(offsets)
    assert b_read == [offsets[p1]]  # b goes on where a stopped: nothing is read twice


async def test_a_revoked_partition_that_could_not_be_committed_fails_the_commit(
        embedded_broker: Any, control: Any) -> None:
    error, offsets, committed, b_read = await _commit_meeting_a_rebalance(
        embedded_broker, control, handover_error=REBALANCE_IN_PROGRESS)
    p0, p1 = sorted(offsets)
    assert isinstance(error, CommitFailedError)
    assert f"{p1} at {offsets[p1]} not committed" in str(error)
    assert f"committed: {p0} at {offsets[p0]}" in str(error)
    assert committed == {p0: offsets[p0]}  # what a kept was committed after the rebalance
    assert b_read == list(range(offsets[p1] + 1))  # again from the start, as it was told
