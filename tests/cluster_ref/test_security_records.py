"""The metadata image's ACLs, SCRAM credentials, broker configs and listeners: applied from
records in log order and carried whole through a snapshot (a broker or controller that
restarts from a snapshot must enforce the same bindings and know the same users)."""

from __future__ import annotations

from pathlib import Path

from server_ref.controller import records
from server_ref.controller.acl_records import load_acls, load_credentials
from server_ref.controller.image import MetadataImage
from server_ref.security.acls import AclEntry, AclStore
from server_ref.security.credentials import CredentialStore

ACL = {"resource_type": 2, "name": "orders", "pattern_type": 3, "principal": "User:alice",
       "host": "*", "operation": 4, "permission": 3}
CREDENTIAL = {"salt": "c2FsdA==", "stored_key": "c3RvcmVk", "server_key": "c2VydmVy",
              "iterations": 4096}


def image_from(*kinds: dict[str, object]) -> MetadataImage:
    image = MetadataImage()
    for offset, record in enumerate(kinds):
        image.apply(records.decode(records.encode(record)))
        image.offset = offset
    return image


def test_records_apply_in_order_and_survive_a_snapshot() -> None:
    image = image_from(
        {"type": "register_broker", "id": 1, "epoch": 0, "incarnation": "i", "host": "h",
         "port": 9092, "rack": None,
         "listeners": {"PLAINTEXT": ["h", 9092], "SASL_SSL": ["h", 9093]}},
        {"type": "acl", "id": "a1", **ACL},
        {"type": "acl", "id": "a2", **{**ACL, "permission": 2}},
        {"type": "remove_acl", "id": "a2"},
        {"type": "scram_credential", "user": "bob", "mechanism": "SCRAM-SHA-256",
         **CREDENTIAL},
        {"type": "scram_credential", "user": "bob", "mechanism": "SCRAM-SHA-512",
         **CREDENTIAL},
        {"type": "remove_scram_credential", "user": "bob", "mechanism": "SCRAM-SHA-512"},
        {"type": "broker_configs", "resource": "", "configs": {"log.cleaner.threads": "2"}},
        {"type": "broker_configs", "resource": "1", "configs": {"log.cleaner.threads": "3"}})
    assert list(image.acls) == ["a1"]
    assert set(image.scram) == {("bob", "SCRAM-SHA-256")}
    assert image.brokers[1].endpoint("SASL_SSL") == ("h", 9093)
    assert image.brokers[1].endpoint(None) == ("h", 9092)
    assert image.brokers[1].endpoint("SSL") is None  # no such listener: left out
    restored = MetadataImage.from_snapshot(image.to_snapshot(), image.offset)
    assert restored.acls == image.acls
    assert restored.scram == image.scram
    assert restored.broker_configs == image.broker_configs
    assert restored.brokers[1].endpoints == image.brokers[1].endpoints


def test_brokers_load_the_image_into_their_stores(tmp_path: Path) -> None:
    image = image_from({"type": "acl", "id": "a1", **ACL},
                       {"type": "scram_credential", "user": "bob",
                        "mechanism": "SCRAM-SHA-256", **CREDENTIAL})
    acls = AclStore(tmp_path)
    assert load_acls(image, acls)
    assert list(acls) == [AclEntry(**ACL)]
    assert not load_acls(image, acls)  # nothing changed: the decision cache stays
    assert not (tmp_path / "acls.json").exists()  # the log is the durable copy
    credentials = CredentialStore(tmp_path)
    load_credentials(image, credentials)
    found = credentials.get("bob", "SCRAM-SHA-256")
    assert found is not None and found.salt == b"salt" and found.iterations == 4096
    image.apply({"type": "remove_acl", "id": "a1"})
    assert load_acls(image, acls) and list(acls) == []
