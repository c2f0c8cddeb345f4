"""Third-party clients against the reference broker's secured listeners: confluent-kafka
(librdkafka), kafka-python, aiokafka and Kafka's Java console tools, over SSL, mutual TLS,
SASL_PLAINTEXT and SASL_SSL with PLAIN, SCRAM-SHA-256/512 (users created through
AlterUserScramCredentials) and OAUTHBEARER; wrong password, unknown user and unsupported
mechanism reach each client as its authentication error with the broker's message; KIP-368
re-authentication under load loses no record."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # importlib mode: the helpers beside us
from broker_setup import add_scram_user, secured_config, unsecured_jws

from server_ref import EmbeddedBroker

POLL_DEADLINE_S = 60.0
USERS = {"PLAIN": ("alice", "alice-secret"), "SCRAM-SHA-256": ("bob", "bob-secret"),
         "SCRAM-SHA-512": ("carol", "carol-secret")}


@pytest.fixture(scope="module")
def broker(tls: Any) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(config=secured_config(tls)) as b:
        add_scram_user(b.bootstrap_servers, "bob", "bob-secret", "SCRAM-SHA-256")
        add_scram_user(b.bootstrap_servers, "carol", "carol-secret", "SCRAM-SHA-512", 4096)
        yield b


def topic_name() -> str:
    return f"sec-{uuid.uuid4().hex[:8]}"


# ---------------------------------------------------------------------------- confluent


def confluent_conf(broker: EmbeddedBroker, tls: Any, listener: str, mechanism: str | None,
                   user: str = "", password: str = "") -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": broker.listener_address(listener),
                            "security.protocol": listener}
    if "SSL" in listener:
        conf["ssl.ca.location"] = str(tls.ca_file)
    if mechanism == "OAUTHBEARER":
        conf.update({"sasl.mechanism": mechanism,
                     "oauth_cb": lambda _config: unsecured_jws("svc-confluent")})
    elif mechanism is not None:
        conf.update({"sasl.mechanism": mechanism, "sasl.username": user,
                     "sasl.password": password})
    return conf


def confluent_round_trip(conf: dict[str, Any], count: int = 20) -> list[bytes]:
    from confluent_kafka import Consumer, Producer

    topic = topic_name()
    producer = Producer(conf)
    values = [f"record-{i}".encode() for i in range(count)]
    for value in values:
        producer.produce(topic, value)
        producer.poll(0)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + POLL_DEADLINE_S
    while len(got) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    assert got == values
    return got


@pytest.mark.parametrize(("listener", "mechanism"), [
    ("SSL", None), ("SASL_SSL", "PLAIN"), ("SASL_PLAINTEXT", "PLAIN"),
    ("SASL_SSL", "SCRAM-SHA-256"), ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
    ("SASL_SSL", "OAUTHBEARER")])
def test_confluent_produces_and_consumes(broker: EmbeddedBroker, tls: Any, listener: str,
                                         mechanism: str | None) -> None:
    user, password = USERS.get(mechanism or "", ("", ""))
    confluent_round_trip(confluent_conf(broker, tls, listener, mechanism, user, password))


def test_confluent_mutual_tls(tls: Any) -> None:
    with EmbeddedBroker(config=secured_config(tls, **{"listeners": "SSL://127.0.0.1:0",
                                                      "ssl.client.auth": "required"})) as b:
        conf = {"bootstrap.servers": b.bootstrap_servers, "security.protocol": "SSL",
                "ssl.ca.location": str(tls.ca_file),
                "ssl.certificate.location": str(tls.client_cert),
                "ssl.key.location": str(tls.client_key)}
        confluent_round_trip(conf, count=5)
        # No certificate: the broker ends the TLS handshake, the client never gets metadata
        # (librdkafka logs the disconnections; it has no error callback for them).
        confluent_errors({**conf, "ssl.certificate.location": None, "ssl.key.location": None})


def confluent_errors(conf: dict[str, Any]) -> list[Any]:
    """The errors librdkafka reports (error_cb, served by poll) while it tries to reach the
    broker for up to 5 s; it never gets metadata."""
    from confluent_kafka import KafkaError, KafkaException, Producer

    seen: list[Any] = []
    conf = {k: v for k, v in conf.items() if v is not None}
    producer = Producer({**conf, "error_cb": seen.append})
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not any(
            e.code() == KafkaError._AUTHENTICATION for e in seen):
        producer.poll(0.2)
    with pytest.raises(KafkaException):
        producer.list_topics(timeout=1)
    return seen


@pytest.mark.parametrize(("mechanism", "user", "password", "message"), [
    ("PLAIN", "alice", "wrong-secret", "Invalid username or password"),
    ("PLAIN", "nobody", "alice-secret", "Invalid username or password"),
    ("SCRAM-SHA-256", "bob", "wrong-secret", "invalid credentials"),
    ("SCRAM-SHA-512", "nobody", "x", "invalid credentials"),
])
def test_confluent_reports_authentication_failures(broker: EmbeddedBroker, tls: Any,
                                                   mechanism: str, user: str, password: str,
                                                   message: str) -> None:
    from confluent_kafka import KafkaError

    errors = confluent_errors(confluent_conf(broker, tls, "SASL_SSL", mechanism, user,
                                             password))
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert auth and message in auth[0].str(), [e.str() for e in errors]


def test_confluent_unsupported_mechanism(tls: Any) -> None:
    from confluent_kafka import KafkaError

    with EmbeddedBroker(config=secured_config(tls, **{"sasl.enabled.mechanisms": "PLAIN"})
                        ) as b:
        errors = confluent_errors(confluent_conf(b, tls, "SASL_PLAINTEXT", "SCRAM-SHA-256",
                                                 "bob", "bob-secret"))
        auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
        assert auth and "SCRAM-SHA-256" in auth[0].str() and "PLAIN" in auth[0].str()


def test_confluent_expired_token_is_refused(broker: EmbeddedBroker, tls: Any) -> None:
    from confluent_kafka import KafkaError

    conf = confluent_conf(broker, tls, "SASL_SSL", "OAUTHBEARER")
    # librdkafka refuses to send a token it knows has expired, so lie about the expiry.
    conf["oauth_cb"] = lambda _config: (unsecured_jws("svc", lifetime_s=-60)[0],
                                        time.time() + 3600)
    errors = confluent_errors(conf)
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert auth and "invalid_token" in auth[0].str(), [e.str() for e in errors]


def test_oauthbearer_reauthentication_under_load_loses_nothing(tls: Any) -> None:
    """librdkafka re-authenticates before the broker's 1.5 s session ends (KIP-368) while a
    producer keeps sending; every record is acknowledged once and read back."""
    from confluent_kafka import Producer

    config = secured_config(tls, **{
        "listener.name.sasl_plaintext.oauthbearer.connections.max.reauth.ms": 1500})
    with EmbeddedBroker(config=config) as b:
        conf = confluent_conf(b, tls, "SASL_PLAINTEXT", "OAUTHBEARER")
        topic = topic_name()
        delivered: list[bytes] = []
        failures: list[Any] = []

        def on_delivery(err: Any, message: Any) -> None:
            (failures.append(err) if err is not None else delivered.append(message.value()))

        producer = Producer({**conf, "linger.ms": 5, "enable.idempotence": True})
        sent: list[bytes] = []
        stop_at = time.monotonic() + 8
        i = 0
        while time.monotonic() < stop_at or b.security_stats["reauthenticated"] < 3:
            value = f"r{i}".encode()
            producer.produce(topic, value, on_delivery=on_delivery)
            sent.append(value)
            i += 1
            producer.poll(0.002)
            assert time.monotonic() < stop_at + 30, b.security_stats
        assert producer.flush(30) == 0
        assert not failures
        assert sorted(delivered) == sorted(sent)
        stats = b.security_stats
        assert stats["reauthenticated"] >= 3 and stats["expired"] == 0, stats
        # Read back through another OAUTHBEARER connection: each record once, in order.
        from confluent_kafka import Consumer

        consumer = Consumer({**conf, "group.id": topic, "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + POLL_DEADLINE_S
        while len(got) < len(sent) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
        consumer.close()
        assert got == sent


# ---------------------------------------------------------------------------- kafka-python


def kafka_python_conf(broker: EmbeddedBroker, tls: Any, listener: str, mechanism: str,
                      user: str = "", password: str = "") -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap_servers": broker.listener_address(listener),
                            "security_protocol": listener, "sasl_mechanism": mechanism}
    if "SSL" in listener:
        conf["ssl_cafile"] = str(tls.ca_file)
    if mechanism == "OAUTHBEARER":
        from kafka.net.sasl.oauth import AbstractTokenProvider

        class Tokens(AbstractTokenProvider):
            def token(self) -> str:
                return unsecured_jws("svc-kafka-python")[0]

        conf["sasl_oauth_token_provider"] = Tokens()
    else:
        conf.update({"sasl_plain_username": user, "sasl_plain_password": password})
    return conf


@pytest.mark.parametrize(("listener", "mechanism"), [
    ("SASL_SSL", "PLAIN"), ("SASL_PLAINTEXT", "SCRAM-SHA-256"), ("SASL_SSL", "SCRAM-SHA-512"),
    ("SASL_PLAINTEXT", "OAUTHBEARER")])
def test_kafka_python_produces_and_consumes(broker: EmbeddedBroker, tls: Any, listener: str,
                                            mechanism: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    user, password = USERS.get(mechanism, ("", ""))
    conf = kafka_python_conf(broker, tls, listener, mechanism, user, password)
    topic = topic_name()
    producer = KafkaProducer(**conf)
    values = [f"kp-{i}".encode() for i in range(10)]
    for value in values:
        producer.send(topic, value).get(30)
    producer.close()
    consumer = KafkaConsumer(topic, group_id=topic, auto_offset_reset="earliest",
                             consumer_timeout_ms=30000, **conf)
    got: list[bytes] = []
    for message in consumer:  # stops at the last record (or after 30 s without one)
        got.append(message.value)
        if len(got) == len(values):
            break
    consumer.close()
    assert got == values


def test_kafka_python_wrong_password(broker: EmbeddedBroker, tls: Any,
                                     caplog: pytest.LogCaptureFixture) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    conf = kafka_python_conf(broker, tls, "SASL_SSL", "SCRAM-SHA-512", "carol", "wrong-secret")
    with caplog.at_level(logging.ERROR, logger="kafka"), pytest.raises(KafkaTimeoutError):
        KafkaProducer(**conf, bootstrap_timeout_ms=3000)
    # kafka-python logs the broker's SaslAuthenticate error and gives up bootstrapping.
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in caplog.text


# ---------------------------------------------------------------------------- aiokafka


def aiokafka_conf(broker: EmbeddedBroker, tls: Any, listener: str, mechanism: str,
                  user: str, password: str) -> dict[str, Any]:
    from aiokafka.helpers import create_ssl_context

    conf: dict[str, Any] = {"bootstrap_servers": broker.listener_address(listener),
                            "security_protocol": listener, "sasl_mechanism": mechanism,
                            "sasl_plain_username": user, "sasl_plain_password": password}
    if "SSL" in listener:
        conf["ssl_context"] = create_ssl_context(cafile=str(tls.ca_file))
    return conf


@pytest.mark.parametrize(("listener", "mechanism"), [
    ("SASL_SSL", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-256"), ("SASL_PLAINTEXT", "SCRAM-SHA-512")])
def test_aiokafka_produces_and_consumes(broker: EmbeddedBroker, tls: Any, listener: str,
                                        mechanism: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    user, password = USERS[mechanism]
    topic = topic_name()
    values = [f"ai-{i}".encode() for i in range(10)]

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**aiokafka_conf(broker, tls, listener, mechanism, user,
                                                    password))
        await producer.start()
        try:
            for value in values:
                await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=topic, auto_offset_reset="earliest",
                                    **aiokafka_conf(broker, tls, listener, mechanism, user,
                                                    password))
        await consumer.start()
        got: list[bytes] = []

        async def read() -> None:
            async for message in consumer:
                got.append(message.value)
                if len(got) == len(values):
                    break

        try:
            await asyncio.wait_for(read(), POLL_DEADLINE_S)
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == values


def test_aiokafka_wrong_password(broker: EmbeddedBroker, tls: Any,
                                 caplog: pytest.LogCaptureFixture) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaConnectionError

    async def run() -> None:
        producer = AIOKafkaProducer(**aiokafka_conf(broker, tls, "SASL_SSL", "PLAIN", "alice",
                                                    "wrong-secret"))
        try:
            with pytest.raises(KafkaConnectionError):
                await producer.start()
        finally:
            await producer.stop()

    with caplog.at_level(logging.ERROR, logger="aiokafka"):
        asyncio.run(run())
    assert "SaslAuthenticationFailed: Authentication failed: Invalid username or password" \
        in caplog.text


# ---------------------------------------------------------------------------- Java tools


def java_properties(path: Path, lines: dict[str, str]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in lines.items()))
    return path


def test_java_console_tools_over_sasl_ssl(broker: EmbeddedBroker, tls: Any,
                                          tmp_path: Path) -> None:
    """Kafka's own console producer (SCRAM-SHA-512) and consumer (OAUTHBEARER, with the
    token Kafka's unsecured login module makes) over SASL_SSL with a PEM trust store."""
    from apache_support import require_apache_kafka

    from tools.apache_kafka import java_command

    require_apache_kafka()
    common = {"security.protocol": "SASL_SSL", "ssl.truststore.type": "PEM",
              "ssl.truststore.location": str(tls.ca_file)}
    scram = java_properties(tmp_path / "scram.properties", {
        **common, "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule '
                            'required username="carol" password="carol-secret";'})
    oauth = java_properties(tmp_path / "oauth.properties", {
        **common, "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer."
                            'OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="java";'})
    topic = topic_name()
    lines = [f"java-{i}" for i in range(5)]
    address = broker.listener_address("SASL_SSL")
    produced = subprocess.run(java_command(
        "org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", address,
        "--topic", topic, "--command-config", str(scram)),
        input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120)
    assert produced.returncode == 0, produced.stderr[-3000:]
    consumed = subprocess.run(java_command(
        "org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", address,
        "--topic", topic, "--from-beginning", "--max-messages", str(len(lines)),
        "--timeout-ms", "60000", "--command-config", str(oauth)),
        capture_output=True, text=True, timeout=120)
    assert consumed.returncode == 0, consumed.stderr[-3000:]
    assert consumed.stdout.split() == lines
    wrong = java_properties(tmp_path / "wrong.properties", {
        **common, "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule '
                            'required username="carol" password="wrong-secret";'})
    refused = subprocess.run(java_command(
        "org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", address,
        "--topic", topic, "--command-config", str(wrong)),
        input="x\n", capture_output=True, text=True, timeout=120)
    printed = refused.stdout + refused.stderr  # the tool prints the failure on stdout
    assert "SaslAuthenticationException" in printed, printed[-3000:]
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in printed




def test_java_console_producer_over_mutual_tls(tls: Any, tmp_path: Path) -> None:
    """Kafka's console producer with a PEM key store (key and chain in one file) and a PEM
    trust store against an SSL listener that requires client certificates."""
    from apache_support import require_apache_kafka

    from tools.apache_kafka import java_command

    require_apache_kafka()
    config = secured_config(tls, **{"listeners": "SSL://127.0.0.1:0",
                                    "ssl.client.auth": "required"})
    from cryptography.hazmat.primitives import serialization

    # Java's PEM key store reads PKCS#8 keys only; trustme writes SEC1 ("EC PRIVATE KEY").
    key = serialization.load_pem_private_key(tls.client_key.read_bytes(), password=None)
    keystore = tmp_path / "client-pkcs8.pem"
    keystore.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption())
                         + tls.client_cert.read_bytes())
    with EmbeddedBroker(config=config) as b:
        props = java_properties(tmp_path / "mtls.properties", {
            "security.protocol": "SSL", "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(tls.ca_file), "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore)})
        topic = topic_name()
        produced = subprocess.run(java_command(
            "org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server",
            b.bootstrap_servers, "--topic", topic, "--command-config", str(props)),
            input="one\ntwo\n", capture_output=True, text=True, timeout=120)
        assert produced.returncode == 0, produced.stderr[-3000:]
        conf = {"bootstrap.servers": b.bootstrap_servers, "security.protocol": "SSL",
                "ssl.ca.location": str(tls.ca_file),
                "ssl.certificate.location": str(tls.client_cert),
                "ssl.key.location": str(tls.client_key)}
        from confluent_kafka import Consumer

        consumer = Consumer({**conf, "group.id": topic, "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + POLL_DEADLINE_S
        while len(got) < 2 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
        consumer.close()
        assert got == [b"one", b"two"]
