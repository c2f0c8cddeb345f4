"""The SASL exchange on the wire, against the reference broker and Apache Kafka configured
alike (a SASL_PLAINTEXT listener with PLAIN and SCRAM-SHA-256, connections.max.reauth.ms):
the same raw requests give the same answers, error codes, messages and closes."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))  # importlib mode: the helpers beside us
from broker_setup import PLAIN_JAAS, scram_exchange, unsecured_jws
from raw_wire import Wire

from sdk.protocol.framing import ClientFraming
from sdk.protocol.messages.api_versions import ApiVersionsRequest
from sdk.protocol.messages.metadata import MetadataRequest
from sdk.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from sdk.protocol.messages.sasl_handshake import SaslHandshakeRequest
from server_ref import EmbeddedBroker

SETTINGS = {
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,OAUTHBEARER",
    "listener.name.sasl.plain.sasl.jaas.config": PLAIN_JAAS,
    "listener.name.sasl.scram-sha-256.sasl.jaas.config":
        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
    "listener.name.sasl.oauthbearer.sasl.jaas.config":
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredLoginStringClaim_sub="broker";',
    "connections.max.reauth.ms": "60000",
}


def answers(connect: Callable[[], Wire]) -> list[Any]:
    out: list[Any] = []
    with connect() as wire:  # an unsupported mechanism
        reply = wire.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1)
        out.append(("unsupported", reply.error_code, sorted(reply.mechanisms),
                    wire.closed_by_broker()))
    with connect() as wire:  # anything but the exchange before authentication
        wire.send(MetadataRequest(topics=[]), 9)
        out.append(("metadata-first", wire.closed_by_broker()))
    with connect() as wire:
        wire.call(ApiVersionsRequest(), 0)
        wire.send(ApiVersionsRequest(), 0)
        out.append(("api-versions-twice", wire.closed_by_broker()))
    with connect() as wire:
        reply = wire.plain("alice", "wrong-secret")
        out.append(("wrong-password", reply.error_code, reply.error_message,
                    wire.closed_by_broker()))
    with connect() as wire:
        reply = wire.sasl("PLAIN", b"alice-without-separators")[0]
        out.append(("malformed-plain", reply.error_code, reply.error_message,
                    wire.closed_by_broker()))
    with connect() as wire:
        first, _ = scram_exchange(wire, "SCRAM-SHA-256", "nobody", "x")
        out.append(("scram-unknown-user", first.error_code, first.error_message,
                    wire.closed_by_broker()))
    with connect() as wire:
        reply = wire.plain("alice", "alice-secret")
        out.append(("login", reply.error_code, reply.session_lifetime_ms))
        out.append(("served", len(wire.metadata().brokers)))
        handshake = wire.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)  # re-authentication
        changed = wire.call(SaslAuthenticateRequest(auth_bytes=b"\0admin\0admin-secret"), 1)
        out.append(("principal-change", handshake.error_code, changed.error_code,
                    changed.error_message, wire.closed_by_broker()))
    with connect() as wire:  # at most one re-authentication a second
        wire.plain("alice", "alice-secret")
        again = [wire.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code,
                 wire.call(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"),
                           1).error_code]
        early = wire.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
        out.append(("reauth-within-a-second", again, early.error_code, early.mechanisms,
                    len(wire.metadata().brokers)))
    with connect() as wire:
        wire.plain("alice", "alice-secret")
        handshake = wire.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1)
        wire.send(SaslAuthenticateRequest(auth_bytes=b"n,,n=alice,r=abc"), 1)
        # Refused at the first token, with no answer: the connection just ends.
        out.append(("mechanism-change", handshake.error_code, wire.closed_by_broker()))
    for case, lifetime_s in (("oauth-expired", -30), ("oauth-short", 20)):
        token, _ = unsecured_jws("svc", lifetime_s=lifetime_s)
        with connect() as wire:
            first = wire.sasl("OAUTHBEARER", f"n,,\x01auth=Bearer {token}\x01\x01".encode())[0]
            if first.auth_bytes:  # refused: the JSON challenge, then the failure
                final = wire.call(SaslAuthenticateRequest(auth_bytes=b"\x01"), 2)
                out.append((case, first.auth_bytes, final.error_code, final.error_message,
                            wire.closed_by_broker()))
            else:  # the session ends with the token, before connections.max.reauth.ms
                out.append((case, first.error_code, 15_000 < first.session_lifetime_ms <= 20_000,
                            len(wire.metadata().brokers)))
    with connect() as wire:  # KIP-511: an ApiVersions version the broker does not know
        request = bytearray(ClientFraming().encode_request(ApiVersionsRequest(), 3)[1])
        request[6:8] = (99).to_bytes(2, "big")
        wire.send_bytes(bytes(request))
        frames: list[bytes] = []
        while not frames:
            frames = wire.raw_frames.feed(wire.sock.recv(1 << 16))
        out.append(("api-versions-v99", int.from_bytes(frames[0][4:6], "big"),
                    wire.plain("alice", "alice-secret").error_code))
    with connect() as wire:  # handshake v0: raw tokens
        wire.call(SaslHandshakeRequest(mechanism="PLAIN"), 0)
        out.append(("v0", wire.raw_call(b"\0alice\0alice-secret"),
                    len(wire.metadata().brokers)))
    return out


def test_sasl_exchange_matches_apache_kafka() -> None:
    from apache_support import apache_cluster

    config = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL://127.0.0.1:0",
              "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT",
              **SETTINGS}
    with EmbeddedBroker(config=config) as b:
        ours = answers(lambda: Wire(b.listener_address("SASL")))
    with apache_cluster(brokers=1, listeners={"SASL": "SASL_PLAINTEXT"},
                        config=SETTINGS) as cluster:
        theirs = answers(lambda: Wire(cluster.listener_address("SASL")))
    assert ours == theirs
    facts = {a[0]: a[1:] for a in ours}
    assert facts["unsupported"] == (33, ["OAUTHBEARER", "PLAIN", "SCRAM-SHA-256"], True)
    assert facts["metadata-first"] == facts["api-versions-twice"] == (True,)
    assert facts["wrong-password"] == (58, "Authentication failed: Invalid username or "
                                           "password", True)
    assert facts["login"] == (0, 60000)
    assert facts["api-versions-v99"] == (35, 0)
    assert facts["principal-change"] == (0, 58, "Cannot change principals during "
                                         "re-authentication from User.alice: User.admin", True)
    assert facts["v0"] == (b"", 1)
    assert facts["reauth-within-a-second"] == ([0, 0], 34, [], 1)
    assert facts["oauth-expired"] == (b'{"status":"invalid_token"}', 58,
                                      '{"status":"invalid_token"}', True)
    assert facts["oauth-short"] == (0, True, 1)
