"""The SDK against the reference broker's TLS and SASL listeners: the same round trips and
refusals as against Apache Kafka (test_client_tls.py, test_client_sasl.py), with SCRAM
users created through our own admin client, and the broker's counters (authentications,
failures, re-authentications) as the second witness.

Where the two brokers differ it is said here: the reference broker keeps the SASL session
counters the tests read; Apache Kafka's equivalent is in JMX, so the Apache tests count on
the client side.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from security.apache_secured import roundtrip

from sdk import AdminClient, Consumer, Producer
from sdk.admin.acl_types import ScramMechanism, UserScramCredentialUpsertion
from sdk.errors import (
    AuthenticationError,
    KafkaError,
    KafkaTimeoutError,
    SaslAuthenticationFailedError,
    SslAuthenticationError,
)
from sdk.net.security.oauth import unsecured_token
from sdk.types import NewTopic
from server_ref import EmbeddedBroker

pytestmark = pytest.mark.integration

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="alice-secret";')
REAUTH_MS = 2000


@pytest.fixture(scope="module")
def broker(tls: Any) -> Iterator[EmbeddedBroker]:
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0,"
                     "MTLS://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL,"
                                          "MTLS:SSL",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.oauthbearer.connections.max.reauth.ms": str(REAUTH_MS),
        # SCRAM-SHA-512 sessions end too: re-authentication is not OAUTHBEARER's alone.
        "listener.name.sasl_ssl.scram-sha-512.connections.max.reauth.ms": "1500",
        "listener.name.mtls.ssl.client.auth": "required",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tls.broker_keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls.ca_file),
    }
    with EmbeddedBroker(config=config) as b:
        with AdminClient(bootstrap_servers=b.bootstrap_servers) as admin:
            # One user once per request (Kafka answers DUPLICATE_RESOURCE otherwise).
            for upsertion in (
                    UserScramCredentialUpsertion("bob", ScramMechanism.SCRAM_SHA_256,
                                                 "bob-secret"),
                    UserScramCredentialUpsertion("bob", ScramMechanism.SCRAM_SHA_512,
                                                 "bob-secret", iterations=8192)):
                result = admin.alter_user_scram_credentials([upsertion])
                assert result.ok, result.errors
        yield b


def _sasl_ssl(broker: EmbeddedBroker, tls: Any, **mechanism: Any) -> dict[str, Any]:
    return {"bootstrap.servers": broker.listener_address("SASL_SSL"),
            "security.protocol": "SASL_SSL", "ssl.ca.location": str(tls.ca_file), **mechanism}


MECHANISMS: dict[str, dict[str, Any]] = {
    "plain": {"sasl.mechanism": "PLAIN", "sasl.username": "alice",
              "sasl.password": "alice-secret"},
    "scram-sha-256": {"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "bob",
                      "sasl.password": "bob-secret"},
    "scram-sha-512": {"sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config":
                      'org.apache.kafka.common.security.scram.ScramLoginModule required '
                      'username="bob" password="bob-secret";'},
    "oauthbearer": {"sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config":
                    'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule '
                    'required unsecuredLoginStringClaim_sub="carol";'},
}


@pytest.mark.parametrize("name", list(MECHANISMS))
def test_produce_consume_admin_over_sasl_ssl(broker: EmbeddedBroker, tls: Any,
                                             name: str) -> None:
    before = broker.security_stats["authenticated"]
    roundtrip(_sasl_ssl(broker, tls, **MECHANISMS[name]), records=30)
    assert broker.security_stats["authenticated"] > before


@pytest.mark.parametrize("listener, client_cert", [("SSL", False), ("MTLS", True)])
def test_produce_consume_admin_over_tls(broker: EmbeddedBroker, tls: Any, listener: str,
                                        client_cert: bool) -> None:
    settings: dict[str, Any] = {"bootstrap.servers": broker.listener_address(listener),
                                "security.protocol": "SSL", "ssl_cafile": str(tls.ca_file)}
    if client_cert:
        settings.update({"ssl.keystore.type": "PEM",
                         "ssl.keystore.location": str(tls.client_keystore)})
    roundtrip(settings, records=30)


@pytest.mark.parametrize("case", ["wrong-password", "expired-token"])
def test_refusals_are_typed_and_not_retried_in_a_storm(broker: EmbeddedBroker, tls: Any,
                                                       case: str) -> None:
    if case == "wrong-password":
        mechanism: dict[str, Any] = {"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "bob",
                                     "sasl.password": "not-bobs"}
    else:
        expired = unsecured_token({"unsecuredLoginStringClaim_sub": "carol"},
                                  now_ms=int(time.time() * 1000) - 3_600_000)
        mechanism = {"sasl.mechanism": "OAUTHBEARER",
                     "sasl_oauth_token_provider": lambda: expired}
    settings = {**_sasl_ssl(broker, tls, **mechanism), "reconnect.backoff.ms": 1,
                "reconnect.backoff.max.ms": 1500}
    failed_before = broker.security_stats["failed"]
    with Producer(dict(settings), max_block_ms=10_000) as producer:
        with pytest.raises(SaslAuthenticationFailedError) as info:
            producer.send("any-topic", b"x").result(timeout=10)
        assert mechanism["sasl.mechanism"] in str(info.value)
        assert "not-bobs" not in str(info.value)
        window_end = time.monotonic() + 4.0
        while time.monotonic() < window_end:
            with pytest.raises(AuthenticationError):
                producer.send("any-topic", b"x").result(timeout=10)
            time.sleep(0.05)
    # The broker counts every refused exchange: a retry storm would be ~10 in 2 s.
    failures = broker.security_stats["failed"] - failed_before
    assert 1 <= failures <= 4, f"{failures} refused authentications in a 4 s window"


def test_missing_client_certificate_is_refused(broker: EmbeddedBroker, tls: Any) -> None:
    """A difference between the brokers: Apache Kafka sends TLS 1.3's alert for a missing
    client certificate (SslAuthenticationError, test_client_tls.py); the reference broker,
    an asyncio server, closes the connection without it, so the client can only say that
    the broker closed the connection right after the handshake and what to check."""
    with AdminClient(bootstrap_servers=broker.listener_address("MTLS"),
                     security_protocol="SSL", ssl_cafile=str(tls.ca_file),
                     default_api_timeout_ms=3000) as admin:
        with pytest.raises(KafkaError) as info:
            admin.list_topics()
    assert not isinstance(info.value, SslAuthenticationError)
    assert "ssl.client.auth=required" in str(info.value)


def test_oauthbearer_session_outlives_reauthentications_under_load(
        broker: EmbeddedBroker, tls: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="sdk.net.connection")
    settings = _sasl_ssl(broker, tls, **MECHANISMS["oauthbearer"])
    topic = f"ref-reauth-{uuid.uuid4().hex[:8]}"
    with AdminClient(dict(settings)) as admin:
        assert admin.create_topics([NewTopic(topic, 2, 1)]).ok
    reauth_before = broker.security_stats["reauthenticated"]
    seen: list[bytes] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def consume() -> None:
        try:
            with Consumer(topic, dict(settings), group_id=f"g-{topic}",
                          auto_offset_reset="earliest", client_id="ref-reauth-consumer") as c:
                while not stop.is_set():
                    for batch in c.poll(timeout_ms=200).values():
                        seen.extend(r.value for r in batch)
        except BaseException as exc:
            errors.append(exc)

    def reauths(client_id: str) -> int:
        return sum(1 for r in list(caplog.records) if "re-authenticated" in r.getMessage()
                   and client_id in r.getMessage())

    reader = threading.Thread(target=consume)
    reader.start()
    sent = 0
    try:
        with Producer(dict(settings), client_id="ref-reauth-producer", linger_ms=5) as producer:
            futures = []
            deadline = time.monotonic() + 120  # bounds a hung run only
            while time.monotonic() < deadline:
                futures.extend(producer.send(topic, f"r{sent + i}".encode()) for i in range(20))
                sent += 20
                time.sleep(0.02)
                if (sent >= 2000 and reauths("ref-reauth-producer") >= 3
                        and reauths("ref-reauth-consumer") >= 3):
                    break
            producer.flush(timeout=30)
            for future in futures:
                future.result(timeout=0)
        for _ in range(600):
            if len(seen) >= sent or errors:
                break
            time.sleep(0.1)
    finally:
        stop.set()
        reader.join(30)
    assert not errors, errors
    assert len(seen) == sent and len(set(seen)) == sent
    assert reauths("ref-reauth-producer") >= 3 and reauths("ref-reauth-consumer") >= 3
    # The broker saw them too, and closed no session for expiry.
    assert broker.security_stats["reauthenticated"] - reauth_before >= 6
    assert broker.security_stats["expired"] == 0


def test_sessions_under_a_second_are_reauthenticated_without_a_close(
        caplog: pytest.LogCaptureFixture) -> None:
    """600 ms PLAIN sessions: the broker takes one re-authentication a second and closes a
    connection whose session ended at its next request, so from the second one on the
    producer holds its requests from the due time until 1 s after the last exchange.
    Nothing is refused, no session expires, no connection is made again, every record is
    acknowledged (test_client_sasl.py has the same case against Apache Kafka)."""
    caplog.set_level(logging.INFO, logger="sdk.net.client")  # reconnections
    caplog.set_level(logging.DEBUG, logger="sdk.net.connection")  # (last: the handler's level)
    config = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
              "listener.security.protocol.map":
                  "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
              "sasl.enabled.mechanisms": "PLAIN",
              "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
              "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "600"}
    topic = f"ref-short-{uuid.uuid4().hex[:8]}"
    with EmbeddedBroker(config=config) as b:
        with AdminClient(bootstrap_servers=b.bootstrap_servers) as admin:
            assert admin.create_topics([NewTopic(topic, 1, 1)]).ok
        settings = {"bootstrap.servers": b.listener_address("SASL_PLAINTEXT"),
                    "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                    "sasl.username": "alice", "sasl.password": "alice-secret"}
        with Producer(dict(settings), client_id="short-sessions") as producer:
            futures = []
            deadline = time.monotonic() + 60  # bounds a hung run only
            while time.monotonic() < deadline and sum(
                    1 for r in list(caplog.records)
                    if "short-sessions re-authenticated" in r.getMessage()) < 5:
                futures.append(producer.send(topic, f"s{len(futures)}".encode()))
                time.sleep(0.05)
            producer.flush(timeout=30)
            for future in futures:
                future.result(timeout=0)
        assert b.security_stats["reauthenticated"] >= 5
        assert b.security_stats["expired"] == 0
    assert [r.getMessage() for r in caplog.records
            if "re-authentication with" in r.getMessage() or "again" in r.getMessage()] == []


def test_refused_reauthentication_fails_sends_with_the_sasl_error(broker: EmbeddedBroker,
                                                                 tls: Any) -> None:
    """Tokens turn expired mid-session: the next KIP-368 re-authentication is refused, the
    connection closes, and the records sent from then on fail with the broker's
    SaslAuthenticationFailedError (as Java's producer fails them), not a delivery timeout
    two minutes later."""
    expired = threading.Event()

    def provider() -> tuple[str, int]:
        now_ms = int(time.time() * 1000)
        token = unsecured_token({"unsecuredLoginStringClaim_sub": "carol"},
                                now_ms=now_ms - (7_200_000 if expired.is_set() else 0))
        assert token.expires_at_ms is not None
        # Asked again at every (re-)authentication: it says the token ends within 1 s.
        return token.value, now_ms + 1000

    settings = {**_sasl_ssl(broker, tls, **{"sasl.mechanism": "OAUTHBEARER",
                                            "sasl_oauth_token_provider": provider}),
                "delivery.timeout.ms": 120_000, "reconnect.backoff.max.ms": 1000}
    topic = f"ref-refused-{uuid.uuid4().hex[:8]}"
    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        assert admin.create_topics([NewTopic(topic, 1, 1)]).ok
    with Producer(dict(settings)) as producer:
        producer.send(topic, b"before").result(timeout=30)
        expired.set()
        error: BaseException | None = None
        unsettled = 0
        for _ in range(600):  # bounded: about 60 s of sends, 0.1 s apart
            future = producer.send(topic, b"after")
            try:
                future.result(timeout=30)
            except SaslAuthenticationFailedError as exc:
                error = exc
                break
            except KafkaTimeoutError:
                # A record in flight when the broker refused the re-authentication was sent
                # once: as in Java's producer it is retried until delivery.timeout.ms (its
                # outcome is not known to be "not written"). Only that one may be left.
                unsettled += 1
            time.sleep(0.1)
        assert isinstance(error, SaslAuthenticationFailedError), error
        assert unsettled <= 1
        assert "OAUTHBEARER" in str(error)


def test_scram_sessions_reauthenticate_too(broker: EmbeddedBroker, tls: Any,
                                           caplog: pytest.LogCaptureFixture) -> None:
    """connections.max.reauth.ms applies to every mechanism (KIP-368): a SCRAM-SHA-512
    producer runs its exchange again on the same connection, with a fresh nonce."""
    caplog.set_level(logging.DEBUG, logger="sdk.net.connection")
    settings = _sasl_ssl(broker, tls, **MECHANISMS["scram-sha-512"])
    topic = f"ref-scram-reauth-{uuid.uuid4().hex[:8]}"
    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        assert admin.create_topics([NewTopic(topic, 1, 1)]).ok
    with Producer(dict(settings), client_id="scram-reauth") as producer:
        sent = 0
        for _ in range(600):  # bounded: about 60 s
            producer.send(topic, f"s{sent}".encode()).result(timeout=30)
            sent += 1
            if sum(1 for r in list(caplog.records) if "scram-reauth re-authenticated"
                   in r.getMessage()) >= 2:
                break
            time.sleep(0.1)
    assert sum(1 for r in caplog.records if "scram-reauth re-authenticated"
               in r.getMessage()) >= 2


def test_refused_reauthentication_is_raised_by_poll(broker: EmbeddedBroker, tls: Any) -> None:
    """The consumer's side of the case above: once a re-authentication is refused, poll()
    raises the broker's SaslAuthenticationFailedError instead of returning nothing."""
    expired = threading.Event()

    def provider() -> tuple[str, int]:
        now_ms = int(time.time() * 1000)
        token = unsecured_token({"unsecuredLoginStringClaim_sub": "carol"},
                                now_ms=now_ms - (7_200_000 if expired.is_set() else 0))
        return token.value, now_ms + 1000

    settings = _sasl_ssl(broker, tls, **{"sasl.mechanism": "OAUTHBEARER",
                                         "sasl_oauth_token_provider": provider})
    topic = f"ref-refused-poll-{uuid.uuid4().hex[:8]}"
    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        assert admin.create_topics([NewTopic(topic, 1, 1)]).ok
    with Producer(bootstrap_servers=broker.bootstrap_servers) as producer:
        producer.send(topic, b"one").result(timeout=30)
    with Consumer(topic, dict(settings), auto_offset_reset="earliest") as consumer:
        got: list[bytes] = []
        for _ in range(100):
            for batch in consumer.poll(timeout_ms=200).values():
                got.extend(r.value for r in batch)
            if got:
                break
        assert got == [b"one"]
        expired.set()
        with pytest.raises(SaslAuthenticationFailedError, match="OAUTHBEARER"):
            for _ in range(300):  # bounded: about 60 s of polls
                consumer.poll(timeout_ms=200)
