"""Partition leadership and placement: elect leaders, move replicas, list moves in progress.

The three requests go to the controller (``CONTROLLER``), as Kafka's Java admin client sends
them: in a KRaft cluster the broker named as controller forwards them to the active
controller, and a NOT_CONTROLLER answer makes the client refresh the metadata and retry.

* **ElectLeaders** answers one error per partition. ELECTION_NOT_NEEDED (the partition
  already has the wanted leader), PREFERRED_LEADER_NOT_AVAILABLE and
  ELIGIBLE_LEADERS_NOT_AVAILABLE are "invalid metadata" codes in Kafka's table, but here
  they are the answer, so they are final, not retried. Asked for every partition
  (``partitions=None``), Kafka leaves out the partitions whose election was not needed: the
  result set then holds only the partitions that got a new leader or failed.
* **AlterPartitionReassignments** starts a move (replicas given) or cancels one (``None``);
  the controller accepts or refuses each partition at once, the data moves afterwards.
* **ListPartitionReassignments** lists only the partitions being moved (adding or removing
  a replica).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sdk.admin.dispatch import Deadline, Dispatcher, default_retry
from sdk.admin.results import (
    ElectionResult,
    ElectionType,
    PartitionReassignment,
    ReassignmentResult,
    ResultSet,
)
from sdk.admin.topics import error_from
from sdk.errors import (
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    PreferredLeaderNotAvailableError,
)
from sdk.net import CONTROLLER
from sdk.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from sdk.protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from sdk.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from sdk.types import TopicPartition

__all__ = ["alter_partition_reassignments", "elect_leaders", "list_partition_reassignments"]

_ELECT = ElectLeadersRequest.API_KEY
_ALTER = AlterPartitionReassignmentsRequest.API_KEY
_LIST = ListPartitionReassignmentsRequest.API_KEY
_ELECTION_TYPE_VERSION = 1  # ElectLeaders v0 can only ask for the preferred leader (KIP-460)
_ELECTION_ANSWERS = (ElectionNotNeededError, PreferredLeaderNotAvailableError,
                     EligibleLeadersNotAvailableError)


def _election_retry(exc: BaseException) -> bool:
    return not isinstance(exc, _ELECTION_ANSWERS) and default_retry(exc)


def _check_partitions(keys: Sequence[object], what: str) -> list[TopicPartition]:
    if isinstance(keys, str | TopicPartition):
        raise TypeError(f"{what} takes a collection of TopicPartition, not {keys!r}")
    out: list[TopicPartition] = []
    for key in keys:
        if not isinstance(key, TopicPartition):
            raise TypeError(f"{what} takes TopicPartition items, not {key!r}")
        out.append(key)
    return list(dict.fromkeys(out))


def _by_topic(partitions: Sequence[TopicPartition]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for tp in partitions:
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return grouped


def _raise_top_level(response: Any) -> None:
    error = error_from(response.error_code, getattr(response, "error_message", None))
    if error is not None:
        raise error


# ============================================================================ elect leaders


def _election_type(value: ElectionType | int) -> ElectionType:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"election_type must be an ElectionType, not {value!r}")
    try:
        return ElectionType(value)
    except ValueError:
        raise ValueError(f"election_type must be ElectionType.PREFERRED or "
                         f"ElectionType.UNCLEAN, not {value!r}") from None


def _elections(response: ElectLeadersResponse) -> dict[TopicPartition, ElectionResult]:
    _raise_top_level(response)
    out: dict[TopicPartition, ElectionResult] = {}
    for topic in response.replica_election_results:
        for p in topic.partition_result:
            tp = TopicPartition(topic.topic, p.partition_id)
            out[tp] = ElectionResult(tp, error_from(p.error_code, p.error_message))
    return out


async def elect_leaders(d: Dispatcher, election_type: ElectionType | int,
                        partitions: Sequence[TopicPartition] | None, *,
                        deadline: Deadline) -> ResultSet[TopicPartition, ElectionResult]:
    kind = _election_type(election_type)
    min_version = _ELECTION_TYPE_VERSION if kind is ElectionType.UNCLEAN else 0

    def build(_version: int, batch: list[TopicPartition] | None) -> ElectLeadersRequest:
        return ElectLeadersRequest(
            election_type=int(kind),
            topic_partitions=None if batch is None else [
                ElectLeadersRequest.TopicPartitions(topic=t, partitions=parts)
                for t, parts in _by_topic(batch).items()],
            timeout_ms=d.operation_timeout_ms(deadline),
        )

    if partitions is None:
        if min_version:  # refuse before sending: a v0 request would elect preferred leaders
            node = await d.client.resolve(CONTROLLER, timeout_s=max(0.001, deadline.remaining()))
            conn = await d.client.connection(node, timeout_s=max(0.001, deadline.remaining()))
            conn.version_for(_ELECT, min_version=min_version)
        response = await d.call(lambda v: build(v, None), _ELECT, deadline, CONTROLLER,
                                check=_raise_top_level)
        everything = _elections(response)
        return ResultSet({tp: everything[tp] for tp in sorted(everything)}, "elect leaders")

    wanted = _check_partitions(partitions, "elect_leaders")

    async def send(node: int, batch: list[TopicPartition]) -> dict[TopicPartition, ElectionResult]:
        response: ElectLeadersResponse = await d.request(
            node, lambda v: build(v, batch), _ELECT, deadline, min_version=min_version)
        return _elections(response)

    results = await d.run_items(
        wanted, what="elect leader", deadline=deadline, route=lambda _tp: CONTROLLER,
        send=send, fail=lambda tp, exc: ElectionResult(tp, exc), error_of=lambda r: r.error,
        retry_if=_election_retry,
    )
    return ResultSet(results, "elect leaders")


# ============================================================================ reassignments


def _replicas(tp: TopicPartition, value: object) -> list[int] | None:
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise TypeError(f"the replicas of {tp} must be a list of broker ids or None (cancel), "
                        f"not {value!r}")
    out = []
    for broker_id in value:
        if isinstance(broker_id, bool) or not isinstance(broker_id, int):
            raise TypeError(f"the replicas of {tp} must be broker ids (int), not {broker_id!r}")
        out.append(broker_id)
    return out


async def alter_partition_reassignments(
    d: Dispatcher, reassignments: Mapping[TopicPartition, Sequence[int] | None], *,
    deadline: Deadline,
) -> ResultSet[TopicPartition, ReassignmentResult]:
    wanted = {tp: _replicas(tp, reassignments[tp])
              for tp in _check_partitions(list(reassignments), "alter_partition_reassignments")}

    def build(_version: int, batch: list[TopicPartition]) -> AlterPartitionReassignmentsRequest:
        return AlterPartitionReassignmentsRequest(
            timeout_ms=d.operation_timeout_ms(deadline),
            topics=[AlterPartitionReassignmentsRequest.ReassignableTopic(
                name=topic,
                partitions=[AlterPartitionReassignmentsRequest.ReassignablePartition(
                    partition_index=p, replicas=wanted[TopicPartition(topic, p)])
                    for p in parts])
                for topic, parts in _by_topic(batch).items()],
        )

    async def send(node: int,
                   batch: list[TopicPartition]) -> dict[TopicPartition, ReassignmentResult]:
        response: AlterPartitionReassignmentsResponse = await d.request(
            node, lambda v: build(v, batch), _ALTER, deadline)
        _raise_top_level(response)  # e.g. NOT_CONTROLLER: every partition of the request
        return {
            TopicPartition(t.name, p.partition_index): ReassignmentResult(
                TopicPartition(t.name, p.partition_index),
                error_from(p.error_code, p.error_message))
            for t in response.responses for p in t.partitions
        }

    results = await d.run_items(
        list(wanted), what="alter partition reassignment", deadline=deadline,
        route=lambda _tp: CONTROLLER, send=send,
        fail=lambda tp, exc: ReassignmentResult(tp, exc), error_of=lambda r: r.error,
    )
    return ResultSet(results, "alter partition reassignments")


async def list_partition_reassignments(
    d: Dispatcher, partitions: Sequence[TopicPartition] | None, *, deadline: Deadline,
) -> dict[TopicPartition, PartitionReassignment]:
    wanted = None if partitions is None else _check_partitions(
        partitions, "list_partition_reassignments")
    if wanted is not None and not wanted:
        return {}

    def build(_version: int) -> ListPartitionReassignmentsRequest:
        return ListPartitionReassignmentsRequest(
            timeout_ms=d.operation_timeout_ms(deadline),
            topics=None if wanted is None else [
                ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(
                    name=topic, partition_indexes=parts)
                for topic, parts in _by_topic(wanted).items()],
        )

    response: ListPartitionReassignmentsResponse = await d.call(
        build, _LIST, deadline, CONTROLLER, check=_raise_top_level)
    # A move adds or removes a replica (Kafka's own test); tansu lists every partition of
    # the topics asked for, with neither, which is no move.
    found = [
        PartitionReassignment(TopicPartition(t.name, p.partition_index), tuple(p.replicas),
                              tuple(p.adding_replicas), tuple(p.removing_replicas))
        for t in response.topics for p in t.partitions
        if p.adding_replicas or p.removing_replicas
    ]
    return {r.topic_partition: r for r in sorted(found, key=lambda r: r.topic_partition)}
