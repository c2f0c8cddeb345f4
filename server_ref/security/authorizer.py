"""The reference broker's authorizer: Kafka's StandardAuthorizer rules over the ACL store.

Enabled by ``authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer``
(without it ``Broker.authorizer`` is None, every request is allowed and the ACL APIs answer
SECURITY_DISABLED, as Kafka does). A request from ``principal`` at ``host`` may perform
``operation`` on a resource when:

1. the principal is one of ``super.users`` (semicolon-separated), or
2. no DENY binding applies (resource pattern matches: literal name, the ``*`` wildcard, or a
   prefix; principal equal or ``User:*``; host equal or ``*``; operation equal or ALL), and
3. an ALLOW binding applies, for the operation itself, ALL, or an operation implying it
   (READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS), or
4. no binding at all names the resource and ``allow.everyone.if.no.acl.found`` is true.

Decisions are cached per (principal, host, operation, resource type, name) and the cache is
dropped whenever the store changes, so produce and fetch pay one dict lookup per topic.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from sdk.errors import ConfigError
from server_ref.security.acls import (
    ALL,
    ALLOW,
    ALTER,
    ALTER_CONFIGS,
    DELETE,
    DENY,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    LITERAL,
    PREFIXED,
    READ,
    WILDCARD,
    WRITE,
    AclEntry,
    AclStore,
)

log = logging.getLogger(__name__)

__all__ = ["STANDARD_AUTHORIZER", "Authorizer", "make_authorizer"]

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_CACHE_LIMIT = 100_000  # decisions kept before the cache starts over

# An ALLOW for the key also grants these operations.
_IMPLIED_BY: dict[int, frozenset[int]] = {
    DESCRIBE: frozenset({DESCRIBE, READ, WRITE, DELETE, ALTER, ALL}),
    DESCRIBE_CONFIGS: frozenset({DESCRIBE_CONFIGS, ALTER_CONFIGS, ALL}),
}
_ANY_PRINCIPAL = "User:*"


def parse_super_users(text: str | None) -> frozenset[str]:
    """``super.users``: principals separated by semicolons ("User:admin;User:ops")."""
    return frozenset(p.strip() for p in (text or "").split(";") if p.strip())


class Authorizer:
    """Answers "may this principal do this operation to this resource?"."""

    def __init__(self, store: AclStore, super_users: frozenset[str] = frozenset(),
                 allow_if_no_acl: bool = False) -> None:
        self.store = store
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self._cache: dict[tuple[str, str, int, int, str], bool] = {}
        self._cache_version = store.version
        # Cluster mode: False until the broker has replayed the metadata log up to its
        # registration (Kafka's initial ACL load); until then only super users pass.
        self.ready = True

    def authorize(self, principal: str, host: str, operation: int, resource_type: int,
                  name: str) -> bool:
        """Whether ``principal`` connecting from ``host`` may do ``operation`` on the
        resource ``name`` of ``resource_type``."""
        if principal in self.super_users:
            return True
        if not self.ready:
            return False
        if self._cache_version != self.store.version:
            self._cache.clear()
            self._cache_version = self.store.version
        key = (principal, host, operation, resource_type, name)
        decision = self._cache.get(key)
        if decision is None:
            decision = self._decide(principal, host, operation, resource_type, name)
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = decision
        return decision

    def _decide(self, principal: str, host: str, operation: int, resource_type: int,
                name: str) -> bool:
        allowing = _IMPLIED_BY.get(operation) or frozenset({operation, ALL})
        allowed = False
        any_acl = False
        for e in self.store.applying_to(resource_type, name):
            any_acl = True
            if e.principal != principal and e.principal != _ANY_PRINCIPAL:
                continue
            if e.host != host and e.host != WILDCARD:
                continue
            if e.permission == DENY:
                if e.operation == operation or e.operation == ALL:
                    return False  # a matching DENY wins over any ALLOW
            elif e.permission == ALLOW and e.operation in allowing:
                allowed = True
        if allowed:
            return True
        return not any_acl and self.allow_if_no_acl

    def authorize_any(self, principal: str, host: str, operation: int,
                      resource_type: int) -> bool:
        """Whether ``principal`` may do ``operation`` on at least one resource of the type
        (Kafka's ``authorizeByResourceType``, used by InitProducerId without a
        transactional id). As Kafka: first a made-up resource name is checked (super users,
        ``allow.everyone.if.no.acl.found``); then an ALLOW on some pattern counts unless a
        DENY covers every name it allows (the ``*`` wildcard, a prefix of it, or the same
        literal name)."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        allowing = _IMPLIED_BY.get(operation) or frozenset({operation, ALL})
        entries = [e for e in self.store.of_type(resource_type)
                   if (e.principal == principal or e.principal == _ANY_PRINCIPAL)
                   and (e.host == host or e.host == WILDCARD)]
        denies = [e for e in entries if e.permission == DENY
                  and (e.operation == operation or e.operation == ALL)]
        for e in entries:
            if e.permission == ALLOW and e.operation in allowing \
                    and not any(_covers(d, e) for d in denies):
                return True
        return False


def _covers(deny: AclEntry, allow: AclEntry) -> bool:
    """Whether ``deny`` applies to every resource ``allow`` names."""
    if deny.pattern_type == PREFIXED:
        return allow.name.startswith(deny.name)
    if deny.name == WILDCARD:
        return True
    return allow.pattern_type == LITERAL and allow.name == deny.name


def make_authorizer(config: Any, data_dir: Path) -> tuple[AclStore, Authorizer | None]:
    """The ACL store (always loaded: the bindings survive a restart without the authorizer)
    and the authorizer ``config`` asks for, or None. Only Kafka's StandardAuthorizer is
    known; another class name is refused at start-up."""
    store = AclStore(data_dir)
    store.load()
    name = (config.get("authorizer.class.name") or "").strip()
    if not name:
        return store, None
    if name != STANDARD_AUTHORIZER:
        raise ConfigError(f"only {STANDARD_AUTHORIZER} is supported", key="authorizer.class.name",
                          value=name)
    authorizer = Authorizer(store, parse_super_users(config.get("super.users")),
                            bool(config.get("allow.everyone.if.no.acl.found")))
    log.info("authorizer on: %d ACL bindings, super users %s", len(store),
             sorted(authorizer.super_users) or "none")
    return store, authorizer
