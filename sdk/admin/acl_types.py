"""ACL and SCRAM credential types of the admin client, with Kafka's numeric codes.

An :class:`AclBinding` says who (``principal``, ``host``) may or may not
(``permission``) do what (``operation``) to which resources (``pattern``)::

    AclBinding(ResourcePattern(ResourceType.TOPIC, "orders-", PatternType.PREFIXED),
               "User:alice", operation=AclOperation.WRITE)

An :class:`AclBindingFilter` selects bindings for ``describe_acls`` and ``delete_acls``:
fields left as ``None`` / ``ANY`` match anything, and ``PatternType.MATCH`` selects every
binding that applies to the named resource (literal, wildcard and prefixed). Enum fields
also take their names as strings (``"READ"``, ``"prefixed"``), as the CLI passes them.
"""

from __future__ import annotations

import enum
import hashlib
import os
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sdk.errors import KafkaError

__all__ = [
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "AclResult",
    "DeletedAcls",
    "PatternType",
    "ResourcePattern",
    "ResourceType",
    "ScramCredentialInfo",
    "ScramMechanism",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "UserScramCredentials",
    "UserScramResult",
]


class ResourceType(enum.IntEnum):
    """Kafka's ACL resource types (``ANY`` only in filters)."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    """How a resource name matches: ``LITERAL`` (exactly, or every resource when the name is
    ``*``) or ``PREFIXED``. ``ANY`` and ``MATCH`` only in filters."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    """Kafka's ACL operations (``ANY`` only in filters; ``ALL`` grants or denies every one)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(enum.IntEnum):
    """``ALLOW`` or ``DENY`` (``ANY`` only in filters); a matching DENY always wins."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class ScramMechanism(enum.IntEnum):
    """SCRAM mechanisms with Kafka's codes in the SCRAM credential APIs."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        """The SASL name: ``SCRAM-SHA-256``."""
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        """The hashlib name of its hash: ``sha256``."""
        return {ScramMechanism.SCRAM_SHA_256: "sha256",
                ScramMechanism.SCRAM_SHA_512: "sha512"}[self]


E = TypeVar("E", bound=enum.IntEnum)


def coerce_enum(cls: type[E], value: Any, what: str) -> E:
    """``value`` as a member of ``cls``: a member, its number or its name (any case, '-' for
    '_'); anything else is a ValueError naming the choices."""
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        key = value.strip().upper().replace("-", "_")
        if key in cls.__members__:
            return cls[key]
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            return cls(value)
        except ValueError:
            pass
    choices = ", ".join(m.name for m in cls if m.name != "UNKNOWN")
    raise ValueError(f"{what} must be one of {choices}, not {value!r}")


def _check_text(value: Any, what: str, *, optional: bool) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, not {value!r}")


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """Resources an ACL applies to: a type, a name (``*`` with LITERAL: all of that type;
    the cluster is named ``kafka-cluster``) and how the name matches."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __post_init__(self) -> None:
        object.__setattr__(self, "resource_type",
                           coerce_enum(ResourceType, self.resource_type, "resource_type"))
        object.__setattr__(self, "pattern_type",
                           coerce_enum(PatternType, self.pattern_type, "pattern_type"))
        _check_text(self.name, "the resource name", optional=False)

    def __str__(self) -> str:
        return f"{self.resource_type.name}:{self.pattern_type.name}:{self.name}"


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: ``principal`` ("User:alice", "User:*") connecting from ``host`` ("*": any)
    is allowed or denied (``permission``) ``operation`` on the resources of ``pattern``."""

    pattern: ResourcePattern
    principal: str
    host: str = "*"
    operation: AclOperation = AclOperation.ALL
    permission: AclPermissionType = AclPermissionType.ALLOW

    def __post_init__(self) -> None:
        if not isinstance(self.pattern, ResourcePattern):
            raise TypeError(f"pattern must be a ResourcePattern, not {self.pattern!r}")
        _check_text(self.principal, "principal", optional=False)
        _check_text(self.host, "host", optional=False)
        object.__setattr__(self, "operation",
                           coerce_enum(AclOperation, self.operation, "operation"))
        object.__setattr__(self, "permission",
                           coerce_enum(AclPermissionType, self.permission, "permission"))

    def validate(self) -> None:
        """Raise ValueError unless this binding can be created (concrete type, LITERAL or
        PREFIXED, a concrete operation, ALLOW or DENY, a "Type:name" principal)."""
        p = self.pattern
        if p.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise ValueError(f"{self}: the resource type must be concrete, not "
                             f"{p.resource_type.name}")
        if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise ValueError(f"{self}: the pattern type must be LITERAL or PREFIXED, not "
                             f"{p.pattern_type.name}")
        if not p.name:
            raise ValueError(f"{self}: the resource name is empty")
        if self.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise ValueError(f"{self}: the operation must be concrete, not "
                             f"{self.operation.name}")
        if self.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            raise ValueError(f"{self}: the permission must be ALLOW or DENY, not "
                             f"{self.permission.name}")
        kind, sep, name = self.principal.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"{self}: the principal must read 'Type:name' "
                             f"(e.g. 'User:alice'), not {self.principal!r}")

    def __str__(self) -> str:
        return (f"{self.permission.name} {self.principal}@{self.host} "
                f"{self.operation.name} on {self.pattern}")


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Selects ACL bindings: ``None`` text fields and ``ANY`` enums match anything;
    ``pattern_type=PatternType.MATCH`` with a name selects every binding that applies to
    that resource (its literal and prefixed patterns and the ``*`` wildcard)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def __post_init__(self) -> None:
        for attr, cls in (("resource_type", ResourceType), ("pattern_type", PatternType),
                          ("operation", AclOperation), ("permission", AclPermissionType)):
            object.__setattr__(self, attr, coerce_enum(cls, getattr(self, attr), attr))
        for attr in ("name", "principal", "host"):
            _check_text(getattr(self, attr), attr, optional=True)

    @classmethod
    def of(cls, binding: AclBinding) -> AclBindingFilter:
        """The filter matching exactly ``binding``."""
        p = binding.pattern
        return cls(p.resource_type, p.name, p.pattern_type, binding.principal, binding.host,
                   binding.operation, binding.permission)

    def validate(self) -> None:
        """Raise ValueError on a filter Kafka refuses (UNKNOWN values)."""
        for attr in ("resource_type", "pattern_type", "operation", "permission"):
            if getattr(self, attr).name == "UNKNOWN":
                raise ValueError(f"{attr} UNKNOWN cannot be used in a filter")

    def __str__(self) -> str:
        parts = [f"{k}={v.name if isinstance(v, enum.Enum) else v}"
                 for k, v in ((k, getattr(self, k)) for k in self.__slots__)
                 if v is not None and not (isinstance(v, enum.Enum) and v.name == "ANY")]
        return f"AclBindingFilter({', '.join(parts)})"



@dataclass(frozen=True, slots=True)
class AclResult:
    """The outcome of creating one binding (``error`` None on success)."""

    binding: AclBinding
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True)
class DeletedAcls:
    """The bindings one filter deleted (``error``: the filter failed as a whole)."""

    filter: AclBindingFilter
    deleted: tuple[AclBinding, ...] = ()
    error: KafkaError | None = None


# ============================================================================ SCRAM


@dataclass(frozen=True, slots=True)
class ScramCredentialInfo:
    """A SCRAM credential a user has: mechanism and iteration count (never the secret)."""

    mechanism: ScramMechanism
    iterations: int


@dataclass(frozen=True, slots=True)
class UserScramCredentials:
    """A user's SCRAM credentials (``error``: e.g. ResourceNotFoundError, no credentials)."""

    user: str
    credentials: tuple[ScramCredentialInfo, ...] = ()
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True)
class UserScramResult:
    """The outcome of altering one user's credentials."""

    user: str
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True, repr=False)
class UserScramCredentialUpsertion:
    """Set ``user``'s password for ``mechanism``. The client salts it (``salt``: 32 random
    bytes unless given) and sends only the salt and PBKDF2(password, salt, iterations), as
    Java's admin client does; the broker never sees the password. The repr hides it."""

    user: str
    mechanism: ScramMechanism
    password: str | bytes = field(repr=False)
    iterations: int = 4096
    salt: bytes | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        _check_text(self.user, "user", optional=False)
        if not self.user:
            raise ValueError("the user name is empty")
        object.__setattr__(self, "mechanism",
                           coerce_enum(ScramMechanism, self.mechanism, "mechanism"))
        if self.mechanism is ScramMechanism.UNKNOWN:
            raise ValueError("mechanism must be SCRAM_SHA_256 or SCRAM_SHA_512")
        if not isinstance(self.password, str | bytes):
            raise TypeError("the password must be str or bytes")
        if isinstance(self.iterations, bool) or not isinstance(self.iterations, int) \
                or self.iterations <= 0:
            raise ValueError(f"iterations must be a positive int, not {self.iterations!r}")
        if self.salt is None:
            object.__setattr__(self, "salt", os.urandom(32))
        elif not isinstance(self.salt, bytes) or not self.salt:
            raise TypeError("salt must be non-empty bytes")

    def salted_password(self) -> bytes:
        """PBKDF2-HMAC of the password with the mechanism's hash (RFC 5802 Hi())."""
        password = self.password.encode() if isinstance(self.password, str) else self.password
        assert self.salt is not None
        return hashlib.pbkdf2_hmac(self.mechanism.hash_name, password, self.salt,
                                   self.iterations)

    def __repr__(self) -> str:
        return (f"UserScramCredentialUpsertion(user={self.user!r}, "
                f"mechanism={self.mechanism.name}, iterations={self.iterations})")


@dataclass(frozen=True, slots=True)
class UserScramCredentialDeletion:
    """Remove ``user``'s credential for ``mechanism``."""

    user: str
    mechanism: ScramMechanism

    def __post_init__(self) -> None:
        _check_text(self.user, "user", optional=False)
        object.__setattr__(self, "mechanism",
                           coerce_enum(ScramMechanism, self.mechanism, "mechanism"))
