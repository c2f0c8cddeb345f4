"""ClientFraming and ServerFraming against each other, byte by byte, and against bad input.

The client encodes requests, the server cuts the stream and decodes them, the server encodes
responses and the client matches them to its requests. Streams are fed whole, one byte at a
time and split at every position. Corrupt and truncated frames must fail with
MalformedDataError only (never IndexError/struct.error), which hypothesis checks by mutating
valid frames.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sdk.errors import MalformedDataError
from sdk.protocol.framing import ClientFraming, FrameBuffer, ReceivedRequest, ServerFraming
from sdk.protocol.message import Message
from sdk.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from sdk.protocol.messages.fetch import FetchRequest, FetchResponse
from sdk.protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from sdk.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from sdk.protocol.messages.metadata import MetadataRequest, MetadataResponse
from sdk.protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from sdk.protocol.messages.produce import ProduceRequest, ProduceResponse

TOPIC_ID = uuid.UUID("0123456789abcdef0123456789abcdef")


def metadata_request() -> MetadataRequest:
    return MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name="orders"),
                MetadataRequest.MetadataRequestTopic(topic_id=TOPIC_ID, name="payments")],
        allow_auto_topic_creation=False)


def metadata_response() -> MetadataResponse:
    part = MetadataResponse.MetadataResponsePartition(
        partition_index=3, leader_id=2, leader_epoch=7, replica_nodes=[1, 2, 3],
        isr_nodes=[2, 3], offline_replicas=[1])
    return MetadataResponse(
        throttle_time_ms=5,
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=1, host="b1", port=9092),
                 MetadataResponse.MetadataResponseBroker(node_id=2, host="b2", port=9093,
                                                         rack="r-ü")],
        cluster_id="clüster", controller_id=1,
        topics=[MetadataResponse.MetadataResponseTopic(name="orders", topic_id=TOPIC_ID,
                                                       partitions=[part],
                                                       topic_authorized_operations=0x1F8)])


def produce_request(acks: int = -1) -> ProduceRequest:
    data = ProduceRequest.PartitionProduceData(index=1, records=b"\x00" * 12 + b"batch-bytes")
    return ProduceRequest(transactional_id="tx-1", acks=acks, timeout_ms=30_000,
                          topic_data=[ProduceRequest.TopicProduceData(name="orders",
                                                                      partition_data=[data])])


def produce_response() -> ProduceResponse:
    part = ProduceResponse.PartitionProduceResponse(
        index=1, error_code=0, base_offset=1234, log_append_time_ms=-1, log_start_offset=0,
        current_leader=ProduceResponse.LeaderIdAndEpoch(leader_id=2, leader_epoch=9))
    return ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(
        name="orders", partition_responses=[part])], throttle_time_ms=1)


def fetch_request() -> FetchRequest:
    part = FetchRequest.FetchPartition(partition=0, current_leader_epoch=4, fetch_offset=99,
                                       partition_max_bytes=1 << 20)
    return FetchRequest(max_wait_ms=500, min_bytes=1, max_bytes=50 << 20, isolation_level=1,
                        session_id=0, session_epoch=-1,
                        topics=[FetchRequest.FetchTopic(topic="orders", topic_id=TOPIC_ID,
                                                        partitions=[part])],
                        rack_id="rack-a", cluster_id="c1")


def fetch_response() -> FetchResponse:
    part = FetchResponse.PartitionData(
        partition_index=0, high_watermark=120, last_stable_offset=120, log_start_offset=0,
        aborted_transactions=None, records=b"\x01\x02records",
        current_leader=FetchResponse.LeaderIdAndEpoch(leader_id=1, leader_epoch=4))
    return FetchResponse(session_id=77, responses=[FetchResponse.FetchableTopicResponse(
        topic="orders", topic_id=TOPIC_ID, partitions=[part])])


def join_group_request() -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id="billing", session_timeout_ms=10_000, rebalance_timeout_ms=60_000,
        member_id="", group_instance_id="static-1", protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01"),
                   JoinGroupRequest.JoinGroupRequestProtocol(name="sticky", metadata=b"")],
        reason="joining")


def join_group_response() -> JoinGroupResponse:
    return JoinGroupResponse(
        generation_id=3, protocol_type="consumer", protocol_name="range", leader="m-1",
        member_id="m-1", members=[JoinGroupResponse.JoinGroupResponseMember(
            member_id="m-1", group_instance_id=None, metadata=b"meta")])


def offset_commit_request() -> OffsetCommitRequest:
    part = OffsetCommitRequest.OffsetCommitRequestPartition(
        partition_index=0, committed_offset=42, committed_leader_epoch=3,
        committed_metadata=None)
    return OffsetCommitRequest(group_id="billing", generation_id_or_member_epoch=3,
                               member_id="m-1", topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
                                   name="orders", partitions=[part])])


def offset_commit_response() -> OffsetCommitResponse:
    return OffsetCommitResponse(topics=[OffsetCommitResponse.OffsetCommitResponseTopic(
        name="orders", partitions=[OffsetCommitResponse.OffsetCommitResponsePartition(
            partition_index=0, error_code=0)])])


def api_versions_response() -> ApiVersionsResponse:
    return ApiVersionsResponse(api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=0, min_version=3, max_version=11),
        ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)],
        finalized_features_epoch=5)


# (request, version, response): non-flexible and flexible versions, both header kinds.
EXCHANGES: list[tuple[Message, int, Message]] = [
    (ApiVersionsRequest(client_software_name="kafka-sdk", client_software_version="0.1"), 3,
     api_versions_response()),
    (ApiVersionsRequest(), 0, ApiVersionsResponse(api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=3, min_version=0, max_version=12)])),
    (metadata_request(), 12, metadata_response()),
    (metadata_request(), 4, metadata_response()),
    (produce_request(), 9, produce_response()),
    (produce_request(), 7, produce_response()),
    (fetch_request(), 13, fetch_response()),
    (fetch_request(), 11, fetch_response()),
    (join_group_request(), 7, join_group_response()),
    (offset_commit_request(), 8, offset_commit_response()),
    (FindCoordinatorRequest(key_type=0, coordinator_keys=["billing", "ads"]), 4,
     FindCoordinatorResponse(coordinators=[FindCoordinatorResponse.Coordinator(
         key="billing", node_id=2, host="b2", port=9093, error_message=None)])),
]


def projected(msg: Message, version: int) -> Message:
    """The message as the peer sees it at ``version`` (fields absent there at default)."""
    return type(msg).decode(msg.encode(version), version)


def client_stream(framing: ClientFraming) -> tuple[list[int], bytes]:
    cids, data = [], b""
    for request, version, _ in EXCHANGES:
        cid, frame = framing.encode_request(request, version)
        cids.append(cid)
        data += frame
    return cids, data


def server_replies(received: list[ReceivedRequest]) -> bytes:
    out = b""
    for rr, (_, _version, response) in zip(received, EXCHANGES):
        out += ServerFraming.encode_response(rr.api_key, rr.api_version, rr.correlation_id,
                                             response)
    return out


def check_requests(received: list[ReceivedRequest], cids: list[int]) -> None:
    assert [r.correlation_id for r in received] == cids
    for rr, (request, version, _) in zip(received, EXCHANGES):
        assert rr.error is None
        assert (rr.api_key, rr.api_version) == (request.API_KEY, version)
        assert rr.client_id == "sdk-test"
        assert rr.request == projected(request, version)


def check_responses(got: list[tuple[int, Message]], cids: list[int]) -> None:
    assert [cid for cid, _ in got] == cids
    for (_, response), (_, version, expected) in zip(got, EXCHANGES):
        assert response == projected(expected, version)


def feed_in_pieces(feed: Any, data: bytes, cuts: list[int]) -> list[Any]:
    out: list[Any] = []
    prev = 0
    for cut in [*cuts, len(data)]:
        out += feed(data[prev:cut])
        prev = cut
    return out


# ----------------------------------------------------------------------------- round trips


def test_pipelined_exchange_whole_stream() -> None:
    client, server = ClientFraming(client_id="sdk-test"), ServerFraming()
    cids, data = client_stream(client)
    assert len(set(cids)) == len(cids)
    received = server.feed(data)
    check_requests(received, cids)
    assert client.in_flight == len(EXCHANGES)
    check_responses(client.feed(server_replies(received)), cids)
    assert client.in_flight == 0


def test_one_byte_at_a_time() -> None:
    client, server = ClientFraming(client_id="sdk-test"), ServerFraming()
    cids, data = client_stream(client)
    received = feed_in_pieces(server.feed, data, list(range(1, len(data))))
    check_requests(received, cids)
    replies = server_replies(received)
    check_responses(feed_in_pieces(client.feed, replies, list(range(1, len(replies)))), cids)


def test_split_at_every_position() -> None:
    client = ClientFraming(client_id="sdk-test")
    cids, data = client_stream(client)
    replies = server_replies(ServerFraming().feed(data))
    for cut in range(len(data) + 1):
        check_requests(feed_in_pieces(ServerFraming().feed, data, [cut]), cids)
    for cut in range(len(replies) + 1):
        fresh = ClientFraming(client_id="sdk-test")
        fresh_cids, _ = client_stream(fresh)
        check_responses(feed_in_pieces(fresh.feed, replies, [cut]), fresh_cids)


def test_frame_buffer_keeps_partial_frames() -> None:
    buf = FrameBuffer()
    assert buf.feed(b"\x00\x00\x00\x03ab") == []
    assert buf.pending_bytes == 6
    assert buf.feed(b"c\x00\x00\x00\x00\x00") == [b"abc", b""]
    assert buf.pending_bytes == 1


@given(st.lists(st.binary(max_size=300), min_size=1, max_size=6), st.data())
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
def test_frame_buffer_cuts_any_chunking(payloads: list[bytes], data: st.DataObject) -> None:
    """Frames come out whole and in order however the stream is cut, even when a chunk
    handed in as a bytearray is overwritten afterwards (a frame spanning chunks is held as
    views until its last byte: they must not see the caller's buffer change)."""
    stream = b"".join(struct.pack(">i", len(p)) + p for p in payloads)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    buf = FrameBuffer()
    out: list[bytes] = []
    for lo, hi in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        chunk = bytearray(stream[lo:hi])
        out += buf.feed(chunk)
        chunk[:] = b"\xff" * len(chunk)
    assert out == payloads
    assert all(type(f) is bytes for f in out)
    assert buf.pending_bytes == 0


def test_correlation_ids_increase_and_wrap() -> None:
    client = ClientFraming()
    assert [client.next_correlation_id() for _ in range(3)] == [0, 1, 2]
    client._next_id = 0x7FFFFFFF  # the last positive int32: the next id wraps to 0
    assert client.next_correlation_id() == 0x7FFFFFFF
    assert client.next_correlation_id() == 0


def test_responses_are_matched_by_correlation_id_not_arrival_slot() -> None:
    client = ClientFraming()
    cid_a, _ = client.encode_request(metadata_request(), 12)
    cid_b, _ = client.encode_request(ApiVersionsRequest(), 0)
    meta = ServerFraming.encode_response(3, 12, cid_a, metadata_response())
    versions = ServerFraming.encode_response(18, 0, cid_b, ApiVersionsResponse())
    got = client.feed(meta + versions)
    assert [(cid, type(r)) for cid, r in got] == [(cid_a, MetadataResponse),
                                                  (cid_b, ApiVersionsResponse)]


def test_unknown_correlation_id_is_malformed() -> None:
    client = ClientFraming()
    client.encode_request(ApiVersionsRequest(), 0)
    stray = ServerFraming.encode_response(18, 0, 12345, ApiVersionsResponse())
    with pytest.raises(MalformedDataError, match="12345"):
        client.feed(stray)


def test_forgotten_request_reply_is_unknown() -> None:
    client = ClientFraming()
    cid, _ = client.encode_request(ApiVersionsRequest(), 0)
    client.forget(cid)
    assert client.in_flight == 0
    with pytest.raises(MalformedDataError):
        client.feed(ServerFraming.encode_response(18, 0, cid, ApiVersionsResponse()))


# ----------------------------------------------------------------------------- headers


def test_api_versions_v3_response_uses_header_v0() -> None:
    frame = ServerFraming.encode_response(18, 3, 7, api_versions_response())
    body = api_versions_response().encode(3)
    assert frame == struct.pack(">ii", 4 + len(body), 7) + body  # no header tag byte


def test_flexible_responses_use_header_v1() -> None:
    frame = ServerFraming.encode_response(3, 12, 7, metadata_response())
    body = metadata_response().encode(12)
    assert frame == struct.pack(">ii", 5 + len(body), 7) + b"\x00" + body


def test_non_flexible_responses_use_header_v0() -> None:
    frame = ServerFraming.encode_response(3, 8, 7, metadata_response())
    body = metadata_response().encode(8)
    assert frame == struct.pack(">ii", 4 + len(body), 7) + body


def test_flexible_request_header_keeps_int16_client_id() -> None:
    _, frame = ClientFraming(client_id="ab").encode_request(metadata_request(), 12)
    # size, key 3, version 12, cid 0, client id as int16 length + bytes, empty header tags
    assert frame[4:17] == bytes.fromhex("0003 000c 00000000 0002 6162 00")


def test_null_client_id_round_trips() -> None:
    _, frame = ClientFraming(client_id=None).encode_request(metadata_request(), 12)
    assert frame[12:14] == b"\xff\xff"
    (rr,) = ServerFraming().feed(frame)
    assert rr.client_id is None and rr.request == projected(metadata_request(), 12)


def test_api_versions_v0_fallback_body_is_read() -> None:
    """A broker that does not know the ApiVersions version we sent answers UNSUPPORTED_VERSION
    with a v0 body (KIP-511); the client must read it to learn the broker's range."""
    client = ClientFraming()
    cid, _ = client.encode_request(
        ApiVersionsRequest(client_software_name="kafka-sdk", client_software_version="0.1"), 4)
    fallback = ApiVersionsResponse(error_code=35, api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=2)])
    ((got_cid, response),) = client.feed(ServerFraming.encode_response(18, 0, cid, fallback))
    assert got_cid == cid
    assert response.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(18, 0, 2)]


# ----------------------------------------------------------------------------- acks=0


def test_stray_reply_to_acks0_produce_is_dropped() -> None:
    client, server = ClientFraming(), ServerFraming()
    cid0, f0 = client.encode_request(produce_request(acks=0), 9, expect_response=False)
    cid1, f1 = client.encode_request(metadata_request(), 12)
    cid2, f2 = client.encode_request(produce_request(acks=0), 9, expect_response=False)
    cid3, f3 = client.encode_request(produce_request(acks=1), 9)
    assert client.in_flight == 2
    assert [r.correlation_id for r in server.feed(f0 + f1 + f2 + f3)] == [cid0, cid1, cid2, cid3]
    # tansu answers the acks=0 produces too; those replies must not shift the others.
    replies = b"".join([
        ServerFraming.encode_response(0, 9, cid0, produce_response()),
        ServerFraming.encode_response(3, 12, cid1, metadata_response()),
        ServerFraming.encode_response(0, 9, cid2, produce_response()),
        ServerFraming.encode_response(0, 9, cid3, produce_response()),
    ])
    got = feed_in_pieces(client.feed, replies, list(range(1, len(replies))))
    assert [cid for cid, _ in got] == [cid1, cid3]
    assert got[0][1] == projected(metadata_response(), 12)
    assert got[1][1] == projected(produce_response(), 9)
    assert client.in_flight == 0


def test_silent_acks0_produce_does_not_block_later_replies() -> None:
    client = ClientFraming()
    cid0, _ = client.encode_request(produce_request(acks=0), 9, expect_response=False)
    cid1, _ = client.encode_request(metadata_request(), 12)
    # A real Kafka broker never answers cid0; the next reply is cid1's.
    got = client.feed(ServerFraming.encode_response(3, 12, cid1, metadata_response()))
    assert [cid for cid, _ in got] == [cid1]
    assert client.in_flight == 0
    # cid0 was retired when a later reply arrived, so a reply to it now is out of order.
    with pytest.raises(MalformedDataError):
        client.feed(ServerFraming.encode_response(0, 9, cid0, produce_response()))


# ----------------------------------------------------------------------------- bad frames


@pytest.mark.parametrize("size", [-1, -(2**31), 101])
def test_oversized_or_negative_request_frame(size: int) -> None:
    server = ServerFraming(max_request_bytes=100)
    with pytest.raises(MalformedDataError, match="frame size"):
        server.feed(struct.pack(">i", size) + b"\x00" * 8)


def test_frame_of_exactly_the_limit_is_accepted() -> None:
    _, frame = ClientFraming().encode_request(ApiVersionsRequest(), 0)
    assert ServerFraming(max_request_bytes=len(frame) - 4).feed(frame)[0].api_key == 18
    with pytest.raises(MalformedDataError):
        ServerFraming(max_request_bytes=len(frame) - 5).feed(frame)


def test_oversized_response_frame() -> None:
    client = ClientFraming(max_frame_bytes=1000)
    client.encode_request(ApiVersionsRequest(), 0)
    with pytest.raises(MalformedDataError, match="frame size"):
        client.feed(struct.pack(">i", 1001))


@pytest.mark.parametrize("payload", [b"", b"\x00\x03", b"\x00\x03\x00\x01\x00\x00\x00"])
def test_request_frame_shorter_than_a_header(payload: bytes) -> None:
    with pytest.raises(MalformedDataError):
        ServerFraming().feed(struct.pack(">i", len(payload)) + payload)


def test_response_frame_shorter_than_a_header() -> None:
    client = ClientFraming()
    client.encode_request(ApiVersionsRequest(), 0)
    with pytest.raises(MalformedDataError):
        client.feed(b"\x00\x00\x00\x02\x00\x00")


def test_unknown_api_key_is_returned_undecoded() -> None:
    payload = struct.pack(">hhi", 999, 0, 31) + b"\x00\x03cli" + b"body"
    (rr,) = ServerFraming().feed(struct.pack(">i", len(payload)) + payload)
    assert rr.request is None and rr.error is not None and "999" in rr.error
    assert (rr.api_key, rr.api_version, rr.correlation_id, rr.client_id) == (999, 0, 31, "cli")
    assert rr.body[rr.body_offset:] == b"body"


@pytest.mark.parametrize("version", [99, -1])
def test_unknown_api_version_is_returned_undecoded(version: int) -> None:
    payload = struct.pack(">hhi", 3, version, 8) + b"\x00\x01x" + b"\x07\x07"
    good_cid, good = ClientFraming().encode_request(ApiVersionsRequest(), 0)
    bad, ok = ServerFraming().feed(struct.pack(">i", len(payload)) + payload + good)
    assert bad.request is None and bad.error is not None and str(version) in bad.error
    assert (bad.api_key, bad.api_version, bad.correlation_id, bad.client_id) == (3, version, 8, "x")
    assert ok.request == ApiVersionsRequest() and ok.correlation_id == good_cid


def test_truncated_body_is_malformed_not_index_error() -> None:
    _, frame = ClientFraming(client_id="c").encode_request(fetch_request(), 13)
    payload = frame[4:]
    for cut in range(8, len(payload)):
        short = payload[:cut]
        with pytest.raises(MalformedDataError):
            ServerFraming().feed(struct.pack(">i", len(short)) + short)


def _valid_request_frames() -> list[bytes]:
    client = ClientFraming(client_id="fuzz")
    return [client.encode_request(req, v)[1] for req, v, _ in EXCHANGES]


VALID_FRAMES = _valid_request_frames()
FUZZ = settings(max_examples=300, deadline=None, derandomize=True,
                suppress_health_check=list(HealthCheck))


@st.composite
def mutated_frames(draw: st.DrawFn) -> bytes:
    """A valid request frame, then truncated / bytes flipped / bytes inserted; the size prefix
    is usually fixed up so the server really parses the damaged body."""
    payload = bytearray(draw(st.sampled_from(VALID_FRAMES))[4:])
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["truncate", "flip", "insert", "delete"]))
        pos = draw(st.integers(0, max(len(payload) - 1, 0)))
        if kind == "truncate":
            del payload[pos:]
        elif kind == "flip" and payload:
            payload[pos] = draw(st.integers(0, 255))
        elif kind == "insert":
            payload[pos:pos] = draw(st.binary(min_size=1, max_size=6))
        elif payload:
            del payload[pos:pos + draw(st.integers(1, 6))]
    size = len(payload) if draw(st.booleans()) or not payload else draw(
        st.integers(-5, len(payload) + 5))
    return struct.pack(">i", size) + bytes(payload)


@FUZZ
@given(mutated_frames())
def test_server_fuzz_only_malformed_data_error(data: bytes) -> None:
    try:
        received = ServerFraming(max_request_bytes=1 << 16).feed(data)
    except MalformedDataError:
        return
    for rr in received:
        assert isinstance(rr, ReceivedRequest)
        assert (rr.request is None) == (rr.error is not None)


@st.composite
def mutated_responses(draw: st.DrawFn) -> tuple[int, int, bytes]:
    index = draw(st.integers(0, len(EXCHANGES) - 1))
    _, version, response = EXCHANGES[index]
    frame = bytearray(ServerFraming.encode_response(response.API_KEY, version, 0, response))
    body = frame[8:]
    for _ in range(draw(st.integers(1, 3))):
        pos = draw(st.integers(0, max(len(body) - 1, 0)))
        if draw(st.booleans()):
            del body[pos:]
        elif body:
            body[pos] = draw(st.integers(0, 255))
    payload = frame[4:8] + body
    return index, version, struct.pack(">i", len(payload)) + bytes(payload)


@FUZZ
@given(mutated_responses())
def test_client_fuzz_only_malformed_data_error(case: tuple[int, int, bytes]) -> None:
    index, version, data = case
    client = ClientFraming()
    client.encode_request(EXCHANGES[index][0], version)
    try:
        got = client.feed(data)
    except MalformedDataError:
        return
    assert len(got) == 1 and got[0][0] == 0
