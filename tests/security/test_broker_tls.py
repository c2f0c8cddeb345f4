"""Listeners and TLS on the reference broker: several listeners with their own endpoints in
Metadata, advertised.listeners, PEM key stores (file, inline, encrypted key), mutual TLS with
Kafka's principal, fetches over TLS (no sendfile), configuration errors, the command line."""

from __future__ import annotations

import re
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # importlib mode: the helpers beside us
from broker_setup import secured_config
from raw_wire import Wire

from sdk.errors import ConfigError
from sdk.protocol.messages.describe_cluster import DescribeClusterRequest
from sdk.protocol.messages.find_coordinator import FindCoordinatorRequest
from server_ref import EmbeddedBroker

ROOT = Path(__file__).resolve().parents[2]


def client_context(tls: Any, cert: bool = False) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(tls.ca_file))
    if cert:
        context.load_cert_chain(str(tls.client_keystore))
    return context


def test_each_listener_answers_with_its_own_endpoints(tls: Any) -> None:
    with EmbeddedBroker(config=secured_config(tls)) as b:
        ports = b.listener_ports
        assert list(ports) == ["PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL"]
        assert len(set(ports.values())) == 4
        assert b.bootstrap_servers == f"127.0.0.1:{ports['PLAINTEXT']}"
        with Wire(b.listener_address("SSL"), client_context(tls)) as wire:
            assert [(x.host, x.port) for x in wire.metadata().brokers] == [
                ("127.0.0.1", ports["SSL"])]
            coordinator = wire.call(FindCoordinatorRequest(key="g"), 3)
            assert coordinator.port == ports["SSL"]
            cluster = wire.call(DescribeClusterRequest(), 0)
            assert cluster.brokers[0].port == ports["SSL"]
        with Wire(b.bootstrap_servers) as wire:
            assert wire.metadata().brokers[0].port == ports["PLAINTEXT"]
        b.restart()  # port 0 listeners bind the same ports again
        assert b.listener_ports == ports


def test_advertised_listeners(tls: Any) -> None:
    config = secured_config(tls, **{
        "listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SSL",
        "advertised.listeners": "EXTERNAL://kafka.example.com:19093",
        "inter.broker.listener.name": "INTERNAL"})
    with EmbeddedBroker(config=config) as b:
        with Wire(b.listener_address("external"), client_context(tls)) as wire:
            assert [(x.host, x.port) for x in wire.metadata().brokers] == [
                ("kafka.example.com", 19093)]
        with Wire(b.listener_address("INTERNAL")) as wire:
            assert wire.metadata().brokers[0].port == b.listener_ports["INTERNAL"]


@pytest.mark.parametrize("setting", [
    {"listeners": "CUSTOM://127.0.0.1:0"},
    {"listeners": "PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0"},
    {"listeners": "PLAINTEXT://nonsense"},
    {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": "/no/such/file.pem"},
    {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "JKS"},
    {"listeners": "SSL://127.0.0.1:0", "ssl.client.auth": "sometimes"},
    {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "GSSAPI"},
    {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
     "listener.name.sasl_plaintext.plain.sasl.jaas.config": "nonsense"},
    {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
     "listener.name.sasl_plaintext.plain.sasl.jaas.config": None},
    {"advertised.listeners": "OTHER://h:1"},
    {"ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/"},
    {"principal.builder.class": "com.example.Builder"},
    {"inter.broker.listener.name": "OTHER"},
])
def test_bad_listener_settings_fail_to_start_with_the_setting_named(
        tls: Any, setting: dict[str, Any]) -> None:
    config = secured_config(tls, **{"listeners": "PLAINTEXT://127.0.0.1:0"})
    config.pop("listener.name.sasl_plaintext.plain.sasl.jaas.config")
    config.update({k: v for k, v in setting.items() if v is not None})
    if "sasl.enabled.mechanisms" not in setting:
        config.pop("sasl.enabled.mechanisms")
    with pytest.raises(ConfigError) as caught:
        EmbeddedBroker(config=config).start()
    message = str(caught.value)
    assert any(key.split(".")[-1] in message or key in message for key in setting), message


def test_sasl_listener_without_mechanisms_names_kafkas_default(tls: Any) -> None:
    with pytest.raises(ConfigError, match="GSSAPI, is not implemented"):
        EmbeddedBroker(config={"listeners": "SASL_PLAINTEXT://127.0.0.1:0"}).start()


def test_inline_pem_and_encrypted_key(tls: Any, tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(tls.broker_key.read_bytes(), password=None)
    encrypted = key.private_bytes(serialization.Encoding.PEM,
                                  serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(b"key-pass"))
    # Inline values as a properties file carries them: on one line.
    config = {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
              "ssl.keystore.key": encrypted.decode().replace("\n", " "),
              "ssl.keystore.certificate.chain": tls.broker_cert.read_text().replace("\n", " "),
              "ssl.key.password": "key-pass",
              "ssl.truststore.type": "PEM",
              "ssl.truststore.certificates": tls.ca_file.read_text()}
    with EmbeddedBroker(config=config) as b, Wire(b.bootstrap_servers,
                                                  client_context(tls)) as wire:
        assert wire.metadata().brokers
    with pytest.raises(ConfigError, match=r"ssl\.key\.password") as caught:
        EmbeddedBroker(config={**config, "ssl.key.password": "wrong-pass"}).start()
    assert "wrong-pass" not in str(caught.value)


@pytest.mark.parametrize("mode", ["required", "requested"])
def test_mutual_tls_principal_is_the_certificate_subject(tls: Any, mode: str) -> None:
    config = secured_config(tls, **{"listeners": "SSL://127.0.0.1:0",
                                    "ssl.client.auth": mode})
    with EmbeddedBroker(config=config) as b:
        with Wire(b.bootstrap_servers, client_context(tls, cert=True)) as wire:
            wire.metadata()
            ((listener, principal),) = b.connection_principals()
            assert listener == "SSL"
            assert re.fullmatch(r"User:CN=client,OU=Testing cert [^,]+,O=trustme[^,]*",
                                principal), principal
        if mode == "required":
            with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
                with Wire(b.bootstrap_servers, client_context(tls)) as wire:
                    wire.metadata()  # TLS 1.3: the refusal arrives at the first read
        else:
            with Wire(b.bootstrap_servers, client_context(tls)) as wire:
                wire.metadata()
                assert b.connection_principals() == [("SSL", "User:ANONYMOUS")]


def test_untrusted_client_certificate_is_refused_and_others_served(tls: Any) -> None:
    import trustme

    stranger = trustme.CA().issue_cert("stranger")
    context = ssl.create_default_context(cafile=str(tls.ca_file))
    stranger.configure_cert(context)
    config = secured_config(tls, **{"listeners": "SSL://127.0.0.1:0",
                                    "ssl.client.auth": "required"})
    with EmbeddedBroker(config=config) as b:
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with Wire(b.bootstrap_servers, context) as wire:
                wire.metadata()
        with Wire(b.bootstrap_servers, client_context(tls, cert=True)) as wire:
            assert wire.metadata().brokers


def test_large_fetch_over_tls_is_copied_not_sendfiled(tls: Any) -> None:
    from confluent_kafka import Consumer, Producer

    with EmbeddedBroker(config=secured_config(tls)) as b:
        ssl_conf = {"bootstrap.servers": b.listener_address("SSL"), "security.protocol": "SSL",
                    "ssl.ca.location": str(tls.ca_file)}
        producer = Producer({**ssl_conf, "linger.ms": 5})
        values = [bytes([i % 251]) * 50_000 for i in range(60)]  # 3 MB
        for value in values:
            producer.produce("big", value)
        assert producer.flush(30) == 0
        consumer = Consumer({**ssl_conf, "group.id": "big", "auto.offset.reset": "earliest"})
        consumer.subscribe(["big"])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < len(values) and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                got.append(message.value())
        consumer.close()
        assert got == values
        # The same data over PLAINTEXT goes through sendfile; over TLS it was copied.
        sent_before = b.call(lambda: b._server.file_bytes_sent)  # type: ignore[union-attr]
        assert sent_before == 0
        plain = Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "big-plain",
                          "auto.offset.reset": "earliest"})
        plain.subscribe(["big"])
        count = 0
        deadline = time.monotonic() + 60
        while count < len(values) and time.monotonic() < deadline:
            message = plain.poll(1.0)
            count += message is not None and message.error() is None
        plain.close()
        assert count == len(values)
        assert b.call(lambda: b._server.file_bytes_sent) > 0  # type: ignore[union-attr]


def test_garbage_before_tls_closes_only_that_connection(tls: Any) -> None:
    import socket

    with EmbeddedBroker(config=secured_config(tls)) as b:
        with Wire(b.listener_address("SSL"), client_context(tls)) as kept:
            kept.metadata()
            host, port = b.listener_address("SSL").rsplit(":", 1)
            for junk in (b"\x00" * 5, b"GET / HTTP/1.1\r\n\r\n",
                         b"\x16\x03\x01\xff\xff" + b"A" * 100):
                with socket.create_connection((host, int(port)), timeout=10) as raw:
                    raw.sendall(junk)
                    assert raw.recv(1024) is not None  # an alert or EOF, never a hang
            assert kept.metadata().brokers


def test_command_line_prints_each_listener(tls: Any, tmp_path: Path) -> None:
    config = secured_config(tls)
    args = [sys.executable, "-m", "server_ref", "--data-dir", str(tmp_path / "data")]
    for key, value in config.items():
        args += ["--config", f"{key}={value}"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        match = re.match(r"server_ref ready bootstrap_servers=127.0.0.1:(\d+) ", ready)
        assert match, ready + (proc.stderr.read() if proc.poll() is not None else "")
        lines = [proc.stdout.readline().strip() for _ in range(4)]
        ports = {}
        for line in lines:
            parsed = re.fullmatch(r"listener (\w+) protocol=(\w+) port=(\d+)", line)
            assert parsed, line
            assert parsed.group(1) == parsed.group(2)
            ports[parsed.group(1)] = int(parsed.group(3))
        assert ports["PLAINTEXT"] == int(match.group(1))
        with Wire(f"127.0.0.1:{ports['SASL_SSL']}", client_context(tls)) as wire:
            assert wire.plain("admin", "admin-secret").error_code == 0
            assert wire.metadata().brokers[0].port == ports["SASL_SSL"]
    finally:
        proc.terminate()
        proc.wait(30)


def test_describe_configs_shows_listener_settings_as_static(tls: Any) -> None:
    """As Kafka describes them: the value when not sensitive, none for passwords, keys and
    JAAS configs (listener-prefixed ones typed as the config they override)."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    with EmbeddedBroker(config=secured_config(tls, **{"ssl.key.password": "key-pass"})) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        resource = ConfigResource(ConfigResource.Type.BROKER, "0")
        entries = admin.describe_configs([resource])[resource].result(30)
        listeners = entries["listeners"]
        assert listeners.value == secured_config(tls)["listeners"]
        assert listeners.source == 4 and not listeners.is_default  # STATIC_BROKER_CONFIG
        assert entries["sasl.enabled.mechanisms"].value == "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512," \
                                                           "OAUTHBEARER"
        for secret in ("ssl.key.password",
                       "listener.name.sasl_ssl.plain.sasl.jaas.config"):
            assert entries[secret].is_sensitive and entries[secret].value is None
            assert entries[secret].source == 4


def test_client_auth_on_sasl_ssl_needs_the_listener_prefix(tls: Any) -> None:
    """KIP-684: a broker-wide ssl.client.auth does not apply to SASL_SSL listeners; with the
    listener prefix it does, and the principal still comes from SASL."""
    broker_wide = secured_config(tls, **{"ssl.client.auth": "required"})
    with EmbeddedBroker(config=broker_wide) as b:
        with Wire(b.listener_address("SASL_SSL"), client_context(tls)) as wire:
            assert wire.plain("alice", "alice-secret").error_code == 0
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with Wire(b.listener_address("SSL"), client_context(tls)) as wire:
                wire.metadata()
    prefixed = secured_config(tls, **{"listener.name.sasl_ssl.ssl.client.auth": "required"})
    with EmbeddedBroker(config=prefixed) as b:
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with Wire(b.listener_address("SASL_SSL"), client_context(tls)) as wire:
                wire.plain("alice", "alice-secret")
        with Wire(b.listener_address("SASL_SSL"), client_context(tls, cert=True)) as wire:
            assert wire.plain("alice", "alice-secret").error_code == 0
            assert b.connection_principals() == [("SASL_SSL", "User:alice")]


def test_listener_on_another_loopback_address(tls: Any) -> None:
    config = {"listeners": "PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.2:0",
              "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT"}
    with EmbeddedBroker(config=config) as b:
        address = b.listener_address("other")
        assert address.startswith("127.0.0.2:")
        with Wire(address) as wire:
            assert [(x.host, x.port) for x in wire.metadata().brokers] == [
                ("127.0.0.2", b.listener_ports["OTHER"])]
