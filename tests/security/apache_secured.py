"""One Apache Kafka node with TLS and SASL listeners beside PLAINTEXT, for the client tests.

Listeners (names -> protocol): ``SASL_SSL`` and ``SASL_PLAINTEXT`` (PLAIN with users in the
JAAS line, SCRAM-SHA-256/512 with credentials added at format time, OAUTHBEARER with Kafka's
default unsecured validator), ``SSL`` (server certificate only), ``MTLS`` (SSL with
``ssl.client.auth=required``) and ``WRONGHOST`` (SSL on 127.0.0.2, whose address the
certificate does not name). PLAINTEXT stays the inter-broker and admin listener.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from apache_support import apache_cluster
from cryptography.hazmat.primitives import serialization

from sdk import AdminClient, Consumer, Producer
from sdk.types import NewTopic
from tools.apache_kafka import ApacheKafkaCluster

USERS = {"alice": "alice-secret", "bob": "bob-secret"}  # PLAIN and SCRAM (both hashes)
_PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
_OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
LISTENERS = {"SASL_SSL": "SASL_SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SSL": "SSL",
             "MTLS": "SSL", "WRONGHOST": "SSL@127.0.0.2"}


def jaas(module: str, **options: str) -> str:
    return f"{module} required " + " ".join(f'{k}="{v}"' for k, v in options.items()) + ";"


def plain_jaas(user: str = "alice") -> str:
    return jaas(_PLAIN, username=user, password=USERS[user])


def scram_jaas(user: str = "alice") -> str:
    return jaas(_SCRAM, username=user, password=USERS[user])


def oauth_jaas(sub: str = "alice") -> str:
    return jaas(_OAUTH, unsecuredLoginStringClaim_sub=sub)


def pkcs8_keystore(tls: Any, directory: Path) -> Path:
    """Kafka's PEM key store reads PKCS#8 keys only; trustme writes the traditional form."""
    key = serialization.load_pem_private_key(tls.broker_key.read_bytes(), password=None)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    path = directory / "broker-keystore-pkcs8.pem"
    path.write_bytes(pem + tls.broker_cert.read_bytes())
    return path


def broker_config(tls: Any, directory: Path, *, oauth_reauth_ms: int | None = None
                  ) -> dict[str, str]:
    config = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pkcs8_keystore(tls, directory)),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls.ca_file),
        "listener.name.mtls.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        # SASL_PLAINTEXT offers no OAUTHBEARER: the unsupported-mechanism case.
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "group.initial.rebalance.delay.ms": "0",
    }
    users = {f"user_{name}": password for name, password in USERS.items()}
    for listener in ("sasl_ssl", "sasl_plaintext"):
        prefix = f"listener.name.{listener}"
        config[f"{prefix}.plain.sasl.jaas.config"] = jaas(_PLAIN, **users)
        config[f"{prefix}.scram-sha-256.sasl.jaas.config"] = f"{_SCRAM} required;"
        config[f"{prefix}.scram-sha-512.sasl.jaas.config"] = f"{_SCRAM} required;"
        config[f"{prefix}.oauthbearer.sasl.jaas.config"] = f"{_OAUTH} required;"
        if oauth_reauth_ms is not None:
            config[f"{prefix}.oauthbearer.connections.max.reauth.ms"] = str(oauth_reauth_ms)
    return config


def scram_users() -> list[str]:
    return [f"SCRAM-SHA-{bits}=[name={name},password={password}]"
            for name, password in USERS.items() for bits in (256, 512)]


@contextmanager
def secured_apache(tls: Any, directory: Path, *, oauth_reauth_ms: int | None = None,
                   config: Mapping[str, str] | None = None) -> Iterator[ApacheKafkaCluster]:
    settings = {**broker_config(tls, directory, oauth_reauth_ms=oauth_reauth_ms),
                **(config or {})}
    with apache_cluster(1, config=settings, listeners=LISTENERS,
                        scram_users=scram_users()) as cluster:
        yield cluster


def roundtrip(settings: Mapping[str, Any], *, records: int = 50, partitions: int = 2) -> str:
    """Create a topic, produce ``records``, read them back in a consumer group and look at
    the group with the admin client: every client over the same secured settings. Returns
    the topic's name."""
    topic = f"secured-{uuid.uuid4().hex[:10]}"
    with AdminClient(dict(settings)) as admin:
        created = admin.create_topics([NewTopic(topic, partitions, 1)])
        assert created.ok, created.errors
        for _ in range(100):  # the broker's metadata learns the topic a moment later
            if topic in admin.list_topics():
                break
            time.sleep(0.1)
        assert topic in admin.list_topics()
    values = [f"value-{i}".encode() for i in range(records)]
    with Producer(dict(settings), acks="all") as producer:
        futures = [producer.send(topic, value) for value in values]
        producer.flush(timeout=30)
        offsets = [f.result(timeout=0).offset for f in futures]
    assert len(offsets) == records
    group = f"group-{topic}"
    seen: list[bytes] = []
    with Consumer(topic, dict(settings), group_id=group, auto_offset_reset="earliest",
                  enable_auto_commit=False) as consumer:
        for _ in range(120):
            for batch in consumer.poll(timeout_ms=500).values():
                seen.extend(r.value for r in batch)
            if len(seen) >= records:
                break
        consumer.commit()
    assert sorted(seen) == sorted(values)
    with AdminClient(dict(settings)) as admin:
        committed = admin.list_consumer_group_offsets(group)
        assert sum(committed[tp].offset or 0 for tp in committed) == records
    return topic
