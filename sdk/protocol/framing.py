"""Sans-IO framing: size prefixes, headers and correlation ids, for both ends of a connection.

Nothing here touches a socket. A connection feeds received bytes in and writes out the bytes
these objects return, so the same code frames the SDK's connections and the reference broker.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from sdk.errors import MalformedDataError
from sdk.protocol.api import (
    API_TABLE,
    request_class,
    request_header_version,
    response_class,
    response_header_version,
)
from sdk.protocol.message import Message
from sdk.protocol.messages.headers import RequestHeader, ResponseHeader
from sdk.protocol.primitives import INT16, INT32

DEFAULT_MAX_FRAME = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default
API_VERSIONS_KEY = 18
UNSUPPORTED_VERSION = 35


class FrameBuffer:
    """Collects stream bytes and cuts them into size-prefixed frames.

    Each frame is copied once: a frame whole inside one chunk is sliced out of it, one
    spanning chunks is kept as views of them and joined when its last byte arrives. (An
    accumulating bytearray copied every byte in, then out again, and its growth faulted in
    fresh pages for each multi-megabyte fetch response.)
    """

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._head = b""  # 0..3 bytes of a size prefix cut by a chunk boundary
        self._parts: list[memoryview] = []  # the received part of the frame in progress
        self._need = -1  # bytes still missing from that frame; -1: reading a size prefix
        self._held = 0  # bytes in self._parts

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        if type(data) is not bytes:
            data = bytes(data)  # views are kept across calls: only of immutable bytes
        frames: list[bytes] = []
        n = len(data)
        pos = 0
        need = self._need
        while True:
            if need < 0:
                if self._head or n - pos < 4:
                    take = min(4 - len(self._head), n - pos)
                    self._head += data[pos:pos + take]
                    pos += take
                    if len(self._head) < 4:
                        break
                    (size,) = INT32.unpack(self._head)
                    self._head = b""
                else:
                    (size,) = INT32.unpack_from(data, pos)
                    pos += 4
                if size < 0 or size > self.max_frame_bytes:
                    raise MalformedDataError(
                        f"frame size {size} is outside 0..{self.max_frame_bytes} bytes"
                    )
                if n - pos >= size:  # whole in this chunk: one slice
                    frames.append(data[pos:pos + size])
                    pos += size
                    continue
                need = size
            take = min(need, n - pos)
            if take:
                self._parts.append(memoryview(data)[pos:pos + take])
                self._held += take
                pos += take
                need -= take
            if need:
                break
            frames.append(b"".join(self._parts))
            self._parts.clear()
            self._held = 0
            need = -1
        self._need = need
        return frames

    @property
    def pending_bytes(self) -> int:
        return len(self._head) + self._held + (4 if self._need >= 0 else 0)


def frame(payload: bytes | bytearray) -> bytes:
    return INT32.pack(len(payload)) + payload


# ----------------------------------------------------------------------------- client side


@dataclass(slots=True)
class _Pending:
    api_key: int
    version: int


# How many unanswered acks=0 requests are remembered. Kafka never answers them and tansu
# answers at once, so a window this size only bounds memory against Kafka.
SILENT_WINDOW = 65536


class ClientFraming:
    """Encodes requests with fresh correlation ids and matches responses to them.

    A request sent with ``expect_response=False`` (Produce with acks=0) is remembered so a
    broker that answers it anyway (tansu does) cannot shift the matching of later responses.
    """

    def __init__(self, client_id: str | None = None,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME) -> None:
        self.client_id = client_id
        self._frames = FrameBuffer(max_frame_bytes)
        self._next_id = 0
        self._pending: dict[int, _Pending] = {}
        self._silent: deque[int] = deque(maxlen=SILENT_WINDOW)  # acks=0 ids, oldest first

    def next_correlation_id(self) -> int:
        cid = self._next_id
        self._next_id = (cid + 1) & 0x7FFFFFFF
        return cid

    def encode_request(self, request: Message, version: int, *,
                       expect_response: bool = True) -> tuple[int, bytearray]:
        """Returns ``(correlation_id, frame)``; the frame is the caller's (not copied into
        ``bytes``: a Produce frame is mostly record batches)."""
        api_key = request.API_KEY
        cid = self.next_correlation_id()
        w = bytearray(b"\0\0\0\0")
        header = RequestHeader(request_api_key=api_key, request_api_version=version,
                               correlation_id=cid, client_id=self.client_id)
        header.encode_into(w, request_header_version(api_key, version))
        request.encode_into(w, version)
        INT32.pack_into(w, 0, len(w) - 4)
        if expect_response:
            self._pending[cid] = _Pending(api_key, version)
        else:
            self._silent.append(cid)
        return cid, w

    def forget(self, correlation_id: int) -> None:
        """Stop waiting for a response (after a timeout the connection is usually closed)."""
        self._pending.pop(correlation_id, None)

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def feed(self, data: bytes) -> list[tuple[int, Message]]:
        """Decode every complete response in ``data``: ``[(correlation_id, response)]``."""
        out: list[tuple[int, Message]] = []
        for payload in self._frames.feed(data):
            if len(payload) < 4:
                raise MalformedDataError(f"response frame of {len(payload)} bytes has no header")
            (cid,) = INT32.unpack_from(payload, 0)
            pending = self._pending.pop(cid, None)
            silent = self._silent
            # Responses come in request order, so acks=0 requests older than this one
            # will never be answered: forget them.
            while silent and silent[0] < cid:
                silent.popleft()
            if pending is None:
                if silent and silent[0] == cid:
                    silent.popleft()
                    continue  # a stray reply to an acks=0 produce: drop it
                raise MalformedDataError(f"response with unknown correlation id {cid}")
            pos = 4 if response_header_version(pending.api_key, pending.version) == 0 else 0
            if pos == 0:
                _header, pos = ResponseHeader.decode_from(payload, 0, 1)
            cls = response_class(pending.api_key)
            if pending.api_key == API_VERSIONS_KEY:
                response = _decode_api_versions(cls, payload, pos, pending.version)
            else:
                response, _ = cls.decode_from(payload, pos, pending.version)
            out.append((cid, response))
        return out


def _decode_api_versions(cls: type[Message], payload: bytes, pos: int, version: int) -> Message:
    """A broker that does not know our ApiVersions version answers UNSUPPORTED_VERSION in a
    v0 body listing its ranges (KIP-511); read that, and fall back to v0 if the body does not
    decode at the version we sent."""
    if len(payload) >= pos + 2 and INT16.unpack_from(payload, pos)[0] == UNSUPPORTED_VERSION:
        return cls.decode_from(payload, pos, 0)[0]
    try:
        return cls.decode_from(payload, pos, version)[0]
    except MalformedDataError:
        if version == 0:
            raise
        return cls.decode_from(payload, pos, 0)[0]


# ----------------------------------------------------------------------------- server side


@dataclass(slots=True)
class ReceivedRequest:
    """A request as the server reads it. ``request`` is None when the key or version is
    unknown; the body is then left undecoded so the server can still answer with an error."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    request: Message | None
    body: bytes
    body_offset: int
    error: str | None = None


class ServerFraming:
    """Cuts a request stream into decoded requests and encodes the responses."""

    def __init__(self, max_request_bytes: int = DEFAULT_MAX_FRAME) -> None:
        self._frames = FrameBuffer(max_request_bytes)

    def feed(self, data: bytes) -> list[ReceivedRequest]:
        return [self.parse(payload) for payload in self._frames.feed(data)]

    @staticmethod
    def parse(payload: bytes) -> ReceivedRequest:
        if len(payload) < 8:
            raise MalformedDataError(f"request frame of {len(payload)} bytes has no header")
        (api_key,) = INT16.unpack_from(payload, 0)
        (version,) = INT16.unpack_from(payload, 2)
        (cid,) = INT32.unpack_from(payload, 4)
        row = API_TABLE.get(api_key)
        known = row is not None and row[3] <= version <= row[4]
        # An unknown version is still read with the v1 header so the server can reply.
        header_version = request_header_version(api_key, version) if known else 1
        header, pos = RequestHeader.decode_from(payload, 0, header_version)
        if not known:
            what = "API key" if row is None else f"version for API key {api_key}:"
            return ReceivedRequest(api_key, version, cid, header.client_id, None, payload, pos,
                                   error=f"unsupported {what} {version if row else api_key}")
        request, _ = request_class(api_key).decode_from(payload, pos, version)
        return ReceivedRequest(api_key, version, cid, header.client_id, request, payload, pos)

    @staticmethod
    def encode_response(api_key: int, version: int, correlation_id: int, response: Any) -> bytes:
        w = bytearray(b"\0\0\0\0")
        w += INT32.pack(correlation_id)
        if response_header_version(api_key, version) == 1:
            w.append(0)  # empty tagged-field section of response header v1
        response.encode_into(w, version)
        INT32.pack_into(w, 0, len(w) - 4)
        return bytes(w)

