"""The ShareFetch long poll wakes for an append that lands between the handler's own check
for records and the moment its wait starts (raw requests, in-process broker).

The handler finds nothing and returns the wait as a coroutine, which starts a loop turn
later; a produce handled in between appended and woke nobody, so the fetch sat out its
whole max wait with the record there. Here the ShareFetch and a Produce are written to
their sockets before the loop runs again, so the broker reads both in one turn; a second
record is produced once the first is acknowledged. A fetch that woke for the first record
brings back that one and leaves the second to the next fetch; one that missed it waits
until the second wakes it and brings back both."""

from __future__ import annotations

import uuid
from typing import Any

from broker_kit import Served, WireClient, make_batch
from test_broker_produce import create_topic, partition_result, produce_request

from sdk.protocol.messages.share_fetch import ShareFetchRequest as SF
from sdk.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest

ROUNDS = 20
MAX_WAIT_MS = 20000  # far beyond the test: the second record ends a wait that missed one


def _write(client: WireClient, request: Any, version: int) -> int:
    """Queue the request on the socket without yielding to the loop."""
    cid, data = client.framing.encode_request(request, version)
    client.writer.write(data)
    return cid


async def _member(client: WireClient, group: str, topic: str) -> tuple[str, int]:
    member = uuid.uuid4().hex
    epoch = 0
    for _ in range(50):
        response = await client.call(ShareGroupHeartbeatRequest(
            group_id=group, member_id=member, member_epoch=epoch,
            subscribed_topic_names=[topic] if epoch == 0 else None), 1)
        assert response.error_code == 0, response.error_message
        epoch = response.member_epoch
        if response.assignment is not None and any(
                t.partitions for t in response.assignment.topic_partitions):
            return member, epoch
    raise AssertionError("no partition assigned")


def _acquired(response: Any) -> int:
    assert response.error_code == 0, response.error_message
    return sum(r.last_offset - r.first_offset + 1 for t in response.responses
               for p in t.partitions for r in p.acquired_records)


async def test_a_record_appended_as_the_wait_starts_is_delivered(served: Served) -> None:
    await create_topic(served, "s")
    topic = served.b.topics.get("s")
    assert topic is not None
    fetcher, producer = await served.client(), await served.client()
    member, _ = await _member(fetcher, "g", "s")

    def share_fetch(session_epoch: int, max_wait_ms: int) -> SF:
        return SF(group_id="g", member_id=member, share_session_epoch=session_epoch,
                  max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, max_records=100,
                  batch_size=100, topics=[SF.FetchTopic(topic_id=topic.topic_id, partitions=[
                      SF.FetchPartition(partition_index=0)])])

    # The session's first fetch initializes the share-partition (at the log end: nothing).
    assert _acquired(await fetcher.call(share_fetch(0, 0), 1)) == 0

    async def produce(value: bytes) -> None:
        response = await producer.call(produce_request("s", make_batch([(None, value)]),
                                                       acks=1), 9)
        assert partition_result(response).error_code == 0  # type: ignore[attr-defined]

    delivered = []  # per round: (the waiting fetch's records, the next fetch's)
    session_epoch = 1
    for i in range(ROUNDS):
        fetch_id = _write(fetcher, share_fetch(session_epoch, MAX_WAIT_MS), 1)
        await produce(f"first-{i}".encode())  # read by the broker in the fetch's turn
        await produce(f"second-{i}".encode())
        got, response = await fetcher.receive()
        assert got == fetch_id
        drained = await fetcher.call(share_fetch(session_epoch + 1, 0), 1)
        delivered.append((_acquired(response), _acquired(drained)))
        session_epoch += 2
    assert delivered == [(1, 1)] * ROUNDS
