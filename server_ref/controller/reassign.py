"""Partition reassignment (KIP-455): AlterPartitionReassignments, ListPartitionReassignments.

A reassignment to ``target`` makes the replicas ``target`` followed by the current ones
not in it, with ``adding`` (target - current) and ``removing`` (current - target): the
adding replicas start copying the partition. It completes when every adding replica is in
the ISR (the leader's AlterPartition that adds the last one): the replicas become
``target``, the ISR keeps only target members, and a leader being removed hands over to
the first in-sync target replica. Cancelling (``replicas: null``) reverts to the replicas
before the move. A move whose target is already in the ISR completes at once.
"""

from __future__ import annotations

from typing import Any

from sdk.errors import (
    InvalidReplicaAssignmentError,
    KafkaError,
    NoReassignmentInProgressError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from sdk.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from sdk.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from server_ref.controller.controller import QuorumController
from server_ref.controller.election import with_leader
from server_ref.controller.image import NO_LEADER, PartitionImage

__all__ = ["complete_if_caught_up", "register_reassignment_apis"]


def start(p: PartitionImage, target: list[int]) -> PartitionImage:
    current = [r for r in p.replicas if r not in p.adding] if p.adding or p.removing \
        else list(p.replicas)
    new = p.copy()
    new.replicas = list(target) + [r for r in current if r not in target]
    new.adding = [r for r in target if r not in current]
    new.removing = [r for r in current if r not in target]
    new.partition_epoch += 1
    return new


def cancel(p: PartitionImage, alive: Any) -> PartitionImage:
    original = [r for r in p.replicas if r not in p.adding]
    new = p.copy()
    new.replicas, new.adding, new.removing = original, [], []
    new.isr = [r for r in p.isr if r in original] or list(p.isr)
    if new.leader not in original:
        leader = next((r for r in original if r in new.isr and alive(r)), NO_LEADER)
        return with_leader(new, leader)
    new.partition_epoch += 1
    return new


def complete_if_caught_up(p: PartitionImage, alive: Any) -> PartitionImage | None:
    """The partition with its move finished, when every adding replica is in sync."""
    if not (p.adding or p.removing) or any(r not in p.isr for r in p.adding):
        return None
    target = [r for r in p.replicas if r not in p.removing]
    new = p.copy()
    new.replicas, new.adding, new.removing = target, [], []
    new.isr = [r for r in p.isr if r in target]
    if new.leader not in target:
        leader = next((r for r in target if r in new.isr and alive(r)), NO_LEADER)
        return with_leader(new, leader)
    return new


def register_reassignment_apis(server: Any, controller: QuorumController) -> None:
    apis = _Reassignments(controller)
    server.register(45, 0, 1, apis.alter)
    server.register(46, 0, 0, apis.list)


class _Reassignments:
    def __init__(self, controller: QuorumController) -> None:
        self.c = controller

    async def alter(self, req: AlterPartitionReassignmentsRequest, version: int
                    ) -> AlterPartitionReassignmentsResponse:
        image = self.c.image
        results: list[tuple[str, int, list[int] | None]] = [
            (t.name, p.partition_index, None if p.replicas is None else list(p.replicas))
            for t in req.topics for p in t.partitions]
        errors: dict[tuple[str, int], tuple[int, str | None]] = {}

        def decide() -> tuple[list[dict[str, Any]], None]:
            batch = []
            for name, index, target in results:
                try:
                    p = image.partition(name, index)
                    if p is None:
                        raise UnknownTopicOrPartitionError(
                            f"The partition {name}-{index} does not exist.")
                    if target is None:
                        if not (p.adding or p.removing):
                            raise NoReassignmentInProgressError(
                                f"no reassignment of {name}-{index} is in progress")
                        new = cancel(p, self.c.alive)
                    else:
                        _check_target(target, image.brokers)
                        new = start(p, target)
                        done = complete_if_caught_up(new, self.c.alive)
                        new = done if done is not None else new
                    batch.append(self.c.partition_change(name, index, new))
                except KafkaError as exc:
                    errors[(name, index)] = (getattr(exc, "errno", UnknownServerError.errno),
                                             exc.message)
            return batch, None

        try:
            await self.c.write(decide)
        except Exception as exc:
            code = getattr(exc, "errno", UnknownServerError.errno)
            return AlterPartitionReassignmentsResponse(error_code=code,
                                                       error_message=str(exc))
        by_topic: dict[str, AlterPartitionReassignmentsResponse.ReassignableTopicResponse] = {}
        for name, index, _target in results:
            code, message = errors.get((name, index), (0, None))
            entry = by_topic.setdefault(
                name, AlterPartitionReassignmentsResponse.ReassignableTopicResponse(name=name))
            entry.partitions.append(AlterPartitionReassignmentsResponse.ReassignablePartitionResponse(
                partition_index=index, error_code=code, error_message=message))
        return AlterPartitionReassignmentsResponse(error_message=None,
                                                   responses=list(by_topic.values()))

    async def list(self, req: ListPartitionReassignmentsRequest, version: int
                   ) -> ListPartitionReassignmentsResponse:
        self.c.check_active()
        image = self.c.image
        if req.topics is None:
            wanted = [(t.name, i) for t in image.topics.values() for i in sorted(t.partitions)]
        else:
            wanted = [(t.name, i) for t in req.topics for i in t.partition_indexes]
        topics: dict[str, ListPartitionReassignmentsResponse.OngoingTopicReassignment] = {}
        for name, index in wanted:
            p = image.partition(name, index)
            if p is None or not (p.adding or p.removing):
                continue
            entry = topics.setdefault(
                name, ListPartitionReassignmentsResponse.OngoingTopicReassignment(name=name))
            entry.partitions.append(ListPartitionReassignmentsResponse.OngoingPartitionReassignment(
                partition_index=index, replicas=list(p.replicas),
                adding_replicas=list(p.adding), removing_replicas=list(p.removing)))
        return ListPartitionReassignmentsResponse(error_message=None,
                                                  topics=list(topics.values()))


def _check_target(target: list[int], brokers: dict[int, Any]) -> None:
    if not target:
        raise InvalidReplicaAssignmentError("The manual partition assignment includes no "
                                            "replicas.")
    if len(set(target)) != len(target):
        raise InvalidReplicaAssignmentError(
            f"The manual partition assignment includes a duplicate replica: {target}")
    for broker in target:
        if broker not in brokers:
            raise InvalidReplicaAssignmentError(
                f"The manual partition assignment includes broker {broker}, but no such "
                "broker is registered.")
