"""Certificates for the security tests, made here with ``trustme`` (never committed).

``tls`` gives one test CA per session and PEM files in the layout both Kafka's broker
(``ssl.keystore.type=PEM``: private key and certificate chain in one file) and clients
(a CA bundle; a client certificate for mutual TLS) read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme


@dataclass(frozen=True)
class TlsFiles:
    ca: trustme.CA
    ca_file: Path  # the CA certificate: clients' trust store, the broker's for mTLS
    broker_keystore: Path  # key + chain for "localhost" / 127.0.0.1 (PEM keystore)
    broker_cert: Path  # the broker's chain alone
    broker_key: Path  # the broker's key alone
    client_cert: Path  # a client certificate (CN=client) for mutual TLS
    client_key: Path
    client_keystore: Path  # key + chain in one file
    untrusted_ca_file: Path  # a CA that signed nothing here


@pytest.fixture(scope="session")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsFiles]:
    root = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    broker = ca.issue_cert("localhost", "127.0.0.1")
    client = ca.issue_cert("client@example.com", common_name="client")
    ca.cert_pem.write_to_path(str(root / "ca.pem"))
    broker.private_key_and_cert_chain_pem.write_to_path(str(root / "broker-keystore.pem"))
    broker.private_key_pem.write_to_path(str(root / "broker.key"))
    for i, blob in enumerate(broker.cert_chain_pems):
        blob.write_to_path(str(root / "broker.pem"), append=i > 0)
    client.private_key_pem.write_to_path(str(root / "client.key"))
    for i, blob in enumerate(client.cert_chain_pems):
        blob.write_to_path(str(root / "client.pem"), append=i > 0)
    client.private_key_and_cert_chain_pem.write_to_path(str(root / "client-keystore.pem"))
    trustme.CA().cert_pem.write_to_path(str(root / "untrusted-ca.pem"))
    yield TlsFiles(ca, root / "ca.pem", root / "broker-keystore.pem", root / "broker.pem",
                   root / "broker.key", root / "client.pem", root / "client.key",
                   root / "client-keystore.pem", root / "untrusted-ca.pem")
