"""Golden bytes: our codecs against three independent encoders of the same messages.

Peers (all encode and decode in pure Python, so they are a fair byte-level reference):

- kafka-python 3.0.12, JSON-schema classes (``kafka.protocol.*``): every version both sides
  define, flexible versions and tagged fields included.
- kafka-python 3.0.12, hand-written structs (``kafka.protocol.old``): positional schemas.
- aiokafka 0.14.0, hand-written structs (``aiokafka.protocol``): positional schemas.

Messages are filled deterministically with non-default values, driven by kafka-python's field
metadata (which fields exist, are nullable or tagged at a version): multi-byte UTF-8 strings,
nested arrays, negative numbers, UUIDs, and a second variant with every nullable field null.
Their schemas carry a few fields that ours (an older schema snapshot) lack; those only exist at
versions above ours and are never filled.
"""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from sdk.protocol.framing import ClientFraming, ServerFraming
from sdk.protocol.message import Message
from sdk.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from sdk.protocol.messages.fetch import FetchRequest, FetchResponse
from sdk.protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from sdk.protocol.messages.headers import RequestHeader, ResponseHeader
from sdk.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from sdk.protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from sdk.protocol.messages.metadata import MetadataRequest, MetadataResponse
from sdk.protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from sdk.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from sdk.protocol.messages.produce import ProduceRequest, ProduceResponse
from sdk.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse

kp_api_header = pytest.importorskip("kafka.protocol.api_header",
                                    reason="kafka-python 3.x (test extra) is not installed")
aiokafka_api = pytest.importorskip("aiokafka.protocol.api",
                                   reason="aiokafka (test extra) is not installed")

OURS: list[type[Message]] = [
    ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse,
    ProduceRequest, ProduceResponse, FetchRequest, FetchResponse,
    ListOffsetsRequest, ListOffsetsResponse, FindCoordinatorRequest, FindCoordinatorResponse,
    JoinGroupRequest, JoinGroupResponse, SyncGroupRequest, SyncGroupResponse,
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
]

# kafka-python JSON classes: module holding each of our classes (same class names).
KP_MODULE = {
    "ApiVersions": "kafka.protocol.metadata", "Metadata": "kafka.protocol.metadata",
    "FindCoordinator": "kafka.protocol.metadata", "Produce": "kafka.protocol.producer",
    "Fetch": "kafka.protocol.consumer", "ListOffsets": "kafka.protocol.consumer",
    "JoinGroup": "kafka.protocol.consumer", "SyncGroup": "kafka.protocol.consumer",
    "OffsetCommit": "kafka.protocol.consumer", "OffsetFetch": "kafka.protocol.consumer",
}
# Hand-written peers: (module, class-name stem) per API; classes are ``<stem>Request_v<N>``.
OLD_PEER = {
    "ApiVersions": ("kafka.protocol.old.api_versions", "ApiVersions"),
    "Metadata": ("kafka.protocol.old.metadata", "Metadata"),
    "Produce": ("kafka.protocol.old.produce", "Produce"),
    "Fetch": ("kafka.protocol.old.fetch", "Fetch"),
    "ListOffsets": ("kafka.protocol.old.list_offsets", "ListOffsets"),
    "FindCoordinator": ("kafka.protocol.old.find_coordinator", "FindCoordinator"),
    "JoinGroup": ("kafka.protocol.old.group", "JoinGroup"),
    "SyncGroup": ("kafka.protocol.old.group", "SyncGroup"),
    "OffsetCommit": ("kafka.protocol.old.commit", "OffsetCommit"),
    "OffsetFetch": ("kafka.protocol.old.commit", "OffsetFetch"),
}
AIOKAFKA_PEER = {
    "ApiVersions": ("aiokafka.protocol.admin", "ApiVersion"),
    "Metadata": ("aiokafka.protocol.metadata", "Metadata"),
    "Produce": ("aiokafka.protocol.produce", "Produce"),
    "Fetch": ("aiokafka.protocol.fetch", "Fetch"),
    "ListOffsets": ("aiokafka.protocol.offset", "Offset"),
    "FindCoordinator": ("aiokafka.protocol.coordination", "FindCoordinator"),
    "JoinGroup": ("aiokafka.protocol.group", "JoinGroup"),
    "SyncGroup": ("aiokafka.protocol.group", "SyncGroup"),
    "OffsetCommit": ("aiokafka.protocol.commit", "OffsetCommit"),
    "OffsetFetch": ("aiokafka.protocol.commit", "OffsetFetch"),
}
# kafka-python renames Metadata's two authorized-operations fields (and makes them bit sets).
AUTH_OPS_NAMES = ("cluster_authorized_operations", "topic_authorized_operations")
INT32_MIN = -(2**31)


def api_and_kind(cls: type[Message]) -> tuple[str, str]:
    name = cls.__name__
    kind = "Request" if name.endswith("Request") else "Response"
    return name[: -len(kind)], kind


def kp_class(cls: type[Message]) -> Any:
    api, _ = api_and_kind(cls)
    return getattr(importlib.import_module(KP_MODULE[api]), cls.__name__)


def our_attr(obj_or_cls: Any, kp_name: str) -> str:
    if kp_name == "authorized_operations":
        names = set(obj_or_cls.field_names())
        return next(n for n in AUTH_OPS_NAMES if n in names)
    return kp_name


def in_version(kp_struct: Any, version: int) -> Iterator[Any]:
    return (f for f in kp_struct._fields if f.for_version_q(version))


# ----------------------------------------------------------------------------- filling


class Filler:
    """Builds one of our messages with a distinct non-default value in every in-version field.

    ``nulls``: nullable fields get None. ``tags``: tagged fields are filled (else default).
    """

    def __init__(self, top: type[Message], version: int, *, nulls: bool, tags: bool) -> None:
        self.top = top
        self.version = version
        self.nulls = nulls
        self.tags = tags
        self.n = 0

    def message(self) -> Message:
        return self.struct(kp_class(self.top)._struct, self.top, 0)

    def struct(self, kp_struct: Any, cls: type, depth: int) -> Any:
        kwargs: dict[str, Any] = {}
        for f in in_version(kp_struct, self.version):
            if f.tagged_field_q(self.version) and not self.tags:
                continue
            kwargs[our_attr(cls, f.name)] = self.value(f, depth)
        return cls(**kwargs)

    def value(self, f: Any, depth: int) -> Any:
        if self.nulls and f.nullable_for_version_q(self.version):
            return None
        if f.is_struct_array():
            elem = getattr(self.top, f.type_str)
            count = 2 if depth < 2 else 1
            return [self.struct(f.array_of, elem, depth + 1) for _ in range(count)]
        if f.is_struct():
            return self.struct(f, getattr(self.top, f.type_str), depth + 1)
        if f.is_array():
            return [self.scalar(f.array_of) for _ in range(3)]
        return self.scalar(f)

    def scalar(self, f: Any) -> Any:
        self.n += 1
        n = self.n
        sign = -1 if n % 4 == 3 else 1
        t = f.type_str
        if t == "int8":
            return sign * (n % 100 + 1)
        if t == "int16":
            return sign * (300 + n)
        if t == "uint16":
            return 65000 - n
        if t == "int32":
            return sign * (70_000 + 1009 * n)
        if t == "int64":
            return sign * (5_000_000_000 + n)
        if t == "float64":
            return 0.5 + n
        if t == "bool":
            return not f.default
        if t == "string":
            return f"{f.name}-{n}-é✓"  # multi-byte UTF-8: lengths count bytes, not chars
        if t in ("bytes", "records"):
            return bytes([0, 255, n % 256]) + b"payload" * (n % 3 + 1)
        if t == "uuid":
            return uuid.UUID(int=(n << 64) | 0xABCDEF)
        if t == "bitfield":  # kafka-python's view of Metadata's authorized-operations int32
            return (1 << 3) | (1 << 5) | (1 << (n % 20 + 8))
        raise AssertionError(f"no filler for type {t}")


# ----------------------------------------------------------------------------- converters


def to_kp(obj: Any, kp_struct: Any, kp_cls: Any, version: int, top: bool = False) -> Any:
    """Our dataclass -> kafka-python DataContainer (by field name)."""
    kwargs = {}
    for f in in_version(kp_struct, version):
        value = getattr(obj, our_attr(obj, f.name))
        kwargs[f.name] = _kp_value(value, f, version)
    return kp_cls(version=version, **kwargs) if top else kp_cls(**kwargs)


def _kp_value(value: Any, f: Any, version: int) -> Any:
    if value is None:
        return None
    if f.is_struct_array():
        return [to_kp(v, f.array_of, f.data_class, version) for v in value]
    if f.is_struct():
        return to_kp(value, f, f.data_class, version)
    if f.type_str == "bitfield":
        return None if value == INT32_MIN else {b for b in range(32) if value >> b & 1}
    return value


def from_kp(kp_obj: Any, kp_struct: Any, cls: type, top: type, version: int) -> Any:
    """kafka-python DataContainer -> our dataclass (fields absent at ``version`` stay default)."""
    kwargs: dict[str, Any] = {}
    for f in in_version(kp_struct, version):
        value = getattr(kp_obj, f.name)
        attr = our_attr(cls, f.name)
        if value is None and f.is_struct():
            continue  # a tagged struct left out: our default instance
        if f.is_struct_array() and value is not None:
            elem = getattr(top, f.type_str)
            value = [from_kp(v, f.array_of, elem, top, version) for v in value]
        elif f.is_struct():
            value = from_kp(value, f, getattr(top, f.type_str), top, version)
        elif f.type_str == "bitfield":
            value = INT32_MIN if value is None else sum(1 << b for b in value)
        elif f.type_str == "uuid" and value is None:
            value = uuid.UUID(int=0)
        elif isinstance(value, memoryview):
            value = bytes(value)
        kwargs[attr] = value
    return cls(**kwargs)


def is_tag_section(peer_type: Any) -> bool:
    return getattr(peer_type, "__name__", "") == "TaggedFields"


def to_positional(obj: Any, kp_struct: Any, schema: Any, version: int) -> tuple[Any, ...]:
    """Our dataclass -> the tuple a hand-written peer schema expects (by position)."""
    ours = [f for f in in_version(kp_struct, version) if not f.tagged_field_q(version)]
    out: list[Any] = []
    it = iter(ours)
    for name, peer_type in zip(schema.names, schema.fields):
        if is_tag_section(peer_type):
            out.append({})  # only messages without tagged values go to these peers
            continue
        f = next(it, None)
        assert f is not None, f"peer field {name!r} has no counterpart in our v{version} layout"
        out.append(_positional_value(getattr(obj, our_attr(obj, f.name)), f, peer_type, version))
    rest = list(it)
    assert not rest, f"peer layout lacks our fields {[f.name for f in rest]} at v{version}"
    return tuple(out)


def _positional_value(value: Any, f: Any, peer_type: Any, version: int) -> Any:
    if value is None:
        return None
    if f.is_struct_array():
        inner = peer_type.array_of
        if not hasattr(inner, "names"):
            # The peer flattens a one-field struct into its value (Metadata v0-8 topic names).
            (only,) = [g for g in in_version(f.array_of, version) if not g.tagged_field_q(version)]
            return [getattr(v, our_attr(v, only.name)) for v in value]
        return [to_positional(v, f.array_of, inner, version) for v in value]
    if f.is_struct():
        return to_positional(value, f, peer_type, version)
    if getattr(peer_type, "__name__", "") == "BitField":
        return None if value == INT32_MIN else {b for b in range(32) if value >> b & 1}
    return value


# ----------------------------------------------------------------------------- cases


def peer_decodable(msg: Message) -> Message:
    """Both kafka-python stacks read an ApiVersions response with an error as v0 (the broker's
    answer to an unsupported version), so their decoders get error_code 0."""
    if isinstance(msg, ApiVersionsResponse):
        return ApiVersionsResponse(**{n: getattr(msg, n) for n in msg.field_names()
                                      if n != "error_code"})
    return msg


def shared_versions(cls: type[Message]) -> range:
    kp = kp_class(cls)
    return range(cls.MIN_VERSION, min(cls.MAX_VERSION, kp.max_version) + 1)


def peer_classes(peers: dict[str, tuple[str, str]]) -> list[tuple[type[Message], int, Any]]:
    out = []
    for cls in OURS:
        api, kind = api_and_kind(cls)
        mod_name, stem = peers[api]
        mod: ModuleType = importlib.import_module(mod_name)
        for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1):
            peer = getattr(mod, f"{stem}{kind}_v{v}", None)
            if peer is not None:
                out.append((cls, v, peer))
    return out


KP_CASES = [(cls, v) for cls in OURS for v in shared_versions(cls)]
OLD_CASES = peer_classes(OLD_PEER)
# aiokafka declares ListOffsetsRequest v4/v5 current_leader_epoch as int64; Kafka's schema
# (and kafka-python) say int32. Checked separately below instead of compared byte for byte.
AIOKAFKA_WRONG = {(ListOffsetsRequest, 4), (ListOffsetsRequest, 5)}
AIO_CASES = [c for c in peer_classes(AIOKAFKA_PEER) if (c[0], c[1]) not in AIOKAFKA_WRONG]
VARIANTS = [pytest.param(False, id="values"), pytest.param(True, id="nulls")]


def case_id(cls: type, version: int) -> str:
    return f"{cls.__name__}-v{version}"


@pytest.mark.parametrize("nulls", VARIANTS)
@pytest.mark.parametrize(("cls", "version"), KP_CASES,
                         ids=[case_id(c, v) for c, v in KP_CASES])
def test_kafka_python_json_classes(cls: type[Message], version: int, nulls: bool) -> None:
    kp = kp_class(cls)
    msg = Filler(cls, version, nulls=nulls, tags=True).message()
    ours = msg.encode(version)
    theirs = to_kp(msg, kp._struct, kp, version, top=True).encode(version=version)
    assert ours == theirs
    assert cls.decode(theirs, version) == msg
    msg = peer_decodable(msg)
    back = from_kp(kp.decode(msg.encode(version), version=version), kp._struct, cls, cls, version)
    assert back == msg


def _positional_check(cls: type[Message], version: int, peer: Any) -> None:
    flexible = cls.is_flexible(version)
    for nulls in (False, True):
        # Hand-written flexible schemas keep tags as raw bytes: compare without tag values.
        msg = Filler(cls, version, nulls=nulls, tags=not flexible).message()
        ours = msg.encode(version)
        args = to_positional(msg, kp_class(cls)._struct, peer.SCHEMA, version)
        theirs = peer(*args).encode()
        assert ours == theirs, f"nulls={nulls}"
        assert cls.decode(theirs, version) == msg
        ours = peer_decodable(msg).encode(version)
        assert peer.decode(ours).encode() == ours


@pytest.mark.parametrize(("cls", "version", "peer"), OLD_CASES,
                         ids=[case_id(c, v) for c, v, _ in OLD_CASES])
def test_kafka_python_handwritten_structs(cls: type[Message], version: int, peer: Any) -> None:
    _positional_check(cls, version, peer)


@pytest.mark.parametrize(("cls", "version", "peer"), AIO_CASES,
                         ids=[case_id(c, v) for c, v, _ in AIO_CASES])
def test_aiokafka_handwritten_structs(cls: type[Message], version: int, peer: Any) -> None:
    _positional_check(cls, version, peer)


@pytest.mark.parametrize("version", [4, 5])
def test_aiokafka_list_offsets_v4_v5_differ_only_by_its_int64_leader_epoch(version: int) -> None:
    from aiokafka.protocol import offset

    msg = Filler(ListOffsetsRequest, version, nulls=False, tags=False).message()
    peer = getattr(offset, f"OffsetRequest_v{version}")
    theirs = peer(*to_positional(msg, kp_class(ListOffsetsRequest)._struct, peer.SCHEMA,
                                 version)).encode()
    ours = msg.encode(version)
    partitions = [p for t in msg.topics for p in t.partitions]
    assert len(theirs) - len(ours) == 4 * len(partitions)
    # Widening each partition's epoch to 8 bytes turns our bytes into theirs.
    pos = 4 + 1 + 4  # replica_id, isolation_level, topic count
    rebuilt = bytearray(ours[:pos])
    for topic in msg.topics:
        name_end = pos + 2 + len(topic.name.encode())
        rebuilt += ours[pos:name_end + 4]  # name and partition count
        pos = name_end + 4
        for part in topic.partitions:
            rebuilt += ours[pos:pos + 4]  # partition_index
            rebuilt += part.current_leader_epoch.to_bytes(8, "big", signed=True)
            rebuilt += ours[pos + 8:pos + 16]  # timestamp
            pos += 16
    assert pos == len(ours) and bytes(rebuilt) == theirs


def test_every_api_has_cases_from_every_peer() -> None:
    for cases in (KP_CASES, OLD_CASES, AIO_CASES):
        covered = {c[0] for c in cases}
        assert covered == set(OURS), sorted(c.__name__ for c in set(OURS) - covered)
    flexible = {(c, v) for c, v in KP_CASES if c.is_flexible(v)}
    assert {c for c, _ in flexible} == set(OURS)  # each API is checked in a flexible version


@pytest.mark.parametrize(("cls", "version"), [
    (ApiVersionsResponse, 3), (FetchRequest, 15), (FetchResponse, 16), (ProduceResponse, 10),
])
def test_tagged_fields_are_exercised(cls: type[Message], version: int) -> None:
    with_tags = Filler(cls, version, nulls=False, tags=True).message().encode(version)
    without = Filler(cls, version, nulls=False, tags=False).message().encode(version)
    assert len(with_tags) > len(without)


# ----------------------------------------------------------------------------- headers


@pytest.mark.parametrize("client_id", ["kafka-sdk", None, "", "clïent-✓"])
@pytest.mark.parametrize("flexible", [False, True])
def test_request_header_bytes(client_id: str | None, flexible: bool) -> None:
    from kafka.protocol.old.api import RequestHeader as OldHeader
    from kafka.protocol.old.api import RequestHeaderV2 as OldHeaderV2

    fields = {"request_api_key": 3, "request_api_version": 12 if flexible else 8,
              "correlation_id": 0x12345678, "client_id": client_id}
    ours = RequestHeader(**fields).encode(2 if flexible else 1)
    kp = kp_api_header.RequestHeader(**fields).encode(flexible=flexible)
    args = (fields["request_api_key"], fields["request_api_version"], fields["correlation_id"],
            client_id)
    old = (OldHeaderV2(*args, {}) if flexible else OldHeader(*args)).encode()
    assert ours == kp == old
    assert RequestHeader.decode(kp, 2 if flexible else 1) == RequestHeader(**fields)


def test_request_header_v0_and_aiokafka_headers() -> None:
    from aiokafka.protocol.metadata import MetadataRequest_v1

    ours_v1 = RequestHeader(request_api_key=3, request_api_version=1, correlation_id=99,
                            client_id="aio").encode(1)
    assert ours_v1 == aiokafka_api.RequestHeader_v1(MetadataRequest_v1(None), 99, "aio").encode()
    ours_v2 = RequestHeader(request_api_key=3, request_api_version=1, correlation_id=99,
                            client_id="aio").encode(2)
    assert ours_v2 == aiokafka_api.RequestHeader_v2(MetadataRequest_v1(None), 99, "aio").encode()
    # v0 (ControlledShutdown v0 only): no client id at all.
    assert RequestHeader(request_api_key=7, request_api_version=0, correlation_id=5).encode(0) \
        == bytes.fromhex("0007 0000 00000005")


@pytest.mark.parametrize("flexible", [False, True])
def test_response_header_bytes(flexible: bool) -> None:
    ours = ResponseHeader(correlation_id=-7).encode(1 if flexible else 0)
    kp = kp_api_header.ResponseHeader(correlation_id=-7).encode(flexible=flexible)
    aio_cls = aiokafka_api.ResponseHeader_v1 if flexible else aiokafka_api.ResponseHeader_v0
    aio = aio_cls(-7, {}).encode() if flexible else aio_cls(-7).encode()
    assert ours == kp == aio


# ----------------------------------------------------------------------------- whole frames


FRAME_CASES = [(ApiVersionsRequest, 0), (ApiVersionsRequest, 3), (MetadataRequest, 1),
               (MetadataRequest, 12), (ProduceRequest, 3), (ProduceRequest, 9),
               (FetchRequest, 4), (FetchRequest, 13), (JoinGroupRequest, 6),
               (OffsetFetchRequest, 8)]


@pytest.mark.parametrize(("cls", "version"), FRAME_CASES,
                         ids=[case_id(c, v) for c, v in FRAME_CASES])
def test_request_frame_matches_kafka_python(cls: type[Message], version: int) -> None:
    msg = Filler(cls, version, nulls=False, tags=True).message()
    framing = ClientFraming(client_id="sdk-golden")
    for _ in range(41):
        framing.next_correlation_id()
    cid, frame = framing.encode_request(msg, version)
    kp = kp_class(cls)
    theirs = to_kp(msg, kp._struct, kp, version, top=True)
    theirs.with_header(correlation_id=cid, client_id="sdk-golden")
    assert cid == 41
    assert frame == theirs.encode(version=version, header=True, framed=True)
    received = ServerFraming().feed(frame)
    assert len(received) == 1 and received[0].request == msg
    assert received[0].client_id == "sdk-golden" and received[0].correlation_id == cid


RESPONSE_FRAME_CASES = [(ApiVersionsResponse, 0), (ApiVersionsResponse, 3),
                        (ApiVersionsResponse, 4), (MetadataResponse, 9),
                        (MetadataResponse, 5), (FetchResponse, 12), (ProduceResponse, 10),
                        (SyncGroupResponse, 4), (FindCoordinatorResponse, 4)]


@pytest.mark.parametrize(("cls", "version"), RESPONSE_FRAME_CASES,
                         ids=[case_id(c, v) for c, v in RESPONSE_FRAME_CASES])
def test_response_frame_matches_kafka_python(cls: type[Message], version: int) -> None:
    msg = Filler(cls, version, nulls=False, tags=True).message()
    msg = peer_decodable(msg)
    ours = ServerFraming.encode_response(cls.API_KEY, version, 77, msg)
    kp = kp_class(cls)
    theirs = to_kp(msg, kp._struct, kp, version, top=True)
    theirs.with_header(correlation_id=77)
    # No version= here: kafka-python would copy it into the response header and fail.
    assert ours == theirs.encode(header=True, framed=True)
    client = ClientFraming()
    request_cls = getattr(importlib.import_module(type(msg).__module__),
                          cls.__name__.replace("Response", "Request"))
    for _ in range(77):
        client.next_correlation_id()
    cid, _ = client.encode_request(request_cls(), version)
    assert client.feed(ours) == [(cid, msg)]
