"""Fetch against a live broker: limits, long polls, errors, sessions, topic ids, zero copy."""

from __future__ import annotations

import asyncio
import uuid

from broker_kit import Served, batches_of, make_batch

from sdk import errors
from sdk.protocol.messages.fetch import FetchRequest
from sdk.protocol.messages.produce import ProduceRequest


def fetch_request(topic: str, offsets: dict[int, int], *, max_wait_ms: int = 0,
                  min_bytes: int = 0, max_bytes: int = 50 << 20,
                  partition_max_bytes: int = 1 << 20, session_id: int = 0,
                  session_epoch: int = -1, topic_id: uuid.UUID | None = None,
                  forgotten: list[int] | None = None) -> FetchRequest:
    topics = []
    if offsets:
        topics = [FetchRequest.FetchTopic(
            topic=topic, topic_id=topic_id or uuid.UUID(int=0), partitions=[
                FetchRequest.FetchPartition(partition=p, fetch_offset=o,
                                            partition_max_bytes=partition_max_bytes)
                for p, o in offsets.items()])]
    forgotten_topics = []
    if forgotten:
        forgotten_topics = [FetchRequest.ForgottenTopic(topic=topic, partitions=forgotten)]
    return FetchRequest(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                        session_id=session_id, session_epoch=session_epoch, topics=topics,
                        forgotten_topics_data=forgotten_topics)


async def produce(served: Served, topic: str, records: bytes, partition: int = 0) -> int:
    client = await served.client()
    response = await client.call(ProduceRequest(acks=1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=partition, records=records)])]))
    result = response.responses[0].partition_responses[0]
    assert result.error_code == 0
    return int(result.base_offset)


def partitions(response: object) -> dict[int, object]:
    return {p.partition_index: p for t in response.responses  # type: ignore[attr-defined]
            for p in t.partitions}


async def test_high_watermark_log_start_and_records(served: Served) -> None:
    served.b.topics.create("t", 1)
    for _ in range(3):
        await produce(served, "t", make_batch([(b"k", b"v")] * 10))
    client = await served.client()
    data = partitions(await client.call(fetch_request("t", {0: 10}), 12))[0]
    assert (data.error_code, data.high_watermark, data.log_start_offset) == (0, 30, 0)
    assert data.last_stable_offset == 30
    assert [b.base_offset for b in batches_of(data.records)] == [10, 20]


async def test_offset_out_of_range_and_unknown_partition(served: Served) -> None:
    served.b.topics.create("t", 1)
    await produce(served, "t", make_batch())
    client = await served.client()
    data = partitions(await client.call(fetch_request("t", {0: 5, 3: 0}), 12))
    assert data[0].error_code == errors.OffsetOutOfRangeError.errno
    assert data[0].high_watermark == 1
    assert data[3].error_code == errors.UnknownTopicOrPartitionError.errno


async def test_partition_and_response_limits_keep_whole_batches(served: Served) -> None:
    served.b.topics.create("t", 2)
    batch = make_batch([(b"k", b"x" * 1000)])
    for partition in (0, 1):
        for _ in range(5):
            await produce(served, "t", batch, partition)
    client = await served.client()
    # One batch per partition fits its limit of 1.5 batches.
    got = partitions(await client.call(fetch_request(
        "t", {0: 0, 1: 0}, partition_max_bytes=len(batch) * 3 // 2), 12))
    assert [len(batches_of(got[p].records)) for p in (0, 1)] == [1, 1]
    # A limit below one batch still returns the first partition's first batch (KIP-74);
    # the response limit is then used up, so partition 1 gets nothing this time.
    got = partitions(await client.call(fetch_request(
        "t", {0: 0, 1: 0}, partition_max_bytes=10, max_bytes=10), 12))
    assert len(batches_of(got[0].records)) == 1
    assert not got[1].records
    # The response limit spreads over partitions in order.
    got = partitions(await client.call(fetch_request(
        "t", {0: 0, 1: 0}, max_bytes=len(batch) * 7), 12))
    assert [len(batches_of(got[p].records)) for p in (0, 1)] == [5, 2]


async def test_long_poll_waits_for_min_bytes(served: Served) -> None:
    served.b.topics.create("t", 1)
    client = await served.client()
    poll = asyncio.ensure_future(client.call(fetch_request(
        "t", {0: 0}, max_wait_ms=10_000, min_bytes=1), 12))
    await asyncio.sleep(0.2)
    assert not poll.done()
    await produce(served, "t", make_batch([(b"k", b"late")]))
    data = partitions(await asyncio.wait_for(poll, 5))[0]
    assert batches_of(data.records)[0].records()[0].value == b"late"


async def test_long_poll_times_out_empty(served: Served) -> None:
    served.b.topics.create("t", 1)
    client = await served.client()
    data = partitions(await client.call(fetch_request(
        "t", {0: 0}, max_wait_ms=100, min_bytes=1), 12))[0]
    assert data.error_code == 0 and not data.records


async def test_pipelined_requests_are_answered_in_order(served: Served) -> None:
    """A long poll holds back the responses after it, though they are handled at once."""
    served.b.topics.create("t", 1)
    client = await served.client()
    slow = await client.send(fetch_request("t", {0: 0}, max_wait_ms=400, min_bytes=1), 12)
    fast = await client.send(fetch_request("t", {0: 0}), 12)
    first, _ = await client.receive()
    second, _ = await client.receive()
    assert (first, second) == (slow, fast)


async def test_fetch_by_topic_id(served: Served) -> None:
    topic = served.b.topics.create("t", 1)
    await produce(served, "t", make_batch())
    client = await served.client()
    response = await client.call(fetch_request("", {0: 0}, topic_id=topic.topic_id), 13)
    assert response.responses[0].topic_id == topic.topic_id
    assert len(batches_of(response.responses[0].partitions[0].records)) == 1
    missing = await client.call(fetch_request("", {0: 0}, topic_id=uuid.uuid4()), 13)
    assert missing.responses[0].partitions[0].error_code == errors.UnknownTopicIdError.errno


async def test_fetch_session_sends_only_changes(served: Served) -> None:
    served.b.topics.create("t", 2)
    await produce(served, "t", make_batch(), 0)
    client = await served.client()
    full = await client.call(fetch_request("t", {0: 0, 1: 0}, session_epoch=0), 12)
    session = full.session_id
    assert session != 0 and set(partitions(full)) == {0, 1}
    # Nothing changed since: an incremental fetch names no partitions and gets none back.
    quiet = await client.call(fetch_request("t", {0: 1}, session_id=session,
                                            session_epoch=1), 12)
    assert quiet.session_id == session and partitions(quiet) == {}
    await produce(served, "t", make_batch(), 1)
    news = await client.call(fetch_request("t", {}, session_id=session, session_epoch=2), 12)
    assert set(partitions(news)) == {1}
    assert len(batches_of(partitions(news)[1].records)) == 1
    # The session keeps partition 1 at offset 0 until the client says otherwise.
    forgot = await client.call(fetch_request("t", {}, session_id=session, session_epoch=3,
                                             forgotten=[1]), 12)
    assert partitions(forgot) == {}
    assert len(served.b.fetch_sessions) == 1


async def test_fetch_session_errors(served: Served) -> None:
    served.b.topics.create("t", 1)
    client = await served.client()
    full = await client.call(fetch_request("t", {0: 0}, session_epoch=0), 12)
    wrong_epoch = await client.call(fetch_request("t", {}, session_id=full.session_id,
                                                  session_epoch=5), 12)
    assert wrong_epoch.error_code == errors.InvalidFetchSessionEpochError.errno
    unknown = await client.call(fetch_request("t", {}, session_id=12345, session_epoch=1), 12)
    assert unknown.error_code == errors.FetchSessionIdNotFoundError.errno
    closing = await client.call(fetch_request("t", {0: 0}, session_id=full.session_id,
                                              session_epoch=-1), 12)
    assert closing.error_code == 0 and closing.session_id == 0
    assert len(served.b.fetch_sessions) == 0


async def test_zero_copy_and_copied_responses_are_identical(make_served: object) -> None:
    copying = await make_served(options={"zero_copy": False})  # type: ignore[operator]
    zero_copy = await make_served()  # type: ignore[operator]
    payload = [make_batch([(b"k%d" % i, bytes([i % 251]) * 20_000)] * 4) for i in range(20)]
    results = []
    for served in (copying, zero_copy):
        served.b.topics.create("t", 1)
        for batch in payload:
            await produce(served, "t", batch)
        client = await served.client()
        for version in (11, 12, 17):
            if version == 17:
                topic_id = served.b.topics.get("t").topic_id
                request = fetch_request("", {0: 0}, topic_id=topic_id, max_bytes=8 << 20,
                                        partition_max_bytes=8 << 20)
            else:
                request = fetch_request("t", {0: 0}, max_bytes=8 << 20,
                                        partition_max_bytes=8 << 20)
            data = partitions(await client.call(request, version))[0]
            results.append((version, data.high_watermark, data.records))
    assert results[:3] == results[3:]
    assert copying.server.file_bytes_sent == 0
    assert zero_copy.server.file_bytes_sent >= 3 * len(results[0][2])
    assert len(results[0][2]) > 1_000_000
    assert [len(b.records()) for b in batches_of(results[0][2])] == [4] * 20


async def test_timed_out_long_polls_leave_no_waiters_behind(served: Served) -> None:
    served.b.topics.create("t", 1)
    client = await served.client()
    for _ in range(3):
        await client.call(fetch_request("t", {0: 0}, max_wait_ms=20, min_bytes=1), 12)
    assert served.b.topics.get("t").partitions[0].waiters == []


async def test_a_long_poll_cut_off_before_it_starts_leaves_nothing_unawaited(
        served: Served) -> None:
    import gc
    import warnings

    from sdk.protocol.framing import ClientFraming

    served.b.topics.create("t", 1)
    client = await served.client()
    await client.call(fetch_request("t", {0: 0}), 12)  # the connection is set up
    assert served.server is not None
    (conn,) = served.server.connections
    _, frame = ClientFraming("t").encode_request(
        fetch_request("t", {0: 0}, max_wait_ms=10_000, min_bytes=1), 12)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        conn.data_received(bytes(frame))  # dispatched: the long poll is a task now ...
        conn.connection_lost(None)  # ... cancelled before the loop ever ran it
        for _ in range(3):
            await asyncio.sleep(0)
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]
    assert not conn.tasks
