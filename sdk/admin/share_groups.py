"""Share-group administration (KIP-932): list, describe, delete; start offsets.

A share group has no committed offsets: each share-partition has a *start offset* (SPSO),
below which every record is settled for the group. ``list_share_group_offsets`` reads them
(DescribeShareGroupOffsets), ``alter_share_group_offsets`` moves them (the group must have
no members), ``delete_share_group_offsets`` forgets a topic's state (the group starts over on
it, at ``share.auto.offset.reset``). Deleting a share group is DeleteGroups, as in Kafka.
Every request goes to the group's coordinator.

:class:`ShareGroupAdmin` and :class:`ShareGroupAdminSync` are the methods the admin
clients take on (``AsyncAdminClient`` and ``AdminClient`` inherit them).
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from sdk.admin.dispatch import Deadline, Dispatcher
from sdk.errors import KafkaError
from sdk.net import Coordinator
from sdk.types import TopicPartition

if TYPE_CHECKING:  # these load with the first share-group call (import time of the clients)
    from sdk.admin.results import BrokerNode, GroupListing, GroupResult, ResultSet
    from sdk.protocol.messages.alter_share_group_offsets import (
        AlterShareGroupOffsetsResponse,
    )
    from sdk.protocol.messages.delete_share_group_offsets import (
        DeleteShareGroupOffsetsResponse,
    )
    from sdk.protocol.messages.describe_share_group_offsets import (
        DescribeShareGroupOffsetsRequest,
        DescribeShareGroupOffsetsResponse,
    )
    from sdk.protocol.messages.share_group_describe import (
        ShareGroupDescribeResponse,
    )

__all__ = ["ShareGroupAdmin", "ShareGroupAdminSync", "ShareGroupDescription",
           "ShareGroupMember", "SharePartitionOffset"]

T = TypeVar("T")
_DESCRIBE, _OFFSETS, _ALTER, _DELETE_OFFSETS = 77, 90, 91, 92  # API keys


@dataclass(frozen=True, slots=True)
class ShareGroupMember:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topics: tuple[str, ...]
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupDescription:
    group_id: str
    error: KafkaError | None = None
    state: str = ""  # Empty, Stable, Dead
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor: str = ""
    members: tuple[ShareGroupMember, ...] = ()
    coordinator: BrokerNode | None = None


@dataclass(frozen=True, slots=True)
class SharePartitionOffset:
    """A share-partition's start offset (None: the group never read the partition) and
    lag (None when the broker does not say: DescribeShareGroupOffsets v0)."""

    topic_partition: TopicPartition
    start_offset: int | None
    leader_epoch: int | None = None
    lag: int | None = None
    error: KafkaError | None = None


def _group(group_id: str, what: str) -> str:
    if not isinstance(group_id, str) or not group_id:
        raise ValueError(f"{what}: the group id must be a non-empty string, not {group_id!r}")
    return group_id


# ============================================================================ the operations


async def describe_share_groups(d: Dispatcher, group_ids: Sequence[str], *,
                                deadline: Deadline) -> ResultSet[str, ShareGroupDescription]:
    from sdk.admin.results import BrokerNode, ResultSet
    from sdk.admin.topics import error_from

    if isinstance(group_ids, str):
        raise TypeError("describe_share_groups takes a list of group ids, not one string")
    groups = [_group(g, "describe_share_groups") for g in group_ids]
    from sdk.protocol.messages.share_group_describe import ShareGroupDescribeRequest

    async def send(node: int, batch: list[str]) -> dict[str, ShareGroupDescription]:
        response: ShareGroupDescribeResponse = await d.request(
            node, lambda _v: ShareGroupDescribeRequest(group_ids=batch), _DESCRIBE, deadline)
        broker = d.client.metadata.brokers.get(node)
        coordinator = None if broker is None else BrokerNode(broker.node_id, broker.host,
                                                             broker.port, broker.rack)
        out = {}
        for g in response.groups:
            members = tuple(ShareGroupMember(
                m.member_id, m.rack_id, m.member_epoch, m.client_id, m.client_host,
                tuple(m.subscribed_topic_names),
                tuple(sorted(TopicPartition(t.topic_name, p)
                             for t in m.assignment.topic_partitions for p in t.partitions)))
                for m in g.members)
            out[g.group_id] = ShareGroupDescription(
                g.group_id, error_from(g.error_code, g.error_message), g.group_state,
                g.group_epoch, g.assignment_epoch, g.assignor_name, members, coordinator)
        return out

    results = await d.run_items(
        groups, what="describe share group", deadline=deadline, route=Coordinator, send=send,
        fail=lambda g, exc: ShareGroupDescription(g, exc), error_of=lambda r: r.error)
    return ResultSet(results, "describe share groups")


async def list_share_group_offsets(d: Dispatcher, group_id: str,
                                   partitions: Sequence[TopicPartition] | None, *,
                                   deadline: Deadline
                                   ) -> ResultSet[TopicPartition, SharePartitionOffset]:
    from sdk.admin.results import ResultSet
    from sdk.admin.topics import error_from

    group = _group(group_id, "list_share_group_offsets")
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(set(partitions or ())):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    from sdk.protocol.messages.describe_share_group_offsets import (
        DescribeShareGroupOffsetsRequest as r,
    )

    def build(_version: int) -> DescribeShareGroupOffsetsRequest:
        topics = None if partitions is None else [
            r.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
            for t, ps in by_topic.items()]
        return r(groups=[r.DescribeShareGroupOffsetsRequestGroup(group_id=group,
                                                                  topics=topics)])

    def check(response: DescribeShareGroupOffsetsResponse) -> None:
        for g in response.groups:
            error = error_from(g.error_code, g.error_message)
            if error is not None:
                raise error

    response: DescribeShareGroupOffsetsResponse = await d.call(
        build, _OFFSETS, deadline, Coordinator(group), check=check)
    out: dict[TopicPartition, SharePartitionOffset] = {}
    for g in response.groups:
        for t in g.topics:
            for p in t.partitions:
                tp = TopicPartition(t.topic_name, p.partition_index)
                out[tp] = SharePartitionOffset(
                    tp, None if p.start_offset < 0 else p.start_offset,
                    None if p.leader_epoch < 0 else p.leader_epoch,
                    None if p.lag < 0 else p.lag, error_from(p.error_code, p.error_message))
    return ResultSet(dict(sorted(out.items())), "list share group offsets")


async def alter_share_group_offsets(d: Dispatcher, group_id: str,
                                    offsets: Mapping[TopicPartition, int], *,
                                    deadline: Deadline
                                    ) -> ResultSet[TopicPartition, SharePartitionOffset]:
    from sdk.admin.results import ResultSet
    from sdk.admin.topics import error_from

    group = _group(group_id, "alter_share_group_offsets")
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for tp, offset in sorted(offsets.items()):
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(f"alter_share_group_offsets: offset for {tp} must be an int >= 0")
        by_topic.setdefault(tp.topic, []).append((tp.partition, offset))
    from sdk.protocol.messages.alter_share_group_offsets import (
        AlterShareGroupOffsetsRequest as r,
    )
    request = r(group_id=group, topics=[r.AlterShareGroupOffsetsRequestTopic(
        topic_name=t, partitions=[r.AlterShareGroupOffsetsRequestPartition(
            partition_index=p, start_offset=o) for p, o in ps]) for t, ps in by_topic.items()])

    def check(response: AlterShareGroupOffsetsResponse) -> None:
        if response.error_code in (14, 15, 16):  # coordinator moved or loading: retried
            raise error_from(response.error_code, response.error_message)  # type: ignore[misc]

    response: AlterShareGroupOffsetsResponse = await d.call(
        lambda _v: request, _ALTER, deadline, Coordinator(group), check=check)
    top = error_from(response.error_code, response.error_message)
    out: dict[TopicPartition, SharePartitionOffset] = {}
    for t in response.responses:
        for p in t.partitions:
            tp = TopicPartition(t.topic_name, p.partition_index)
            out[tp] = SharePartitionOffset(tp, offsets.get(tp), error=top or error_from(
                p.error_code, p.error_message))
    for tp, offset in offsets.items():  # a top-level refusal answers for everything
        out.setdefault(tp, SharePartitionOffset(tp, offset, error=top))
    return ResultSet(dict(sorted(out.items())), "alter share group offsets")


async def delete_share_group_offsets(d: Dispatcher, group_id: str, topics: Sequence[str], *,
                                     deadline: Deadline) -> ResultSet[str, GroupResult]:
    """Forget the group's state of whole topics (Kafka deletes share offsets per topic)."""
    from sdk.admin.results import GroupResult, ResultSet
    from sdk.admin.topics import error_from

    group = _group(group_id, "delete_share_group_offsets")
    if isinstance(topics, str):
        raise TypeError("delete_share_group_offsets takes a list of topic names")
    names = list(dict.fromkeys(topics))
    from sdk.protocol.messages.delete_share_group_offsets import (
        DeleteShareGroupOffsetsRequest as r,
    )
    request = r(group_id=group, topics=[r.DeleteShareGroupOffsetsRequestTopic(topic_name=t)
                                        for t in names])

    def check(response: DeleteShareGroupOffsetsResponse) -> None:
        if response.error_code in (14, 15, 16):
            raise error_from(response.error_code, response.error_message)  # type: ignore[misc]

    response: DeleteShareGroupOffsetsResponse = await d.call(
        lambda _v: request, _DELETE_OFFSETS, deadline, Coordinator(group), check=check)
    top = error_from(response.error_code, response.error_message)
    out = {t.topic_name: GroupResult(t.topic_name, top or error_from(t.error_code,
                                                                       t.error_message))
           for t in response.responses}
    for name in names:
        out.setdefault(name, GroupResult(name, top))
    return ResultSet(out, "delete share group offsets")


# ============================================================================ the client methods


class ShareGroupAdmin:
    """Share-group methods of :class:`~sdk.admin.AsyncAdminClient`."""

    async def _ready(self, timeout_ms: int | None) -> tuple[Dispatcher, Deadline]:
        raise NotImplementedError  # the admin client's own

    async def list_share_groups(self, *, states: Sequence[str] | None = None,
                                timeout_ms: int | None = None) -> dict[str, GroupListing]:
        """Every share group of the cluster (ListGroups with the "share" type filter)."""
        from sdk.admin.groups import list_groups

        d, deadline = await self._ready(timeout_ms)
        return await list_groups(d, states=states, types=["share"], deadline=deadline)

    async def describe_share_groups(self, group_ids: Sequence[str], *,
                                    timeout_ms: int | None = None
                                    ) -> ResultSet[str, ShareGroupDescription]:
        """Members, assignments and state of each share group (ShareGroupDescribe)."""
        d, deadline = await self._ready(timeout_ms)
        return await describe_share_groups(d, group_ids, deadline=deadline)

    async def list_share_group_offsets(self, group_id: str,
                                       partitions: Sequence[TopicPartition] | None = None, *,
                                       timeout_ms: int | None = None
                                       ) -> ResultSet[TopicPartition, SharePartitionOffset]:
        """Start offsets (and lag) of the group's share-partitions; all of them by default."""
        d, deadline = await self._ready(timeout_ms)
        return await list_share_group_offsets(d, group_id, partitions, deadline=deadline)

    async def alter_share_group_offsets(self, group_id: str,
                                        offsets: Mapping[TopicPartition, int], *,
                                        timeout_ms: int | None = None
                                        ) -> ResultSet[TopicPartition, SharePartitionOffset]:
        """Move start offsets (the group must have no members)."""
        d, deadline = await self._ready(timeout_ms)
        return await alter_share_group_offsets(d, group_id, offsets, deadline=deadline)

    async def delete_share_group_offsets(self, group_id: str, topics: Sequence[str], *,
                                         timeout_ms: int | None = None
                                         ) -> ResultSet[str, GroupResult]:
        """Forget the group's share-partition state for whole topics (the group must have no members).
        """
        d, deadline = await self._ready(timeout_ms)
        return await delete_share_group_offsets(d, group_id, topics, deadline=deadline)

    async def delete_share_groups(self, group_ids: Sequence[str], *,
                                  timeout_ms: int | None = None) -> ResultSet[str, GroupResult]:
        """Delete share groups and their state (DeleteGroups); a group with members fails
        with NonEmptyGroupError."""
        from sdk.admin.groups import delete_groups

        d, deadline = await self._ready(timeout_ms)
        return await delete_groups(d, group_ids, deadline=deadline)


class ShareGroupAdminSync:
    """The same methods on the blocking :class:`~sdk.admin.AdminClient`."""

    _core: Any

    def _run(self, coro: Coroutine[Any, Any, T], timeout_ms: int | None) -> T:
        raise NotImplementedError  # the admin client's own

    def list_share_groups(self, *, states: Sequence[str] | None = None,
                          timeout_ms: int | None = None) -> dict[str, GroupListing]:
        """Every share group of the cluster (ListGroups with the "share" type filter)."""
        return self._run(self._core.list_share_groups(states=states, timeout_ms=timeout_ms),
                         timeout_ms)

    def describe_share_groups(self, group_ids: Sequence[str], *, timeout_ms: int | None = None
                              ) -> ResultSet[str, ShareGroupDescription]:
        """Members, assignments and state of each share group (ShareGroupDescribe)."""
        return self._run(self._core.describe_share_groups(group_ids, timeout_ms=timeout_ms),
                         timeout_ms)

    def list_share_group_offsets(self, group_id: str,
                                 partitions: Sequence[TopicPartition] | None = None, *,
                                 timeout_ms: int | None = None
                                 ) -> ResultSet[TopicPartition, SharePartitionOffset]:
        """Start offsets (and lag) of the group's share-partitions; all of them by default."""
        return self._run(self._core.list_share_group_offsets(
            group_id, partitions, timeout_ms=timeout_ms), timeout_ms)

    def alter_share_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int], *,
                                  timeout_ms: int | None = None
                                  ) -> ResultSet[TopicPartition, SharePartitionOffset]:
        """Move start offsets (the group must have no members)."""
        return self._run(self._core.alter_share_group_offsets(
            group_id, offsets, timeout_ms=timeout_ms), timeout_ms)

    def delete_share_group_offsets(self, group_id: str, topics: Sequence[str], *,
                                   timeout_ms: int | None = None) -> ResultSet[str, GroupResult]:
        """Forget the group's share-partition state for whole topics (the group must have no members).
        """
        return self._run(self._core.delete_share_group_offsets(
            group_id, topics, timeout_ms=timeout_ms), timeout_ms)

    def delete_share_groups(self, group_ids: Sequence[str], *, timeout_ms: int | None = None
                            ) -> ResultSet[str, GroupResult]:
        """Delete share groups and their state (DeleteGroups); a group with members fails with NonEmptyGroupError.
        """
        return self._run(self._core.delete_share_groups(group_ids, timeout_ms=timeout_ms),
                         timeout_ms)
