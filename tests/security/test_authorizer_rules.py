"""The reference broker's authorizer rules, unit level: Kafka's StandardAuthorizer matching
(literal, wildcard and prefixed patterns, ``User:*``, hosts, DENY over ALLOW, ALL, implied
operations, super users, allow-if-no-ACL), the decision cache, the store's filters and its
persistence."""

from __future__ import annotations

from pathlib import Path

import pytest

from server_ref.security.acls import (
    ALL,
    ALLOW,
    ALTER,
    ALTER_CONFIGS,
    ANY,
    CLUSTER,
    CREATE,
    DELETE,
    DENY,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    GROUP,
    LITERAL,
    MATCH,
    PREFIXED,
    READ,
    TOPIC,
    WRITE,
    AclEntry,
    AclFilter,
    AclStore,
    invalid_reason,
)
from server_ref.security.authorizer import Authorizer, parse_super_users

ALICE, BOB = "User:alice", "User:bob"


def acl(name: str, op: int, principal: str = ALICE, *, kind: int = TOPIC,
        pattern: int = LITERAL, host: str = "*", permission: int = ALLOW) -> AclEntry:
    return AclEntry(kind, name, pattern, principal, host, op, permission)


@pytest.fixture
def store(tmp_path: Path) -> AclStore:
    s = AclStore(tmp_path)
    s.load()
    return s


def test_literal_wildcard_and_prefixed_patterns(store: AclStore) -> None:
    store.add([acl("orders", READ), acl("logs-", WRITE, pattern=PREFIXED),
               acl("*", DESCRIBE, BOB)])
    az = Authorizer(store)
    assert az.authorize(ALICE, "10.0.0.1", READ, TOPIC, "orders")
    assert not az.authorize(ALICE, "10.0.0.1", READ, TOPIC, "orders2")  # literal is exact
    assert az.authorize(ALICE, "h", WRITE, TOPIC, "logs-app")
    assert not az.authorize(ALICE, "h", WRITE, TOPIC, "log")  # shorter than the prefix
    assert az.authorize(BOB, "h", DESCRIBE, TOPIC, "anything")  # the * wildcard
    assert not az.authorize(BOB, "h", DESCRIBE, GROUP, "anything")  # other resource type
    assert not az.authorize(BOB, "h", READ, TOPIC, "orders")


def test_principal_and_host_wildcards(store: AclStore) -> None:
    store.add([acl("t", READ, "User:*"), acl("u", READ, host="10.0.0.7")])
    az = Authorizer(store)
    assert az.authorize(BOB, "1.2.3.4", READ, TOPIC, "t")
    assert az.authorize(ALICE, "10.0.0.7", READ, TOPIC, "u")
    assert not az.authorize(ALICE, "10.0.0.8", READ, TOPIC, "u")


def test_deny_wins_and_all_covers_every_operation(store: AclStore) -> None:
    store.add([acl("t", ALL), acl("t", WRITE, permission=DENY),
               acl("x-", READ, "User:*", pattern=PREFIXED),
               acl("x-secret", ALL, permission=DENY)])
    az = Authorizer(store)
    for op in (READ, DESCRIBE, DELETE, ALTER_CONFIGS, CREATE):
        assert az.authorize(ALICE, "h", op, TOPIC, "t")
    assert not az.authorize(ALICE, "h", WRITE, TOPIC, "t")  # DENY over ALLOW ALL
    assert az.authorize(BOB, "h", READ, TOPIC, "x-public")
    assert az.authorize(ALICE, "h", READ, TOPIC, "x-public")
    assert not az.authorize(ALICE, "h", READ, TOPIC, "x-secret")  # DENY ALL wins
    assert az.authorize(BOB, "h", READ, TOPIC, "x-secret")  # the deny names alice only


def test_implied_operations(store: AclStore) -> None:
    store.add([acl("r", READ), acl("w", WRITE), acl("d", DELETE), acl("a", ALTER),
               acl("c", ALTER_CONFIGS), acl("k", CREATE)])
    az = Authorizer(store)
    for name in ("r", "w", "d", "a"):
        assert az.authorize(ALICE, "h", DESCRIBE, TOPIC, name), name
    assert az.authorize(ALICE, "h", DESCRIBE_CONFIGS, TOPIC, "c")
    assert not az.authorize(ALICE, "h", DESCRIBE, TOPIC, "k")  # CREATE implies nothing
    assert not az.authorize(ALICE, "h", DESCRIBE, TOPIC, "c")
    assert not az.authorize(ALICE, "h", READ, TOPIC, "w")  # only DESCRIBE is implied
    # An implied ALLOW does not beat an explicit DENY of DESCRIBE.
    store.add([acl("r", DESCRIBE, permission=DENY)])
    assert not az.authorize(ALICE, "h", DESCRIBE, TOPIC, "r")
    assert az.authorize(ALICE, "h", READ, TOPIC, "r")


def test_super_users_and_allow_if_no_acl(store: AclStore) -> None:
    assert parse_super_users(" User:admin ;User:ops;; ") == {"User:admin", "User:ops"}
    store.add([acl("t", ALL, permission=DENY, principal="User:*")])
    strict = Authorizer(store, parse_super_users("User:admin"))
    assert strict.authorize("User:admin", "h", WRITE, TOPIC, "t")  # above every ACL
    assert not strict.authorize(ALICE, "h", READ, TOPIC, "free")  # default: deny
    lenient = Authorizer(store, allow_if_no_acl=True)
    assert lenient.authorize(ALICE, "h", READ, TOPIC, "free")  # no ACL names "free"
    assert not lenient.authorize(ALICE, "h", READ, TOPIC, "t")
    store.add([acl("free", READ, BOB)])  # now an ACL names it: only bob may
    assert not lenient.authorize(ALICE, "h", READ, TOPIC, "free")
    assert lenient.authorize(BOB, "h", READ, TOPIC, "free")


def test_the_decision_cache_follows_acl_changes(store: AclStore) -> None:
    az = Authorizer(store)
    assert not az.authorize(ALICE, "h", READ, TOPIC, "t")
    store.add([acl("t", READ)])
    assert az.authorize(ALICE, "h", READ, TOPIC, "t")
    store.remove_matching([AclFilter(ANY, None, ANY, ALICE, None, ANY, ANY)])
    assert not az.authorize(ALICE, "h", READ, TOPIC, "t")


def test_authorize_any_for_idempotent_producers(store: AclStore) -> None:
    az = Authorizer(store)
    assert not az.authorize_any(ALICE, "h", WRITE, TOPIC)
    assert Authorizer(store, allow_if_no_acl=True).authorize_any(ALICE, "h", WRITE, TOPIC)
    assert Authorizer(store, frozenset({ALICE})).authorize_any(ALICE, "h", WRITE, TOPIC)
    store.add([acl("t-", WRITE, pattern=PREFIXED)])
    assert az.authorize_any(ALICE, "h", WRITE, TOPIC)
    store.add([acl("t-", WRITE, permission=DENY)])  # a literal deny of one name only
    assert az.authorize_any(ALICE, "h", WRITE, TOPIC)
    store.add([acl("t-x", WRITE, pattern=PREFIXED, permission=DENY)])  # a narrower prefix
    assert az.authorize_any(ALICE, "h", WRITE, TOPIC)
    store.add([acl("t", WRITE, pattern=PREFIXED, permission=DENY)])  # a wider prefix
    assert not az.authorize_any(ALICE, "h", WRITE, TOPIC)
    store.add([acl("u", WRITE)])
    assert az.authorize_any(ALICE, "h", WRITE, TOPIC)
    store.add([acl("*", WRITE, permission=DENY)])  # the wildcard cancels everything
    assert not az.authorize_any(ALICE, "h", WRITE, TOPIC)


def test_filters_any_match_and_exact(store: AclStore) -> None:
    lit, pre, wild = acl("orders", READ), acl("ord", WRITE, pattern=PREFIXED), acl("*", READ, BOB)
    other = acl("g", READ, kind=GROUP)
    store.add([lit, pre, wild, other])

    def find(**kw: object) -> set[AclEntry]:
        base: dict[str, object] = dict(resource_type=ANY, name=None, pattern_type=ANY,
                                       principal=None, host=None, operation=ANY, permission=ANY)
        base.update(kw)
        return set(store.matching(AclFilter(**base)))  # type: ignore[arg-type]

    assert find() == {lit, pre, wild, other}
    assert find(resource_type=TOPIC, name="orders", pattern_type=MATCH) == {lit, pre, wild}
    assert find(resource_type=TOPIC, name="orders", pattern_type=LITERAL) == {lit}
    assert find(name="ord", pattern_type=PREFIXED) == {pre}
    assert find(name="orders") == {lit}  # ANY pattern type with a name: that exact name
    assert find(principal=BOB) == {wild}
    assert find(operation=WRITE, permission=ALLOW) == {pre}
    assert find(permission=DENY) == set()


def test_store_persists_and_validates(tmp_path: Path) -> None:
    first = AclStore(tmp_path)
    first.load()
    first.add([acl("t", READ), acl("t", READ)])  # the same binding twice is kept once
    again = AclStore(tmp_path)
    again.load()
    assert list(again) == [acl("t", READ)]
    assert invalid_reason(acl("foo", ALTER, kind=CLUSTER)) == \
        "The only valid name for the CLUSTER resource is kafka-cluster"
    assert invalid_reason(acl("kafka-cluster", ALTER, kind=CLUSTER)) is None
    assert "principal" in (invalid_reason(acl("t", READ, "alice")) or "")
    assert invalid_reason(acl("t", ANY)) == "Invalid operation ANY"
    assert invalid_reason(acl("t", READ, pattern=MATCH)) == "Invalid patternType MATCH"
    assert invalid_reason(acl("t", READ, kind=ANY)) == "Invalid resourceType ANY"
    assert invalid_reason(acl("t", READ, permission=ANY)) == "Invalid permissionType ANY"
    assert invalid_reason(acl("", READ)) == "Resource name should not be empty"
