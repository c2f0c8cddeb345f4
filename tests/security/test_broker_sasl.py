"""SASL on the reference broker, on the wire: SaslHandshake / SaslAuthenticate with PLAIN,
SCRAM and OAUTHBEARER, Kafka's errors, what is allowed before authentication, KIP-368
sessions (expiry, re-authentication, no principal change), the authentication deadline,
and that logs never carry a password or token."""

from __future__ import annotations

import base64
import logging
import ssl
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # importlib mode: the helpers beside us
from broker_setup import (
    PASSWORDS,
    add_scram_user,
    scram_exchange,
    secured_config,
    unsecured_jws,
)
from raw_wire import Wire

from sdk.errors import IllegalSaslStateError, SaslAuthenticationFailedError
from sdk.protocol.messages.api_versions import ApiVersionsRequest
from sdk.protocol.messages.metadata import MetadataRequest
from sdk.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from sdk.protocol.messages.sasl_handshake import SaslHandshakeRequest
from server_ref import EmbeddedBroker

UNSUPPORTED_SASL_MECHANISM = 33


@pytest.fixture
def broker(tls: Any) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(config=secured_config(tls)) as b:
        add_scram_user(b.bootstrap_servers, "bob", "bob-secret", "SCRAM-SHA-256")
        add_scram_user(b.bootstrap_servers, "bob", "bob-secret", "SCRAM-SHA-512", 8192)
        yield b


def oauth_token(token: str) -> bytes:
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


# ---------------------------------------------------------------------------- mechanisms


def test_plain_authenticates_and_requests_carry_the_principal(broker: EmbeddedBroker) -> None:
    with Wire(broker.listener_address("SASL_PLAINTEXT")) as wire:
        answer = wire.plain("alice", "alice-secret")
        assert answer.error_code == 0 and answer.session_lifetime_ms == 0
        assert wire.metadata().brokers[0].port == broker.listener_ports["SASL_PLAINTEXT"]
        assert ("SASL_PLAINTEXT", "User:alice") in broker.connection_principals()


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong-secret"),
                                                ("nobody", "alice-secret")])
def test_plain_refuses_a_wrong_password_or_unknown_user(broker: EmbeddedBroker, user: str,
                                                        password: str) -> None:
    with Wire(broker.listener_address("SASL_PLAINTEXT")) as wire:
        answer = wire.plain(user, password)
        assert answer.error_code == SaslAuthenticationFailedError.errno
        assert answer.error_message == "Authentication failed: Invalid username or password"
        assert wire.closed_by_broker()
    assert broker.security_stats["failed"] == 1


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_authenticates_with_stored_credentials(broker: EmbeddedBroker, tls: Any,
                                                     mechanism: str) -> None:
    with Wire(broker.listener_address("SASL_SSL"), context=tls_client(tls)) as wire:
        first, final = scram_exchange(wire, mechanism, "bob", "bob-secret")
        iterations = 4096 if mechanism.endswith("256") else 8192
        assert f",i={iterations}" in first.auth_bytes.decode()
        assert final.error_code == 0
        assert wire.metadata().brokers[0].port == broker.listener_ports["SASL_SSL"]
    assert broker.security_stats["authenticated"] == 1


@pytest.mark.parametrize(("user", "password"), [("bob", "wrong-secret"),
                                                ("nobody", "bob-secret")])
def test_scram_failures_do_not_tell_users_apart(broker: EmbeddedBroker, user: str,
                                                password: str) -> None:
    with Wire(broker.listener_address("SASL_PLAINTEXT")) as wire:
        first, final = scram_exchange(wire, "SCRAM-SHA-256", user, password)
        answer = final if final is not None else first
        assert answer.error_code == SaslAuthenticationFailedError.errno
        assert answer.error_message == ("Authentication failed during authentication due to "
                                        "invalid credentials with SASL mechanism SCRAM-SHA-256")
        assert wire.closed_by_broker()


def test_scram_credentials_survive_a_restart_and_hold_no_password(broker: EmbeddedBroker
                                                                  ) -> None:
    broker.restart()
    stored = (broker.data_dir / "scram_credentials.json").read_text()
    assert "bob-secret" not in stored and '"iterations": 8192' in stored
    with Wire(broker.listener_address("SASL_PLAINTEXT")) as wire:
        assert scram_exchange(wire, "SCRAM-SHA-512", "bob", "bob-secret")[1].error_code == 0


def test_oauthbearer_unsecured_token_sets_principal_and_session(tls: Any) -> None:
    with EmbeddedBroker(config=secured_config(
            tls, **{"connections.max.reauth.ms": 600_000})) as b:
        token, _ = unsecured_jws("svc-orders", lifetime_s=120)
        with Wire(b.listener_address("SASL_PLAINTEXT")) as wire:
            answer = wire.sasl("OAUTHBEARER", oauth_token(token))[0]
            assert answer.error_code == 0
            # The session ends with the token (120 s), before connections.max.reauth.ms.
            assert 100_000 < answer.session_lifetime_ms <= 120_000
            wire.metadata()
            assert ("SASL_PLAINTEXT", "User:svc-orders") in b.connection_principals()


@pytest.mark.parametrize("case", ["expired", "future-iat", "signed", "no-sub", "alg"])
def test_oauthbearer_refuses_bad_tokens_as_kafka_does(broker: EmbeddedBroker,
                                                      case: str) -> None:
    token, _ = unsecured_jws("svc", lifetime_s=-10 if case == "expired" else 60,
                             issued_at=time.time() + 600 if case == "future-iat" else None)
    head, claims, _ = token.split(".")
    if case == "signed":
        token = f"{head}.{claims}.c2lnbmF0dXJl"
    elif case == "no-sub":
        no_sub = base64.urlsafe_b64encode(b'{"exp": 9999999999}').decode().rstrip("=")
        token = f"{head}.{no_sub}."
    elif case == "alg":
        alg = base64.urlsafe_b64encode(b'{"alg":"HS256"}').decode().rstrip("=")
        token = f"{alg}.{claims}."
    with Wire(broker.listener_address("SASL_PLAINTEXT")) as wire:
        challenge = wire.sasl("OAUTHBEARER", oauth_token(token))[0]
        # Kafka answers a refused token with a JSON challenge, then fails on the client's ^A.
        assert challenge.error_code == 0 and challenge.auth_bytes == b'{"status":"invalid_token"}'
        final = wire.call(SaslAuthenticateRequest(auth_bytes=b"\x01"), 2)
        assert final.error_code == SaslAuthenticationFailedError.errno
        assert final.error_message == '{"status":"invalid_token"}'
        assert wire.closed_by_broker()


def test_oauthbearer_required_scope(tls: Any) -> None:
    jaas = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            'unsecuredValidatorRequiredScope="kafka";')
    with EmbeddedBroker(config=secured_config(tls, **{
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": jaas})) as b:
        for scope, ok in (("kafka other", True), ("other", False)):
            token, _ = unsecured_jws("svc", scope=scope)
            with Wire(b.listener_address("SASL_PLAINTEXT")) as wire:
                answer = wire.sasl("OAUTHBEARER", oauth_token(token))[0]
                assert (answer.auth_bytes == b"") is ok
                if not ok:
                    assert b'"insufficient_scope"' in answer.auth_bytes


# ---------------------------------------------------------------------------- the exchange


def test_unsupported_mechanism_lists_the_enabled_ones_then_closes(tls: Any) -> None:
    with EmbeddedBroker(config=secured_config(tls, **{"sasl.enabled.mechanisms": "PLAIN"})
                        ) as b, Wire(b.listener_address("SASL_PLAINTEXT")) as wire:
        answer = wire.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1)
        assert answer.error_code == UNSUPPORTED_SASL_MECHANISM
        assert answer.mechanisms == ["PLAIN"]
        assert wire.closed_by_broker()


@pytest.mark.parametrize("first", ["metadata", "authenticate-first", "api-versions-twice"])
def test_only_the_exchange_is_served_before_authentication(broker: EmbeddedBroker, tls: Any,
                                                           first: str) -> None:
    with Wire(broker.listener_address("SASL_SSL"), context=tls_client(tls)) as wire:
        if first == "metadata":
            wire.send(MetadataRequest(topics=None), 9)
        elif first == "authenticate-first":
            wire.send(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 1)
        else:
            wire.call(ApiVersionsRequest(), 0)
            wire.send(ApiVersionsRequest(), 0)
        assert wire.closed_by_broker()
    # The broker keeps serving others.
    with Wire(broker.listener_address("SASL_PLAINTEXT")) as wire:
        assert wire.plain("admin", "admin-secret").error_code == 0


def test_unknown_api_versions_version_is_answered_before_authentication(
        broker: EmbeddedBroker) -> None:
    """KIP-511 on a SASL listener: ApiVersions in a version the broker does not know gets
    UNSUPPORTED_VERSION in a v0 body, and the client goes on with one it knows."""
    from sdk.protocol.framing import ClientFraming

    request = bytearray(ClientFraming().encode_request(ApiVersionsRequest(), 3)[1])
    request[6:8] = (99).to_bytes(2, "big")  # ApiVersions v99
    with Wire(broker.listener_address("SASL_PLAINTEXT")) as wire:
        wire.send_bytes(bytes(request))
        answer = _read_frame(wire)
        assert int.from_bytes(answer[4:6], "big") == 35  # UNSUPPORTED_VERSION
        assert wire.plain("alice", "alice-secret").error_code == 0


def _read_frame(wire: Wire) -> bytes:
    while True:
        frames = wire.raw_frames.feed(wire.sock.recv(1 << 16))
        if frames:
            return frames[0]


def test_handshake_v0_raw_tokens(broker: EmbeddedBroker) -> None:
    with Wire(broker.listener_address("SASL_PLAINTEXT")) as wire:
        assert wire.call(SaslHandshakeRequest(mechanism="PLAIN"), 0).error_code == 0
        assert wire.raw_call(b"\0alice\0alice-secret") == b""
        assert wire.metadata().brokers
    with Wire(broker.listener_address("SASL_PLAINTEXT")) as wire:
        wire.call(SaslHandshakeRequest(mechanism="PLAIN"), 0)
        wire.send_bytes(len(b"\0alice\0nope").to_bytes(4, "big") + b"\0alice\0nope")
        assert wire.closed_by_broker()  # v0 has no place for an error: Kafka just closes


def test_sasl_requests_on_a_plaintext_listener_or_after_authentication(
        broker: EmbeddedBroker) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        assert wire.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == \
            IllegalSaslStateError.errno
    with Wire(broker.listener_address("SASL_PLAINTEXT")) as wire:
        wire.plain("alice", "alice-secret")
        # No session lifetime: no re-authentication; the API handler answers.
        assert wire.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == \
            IllegalSaslStateError.errno
        assert wire.metadata().brokers


def test_unauthenticated_connection_closed_after_connections_max_idle_ms(tls: Any) -> None:
    with EmbeddedBroker(config=secured_config(tls, **{"connections.max.idle.ms": 300})
                        ) as b:
        with Wire(b.listener_address("SASL_PLAINTEXT")) as stalled:
            stalled.call(ApiVersionsRequest(), 0)
            assert stalled.closed_by_broker()
        with Wire(b.listener_address("SASL_SSL"), context=tls_client(tls)) as stalled_tls:
            assert stalled_tls.closed_by_broker()
        assert b.security_stats["timed_out"] == 2
        with Wire(b.listener_address("SASL_PLAINTEXT")) as quick:
            quick.plain("alice", "alice-secret")
            time.sleep(0.6)
            assert quick.metadata().brokers  # authenticated: the deadline no longer applies


# ---------------------------------------------------------------------------- KIP-368


@pytest.fixture
def short_sessions(tls: Any) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(config=secured_config(tls, **{
            "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": 1500})) as b:
        yield b


def test_expired_session_closed_at_next_request(short_sessions: EmbeddedBroker) -> None:
    with Wire(short_sessions.listener_address("SASL_PLAINTEXT")) as wire:
        assert wire.plain("alice", "alice-secret").session_lifetime_ms == 1500
        wire.metadata()
        time.sleep(1.7)
        wire.send(MetadataRequest(topics=[]), 9)
        assert wire.closed_by_broker()
    assert short_sessions.security_stats["expired"] == 1


def test_reauthentication_keeps_the_connection_and_in_flight_requests(
        short_sessions: EmbeddedBroker) -> None:
    with Wire(short_sessions.listener_address("SASL_PLAINTEXT")) as wire:
        wire.plain("alice", "alice-secret")
        for _ in range(3):
            pending = wire.send(MetadataRequest(topics=[]), 9)  # in flight during re-auth
            handshake = wire.send(SaslHandshakeRequest(mechanism="PLAIN"), 1)
            auth = wire.send(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 1)
            answers = [wire.receive() for _ in range(3)]
            assert [cid for cid, _ in answers] == [pending, handshake, auth]
            assert answers[2][1].error_code == 0 and answers[2][1].session_lifetime_ms == 1500
            time.sleep(1.05)  # Kafka's brokers: at most one re-authentication a second
            assert wire.metadata().brokers
        assert short_sessions.security_stats["reauthenticated"] == 3


def test_a_second_reauthentication_within_a_second_is_refused_and_the_connection_kept(
        short_sessions: EmbeddedBroker) -> None:
    with Wire(short_sessions.listener_address("SASL_PLAINTEXT")) as wire:
        wire.plain("alice", "alice-secret")
        assert wire.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        assert wire.call(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"),
                         1).error_code == 0  # the first re-authentication: always allowed
        early = wire.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
        assert early.error_code == IllegalSaslStateError.errno and early.mechanisms == []
        assert wire.metadata().brokers  # answered, not closed
        time.sleep(1.0)
        assert wire.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        assert wire.call(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"),
                         1).error_code == 0
    assert short_sessions.security_stats["reauthenticated"] == 2


def test_reauthentication_cannot_change_principal(short_sessions: EmbeddedBroker) -> None:
    with Wire(short_sessions.listener_address("SASL_PLAINTEXT")) as wire:
        wire.plain("alice", "alice-secret")
        assert wire.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        answer = wire.call(SaslAuthenticateRequest(auth_bytes=b"\0admin\0admin-secret"), 1)
        assert answer.error_code == SaslAuthenticationFailedError.errno
        assert answer.error_message == ("Cannot change principals during re-authentication "
                                        "from User.alice: User.admin")
        assert wire.closed_by_broker()


# ---------------------------------------------------------------------------- logs


def test_logs_never_carry_passwords_or_tokens(broker: EmbeddedBroker,
                                              caplog: pytest.LogCaptureFixture) -> None:
    token, _ = unsecured_jws("svc", lifetime_s=-5)
    with caplog.at_level(logging.DEBUG):
        for password in ("alice-secret", "wrong-secret"):
            with Wire(broker.listener_address("SASL_PLAINTEXT")) as wire:
                wire.plain("alice", password)
                wire.closed_by_broker() if password == "wrong-secret" else wire.metadata()
        with Wire(broker.listener_address("SASL_PLAINTEXT")) as wire:
            scram_exchange(wire, "SCRAM-SHA-256", "bob", "wrong-secret")
        with Wire(broker.listener_address("SASL_PLAINTEXT")) as wire:
            wire.sasl("OAUTHBEARER", oauth_token(token))
            wire.call(SaslAuthenticateRequest(auth_bytes=b"\x01"), 2)
            wire.closed_by_broker()
    text = caplog.text + repr(broker.config)
    assert "closing connection" in text  # the failures were logged...
    for secret in (*PASSWORDS, token, token.split(".")[1]):
        assert secret not in text  # ...without what the clients sent


def tls_client(tls: Any) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(tls.ca_file))
