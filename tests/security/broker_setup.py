"""Broker configurations and credentials shared by the reference broker's security tests."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

from raw_wire import Wire

from sdk.protocol.messages.sasl_authenticate import SaslAuthenticateRequest

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" '
              'user_alice="alice-secret";')
PASSWORDS = ("admin-secret", "alice-secret", "bob-secret", "carol-secret", "wrong-secret")
ALL_MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"


def secured_config(tls: Any, **extra: Any) -> dict[str, Any]:
    """Four listeners (PLAINTEXT first: the bootstrap), every mechanism on both SASL ones."""
    config: dict[str, Any] = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,"
                     "SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "sasl.enabled.mechanisms": ALL_MECHANISMS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tls.broker_keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls.ca_file),
    }
    config.update(extra)
    return config


def unsecured_jws(sub: str, lifetime_s: float = 3600, scope: str | None = None,
                  issued_at: float | None = None) -> tuple[str, float]:
    """An unsecured JWS (alg none) as Kafka's unsecured login module makes one, and its
    expiry in seconds since the epoch."""
    def part(data: dict[str, Any]) -> str:
        raw = json.dumps(data, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    # Millisecond precision, as Kafka's own unsecured login module writes times (a finer
    # iat could round to the broker's next millisecond: "issued in the future").
    now = (time.time_ns() // 1_000_000 if issued_at is None else issued_at * 1000) / 1000
    claims: dict[str, Any] = {"sub": sub, "iat": now, "exp": now + lifetime_s}
    if scope is not None:
        claims["scope"] = scope
    return f"{part({'alg': 'none'})}.{part(claims)}.", now + lifetime_s


def add_scram_user(bootstrap: str, user: str, password: str,
                   mechanism: str = "SCRAM-SHA-256", iterations: int = 4096) -> None:
    """Create a SCRAM credential through confluent-kafka's AlterUserScramCredentials."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    kind = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
            "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}[mechanism]
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        user, ScramCredentialInfo(kind, iterations), password.encode())])
    for future in futures.values():
        future.result(timeout=30)


def scram_exchange(wire: Wire, mechanism: str, user: str, password: str
                   ) -> tuple[Any, Any]:
    """The client side of RFC 5802 over SaslAuthenticate: (first answer, final answer)."""
    digest = "sha256" if mechanism.endswith("256") else "sha512"
    nonce = base64.b64encode(b"client-nonce-123").decode()
    bare = f"n={user},r={nonce}"
    first = wire.sasl(mechanism, f"n,,{bare}".encode())[0]
    if first.error_code:
        return first, None
    server_first = first.auth_bytes.decode()
    attrs = dict(p.split("=", 1) for p in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), base64.b64decode(attrs["s"]),
                                 int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    stored_key = hashlib.new(digest, client_key).digest()
    without_proof = f"c=biws,r={attrs['r']}"
    auth_message = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, digest).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    final = wire.call(SaslAuthenticateRequest(
        auth_bytes=f"{without_proof},p={base64.b64encode(proof).decode()}".encode()), 2)
    if final.error_code == 0:
        server_key = hmac.new(salted, b"Server Key", digest).digest()
        expected = hmac.new(server_key, auth_message, digest).digest()
        assert final.auth_bytes == b"v=" + base64.b64encode(expected)  # server proves itself
    return first, final
