"""ACLs and SCRAM credentials: CreateAcls, DescribeAcls, DeleteAcls,
DescribeUserScramCredentials, AlterUserScramCredentials.

Each is one request to any broker (a KRaft broker forwards the changes to the controller;
the other brokers learn them from the metadata log a little later). A broker without an
authorizer answers SECURITY_DISABLED, raised as :class:`sdk.errors.SecurityDisabledError`.
"""

from __future__ import annotations

from collections.abc import Sequence

from sdk.admin.acl_types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclResult,
    DeletedAcls,
    PatternType,
    ResourcePattern,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentials,
    UserScramCredentialUpsertion,
    UserScramResult,
)
from sdk.admin.dispatch import Deadline, Dispatcher
from sdk.admin.results import ResultSet
from sdk.admin.topics import error_from
from sdk.errors import KafkaError, MalformedDataError
from sdk.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)
from sdk.protocol.messages.create_acls import CreateAclsRequest, CreateAclsResponse
from sdk.protocol.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
from sdk.protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse
from sdk.protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)

__all__ = ["alter_user_scram_credentials", "create_acls", "delete_acls", "describe_acls",
           "describe_user_scram_credentials"]


def _enum_or_unknown(cls: type, value: int) -> object:
    try:
        return cls(value)
    except ValueError:
        return cls(0)  # every one of these enums has UNKNOWN = 0


def _binding(resource_type: int, name: str, pattern_type: int, principal: str, host: str,
             operation: int, permission: int) -> AclBinding:
    pattern = ResourcePattern(_enum_or_unknown(ResourceType, resource_type),  # type: ignore[arg-type]
                              name, _enum_or_unknown(PatternType, pattern_type))  # type: ignore[arg-type]
    return AclBinding(pattern, principal, host,
                      _enum_or_unknown(AclOperation, operation),  # type: ignore[arg-type]
                      _enum_or_unknown(AclPermissionType, permission))  # type: ignore[arg-type]


def _raise_if(code: int, message: str | None) -> None:
    error = error_from(code, message)
    if error is not None:
        raise error


def _filters(filters: AclBindingFilter | Sequence[AclBindingFilter], what: str
             ) -> list[AclBindingFilter]:
    items = [filters] if isinstance(filters, AclBindingFilter) else list(filters)
    for f in items:
        if not isinstance(f, AclBindingFilter):
            raise TypeError(f"{what} takes AclBindingFilter objects, not {f!r}")
        f.validate()
    return items


# ============================================================================ ACLs


async def create_acls(d: Dispatcher, bindings: Sequence[AclBinding], *,
                      deadline: Deadline) -> ResultSet[AclBinding, AclResult]:
    items = list(dict.fromkeys(bindings))
    for b in items:
        if not isinstance(b, AclBinding):
            raise TypeError(f"create_acls takes AclBinding objects, not {b!r}")
        b.validate()
    if not items:
        return ResultSet({}, "create acls")

    def build(version: int) -> CreateAclsRequest:
        return CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
            resource_type=int(b.pattern.resource_type), resource_name=b.pattern.name,
            resource_pattern_type=int(b.pattern.pattern_type), principal=b.principal,
            host=b.host, operation=int(b.operation), permission_type=int(b.permission))
            for b in items])

    response: CreateAclsResponse = await d.call(build, CreateAclsRequest.API_KEY, deadline)
    if len(response.results) != len(items):
        raise MalformedDataError(f"CreateAcls answered {len(response.results)} results for "
                                 f"{len(items)} bindings")
    return ResultSet({b: AclResult(b, error_from(r.error_code, r.error_message))
                      for b, r in zip(items, response.results)}, "create acls")


async def describe_acls(d: Dispatcher, acl_filter: AclBindingFilter, *,
                        deadline: Deadline) -> list[AclBinding]:
    (f,) = _filters(acl_filter, "describe_acls")

    def build(version: int) -> DescribeAclsRequest:
        return DescribeAclsRequest(
            resource_type_filter=int(f.resource_type), resource_name_filter=f.name,
            pattern_type_filter=int(f.pattern_type), principal_filter=f.principal,
            host_filter=f.host, operation=int(f.operation), permission_type=int(f.permission))

    response: DescribeAclsResponse = await d.call(build, DescribeAclsRequest.API_KEY, deadline)
    _raise_if(response.error_code, response.error_message)
    return [_binding(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host,
                     a.operation, a.permission_type)
            for r in response.resources for a in r.acls]


async def delete_acls(d: Dispatcher, filters: AclBindingFilter | Sequence[AclBindingFilter], *,
                      deadline: Deadline) -> ResultSet[AclBindingFilter, DeletedAcls]:
    items = list(dict.fromkeys(_filters(filters, "delete_acls")))
    if not items:
        return ResultSet({}, "delete acls")

    def build(version: int) -> DeleteAclsRequest:
        return DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(
            resource_type_filter=int(f.resource_type), resource_name_filter=f.name,
            pattern_type_filter=int(f.pattern_type), principal_filter=f.principal,
            host_filter=f.host, operation=int(f.operation), permission_type=int(f.permission))
            for f in items])

    response: DeleteAclsResponse = await d.call(build, DeleteAclsRequest.API_KEY, deadline)
    if len(response.filter_results) != len(items):
        raise MalformedDataError(f"DeleteAcls answered {len(response.filter_results)} results "
                                 f"for {len(items)} filters")
    out: dict[AclBindingFilter, DeletedAcls] = {}
    for f, r in zip(items, response.filter_results):
        error: KafkaError | None = error_from(r.error_code, r.error_message)
        deleted = []
        for m in r.matching_acls:
            if m.error_code:  # one binding Kafka failed to delete: the filter's error
                error = error or error_from(m.error_code, m.error_message)
                continue
            deleted.append(_binding(m.resource_type, m.resource_name, m.pattern_type,
                                    m.principal, m.host, m.operation, m.permission_type))
        out[f] = DeletedAcls(f, tuple(deleted), error)
    return ResultSet(out, "delete acls")


# ============================================================================ SCRAM


async def describe_user_scram_credentials(
    d: Dispatcher, users: Sequence[str] | None, *, deadline: Deadline,
) -> ResultSet[str, UserScramCredentials]:
    names = None if users is None else list(dict.fromkeys(users))
    for name in names or ():
        if not isinstance(name, str) or not name:
            raise ValueError(f"user names must be non-empty strings, not {name!r}")

    def build(version: int) -> DescribeUserScramCredentialsRequest:
        # "Every user" travels as an empty list, as Java's admin sends it: Kafka 4.3 answers
        # an unauthorized request with users=null with nothing at all (its error response
        # builder fails on the null list and the request is dropped).
        return DescribeUserScramCredentialsRequest(
            users=[DescribeUserScramCredentialsRequest.UserName(name=n) for n in names or ()])

    response: DescribeUserScramCredentialsResponse = await d.call(
        build, DescribeUserScramCredentialsRequest.API_KEY, deadline)
    _raise_if(response.error_code, response.error_message)
    out: dict[str, UserScramCredentials] = {}
    for r in response.results:
        infos = tuple(ScramCredentialInfo(
            _enum_or_unknown(ScramMechanism, c.mechanism), c.iterations)  # type: ignore[arg-type]
            for c in r.credential_infos)
        out[r.user] = UserScramCredentials(r.user, infos,
                                           error_from(r.error_code, r.error_message))
    return ResultSet(out, "describe user SCRAM credentials")


async def alter_user_scram_credentials(
    d: Dispatcher, upsertions: Sequence[UserScramCredentialUpsertion],
    deletions: Sequence[UserScramCredentialDeletion], *, deadline: Deadline,
) -> ResultSet[str, UserScramResult]:
    ups, dels = list(upsertions), list(deletions)
    for u in ups:
        if not isinstance(u, UserScramCredentialUpsertion):
            raise TypeError(f"upsertions take UserScramCredentialUpsertion objects, not {u!r}")
    for x in dels:
        if not isinstance(x, UserScramCredentialDeletion):
            raise TypeError(f"deletions take UserScramCredentialDeletion objects, not {x!r}")
    users = list(dict.fromkeys([u.user for u in ups] + [x.user for x in dels]))
    if not users:
        return ResultSet({}, "alter user SCRAM credentials")
    # Salting is PBKDF2 with thousands of rounds: done once, not per version probed.
    salted = [(u, u.salted_password()) for u in ups]

    def build(version: int) -> AlterUserScramCredentialsRequest:
        return AlterUserScramCredentialsRequest(
            deletions=[AlterUserScramCredentialsRequest.ScramCredentialDeletion(
                name=x.user, mechanism=int(x.mechanism)) for x in dels],
            upsertions=[AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
                name=u.user, mechanism=int(u.mechanism), iterations=u.iterations,
                salt=u.salt or b"", salted_password=pw) for u, pw in salted])

    response: AlterUserScramCredentialsResponse = await d.call(
        build, AlterUserScramCredentialsRequest.API_KEY, deadline)
    out = {r.user: UserScramResult(r.user, error_from(r.error_code, r.error_message))
           for r in response.results}
    for user in users:
        if user not in out:
            out[user] = UserScramResult(user, MalformedDataError(
                f"the broker's answer did not mention user {user!r}"))
    return ResultSet({u: out[u] for u in users}, "alter user SCRAM credentials")
