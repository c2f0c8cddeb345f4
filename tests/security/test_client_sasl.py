"""The SDK over SASL against Apache Kafka (one node, its SASL listeners; see apache_secured).

Every mechanism carries a producer, a consumer group and admin calls; wrong credentials,
an expired token and a mechanism the listener does not offer are typed errors, raised by
the call that needed the broker, told to on_error, and never retried in a storm; an
OAUTHBEARER session outlives several KIP-368 re-authentications under load with no record
lost.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from security.apache_secured import (
    USERS,
    oauth_jaas,
    plain_jaas,
    roundtrip,
    scram_jaas,
    secured_apache,
)

from sdk import AdminClient, Consumer, Producer
from sdk.errors import (
    AuthenticationError,
    KafkaError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from sdk.net.security import OAuthBearerToken
from sdk.net.security.oauth import unsecured_token
from sdk.types import NewTopic
from tools.apache_kafka import ApacheKafkaCluster

pytestmark = pytest.mark.integration

REAUTH_MS = 2000  # the broker's connections.max.reauth.ms for OAUTHBEARER sessions


@pytest.fixture(scope="module")
def kafka(tls: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    with secured_apache(tls, tmp_path_factory.mktemp("sasl-kafka"),
                        oauth_reauth_ms=REAUTH_MS) as cluster:
        yield cluster


def sasl_ssl(kafka: ApacheKafkaCluster, tls: Any, **mechanism: Any) -> dict[str, Any]:
    """Java's property names for the TLS part, as a Java client's file would have them."""
    return {"bootstrap.servers": kafka.listener_bootstrap("SASL_SSL"),
            "security.protocol": "SASL_SSL", "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(tls.ca_file), **mechanism}


async def _async_token() -> OAuthBearerToken:
    return unsecured_token({"unsecuredLoginStringClaim_sub": "alice",
                            "unsecuredLoginLifetimeSeconds": "600"})


MECHANISMS: dict[str, dict[str, Any]] = {
    "plain-librdkafka-names": {"sasl.mechanisms": "PLAIN", "sasl.username": "alice",
                               "sasl.password": USERS["alice"]},
    "plain-jaas": {"sasl.mechanism": "PLAIN", "sasl.jaas.config": plain_jaas("bob")},
    "scram-sha-256": {"sasl_mechanism": "SCRAM-SHA-256", "sasl_username": "alice",
                      "sasl_password": USERS["alice"]},
    "scram-sha-512-jaas": {"sasl.mechanism": "SCRAM-SHA-512",
                           "sasl.jaas.config": scram_jaas("bob")},
    "oauthbearer-unsecured-jaas": {"sasl.mechanism": "OAUTHBEARER",
                                   "sasl.jaas.config": oauth_jaas("alice")},
    "oauthbearer-async-provider": {"sasl.mechanism": "OAUTHBEARER",
                                   "sasl_oauth_token_provider": _async_token},
}


@pytest.mark.parametrize("name", list(MECHANISMS))
def test_produce_consume_admin_over_sasl_ssl(kafka: ApacheKafkaCluster, tls: Any,
                                             name: str) -> None:
    roundtrip(sasl_ssl(kafka, tls, **MECHANISMS[name]))


def test_scram_over_sasl_plaintext(kafka: ApacheKafkaCluster) -> None:
    roundtrip({"bootstrap.servers": kafka.listener_bootstrap("SASL_PLAINTEXT"),
               "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
               "sasl.username": "alice", "sasl.password": USERS["alice"]}, records=20)


def _attempts(caplog: pytest.LogCaptureFixture) -> int:
    """Connection attempts that failed authentication, as the network client logs them."""
    return sum(1 for r in caplog.records
               if r.name == "sdk.net.client" and "unreachable" in r.getMessage()
               and "authentication" in r.getMessage().lower())


def _expired_token() -> str:
    return unsecured_token({"unsecuredLoginStringClaim_sub": "alice"},
                           now_ms=int(time.time() * 1000) - 7_200_000).value


BAD_CREDENTIALS: dict[str, tuple[dict[str, Any], str]] = {
    "plain-wrong-password": ({"sasl.mechanism": "PLAIN", "sasl.username": "alice",
                              "sasl.password": "not-the-password"}, "Invalid username or password"),
    "scram-wrong-password": ({"sasl.mechanism": "SCRAM-SHA-256",
                              "sasl.jaas.config": scram_jaas("alice").replace(
                                  USERS["alice"], "not-the-password")}, "invalid credentials"),
    "scram-unknown-user": ({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "mallory",
                            "sasl.password": "not-the-password"}, "SCRAM-SHA-512"),
    "oauthbearer-expired-token": ({"sasl.mechanism": "OAUTHBEARER",
                                   "sasl_oauth_token_provider": _expired_token},
                                  "invalid_token"),
}


@pytest.mark.parametrize("name", list(BAD_CREDENTIALS))
def test_refused_credentials_are_typed_told_and_not_retried_in_a_storm(
        kafka: ApacheKafkaCluster, tls: Any, name: str,
        caplog: pytest.LogCaptureFixture) -> None:
    mechanism, broker_words = BAD_CREDENTIALS[name]
    told: list[KafkaError] = []
    # A short first backoff would retry ~10 times in 2 s; an authentication failure waits
    # reconnect_backoff_max_ms (1.5 s) instead.
    settings = {**sasl_ssl(kafka, tls, **mechanism), "reconnect.backoff.ms": 1,
                "reconnect.backoff.max.ms": 1500, "on_error": told.append}
    caplog.set_level(logging.INFO, logger="sdk.net.client")
    with Producer(dict(settings), max_block_ms=10_000) as producer:
        with pytest.raises(SaslAuthenticationFailedError) as info:
            producer.send("any-topic", b"x").result(timeout=10)
        text = str(info.value)
        assert "SASL_AUTHENTICATION_FAILED" in text and mechanism["sasl.mechanism"] in text
        assert broker_words in text
        assert "not-the-password" not in text and "not-the-password" not in repr(producer)
        # Sends keep failing at once with the same error during a bounded window; count
        # the connection attempts made meanwhile.
        window_end = time.monotonic() + 4.0
        failures = 0
        while time.monotonic() < window_end:
            with pytest.raises(AuthenticationError):
                producer.send("any-topic", b"x").result(timeout=10)
            failures += 1
            time.sleep(0.05)
    assert failures > 10
    attempts = _attempts(caplog)
    assert 1 <= attempts <= 4, f"{attempts} authentication attempts in a 4 s window"
    assert any(isinstance(e, SaslAuthenticationFailedError) for e in told)
    for record in caplog.records:
        assert "not-the-password" not in record.getMessage()


def test_consumer_poll_and_admin_raise_refused_credentials(kafka: ApacheKafkaCluster,
                                                          tls: Any) -> None:
    settings = sasl_ssl(kafka, tls, **{"sasl.mechanism": "PLAIN", "sasl.username": "alice",
                                       "sasl.password": "wrong"})
    with Consumer("any-topic", dict(settings), group_id="g-refused") as consumer:
        with pytest.raises(SaslAuthenticationFailedError, match="PLAIN"):
            for _ in range(20):
                consumer.poll(timeout_ms=500)
    with Consumer(dict(settings)) as consumer:  # no group: metadata only
        consumer.subscribe(["any-topic"])
        with pytest.raises(SaslAuthenticationFailedError):
            for _ in range(20):
                consumer.poll(timeout_ms=500)
    with AdminClient(dict(settings)) as admin:
        with pytest.raises(SaslAuthenticationFailedError):
            admin.list_topics()


def test_mechanism_the_listener_does_not_offer(kafka: ApacheKafkaCluster) -> None:
    settings = {"bootstrap.servers": kafka.listener_bootstrap("SASL_PLAINTEXT"),
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                "sasl.jaas.config": oauth_jaas()}
    with AdminClient(settings) as admin:
        with pytest.raises(UnsupportedSaslMechanismError) as info:
            admin.list_topics()
    assert "OAUTHBEARER is not enabled" in str(info.value)
    assert "SCRAM-SHA-512" in str(info.value)  # what the broker offers instead


def test_oauthbearer_session_outlives_reauthentications_under_load(
        kafka: ApacheKafkaCluster, tls: Any, caplog: pytest.LogCaptureFixture) -> None:
    """connections.max.reauth.ms=2000: every connection re-authenticates every ~1.8 s while
    records flow both ways; at least three re-authentications each for the producer's and
    the consumer's connections, and every record arrives exactly once."""
    caplog.set_level(logging.DEBUG, logger="sdk.net.connection")
    tokens: list[int] = []

    def provider() -> tuple[str, int]:
        tokens.append(1)
        token = unsecured_token({"unsecuredLoginStringClaim_sub": "alice",
                                 "unsecuredLoginLifetimeSeconds": "3"})
        assert token.expires_at_ms is not None
        return token.value, token.expires_at_ms

    settings, topic = _oauth_settings_and_topic(kafka, tls, provider, "reauth", 2)
    seen: list[bytes] = []
    stop = threading.Event()
    consumer_error: list[BaseException] = []

    def consume() -> None:
        try:
            with Consumer(topic, dict(settings), group_id=f"g-{topic}",
                          auto_offset_reset="earliest", client_id="reauth-consumer") as c:
                while not stop.is_set():
                    for batch in c.poll(timeout_ms=200).values():
                        seen.extend(r.value for r in batch)
        except BaseException as exc:  # reported below
            consumer_error.append(exc)

    reader = threading.Thread(target=consume)
    reader.start()
    sent = 0
    try:
        with Producer(dict(settings), client_id="reauth-producer", linger_ms=5) as producer:
            futures = []
            deadline = time.monotonic() + 120  # a bound on a hung run, not an expectation
            while time.monotonic() < deadline:
                futures.extend(producer.send(topic, f"r{sent + i}".encode()) for i in range(20))
                sent += 20
                time.sleep(0.02)
                if (_reauths(caplog, "reauth-producer") >= 3 and sent >= 2000
                        and _reauths(caplog, "reauth-consumer") >= 3):
                    break
            producer.flush(timeout=30)
            for future in futures:
                future.result(timeout=0)  # every record acknowledged, none failed
        for _ in range(600):
            if len(seen) >= sent or consumer_error:
                break
            time.sleep(0.1)
    finally:
        stop.set()
        reader.join(30)
    assert not consumer_error, consumer_error
    assert _reauths(caplog, "reauth-producer") >= 3
    assert _reauths(caplog, "reauth-consumer") >= 3
    assert len(seen) == sent and len(set(seen)) == sent
    assert len(tokens) >= 2  # the 3 s tokens were renewed for re-authentications


def test_sessions_under_a_second_are_reauthenticated_without_a_close(
        kafka: ApacheKafkaCluster, tls: Any, caplog: pytest.LogCaptureFixture) -> None:
    """Kafka's broker takes one re-authentication a second per connection and closes a
    connection whose session ended at its next request. Tokens that end 1.1 s after they
    are issued, reused until 80% of their life, make sessions of 0.9-1.1 s, too short for
    both rules: requests are held from the due time and the SaslHandshake goes out 1 s
    after the last exchange ended, so no re-authentication is refused, no connection is
    closed and none is made again, on any of an idle consumer's three connections."""
    caplog.set_level(logging.INFO, logger="sdk.net.client")  # reconnections
    caplog.set_level(logging.DEBUG, logger="sdk.net.connection")  # (last: the handler's level)

    def provider() -> tuple[str, int]:
        now_ms = int(time.time() * 1000)
        token = unsecured_token({"unsecuredLoginStringClaim_sub": "alice",
                                 "unsecuredLoginLifetimeSeconds": "2"}, now_ms=now_ms - 900)
        assert token.expires_at_ms == now_ms + 1100
        return token.value, token.expires_at_ms

    settings, topic = _oauth_settings_and_topic(kafka, tls, provider, "idle", 1)
    with Consumer(topic, dict(settings), group_id=f"g-{topic}", fetch_max_wait_ms=500,
                  client_id="idle-consumer") as consumer:
        deadline = time.monotonic() + 60  # bounds a hung run only
        while _reauths(caplog, "idle-consumer") < 15 and time.monotonic() < deadline:
            assert consumer.poll(timeout_ms=200) == {}
    assert _refused_reauths(caplog) == []
    assert [r.getMessage() for r in caplog.records if "again" in r.getMessage()] == []
    assert _reauths(caplog, "idle-consumer") >= 15


def _oauth_settings_and_topic(kafka: ApacheKafkaCluster, tls: Any, provider: Any,
                              prefix: str, partitions: int) -> tuple[dict[str, Any], str]:
    """OAUTHBEARER settings with ``provider`` and a new topic made with them."""
    settings = sasl_ssl(kafka, tls, **{"sasl.mechanism": "OAUTHBEARER",
                                       "sasl_oauth_token_provider": provider})
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    with AdminClient(dict(settings)) as admin:
        assert admin.create_topics([NewTopic(topic, partitions, 1)]).ok
    return settings, topic


def _reauths(caplog: pytest.LogCaptureFixture, client_id: str) -> int:
    return sum(1 for r in list(caplog.records)
               if r.name == "sdk.net.connection" and "re-authenticated" in r.getMessage()
               and client_id in r.getMessage())


def _refused_reauths(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in list(caplog.records)
            if r.name == "sdk.net.connection" and "re-authentication with" in r.getMessage()]


def test_credentials_not_in_reprs(kafka: ApacheKafkaCluster, tls: Any, tmp_path: Path) -> None:
    settings = sasl_ssl(kafka, tls, **{"sasl.mechanism": "PLAIN",
                                       "sasl.jaas.config": plain_jaas("alice")})
    with Producer(dict(settings)) as producer, AdminClient(dict(settings)) as admin:
        admin.list_topics()
        for shown in (repr(producer), repr(admin), str(producer)):
            assert USERS["alice"] not in shown


# ------------------------------------------------------------------------------ CLI

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    proc = subprocess.run([sys.executable, "-m", "sdk", *args], input=stdin, text=True,
                          capture_output=True, cwd=ROOT, env=env, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_cli_over_sasl_ssl_with_x_and_command_config(kafka: ApacheKafkaCluster, tls: Any,
                                                     tmp_path: Path) -> None:
    """-X takes librdkafka's names; --command-config a Java client's properties file."""
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    x = ["-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={tls.ca_file}",
         "-X", "sasl.mechanisms=SCRAM-SHA-256", "-X", "sasl.username=alice",
         "-X", f"sasl.password={USERS['alice']}"]
    bootstrap = ["--bootstrap-server", kafka.listener_bootstrap("SASL_SSL")]
    created = _cli(*bootstrap, *x, "topics", "create", topic, "--partitions", "1")
    assert created.returncode == 0, created.stderr
    produced = _cli(*bootstrap, *x, "produce", topic, "--quiet", stdin="one\ntwo\nthree\n")
    assert produced.returncode == 0, produced.stderr
    properties = tmp_path / "client.properties"
    properties.write_text(
        f"bootstrap.servers={kafka.listener_bootstrap('SASL_SSL')}\n"
        "security.protocol=SASL_SSL\nssl.truststore.type=PEM\n"
        f"ssl.truststore.location={tls.ca_file}\nsasl.mechanism=PLAIN\n"
        f"sasl.jaas.config={plain_jaas('bob')}\n")
    consumed = _cli("--command-config", str(properties), "consume", topic,
                    "--from-beginning", "--max-messages", "3")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == ["one", "two", "three"]
    listed = _cli("--command-config", str(properties), "topics", "list")
    assert topic in listed.stdout


def test_cli_wrong_password_is_one_clear_error_line(kafka: ApacheKafkaCluster,
                                                    tls: Any) -> None:
    run = _cli("--bootstrap-server", kafka.listener_bootstrap("SASL_SSL"),
               "-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={tls.ca_file}",
               "-X", "sasl.mechanism=PLAIN", "-X", "sasl.username=alice",
               "-X", "sasl.password=definitely-wrong", "topics", "list")
    assert run.returncode != 0
    assert "SASL_AUTHENTICATION_FAILED" in run.stderr and "PLAIN" in run.stderr
    assert "definitely-wrong" not in run.stderr + run.stdout


def test_scram_user_created_through_our_admin_client(kafka: ApacheKafkaCluster,
                                                     tls: Any) -> None:
    """A SCRAM credential set with AdminClient.alter_user_scram_credentials (over PLAINTEXT)
    lets a new user in over SASL_SSL: the broker learns it from the metadata log a moment
    after the call returns, so the first attempts may be refused."""
    from sdk.admin.acl_types import ScramMechanism, UserScramCredentialUpsertion

    user, password = f"carol{uuid.uuid4().hex[:6]}", "carol-secret"
    with AdminClient(bootstrap_servers=kafka.bootstrap_servers) as admin:
        result = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            user, ScramMechanism.SCRAM_SHA_512, password, iterations=8192)])
        assert result.ok, result.errors
    settings = sasl_ssl(kafka, tls, **{"sasl.mechanism": "SCRAM-SHA-512",
                                       "sasl.username": user, "sasl.password": password})
    for _ in range(50):
        try:
            with AdminClient(dict(settings)) as admin:
                admin.list_topics()
            break
        except SaslAuthenticationFailedError:
            time.sleep(0.2)
    roundtrip(settings, records=20)
