"""A blocking Kafka-protocol connection for the broker's security tests: requests through the
SDK's sans-IO framing, raw frames and raw bytes for the malformed cases, optional TLS."""

from __future__ import annotations

import socket
import ssl
from typing import Any

from sdk.protocol.framing import ClientFraming, FrameBuffer, frame
from sdk.protocol.message import Message
from sdk.protocol.messages.api_versions import ApiVersionsRequest
from sdk.protocol.messages.metadata import MetadataRequest
from sdk.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from sdk.protocol.messages.sasl_handshake import SaslHandshakeRequest

TIMEOUT_S = 15.0


class Wire:
    def __init__(self, address: str, context: ssl.SSLContext | None = None,
                 server_hostname: str = "localhost") -> None:
        host, port = address.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=TIMEOUT_S)
        self.sock: socket.socket = (context.wrap_socket(sock, server_hostname=server_hostname)
                                    if context is not None else sock)
        self.framing = ClientFraming(client_id="security-tests")
        self.raw_frames = FrameBuffer()
        self._ready: list[tuple[int, Message]] = []

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, request: Message, version: int) -> int:
        cid, data = self.framing.encode_request(request, version)
        self.sock.sendall(data)
        return cid

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def receive(self) -> tuple[int, Message]:
        while not self._ready:
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("broker closed the connection")
            self._ready.extend(self.framing.feed(data))
        return self._ready.pop(0)

    def call(self, request: Message, version: int) -> Any:
        cid = self.send(request, version)
        got, response = self.receive()
        assert got == cid
        return response

    def raw_call(self, token: bytes) -> bytes:
        """A raw SASL token (after a v0 handshake) and the raw answer."""
        self.sock.sendall(frame(token))
        while True:
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("broker closed the connection")
            frames = self.raw_frames.feed(data)
            if frames:
                return frames[0]

    def closed_by_broker(self) -> bool:
        """True once the broker has closed the connection (waits up to the timeout)."""
        try:
            while True:
                data = self.sock.recv(1 << 16)
                if not data:
                    return True
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
            return True
        except TimeoutError:
            return False

    # ------------------------------------------------------------------ SASL

    def sasl(self, mechanism: str, *tokens: bytes, version: int = 1) -> list[Any]:
        """ApiVersions, SaslHandshake v1, then one SaslAuthenticate per token."""
        self.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
        handshake = self.call(SaslHandshakeRequest(mechanism=mechanism), 1)
        assert handshake.error_code == 0, handshake
        return [self.call(SaslAuthenticateRequest(auth_bytes=t), version) for t in tokens]

    def plain(self, user: str, password: str, version: int = 1) -> Any:
        return self.sasl("PLAIN", f"\0{user}\0{password}".encode(), version=version)[0]

    def metadata(self) -> Any:
        return self.call(MetadataRequest(topics=[], allow_auto_topic_creation=False), 9)
