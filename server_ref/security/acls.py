"""The ACL store of the reference broker: bindings kept in ``acls.json`` in the data
directory (so they survive restarts), Kafka's filter rules for DescribeAcls/DeleteAcls, and
the validation CreateAcls applies. In cluster mode the metadata log holds the bindings
(``server_ref.controller.acl_records``): the store is replaced from each broker's replay
(``replace``) and the file is not written.

Codes are Kafka's (``ResourceType``, ``PatternType``, ``AclOperation``, ``AclPermissionType``
in Java): the broker shares only codecs with the SDK, so the numbers are spelled out here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from server_ref.config import read_json, write_json_atomically

__all__ = ["AclEntry", "AclFilter", "AclStore", "CLUSTER_NAME", "invalid_reason"]

ACLS_FILE = "acls.json"
CLUSTER_NAME = "kafka-cluster"

# ResourceType
UNKNOWN, ANY = 0, 1
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = 2, 3, 4, 5, 6, 7
RESOURCE_TYPES = range(TOPIC, USER + 1)
# PatternType
MATCH, LITERAL, PREFIXED = 2, 3, 4
# AclOperation (ANY = 1 in filters)
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 2, 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
CREATE_TOKENS, DESCRIBE_TOKENS, TWO_PHASE_COMMIT = 13, 14, 15
OPERATIONS = range(ALL, TWO_PHASE_COMMIT + 1)
# AclPermissionType
DENY, ALLOW = 2, 3

WILDCARD = "*"


@dataclass(frozen=True, slots=True)
class AclEntry:
    """One ACL binding, as CreateAcls carries it."""

    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def resource_matches(self, resource_type: int, name: str) -> bool:
        """Whether this binding applies to the resource ``name`` of ``resource_type``."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == LITERAL:
            return self.name == name or self.name == WILDCARD
        return self.pattern_type == PREFIXED and name.startswith(self.name)


_RESOURCE_NAMES = ("UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID",
                   "DELEGATION_TOKEN", "USER")
_PATTERN_NAMES = ("UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED")
_OPERATION_NAMES = ("UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER",
                    "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
                    "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS", "TWO_PHASE_COMMIT")
_PERMISSION_NAMES = ("UNKNOWN", "ANY", "DENY", "ALLOW")


def _name(names: tuple[str, ...], code: int) -> str:
    return names[code] if 0 <= code < len(names) else "UNKNOWN"


def invalid_reason(e: AclEntry) -> str | None:
    """Why CreateAcls refuses ``e`` (INVALID_REQUEST, in Kafka's words), or None."""
    if e.resource_type not in RESOURCE_TYPES:
        return f"Invalid resourceType {_name(_RESOURCE_NAMES, e.resource_type)}"
    if e.pattern_type not in (LITERAL, PREFIXED):
        return f"Invalid patternType {_name(_PATTERN_NAMES, e.pattern_type)}"
    if e.operation not in OPERATIONS:
        return f"Invalid operation {_name(_OPERATION_NAMES, e.operation)}"
    if e.permission not in (DENY, ALLOW):
        return f"Invalid permissionType {_name(_PERMISSION_NAMES, e.permission)}"
    if not e.name:
        return "Resource name should not be empty"
    if e.resource_type == CLUSTER and e.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    kind, sep, who = e.principal.partition(":")
    if not sep or not kind or not who:
        return f"Could not parse principal from `{e.principal}` (no colon is present " \
               "separating the principal type from the principal name)"
    if not e.host:
        return "Invalid host: the host must not be empty"
    return None


@dataclass(frozen=True, slots=True)
class AclFilter:
    """A DescribeAcls / DeleteAcls filter: None and ANY match anything; MATCH selects the
    bindings that apply to the named resource."""

    resource_type: int
    name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def invalid_reason(self) -> str | None:
        for what, value in (("resource type", self.resource_type),
                            ("pattern type", self.pattern_type),
                            ("operation", self.operation), ("permission type", self.permission)):
            if value == UNKNOWN:
                return f"The filter's {what} is UNKNOWN"
        return None

    def matches(self, e: AclEntry) -> bool:
        if self.resource_type != ANY and self.resource_type != e.resource_type:
            return False
        if self.pattern_type == MATCH and self.name is not None:
            if not e.resource_matches(e.resource_type, self.name):
                return False
        elif self.pattern_type not in (ANY, MATCH):
            if self.pattern_type != e.pattern_type or (
                    self.name is not None and self.name != e.name):
                return False
        elif self.name is not None and self.pattern_type == ANY and self.name != e.name:
            return False
        if self.principal is not None and self.principal != e.principal:
            return False
        if self.host is not None and self.host != e.host:
            return False
        if self.operation != ANY and self.operation != e.operation:
            return False
        return self.permission == ANY or self.permission == e.permission


class AclStore:
    """The bindings, indexed by resource type, by literal name and by prefix; ``version``
    grows with every change (the authorizer's decision cache is keyed on it)."""

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / ACLS_FILE
        self._entries: dict[AclEntry, None] = {}  # insertion-ordered set
        self._by_type: dict[int, list[AclEntry]] = {}
        self._literal: dict[tuple[int, str], list[AclEntry]] = {}  # "*" included
        self._prefixed: dict[int, list[AclEntry]] = {}
        self.version = 0

    def load(self) -> None:
        saved = read_json(self.path) or []
        self._entries = {AclEntry(**item): None for item in saved}
        self._reindex()

    def _reindex(self) -> None:
        by_type: dict[int, list[AclEntry]] = {}
        literal: dict[tuple[int, str], list[AclEntry]] = {}
        prefixed: dict[int, list[AclEntry]] = {}
        for e in self._entries:
            by_type.setdefault(e.resource_type, []).append(e)
            if e.pattern_type == LITERAL:
                literal.setdefault((e.resource_type, e.name), []).append(e)
            else:
                prefixed.setdefault(e.resource_type, []).append(e)
        self._by_type, self._literal, self._prefixed = by_type, literal, prefixed
        self.version += 1

    def applying_to(self, resource_type: int, name: str) -> list[AclEntry]:
        """The bindings whose pattern matches the resource: its literal name, the ``*``
        wildcard, and the prefixes it starts with (a dict lookup each, plus a scan of the
        prefixed bindings of that type)."""
        found = self._literal.get((resource_type, name), [])
        if name != WILDCARD:
            found = found + self._literal.get((resource_type, WILDCARD), [])
        prefixes = self._prefixed.get(resource_type)
        if prefixes:
            found = found + [e for e in prefixes if name.startswith(e.name)]
        return found

    def replace(self, entries: Iterable[AclEntry]) -> bool:
        """Hold exactly ``entries`` (cluster mode: the bindings the metadata log holds,
        which is their durable copy, so nothing is written here); whether that changed
        anything."""
        wanted = dict.fromkeys(entries)
        if wanted.keys() == self._entries.keys():
            return False
        self._entries = wanted
        self._reindex()
        return True

    def _save(self) -> None:
        write_json_atomically(self.path, [
            {"resource_type": e.resource_type, "name": e.name, "pattern_type": e.pattern_type,
             "principal": e.principal, "host": e.host, "operation": e.operation,
             "permission": e.permission} for e in self._entries])

    def __iter__(self) -> Iterator[AclEntry]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def of_type(self, resource_type: int) -> list[AclEntry]:
        return self._by_type.get(resource_type, [])

    def add(self, entries: Iterable[AclEntry]) -> None:
        """Add bindings (one that exists already is left as is) and persist them."""
        changed = False
        for e in entries:
            if e not in self._entries:
                self._entries[e] = None
                changed = True
        if changed:
            self._save()
            self._reindex()

    def remove_matching(self, filters: list[AclFilter]) -> list[list[AclEntry]]:
        """Delete every binding matching each filter; per filter, the bindings it matched
        (a binding matched by two filters is reported by both, as Kafka does)."""
        matched = [[e for e in self._entries if f.matches(e)] for f in filters]
        gone = {e for found in matched for e in found}
        if gone:
            for e in gone:
                del self._entries[e]
            self._save()
            self._reindex()
        return matched

    def matching(self, f: AclFilter) -> list[AclEntry]:
        return [e for e in self._entries if f.matches(e)]
