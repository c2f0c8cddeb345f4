"""Group membership and group admin APIs, translated between wire versions and the
:class:`~server_ref.groups.GroupCoordinator`.

FindCoordinator v0-v6, JoinGroup v0-v9, SyncGroup v0-v5, Heartbeat v0-v4, LeaveGroup v0-v5,
ListGroups v0-v5, DescribeGroups v0-v5, DeleteGroups v0-v2. This single broker coordinates
every group and every transactional id.
"""

from __future__ import annotations

from sdk import errors
from sdk.protocol.api import ApiKey
from sdk.protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from sdk.protocol.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from sdk.protocol.messages.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from sdk.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from sdk.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from sdk.protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse
from sdk.protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from sdk.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from server_ref.groups import GroupCoordinator, LeavingMember
from server_ref.handlers import RequestContext, handles
from server_ref.replication.group_writes import group_write_replicated

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
# Without an authorizer Kafka reports every operation a group supports: READ(3), DELETE(6),
# DESCRIBE(8), as a bit field.
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
OPERATIONS_NOT_REQUESTED = -(1 << 31)


def _coordinator(ctx: RequestContext) -> GroupCoordinator:
    coordinator = ctx.broker.groups
    if coordinator is None:  # set by Broker.start(), before any request is served
        raise RuntimeError("the broker's group coordinator is not started")
    return coordinator


def client_host(peer: str) -> str:
    """Kafka shows a member's host as Java prints an address: "/127.0.0.1"."""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer  # the peer is "host:port"
    return "/" + host


# ---------------------------------------------------------------------------- FindCoordinator


@handles(ApiKey.FIND_COORDINATOR, 0, 6)
def find_coordinator(ctx: RequestContext,
                     req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    broker = ctx.broker
    if broker.cluster is not None:  # the leader of the key's __consumer_offsets partition
        from server_ref.cluster.coordinators import find_coordinator as placed

        return placed(ctx, req)
    host, port = broker.endpoint(ctx.listener)
    key_type = req.key_type if ctx.api_version >= 1 else GROUP_KEY_TYPE

    def locate() -> tuple[int, str | None]:
        if key_type not in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE):
            return errors.InvalidRequestError.errno, f"coordinator key type {key_type} unknown"
        if key_type == GROUP_KEY_TYPE and not _coordinator(ctx).loaded:
            return errors.CoordinatorNotAvailableError.errno, "the coordinator is not loaded"
        txns = broker.transactions
        if key_type == TRANSACTION_KEY_TYPE and (txns is None or not txns.loaded):
            return errors.CoordinatorNotAvailableError.errno, \
                "the transaction coordinator is not loaded"
        return 0, None

    if ctx.api_version >= 4:
        coordinators = []
        for key in req.coordinator_keys:
            error, message = locate()
            coordinators.append(FindCoordinatorResponse.Coordinator(
                key=key, node_id=-1 if error else broker.node_id,
                host="" if error else host, port=-1 if error else port,
                error_code=error, error_message=message,
            ))
        return FindCoordinatorResponse(coordinators=coordinators)
    error, message = locate()
    return FindCoordinatorResponse(
        error_code=error, error_message=message, node_id=-1 if error else broker.node_id,
        host="" if error else host, port=-1 if error else port,
    )


# ---------------------------------------------------------------------------- membership


@handles(ApiKey.JOIN_GROUP, 0, 9)
async def join_group(ctx: RequestContext, req: JoinGroupRequest) -> JoinGroupResponse:
    v = ctx.api_version
    result = await _coordinator(ctx).join_group(
        req.group_id, req.member_id, protocol_type=req.protocol_type,
        protocols=[(p.name, p.metadata) for p in req.protocols or ()],
        session_timeout_ms=req.session_timeout_ms,
        # v0 has no rebalance timeout: the session timeout bounds the rebalance.
        rebalance_timeout_ms=req.rebalance_timeout_ms if v >= 1 else req.session_timeout_ms,
        group_instance_id=req.group_instance_id if v >= 5 else None,
        client_id=ctx.client_id or "", client_host=client_host(ctx.peer),
        require_known_member_id=v >= 4, supports_skip_assignment=v >= 9,
        reason=req.reason if v >= 8 else None,
    )
    # Cluster mode: answered once the ISR has the group's records (Kafka appends acks=-1).
    error = await group_write_replicated(ctx.broker, req.group_id, result.error)
    return JoinGroupResponse(
        error_code=error, generation_id=result.generation_id,
        # Null protocol type/name only exist from v7 on.
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name if v >= 7 else (result.protocol_name or ""),
        leader=result.leader, skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[
            JoinGroupResponse.JoinGroupResponseMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id,
                metadata=m.metadata)
            for m in result.members
        ],
    )


@handles(ApiKey.SYNC_GROUP, 0, 5)
async def sync_group(ctx: RequestContext, req: SyncGroupRequest) -> SyncGroupResponse:
    v = ctx.api_version
    result = await _coordinator(ctx).sync_group(
        req.group_id, req.member_id, req.generation_id,
        assignments={a.member_id: a.assignment for a in req.assignments or ()},
        group_instance_id=req.group_instance_id if v >= 3 else None,
        protocol_type=req.protocol_type if v >= 5 else None,
        protocol_name=req.protocol_name if v >= 5 else None,
    )
    # Cluster mode: the assignment is answered once the ISR has it (Kafka appends acks=-1).
    error = await group_write_replicated(ctx.broker, req.group_id, result.error)
    if error != result.error:
        return SyncGroupResponse(error_code=error)
    return SyncGroupResponse(error_code=result.error, protocol_type=result.protocol_type,
                             protocol_name=result.protocol_name, assignment=result.assignment)


@handles(ApiKey.HEARTBEAT, 0, 4)
def heartbeat(ctx: RequestContext, req: HeartbeatRequest) -> HeartbeatResponse:
    error = _coordinator(ctx).heartbeat(
        req.group_id, req.member_id, req.generation_id,
        req.group_instance_id if ctx.api_version >= 3 else None,
    )
    return HeartbeatResponse(error_code=error)


@handles(ApiKey.LEAVE_GROUP, 0, 5)
def leave_group(ctx: RequestContext, req: LeaveGroupRequest) -> LeaveGroupResponse:
    v = ctx.api_version
    if v < 3:
        leaving = [LeavingMember(req.member_id)]
    else:
        leaving = [LeavingMember(m.member_id, m.group_instance_id, m.reason if v >= 5 else None)
                   for m in req.members or ()]
    result = _coordinator(ctx).leave_group(req.group_id, leaving)
    if v < 3:
        # One member, one error field: the group's error, else the member's.
        member_error = result.members[0][1] if result.members else 0
        return LeaveGroupResponse(error_code=result.error or member_error)
    return LeaveGroupResponse(
        error_code=result.error,
        members=[
            LeaveGroupResponse.MemberResponse(member_id=m.member_id,
                                              group_instance_id=m.group_instance_id,
                                              error_code=error)
            for m, error in result.members
        ],
    )


# ---------------------------------------------------------------------------- group admin


@handles(ApiKey.LIST_GROUPS, 0, 5)
def list_groups(ctx: RequestContext, req: ListGroupsRequest) -> ListGroupsResponse:
    v = ctx.api_version
    error, listed = _coordinator(ctx).list_groups(
        states=req.states_filter or () if v >= 4 else (),
        types=req.types_filter or () if v >= 5 else (),
    )
    from server_ref.share.coordinator import listed_share_groups  # share groups (KIP-932)

    shared = listed_share_groups(ctx.broker, req.states_filter if v >= 4 else (),
                                 req.types_filter if v >= 5 else ())
    return ListGroupsResponse(
        error_code=error,
        groups=[
            ListGroupsResponse.ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type,
                                           group_state=g.state, group_type=g.group_type)
            for g in (*listed, *shared)
        ],
    )


@handles(ApiKey.DESCRIBE_GROUPS, 0, 5)
def describe_groups(ctx: RequestContext, req: DescribeGroupsRequest) -> DescribeGroupsResponse:
    v = ctx.api_version
    operations = (GROUP_AUTHORIZED_OPERATIONS if v >= 3 and req.include_authorized_operations
                  else OPERATIONS_NOT_REQUESTED)
    described = []
    for group_id in req.groups or ():
        d = _coordinator(ctx).describe_group(group_id)
        described.append(DescribeGroupsResponse.DescribedGroup(
            error_code=d.error, group_id=d.group_id, group_state=d.state,
            protocol_type=d.protocol_type, protocol_data=d.protocol_data,
            members=[
                DescribeGroupsResponse.DescribedGroupMember(
                    member_id=m.member_id, group_instance_id=m.group_instance_id,
                    client_id=m.client_id, client_host=m.client_host,
                    member_metadata=m.metadata, member_assignment=m.assignment)
                for m in d.members
            ],
            authorized_operations=operations,
        ))
    return DescribeGroupsResponse(groups=described)


@handles(ApiKey.DELETE_GROUPS, 0, 2)
def delete_groups(ctx: RequestContext, req: DeleteGroupsRequest) -> DeleteGroupsResponse:
    names = list(dict.fromkeys(req.groups_names or ()))  # a name asked twice is answered once
    results = _coordinator(ctx).delete_groups(names)
    from server_ref.share.coordinator import delete_share_group  # share groups (KIP-932)

    for name in names:
        share_error = delete_share_group(ctx.broker, name)
        if share_error is not None:
            results[name] = share_error
    return DeleteGroupsResponse(results=[
        DeleteGroupsResponse.DeletableGroupResult(group_id=name, error_code=results[name])
        for name in names
    ])
