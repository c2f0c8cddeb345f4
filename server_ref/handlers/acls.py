"""CreateAcls (30), DescribeAcls (29), DeleteAcls (31) over the broker's ACL store.

Without an authorizer (``authorizer.class.name`` unset) every answer is SECURITY_DISABLED,
as Kafka's. Who may call them (ALTER / DESCRIBE on the cluster) is checked by
``server_ref.security.api_rules`` before these run. Changes apply at once: the store
persists them and drops the authorizer's decision cache, and every incremental fetch
session is forgotten (its partitions were authorized when they joined it; the clients start
new sessions with full fetch requests, which are checked again, where Kafka re-checks each
session partition on every fetch). In cluster mode CreateAcls and DeleteAcls go to the
active controller (``server_ref.controller.acl_records``) and every broker replays the
bindings from the metadata log; DescribeAcls reads the replayed store.
"""

from __future__ import annotations

from typing import Any

from sdk.errors import InvalidRequestError, SecurityDisabledError
from sdk.protocol.messages.create_acls import CreateAclsRequest, CreateAclsResponse
from sdk.protocol.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
from sdk.protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse
from server_ref.handlers import RequestContext, handles
from server_ref.security.acls import AclEntry, AclFilter, invalid_reason

_DISABLED = SecurityDisabledError.errno
_DISABLED_MESSAGE = "No Authorizer is configured on the broker"
_INVALID = InvalidRequestError.errno


@handles(CreateAclsRequest.API_KEY, 0, 3)
def create_acls(ctx: RequestContext, req: CreateAclsRequest) -> Any:
    if ctx.broker.cluster is not None and ctx.broker.authorizer is not None:
        from server_ref.cluster import forwarding  # bindings live in the metadata log

        return forwarding.create_acls(ctx, req)
    results = []
    valid: list[AclEntry] = []
    for c in req.creations:
        if ctx.broker.authorizer is None:
            results.append(CreateAclsResponse.AclCreationResult(
                error_code=_DISABLED, error_message=_DISABLED_MESSAGE))
            continue
        entry = AclEntry(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal,
                         c.host, c.operation, c.permission_type)
        reason = invalid_reason(entry)
        if reason is None:
            valid.append(entry)
            results.append(CreateAclsResponse.AclCreationResult())
        else:
            results.append(CreateAclsResponse.AclCreationResult(error_code=_INVALID,
                                                                error_message=reason))
    if valid:
        before = ctx.broker.acls.version
        ctx.broker.acls.add(valid)
        if ctx.broker.acls.version != before:
            ctx.broker.fetch_sessions.clear()
    return CreateAclsResponse(results=results)


def _filter(f: DescribeAclsRequest | DeleteAclsRequest.DeleteAclsFilter) -> AclFilter:
    return AclFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                     f.principal_filter, f.host_filter, f.operation, f.permission_type)


@handles(DescribeAclsRequest.API_KEY, 0, 3)
def describe_acls(ctx: RequestContext, req: DescribeAclsRequest) -> DescribeAclsResponse:
    if ctx.broker.authorizer is None:
        return DescribeAclsResponse(error_code=_DISABLED, error_message=_DISABLED_MESSAGE)
    f = _filter(req)
    reason = f.invalid_reason()
    if reason is not None:
        return DescribeAclsResponse(error_code=_INVALID, error_message=reason)
    by_resource: dict[tuple[int, str, int], list[DescribeAclsResponse.AclDescription]] = {}
    for e in ctx.broker.acls.matching(f):
        by_resource.setdefault((e.resource_type, e.name, e.pattern_type), []).append(
            DescribeAclsResponse.AclDescription(principal=e.principal, host=e.host,
                                                operation=e.operation,
                                                permission_type=e.permission))
    return DescribeAclsResponse(resources=[
        DescribeAclsResponse.DescribeAclsResource(resource_type=t, resource_name=n,
                                                  pattern_type=p, acls=acls)
        for (t, n, p), acls in by_resource.items()])


@handles(DeleteAclsRequest.API_KEY, 0, 3)
def delete_acls(ctx: RequestContext, req: DeleteAclsRequest) -> Any:
    Result = DeleteAclsResponse.DeleteAclsFilterResult
    if ctx.broker.authorizer is None:
        return DeleteAclsResponse(filter_results=[
            Result(error_code=_DISABLED, error_message=_DISABLED_MESSAGE) for _ in req.filters])
    if ctx.broker.cluster is not None:
        from server_ref.cluster import forwarding  # bindings live in the metadata log

        return forwarding.delete_acls(ctx, req)
    filters = [_filter(f) for f in req.filters]
    reasons = [f.invalid_reason() for f in filters]
    before = ctx.broker.acls.version
    matched = ctx.broker.acls.remove_matching([f for f, r in zip(filters, reasons) if r is None])
    if ctx.broker.acls.version != before:
        ctx.broker.fetch_sessions.clear()
    found = iter(matched)
    results = []
    for reason in reasons:
        if reason is not None:
            results.append(Result(error_code=_INVALID, error_message=reason))
            continue
        results.append(Result(matching_acls=[DeleteAclsResponse.DeleteAclsMatchingAcl(
            resource_type=e.resource_type, resource_name=e.name, pattern_type=e.pattern_type,
            principal=e.principal, host=e.host, operation=e.operation,
            permission_type=e.permission) for e in next(found)]))
    return DeleteAclsResponse(filter_results=results)
