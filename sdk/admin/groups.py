"""Consumer group administration: list, describe, delete; committed offsets (read, alter,
reset); lag.

Group requests go to the group's coordinator (FindCoordinator, cached by the network client;
a NOT_COORDINATOR answer forgets it and asks again). ListGroups goes to every broker, since
each lists only the groups it coordinates.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sdk.admin.dispatch import Deadline, Dispatcher
from sdk.admin.offsets import list_offsets
from sdk.admin.results import (
    BrokerNode,
    CommittedOffset,
    GroupDescription,
    GroupLag,
    GroupListing,
    GroupResult,
    ItemsFailedError,
    MemberDescription,
    OffsetSpec,
    PartitionLag,
    ResultSet,
)
from sdk.admin.topics import error_from, fetch_metadata
from sdk.errors import KafkaError, MalformedDataError, NonEmptyGroupError
from sdk.net import Coordinator
from sdk.protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from sdk.protocol.messages.consumer_protocol import ConsumerProtocolAssignment
from sdk.protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from sdk.protocol.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from sdk.protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from sdk.protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from sdk.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from sdk.types import OffsetAndMetadata, TopicPartition

__all__ = [
    "ConsumerProtocolMember",
    "ConsumerProtocolGroup",
    "alter_group_offsets",
    "consumer_group_describe",
    "delete_groups",
    "describe_groups",
    "group_lag",
    "list_group_offsets",
    "list_groups",
    "reset_group_offsets",
]

_LIST_GROUPS = ListGroupsRequest.API_KEY
_DESCRIBE_GROUPS = DescribeGroupsRequest.API_KEY
_CONSUMER_GROUP_DESCRIBE = ConsumerGroupDescribeRequest.API_KEY
_DELETE_GROUPS = DeleteGroupsRequest.API_KEY
_OFFSET_FETCH = OffsetFetchRequest.API_KEY
_OFFSET_COMMIT = OffsetCommitRequest.API_KEY
_LIST_GROUPS_STATES = 4  # states_filter (KIP-518)
_LIST_GROUPS_TYPES = 5  # types_filter (KIP-848)
_OFFSET_FETCH_ALL = 2  # a null topic list means "every committed partition"
_OFFSET_FETCH_BATCHED = 8  # groups array (KIP-709)
_INACTIVE_STATES = ("Empty", "Dead")
_INT16 = struct.Struct(">h")


def _check_groups(group_ids: Sequence[str], what: str) -> list[str]:
    if isinstance(group_ids, str):
        raise TypeError(f"{what} takes a list of group ids, not one string")
    out = list(group_ids)
    for g in out:
        if not isinstance(g, str) or not g:
            raise ValueError(f"{what}: every group id must be a non-empty string, not {g!r}")
    if len(set(out)) != len(out):
        raise ValueError(f"{what}: a group id is given twice")
    return out


def _by_topic(partitions: Sequence[TopicPartition]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return grouped


# ============================================================================ list


@dataclass(frozen=True, slots=True)
class _BrokerGroups:
    node: int
    groups: tuple[GroupListing, ...] = ()
    error: KafkaError | None = None


async def list_groups(d: Dispatcher, *, states: Sequence[str] | None,
                      types: Sequence[str] | None,
                      deadline: Deadline) -> dict[str, GroupListing]:
    """Every group of every broker; raises ItemsFailedError if a broker could not answer
    (a partial list would silently miss that broker's groups)."""
    await d.client.refresh_metadata(timeout_s=max(0.001, deadline.remaining()))
    nodes = sorted(d.client.metadata.brokers)
    min_version = _LIST_GROUPS_TYPES if types else _LIST_GROUPS_STATES if states else 0

    async def send(node: int, _batch: list[int]) -> dict[int, _BrokerGroups]:
        def build(_version: int) -> ListGroupsRequest:
            return ListGroupsRequest(states_filter=list(states or ()),
                                     types_filter=list(types or ()))

        response: ListGroupsResponse = await d.request(node, build, _LIST_GROUPS, deadline,
                                                       min_version=min_version)
        error = error_from(response.error_code)
        groups = tuple(GroupListing(g.group_id, g.protocol_type, g.group_state, g.group_type,
                                    node) for g in response.groups)
        return {node: _BrokerGroups(node, groups, error)}

    results = await d.run_items(
        nodes, what="list groups", deadline=deadline, route=lambda node: node, send=send,
        fail=lambda node, exc: _BrokerGroups(node, error=exc), error_of=lambda r: r.error,
    )
    failed = {f"broker {n}": r.error for n, r in results.items() if r.error is not None}
    if failed:
        raise ItemsFailedError("list consumer groups", failed, len(results))
    listings = [g for r in results.values() for g in r.groups]
    return {g.group_id: g for g in sorted(listings, key=lambda g: g.group_id)}


# ============================================================================ describe


def _assignment(protocol_type: str, data: bytes) -> tuple[TopicPartition, ...]:
    """The partitions in a consumer-protocol assignment; () for other protocols and for
    bytes that do not decode (a describe should not fail on one odd member)."""
    if protocol_type != "consumer" or len(data) < 2:
        return ()
    (version,) = _INT16.unpack_from(data, 0)
    if version < 0:
        return ()
    try:
        msg, _ = ConsumerProtocolAssignment.decode_from(
            data, 2, min(version, ConsumerProtocolAssignment.MAX_VERSION))
    except MalformedDataError:
        return ()
    return tuple(sorted(TopicPartition(t.topic, p)
                        for t in msg.assigned_partitions or () for p in t.partitions or ()))


def _node(d: Dispatcher, node: int) -> BrokerNode | None:
    broker = d.client.metadata.brokers.get(node)
    if broker is not None:
        return BrokerNode(broker.node_id, broker.host, broker.port, broker.rack)
    address = d.client.address_of(node)
    return None if address is None else BrokerNode(node, address[0], address[1])


async def describe_groups(d: Dispatcher, group_ids: Sequence[str], *,
                          deadline: Deadline) -> ResultSet[str, GroupDescription]:
    groups = _check_groups(group_ids, "describe_consumer_groups")

    async def send(node: int, batch: list[str]) -> dict[str, GroupDescription]:
        response: DescribeGroupsResponse = await d.request(
            node, lambda _v: DescribeGroupsRequest(groups=batch), _DESCRIBE_GROUPS, deadline)
        coordinator = _node(d, node)
        out: dict[str, GroupDescription] = {}
        for g in response.groups:
            members = tuple(
                MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                  _assignment(g.protocol_type, m.member_assignment))
                for m in g.members)
            out[g.group_id] = GroupDescription(
                group_id=g.group_id, error=error_from(g.error_code), state=g.group_state,
                protocol_type=g.protocol_type, protocol=g.protocol_data, members=members,
                coordinator=coordinator)
        return out

    results = await d.run_items(
        groups, what="describe group", deadline=deadline, route=Coordinator, send=send,
        fail=lambda g, exc: GroupDescription(g, exc), error_of=lambda r: r.error,
    )
    return ResultSet(results, "describe consumer groups")


# ============================================================================ KIP-848 describe


@dataclass(frozen=True, slots=True)
class ConsumerProtocolMember:
    """A member of a consumer-protocol (KIP-848) group, as its coordinator sees it."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[TopicPartition, ...]  # what it owns now
    target_assignment: tuple[TopicPartition, ...]  # what it is moving to
    member_type: int = -1  # v1+: 0 classic member of a mixed group, 1 consumer; -1 unknown


@dataclass(frozen=True, slots=True)
class ConsumerProtocolGroup:
    """ConsumerGroupDescribe of one group: its epochs, assignor and members."""

    group_id: str
    error: KafkaError | None = None
    state: str = ""  # Empty, Assigning, Reconciling, Stable, Dead
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor: str = ""
    members: tuple[ConsumerProtocolMember, ...] = ()
    coordinator: BrokerNode | None = None


def _partitions(a: ConsumerGroupDescribeResponse.Assignment | None) -> tuple[TopicPartition, ...]:
    if a is None:
        return ()
    return tuple(sorted(TopicPartition(t.topic_name, p) for t in a.topic_partitions
                        for p in t.partitions))


async def consumer_group_describe(d: Dispatcher, group_ids: Sequence[str], *,
                                  deadline: Deadline) -> ResultSet[str, ConsumerProtocolGroup]:
    """ConsumerGroupDescribe at each group's coordinator. A classic group (or none) is
    GroupIdNotFoundError, as Kafka answers it."""
    groups = _check_groups(group_ids, "consumer_group_describe")

    async def send(node: int, batch: list[str]) -> dict[str, ConsumerProtocolGroup]:
        response: ConsumerGroupDescribeResponse = await d.request(
            node, lambda _v: ConsumerGroupDescribeRequest(group_ids=batch),
            _CONSUMER_GROUP_DESCRIBE, deadline)
        coordinator = _node(d, node)
        out: dict[str, ConsumerProtocolGroup] = {}
        for g in response.groups:
            members = tuple(
                ConsumerProtocolMember(
                    m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.client_id,
                    m.client_host, tuple(m.subscribed_topic_names), m.subscribed_topic_regex,
                    _partitions(m.assignment), _partitions(m.target_assignment),
                    m.member_type)
                for m in g.members)
            out[g.group_id] = ConsumerProtocolGroup(
                group_id=g.group_id, error=error_from(g.error_code, g.error_message),
                state=g.group_state, group_epoch=g.group_epoch,
                assignment_epoch=g.assignment_epoch, assignor=g.assignor_name,
                members=members, coordinator=coordinator)
        return out

    results = await d.run_items(
        groups, what="describe consumer-protocol group", deadline=deadline,
        route=Coordinator, send=send, fail=lambda g, exc: ConsumerProtocolGroup(g, exc),
        error_of=lambda r: r.error,
    )
    return ResultSet(results, "describe consumer-protocol groups")


# ============================================================================ delete


async def delete_groups(d: Dispatcher, group_ids: Sequence[str], *,
                        deadline: Deadline) -> ResultSet[str, GroupResult]:
    groups = _check_groups(group_ids, "delete_consumer_groups")

    async def send(node: int, batch: list[str]) -> dict[str, GroupResult]:
        response: DeleteGroupsResponse = await d.request(
            node, lambda _v: DeleteGroupsRequest(groups_names=batch), _DELETE_GROUPS, deadline)
        return {r.group_id: GroupResult(r.group_id, error_from(r.error_code))
                for r in response.results}

    results = await d.run_items(
        groups, what="delete group", deadline=deadline, route=Coordinator, send=send,
        fail=lambda g, exc: GroupResult(g, exc), error_of=lambda r: r.error,
    )
    return ResultSet(results, "delete consumer groups")


# ============================================================================ committed offsets


@dataclass(frozen=True, slots=True)
class _GroupOffsets:
    offsets: dict[TopicPartition, CommittedOffset] = field(default_factory=dict)
    error: KafkaError | None = None


async def list_group_offsets(d: Dispatcher, group_id: str,
                             partitions: Sequence[TopicPartition] | None, *,
                             require_stable: bool,
                             deadline: Deadline) -> ResultSet[TopicPartition, CommittedOffset]:
    """The group's committed offsets: of ``partitions``, or of every partition it has
    committed (then partitions without a commit are left out). Raises the group's error."""
    (group,) = _check_groups([group_id], "list_consumer_group_offsets")
    wanted = None if partitions is None else sorted(set(partitions))

    def build(version: int) -> OffsetFetchRequest:
        if version >= _OFFSET_FETCH_BATCHED:
            topics = None if wanted is None else [
                OffsetFetchRequest.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                for t, ps in _by_topic(wanted).items()]
            return OffsetFetchRequest(
                groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=topics)],
                require_stable=require_stable)
        topic_list = None if wanted is None else [
            OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
            for t, ps in _by_topic(wanted).items()]
        return OffsetFetchRequest(group_id=group, topics=topic_list,
                                  require_stable=require_stable)

    async def send(node: int, _batch: list[str]) -> dict[str, _GroupOffsets]:
        response: OffsetFetchResponse = await d.request(
            node, build, _OFFSET_FETCH, deadline,
            min_version=_OFFSET_FETCH_ALL if wanted is None else 0)
        # v8+ nests the topics per group, in classes of the same shape as the top-level ones.
        topics: list[tuple[str, Sequence[OffsetFetchResponse.OffsetFetchResponsePartition
                                         | OffsetFetchResponse.OffsetFetchResponsePartitions]]]
        if response.groups:
            g = response.groups[0]
            code, topics = g.error_code, [(t.name, t.partitions) for t in g.topics]
        else:
            code, topics = response.error_code, [(t.name, t.partitions) for t in response.topics]
        offsets: dict[TopicPartition, CommittedOffset] = {}
        for name, parts in topics:
            for p in parts:
                tp = TopicPartition(name, p.partition_index)
                if wanted is None and p.committed_offset < 0 and not p.error_code:
                    continue
                offsets[tp] = CommittedOffset(
                    tp, p.committed_offset if p.committed_offset >= 0 else None,
                    p.metadata or "",
                    p.committed_leader_epoch if p.committed_leader_epoch >= 0 else None,
                    error_from(p.error_code))
        return {group: _GroupOffsets(offsets, error_from(code))}

    results = await d.run_items(
        [group], what="list group offsets", deadline=deadline, route=Coordinator, send=send,
        fail=lambda _g, exc: _GroupOffsets(error=exc), error_of=lambda r: r.error,
    )
    outcome = results[group]
    if outcome.error is not None:
        raise outcome.error
    for tp in wanted or ():
        outcome.offsets.setdefault(tp, CommittedOffset(tp, None))
    return ResultSet(dict(sorted(outcome.offsets.items())), "list consumer group offsets")


def _as_offset(value: OffsetAndMetadata | int, tp: TopicPartition) -> OffsetAndMetadata:
    if isinstance(value, OffsetAndMetadata):
        offset = value.offset
    elif isinstance(value, int) and not isinstance(value, bool):
        offset, value = value, OffsetAndMetadata(value)
    else:
        raise TypeError(f"the offset for {tp} must be an int or OffsetAndMetadata, not {value!r}")
    if offset < 0:
        raise ValueError(f"the offset for {tp} must be >= 0, not {offset}")
    return value


async def alter_group_offsets(d: Dispatcher, group_id: str,
                              offsets: Mapping[TopicPartition, OffsetAndMetadata | int], *,
                              deadline: Deadline) -> ResultSet[TopicPartition, CommittedOffset]:
    """Commit ``offsets`` for the group as an admin (no member id, no generation): the
    coordinator accepts this only while the group has no active members."""
    (group,) = _check_groups([group_id], "alter_consumer_group_offsets")
    commits: dict[TopicPartition, OffsetAndMetadata] = {}
    for tp, value in offsets.items():
        if not isinstance(tp, TopicPartition):
            raise TypeError(f"offsets are keyed by TopicPartition, not {tp!r}")
        commits[tp] = _as_offset(value, tp)

    def result(tp: TopicPartition, error: KafkaError | None) -> CommittedOffset:
        c = commits[tp]
        return CommittedOffset(tp, c.offset, c.metadata, c.leader_epoch, error)

    async def send(node: int, batch: list[TopicPartition]) -> dict[TopicPartition, CommittedOffset]:
        def build(_version: int) -> OffsetCommitRequest:
            return OffsetCommitRequest(
                group_id=group, generation_id_or_member_epoch=-1, member_id="",
                topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
                    name=t,
                    partitions=[OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=p,
                        committed_offset=commits[TopicPartition(t, p)].offset,
                        committed_leader_epoch=_epoch(commits[TopicPartition(t, p)]),
                        committed_metadata=commits[TopicPartition(t, p)].metadata)
                        for p in ps])
                    for t, ps in _by_topic(batch).items()])

        response: OffsetCommitResponse = await d.request(node, build, _OFFSET_COMMIT, deadline)
        return {TopicPartition(t.name, p.partition_index):
                result(TopicPartition(t.name, p.partition_index), error_from(p.error_code))
                for t in response.topics for p in t.partitions}

    results = await d.run_items(
        sorted(commits), what="commit offset", deadline=deadline,
        route=lambda _tp: Coordinator(group), send=send, fail=result,
        error_of=lambda r: r.error,
    )
    return ResultSet(results, "alter consumer group offsets")


def _epoch(offset: OffsetAndMetadata) -> int:
    return -1 if offset.leader_epoch is None else offset.leader_epoch


async def _require_inactive(d: Dispatcher, group: str, deadline: Deadline) -> None:
    description = (await describe_groups(d, [group], deadline=deadline))[group]
    if description.error is not None:
        raise description.error
    if description.members or description.state not in _INACTIVE_STATES:
        raise NonEmptyGroupError(
            f"group {group!r} is {description.state} with {len(description.members)} "
            f"member(s); offsets can be reset only while it has none (stop its consumers)")


async def reset_group_offsets(d: Dispatcher, group_id: str, to: OffsetSpec | int, *,
                              topics: Sequence[str] | None,
                              partitions: Sequence[TopicPartition] | None, dry_run: bool,
                              deadline: Deadline) -> ResultSet[TopicPartition, CommittedOffset]:
    """Move the group's offsets to the earliest or latest offset, or to the first offset at
    or after a timestamp (the latest when no record is that new), as Kafka's
    ``kafka-consumer-groups --reset-offsets`` does. The scope is ``partitions``, else every
    partition of ``topics``, else every partition the group has committed. With ``dry_run``
    the new offsets are computed and returned but not committed."""
    (group,) = _check_groups([group_id], "reset_consumer_group_offsets")
    if to == OffsetSpec.MAX_TIMESTAMP:
        raise ValueError("reset to EARLIEST, LATEST or a timestamp, not MAX_TIMESTAMP")
    await _require_inactive(d, group, deadline)
    scope = await _reset_scope(d, group, topics, partitions, deadline)
    if not scope:
        return ResultSet({}, "reset consumer group offsets")
    found = await list_offsets(d, dict.fromkeys(scope, to), isolation_level="read_uncommitted",
                               deadline=deadline)
    missing = [tp for tp, r in found.items() if r.error is None and r.offset < 0]
    if missing:  # no record at or after the timestamp: go to the end, as Kafka's tool does
        ends = await list_offsets(d, dict.fromkeys(missing, OffsetSpec.LATEST),
                                  isolation_level="read_uncommitted", deadline=deadline)
        found = ResultSet({**found, **ends}, "list offsets")
    targets = {tp: r.offset for tp, r in found.items() if r.error is None}
    failed = {tp: CommittedOffset(tp, None, error=r.error)
              for tp, r in found.items() if r.error is not None}
    if dry_run or not targets:
        planned = {tp: CommittedOffset(tp, off) for tp, off in targets.items()}
        return ResultSet(dict(sorted({**planned, **failed}.items())),
                         "reset consumer group offsets")
    committed = await alter_group_offsets(d, group, targets, deadline=deadline)
    return ResultSet(dict(sorted({**committed, **failed}.items())),
                     "reset consumer group offsets")


async def _reset_scope(d: Dispatcher, group: str, topics: Sequence[str] | None,
                       partitions: Sequence[TopicPartition] | None,
                       deadline: Deadline) -> list[TopicPartition]:
    if partitions is not None:
        return sorted(set(partitions))
    if topics is not None:
        response = await fetch_metadata(d, list(topics), deadline)
        scope: list[TopicPartition] = []
        for t in response.topics:
            error = error_from(t.error_code, f"topic {t.name!r}")
            if error is not None:
                raise error
            scope.extend(TopicPartition(t.name or "", p.partition_index) for p in t.partitions)
        return sorted(scope)
    committed = await list_group_offsets(d, group, None, require_stable=False,
                                         deadline=deadline)
    return sorted(committed)


# ============================================================================ lag


async def group_lag(d: Dispatcher, group_id: str, *, isolation_level: str,
                    deadline: Deadline) -> GroupLag:
    """Committed offset vs end offset for every partition the group has committed or has
    assigned to a member. Raises the group's own errors; end-offset errors stay per
    partition."""
    (group,) = _check_groups([group_id], "consumer_group_lag")
    description = (await describe_groups(d, [group], deadline=deadline))[group]
    if description.error is not None:
        raise description.error
    committed = await list_group_offsets(d, group, None, require_stable=False,
                                         deadline=deadline)
    owners: dict[TopicPartition, MemberDescription] = {
        tp: m for m in description.members for tp in m.assignment}
    scope = sorted(set(committed) | set(owners))
    ends = await list_offsets(d, dict.fromkeys(scope, OffsetSpec.LATEST),
                              isolation_level=isolation_level, deadline=deadline) if scope else {}
    rows: list[PartitionLag] = []
    for tp in scope:
        commit = committed.get(tp)
        offset = commit.offset if commit is not None else None
        end = ends[tp] if tp in ends else None
        end_offset = end.offset if end is not None and end.error is None else None
        lag = end_offset - offset if end_offset is not None and offset is not None else None
        owner = owners.get(tp)
        error = (commit.error if commit is not None else None) or (
            end.error if end is not None else None)
        rows.append(PartitionLag(
            tp, offset, end_offset, lag,
            owner.member_id if owner else "", owner.client_id if owner else "",
            owner.client_host if owner else "", error))
    return GroupLag(group, description.state, tuple(rows))
