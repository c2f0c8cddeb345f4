"""Fuzzing the reference broker's SASL and TLS handshakes: random sequences of truncated,
oversized, out-of-order and garbage frames on new connections (SASL_PLAINTEXT, SASL_SSL,
and raw bytes where TLS is expected) close those connections only. A client that
authenticated before the fuzzing started is served after every example, and the broker
never logs a failure of its own (a handler exception) for any input."""

from __future__ import annotations

import logging
import socket
import ssl
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))  # importlib mode: the helpers beside us
from broker_setup import secured_config
from raw_wire import Wire

from sdk.protocol.framing import ClientFraming
from sdk.protocol.message import Message
from sdk.protocol.messages.api_versions import ApiVersionsRequest
from sdk.protocol.messages.metadata import MetadataRequest
from sdk.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from sdk.protocol.messages.sasl_handshake import SaslHandshakeRequest
from server_ref import EmbeddedBroker

READ_S = 0.05  # how long an example listens for answers before closing


class Recorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(scope="module")
def fuzzed(tls: Any) -> Iterator[tuple[EmbeddedBroker, Wire, Recorder, ssl.SSLContext]]:
    recorder = Recorder()
    logger = logging.getLogger("server_ref")
    logger.addHandler(recorder)
    context = ssl.create_default_context(cafile=str(tls.ca_file))
    config = secured_config(tls, **{"connections.max.idle.ms": 2000})
    with EmbeddedBroker(config=config) as b:
        with Wire(b.listener_address("SASL_SSL"), context) as kept:
            assert kept.plain("alice", "alice-secret").error_code == 0
            yield b, kept, recorder, context
    logger.removeHandler(recorder)


def encoded(request: Message, version: int) -> bytes:
    return bytes(ClientFraming(client_id="fuzz").encode_request(request, version)[1])


HANDSHAKE_V1 = encoded(SaslHandshakeRequest(mechanism="PLAIN"), 1)
mechanisms = st.sampled_from(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER",
                              "GSSAPI", "", "plain"])
tokens = st.one_of(
    st.binary(max_size=300),
    st.sampled_from([b"\0alice\0alice-secret", b"\0alice\0", b"n,,n=bob,r=abc",
                     b"c=biws,r=abc,p=AAAA", b"n,,\x01auth=Bearer a.b.\x01\x01", b"\x01"]))
frames = st.one_of(
    st.builds(lambda v: encoded(ApiVersionsRequest(client_software_name="f",
                                                   client_software_version="1"), v),
              st.integers(0, 3)),
    st.builds(lambda m, v: encoded(SaslHandshakeRequest(mechanism=m), v), mechanisms,
              st.integers(0, 1)),
    st.builds(lambda t, v: encoded(SaslAuthenticateRequest(auth_bytes=t), v), tokens,
              st.integers(0, 2)),
    st.just(encoded(MetadataRequest(topics=[]), 9)),
)
steps = st.one_of(
    frames,
    # a frame cut short: the connection ends mid-frame
    st.builds(lambda f, cut: f[:max(1, len(f) * cut // 100)], frames, st.integers(0, 99)),
    # a header for a SASL frame larger than sasl.server.max.receive.size, or negative
    st.builds(lambda n: n.to_bytes(4, "big", signed=True),
              st.one_of(st.integers(524289, 2**31 - 1), st.integers(-2**31, -1))),
    # a valid size around a random body (an unknown API key or a bad header)
    st.builds(lambda body: len(body).to_bytes(4, "big") + body, st.binary(min_size=0,
                                                                           max_size=64)),
    st.binary(min_size=1, max_size=64),  # garbage
    st.integers(2, 9).map(lambda v: HANDSHAKE_V1[:6] + v.to_bytes(2, "big")
                          + HANDSHAKE_V1[8:]),  # a SaslHandshake version nobody has
)
authenticated_prefix = [
    encoded(ApiVersionsRequest(client_software_name="f", client_software_version="1"), 3),
    encoded(SaslHandshakeRequest(mechanism="PLAIN"), 1),
    encoded(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 2),
]


def play(address: str, script: list[bytes], context: ssl.SSLContext | None) -> None:
    host, port = address.rsplit(":", 1)
    try:
        sock = socket.create_connection((host, int(port)), timeout=5)
        if context is not None:
            sock = context.wrap_socket(sock, server_hostname="localhost")
    except (OSError, ssl.SSLError):
        return
    with sock:
        sock.settimeout(READ_S)
        try:
            for chunk in script:
                sock.sendall(chunk)
            while sock.recv(1 << 16):
                pass
        except (OSError, ssl.SSLError):
            pass  # closed by the broker, or no answer within READ_S


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(target=st.sampled_from(["SASL_PLAINTEXT", "SASL_SSL", "SSL-raw", "SASL_SSL-raw"]),
       after_login=st.booleans(), script=st.lists(steps, min_size=1, max_size=6))
def test_handshake_fuzz_keeps_the_authenticated_client_served(
        fuzzed: tuple[EmbeddedBroker, Wire, Recorder, ssl.SSLContext], target: str,
        after_login: bool, script: list[bytes]) -> None:
    broker, kept, recorder, context = fuzzed
    listener = target.removesuffix("-raw")
    raw = target.endswith("-raw")  # bytes where a TLS handshake is expected
    prefix = authenticated_prefix if after_login and not raw else []
    play(broker.listener_address(listener), prefix + script,
         None if raw or listener == "SASL_PLAINTEXT" else context)
    assert kept.metadata().brokers[0].port == broker.listener_ports["SASL_SSL"]
    assert not recorder.records, [r.getMessage() for r in recorder.records]


def test_after_fuzzing_nothing_is_left_open(
        fuzzed: tuple[EmbeddedBroker, Wire, Recorder, ssl.SSLContext]) -> None:
    """Every fuzzing connection ended (closed by the client, by the broker, or by the
    2 s authentication deadline); only the authenticated client remains."""
    import time

    broker, kept, _, _ = fuzzed
    deadline = time.monotonic() + 10
    while len(broker.connection_principals()) > 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert broker.connection_principals() == [("SASL_SSL", "User:alice")]
    assert kept.metadata().brokers
