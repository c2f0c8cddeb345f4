"""The admin client's ACL and SCRAM types: Kafka's codes, coercion of names, validation of
what may be created, and secrets kept out of reprs."""

from __future__ import annotations

import hashlib

import pytest

import sdk
from sdk.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)


def test_codes_are_kafkas() -> None:
    assert (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
            ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN,
            ResourceType.USER) == (2, 3, 4, 5, 6, 7)
    assert (PatternType.ANY, PatternType.MATCH, PatternType.LITERAL,
            PatternType.PREFIXED) == (1, 2, 3, 4)
    assert (AclOperation.ALL, AclOperation.READ, AclOperation.DESCRIBE,
            AclOperation.IDEMPOTENT_WRITE) == (2, 3, 8, 12)
    assert (AclPermissionType.DENY, AclPermissionType.ALLOW) == (2, 3)
    assert ScramMechanism.SCRAM_SHA_512 == 2
    assert ScramMechanism.SCRAM_SHA_256.mechanism_name == "SCRAM-SHA-256"


def test_public_names() -> None:
    for name in ("AclBinding", "AclBindingFilter", "AclOperation", "AclPermissionType",
                 "PatternType", "ResourcePattern", "ResourceType", "ScramMechanism",
                 "UserScramCredentialUpsertion", "UserScramCredentialDeletion"):
        assert getattr(sdk, name) is getattr(sdk.admin, name)


def test_names_coerce_and_bad_values_say_what_is_allowed() -> None:
    b = AclBinding(ResourcePattern("topic", "t", "prefixed"), "User:a", operation="read",
                   permission="deny")
    assert b.pattern.resource_type is ResourceType.TOPIC
    assert b.pattern.pattern_type is PatternType.PREFIXED
    assert (b.operation, b.permission) == (AclOperation.READ, AclPermissionType.DENY)
    assert AclBindingFilter(operation="describe-configs").operation is \
        AclOperation.DESCRIBE_CONFIGS
    with pytest.raises(ValueError, match=r"operation must be one of .*READ"):
        AclBinding(ResourcePattern("TOPIC", "t"), "User:a", operation="READS")
    with pytest.raises(TypeError, match="ResourcePattern"):
        AclBinding("topic:t", "User:a")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="principal"):
        AclBinding(ResourcePattern("TOPIC", "t"), None)  # type: ignore[arg-type]


@pytest.mark.parametrize("binding, problem", [
    (AclBinding(ResourcePattern("ANY", "t"), "User:a"), "resource type"),
    (AclBinding(ResourcePattern("TOPIC", "t", "MATCH"), "User:a"), "LITERAL or PREFIXED"),
    (AclBinding(ResourcePattern("TOPIC", ""), "User:a"), "empty"),
    (AclBinding(ResourcePattern("TOPIC", "t"), "User:a", operation="ANY"), "operation"),
    (AclBinding(ResourcePattern("TOPIC", "t"), "User:a", permission="ANY"), "ALLOW or DENY"),
    (AclBinding(ResourcePattern("TOPIC", "t"), "alice"), "Type:name"),
])
def test_validate_refuses_what_cannot_be_created(binding: AclBinding, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        binding.validate()


def test_filter_of_a_binding_and_its_text() -> None:
    b = AclBinding(ResourcePattern("GROUP", "g"), "User:*", "10.0.0.1", "READ")
    f = AclBindingFilter.of(b)
    assert (f.resource_type, f.name, f.pattern_type, f.principal, f.host, f.operation,
            f.permission) == (ResourceType.GROUP, "g", PatternType.LITERAL, "User:*",
                              "10.0.0.1", AclOperation.READ, AclPermissionType.ALLOW)
    assert str(AclBindingFilter(principal="User:x")) == "AclBindingFilter(principal=User:x)"
    assert str(b) == "ALLOW User:*@10.0.0.1 READ on GROUP:LITERAL:g"
    with pytest.raises(ValueError, match="UNKNOWN"):
        AclBindingFilter(operation=AclOperation.UNKNOWN).validate()


def test_scram_upsertion_salts_and_hides_secrets() -> None:
    u = UserScramCredentialUpsertion("alice", "scram-sha-512", "pw", iterations=8192,
                                     salt=b"NaCl")
    assert u.salted_password() == hashlib.pbkdf2_hmac("sha512", b"pw", b"NaCl", 8192)
    assert "pw" not in repr(u) and "NaCl" not in repr(u)
    fresh = UserScramCredentialUpsertion("alice", ScramMechanism.SCRAM_SHA_256, b"pw")
    assert fresh.salt is not None and len(fresh.salt) == 32  # random per upsertion
    assert fresh.salt != UserScramCredentialUpsertion("alice", 1, b"pw").salt
    with pytest.raises(ValueError, match="iterations"):
        UserScramCredentialUpsertion("alice", 1, "pw", iterations=0)
    with pytest.raises(TypeError, match="salt"):
        UserScramCredentialUpsertion("alice", 1, "pw", salt="text")  # type: ignore[arg-type]
    assert UserScramCredentialDeletion("bob", "SCRAM-SHA-256").mechanism is \
        ScramMechanism.SCRAM_SHA_256
