"""Classic members in a KIP-848 consumer group: the online upgrade Kafka allows.

With Kafka's default ``group.consumer.migration.policy`` (bidirectional), a rolling switch
to ``group.protocol=consumer`` works: the first consumer-protocol member turns the stable
classic group into a consumer group (:meth:`ClassicMembers.convert`: every classic member
keeps its generation as member epoch and its partitions), and the classic members carry on
with JoinGroup / SyncGroup / Heartbeat / LeaveGroup, answered from the consumer group:

* JoinGroup updates the member (subscription and owned partitions from its embedded
  subscription), recomputes the target if needed and reconciles it at once; the answer has
  the member epoch as generation, the member's first protocol and no leader (the broker
  assigns), so SyncGroup brings the member's partitions (an embedded assignment);
* Heartbeat answers REBALANCE_IN_PROGRESS while the member has partitions to give up,
  is behind the group epoch, or could now take partitions it was waiting for: the member
  rejoins, which is how a classic member revokes;
* LeaveGroup and the session timeout (the member's own) remove it.

The downgrade, as the same policy allows: when the last consumer-protocol member leaves
(or is removed) and classic members remain, :meth:`ClassicMembers.downgrade` turns the
group back into a classic group of them (generation = the group epoch, each member's
partitions as its assignment) and the coordinator starts a rebalance, so they rejoin
(their next heartbeat answers ILLEGAL_GENERATION or REBALANCE_IN_PROGRESS) and the classic
leader assigns again. A consumer group that only ever lost classic members stays one.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from sdk import errors
from sdk.protocol.messages.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from server_ref.groups.assignors import Assignment
from server_ref.groups.consumer_coordinator import ConsumerGroupCoordinator, TopicLookup
from server_ref.groups.consumer_group import (
    ClassicInfo,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)
from server_ref.groups.group import CONSUMER_PROTOCOL_TYPE, Group, GroupState, Member
from server_ref.groups.results import JoinResult, LeaveResult, LeavingMember, SyncResult
from server_ref.groups.store import GroupStore

_REBALANCE_IN_PROGRESS = errors.RebalanceInProgressError.errno
_NOT_A_CONSUMER_GROUP = "Group {} is not a consumer group"


def _subscription(metadata: bytes) -> tuple[ConsumerProtocolSubscription, int]:
    if len(metadata) < 2:
        raise errors.InconsistentGroupProtocolError("an empty consumer subscription")
    version = int.from_bytes(metadata[:2], "big", signed=True)
    if version < 0:
        raise errors.InconsistentGroupProtocolError(f"consumer subscription version {version}")
    read = min(version, ConsumerProtocolSubscription.MAX_VERSION)
    subscription, _ = ConsumerProtocolSubscription.decode_from(metadata, 2, read)
    return subscription, read


class ClassicMembers:
    """JoinGroup/SyncGroup/Heartbeat/LeaveGroup of classic members in consumer groups."""

    def __init__(self, consumer: ConsumerGroupCoordinator, store: GroupStore,
                 forget_classic: Callable[[object], None]) -> None:
        self._consumer = consumer
        self._store = store
        self._forget_classic = forget_classic  # cancels the classic group's timers

    def _topics(self) -> TopicLookup:
        return self._consumer._topics

    def _ids(self) -> dict[str, uuid.UUID]:
        return {name: tid for name, tid, _count, _internal in self._topics()()}

    def _names(self) -> dict[uuid.UUID, str]:
        return {tid: name for name, tid, _count, _internal in self._topics()()}

    # ------------------------------------------------------------------ the upgrade

    def convert(self, group_id: str) -> ConsumerGroup | None:
        """The stable classic group ``group_id`` as a consumer group (None: no classic
        group with members). Its offsets stay where they are."""
        classic = self._store.get(group_id)
        if classic is None or not classic.members:
            return None
        if (classic.protocol_type != CONSUMER_PROTOCOL_TYPE
                or classic.state is not GroupState.STABLE or classic.protocol_name is None):
            raise errors.GroupIdNotFoundError(_NOT_A_CONSUMER_GROUP.format(group_id))
        ids = self._ids()
        group = ConsumerGroup(group_id, group_epoch=classic.generation_id,
                              assignment_epoch=classic.generation_id)
        for m in classic.members.values():
            subscription, _ = _subscription(m.metadata_for(classic.protocol_name))
            assigned = _assignment_ids(m.assignment, ids)
            member = ConsumerMember(
                m.member_id, m.group_instance_id, subscription.rack_id, m.client_id,
                m.client_host, m.rebalance_timeout_ms, None,
                tuple(sorted(subscription.topics)), None, classic.generation_id, -1,
                MemberState.STABLE, assigned, {},
                ClassicInfo(m.session_timeout_ms, tuple(m.protocols)))
            group.members[member.member_id] = member
            if member.instance_id is not None:
                group.static_members[member.instance_id] = member.member_id
            group.target[member.member_id] = {t: set(ps) for t, ps in assigned.items()}
            group.add_ownership(member)
        group.subscription_metadata = self._consumer._subscription_metadata(group)
        # The classic side forgets its members; the group record stays, Empty, with offsets.
        self._forget_classic(classic)
        for member_id in list(classic.members):
            classic.remove_member(member_id)
        classic.state = GroupState.EMPTY
        self._store.write_group(classic)
        for member in group.members.values():
            self._consumer._schedule_session(group, member)
        return group

    # ------------------------------------------------------------------ the downgrade

    def downgrade(self, group: ConsumerGroup, now_ms: int) -> Group | None:
        """The consumer group ``group`` as a classic group, when every member left is a
        classic one (None otherwise). The classic group record kept for the offsets takes
        them, Stable at the group epoch; the caller drops the consumer group and starts
        the rebalance."""
        members = list(group.members.values())
        if not members or any(m.classic is None for m in members):
            return None
        classic = self._store.get_or_create(group.group_id)
        self._forget_classic(classic)
        for member_id in list(classic.members):
            classic.remove_member(member_id)
        classic.pending_members.clear()
        classic.pending_sync.clear()
        classic.leader_id = None
        for m in members:
            assert m.classic is not None
            classic.add_member(Member(
                m.member_id, m.instance_id, m.client_id, m.client_host,
                m.rebalance_timeout_ms, m.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE,
                list(m.classic.protocols), self._assignment_bytes(m)))
        classic.protocol_type = CONSUMER_PROTOCOL_TYPE
        try:
            classic.protocol_name = classic.select_protocol()
        except errors.IllegalStateError:  # no protocol common to them: stays a consumer group
            for m in members:
                classic.remove_member(m.member_id)
            classic.protocol_name, classic.leader_id = None, None
            return None
        classic.generation_id = group.group_epoch
        classic.state = GroupState.STABLE  # as Kafka's ClassicGroup.fromConsumerGroup
        classic.state_timestamp_ms = now_ms
        return classic

    def _assignment_bytes(self, member: ConsumerMember) -> bytes:
        """A classic member's partitions as the consumer protocol's assignment bytes, in
        the version of its subscription."""
        assert member.classic is not None
        _, version = _subscription(member.classic.protocols[0][1])
        names = self._names()
        by_topic: dict[str, list[int]] = {}
        for topic_id, partitions in member.assigned.items():
            if topic_id in names:
                by_topic[names[topic_id]] = sorted(partitions)
        assignment = ConsumerProtocolAssignment(assigned_partitions=[
            ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=ps)
            for t, ps in sorted(by_topic.items())])
        version = min(version, ConsumerProtocolAssignment.MAX_VERSION)
        return version.to_bytes(2, "big", signed=True) + assignment.encode(version)

    # ------------------------------------------------------------------ the classic APIs

    def join(self, group: ConsumerGroup, member_id: str, *, protocol_type: str,
             protocols: Sequence[tuple[str, bytes]], session_timeout_ms: int,
             rebalance_timeout_ms: int, group_instance_id: str | None, client_id: str,
             client_host: str, require_known_member_id: bool) -> JoinResult:
        if protocol_type != CONSUMER_PROTOCOL_TYPE or not protocols:
            return JoinResult(error=errors.InconsistentGroupProtocolError.errno,
                              member_id=member_id)
        if not member_id:
            new_id = f"{client_id}-{uuid.uuid4()}"
            if require_known_member_id and group_instance_id is None:
                return JoinResult(error=errors.MemberIdRequiredError.errno, member_id=new_id)
            member_id = new_id
        try:
            subscription, _ = _subscription(protocols[0][1])
        except (errors.BrokerResponseError, errors.MalformedDataError):
            return JoinResult(error=errors.InconsistentGroupProtocolError.errno,
                              member_id=member_id)
        consumer = self._consumer
        member = group.members.get(member_id)
        if member is None and group_instance_id is not None:
            old_id = group.static_members.get(group_instance_id)
            if old_id is not None:  # the static member restarted with a new id
                member = group.members.pop(old_id)
                group.remove_ownership(member)
                member.member_id = member_id
                group.members[member_id] = member
                group.static_members[group_instance_id] = member_id
                if old_id in group.target:
                    group.target[member_id] = group.target.pop(old_id)
                group.add_ownership(member)
        bump = False
        if member is None:
            if len(group.members) >= consumer.max_size:
                return JoinResult(error=errors.GroupMaxSizeReachedError.errno,
                                  member_id=member_id)
            member = ConsumerMember(member_id, group_instance_id)
            group.members[member_id] = member
            if group_instance_id is not None:
                group.static_members[group_instance_id] = member_id
            bump = True
        topics = tuple(sorted(set(subscription.topics)))
        if topics != member.subscribed_topic_names:
            member.subscribed_topic_names, bump = topics, True
        member.rack_id = subscription.rack_id or member.rack_id
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.client_id, member.client_host = client_id, client_host
        member.classic = ClassicInfo(session_timeout_ms, tuple(protocols))
        metadata = consumer._subscription_metadata(group)
        if metadata != group.subscription_metadata:
            group.subscription_metadata, bump = metadata, True
        if bump:
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            consumer._assign(group)
        ids = self._ids()
        owned: dict[uuid.UUID, set[int]] = {}
        for tp in subscription.owned_partitions or ():
            if tp.topic in ids:
                owned.setdefault(ids[tp.topic], set()).update(tp.partitions)
        group.reconcile(member, owned)
        consumer._schedule_session(group, member)
        consumer._save(group)
        return JoinResult(error=0, member_id=member_id, generation_id=member.member_epoch,
                          protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=protocols[0][0])

    def _member(self, group: ConsumerGroup, member_id: str,
                instance_id: str | None) -> ConsumerMember:
        member = group.members.get(member_id)
        if member is None:
            raise errors.UnknownMemberIdError(f"member {member_id} is not in {group.group_id}")
        if instance_id is not None and member.instance_id != instance_id:
            raise errors.FencedInstanceIdError(f"instance {instance_id} is another member's")
        if member.classic is None:
            raise errors.UnknownMemberIdError(f"member {member_id} uses the consumer protocol")
        return member

    def sync(self, group: ConsumerGroup, member_id: str, generation_id: int, *,
             group_instance_id: str | None, protocol_name: str | None) -> SyncResult:
        try:
            member = self._member(group, member_id, group_instance_id)
            if generation_id != member.member_epoch:
                raise errors.IllegalGenerationError(
                    f"generation {generation_id} is not the member's {member.member_epoch}")
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                raise errors.RebalanceInProgressError("the member has partitions to revoke")
        except errors.BrokerResponseError as exc:
            return SyncResult(exc.errno)
        assert member.classic is not None
        name = member.classic.protocols[0][0]
        data = self._assignment_bytes(member)
        self._consumer._schedule_session(group, member)
        return SyncResult(0, CONSUMER_PROTOCOL_TYPE, protocol_name or name, data)

    def heartbeat(self, group: ConsumerGroup, member_id: str, generation_id: int,
                  group_instance_id: str | None) -> int:
        try:
            member = self._member(group, member_id, group_instance_id)
            if generation_id != member.member_epoch:
                raise errors.IllegalGenerationError(
                    f"generation {generation_id} is not the member's {member.member_epoch}")
        except errors.BrokerResponseError as exc:
            return exc.errno
        self._consumer._schedule_session(group, member)
        if (member.member_epoch < group.group_epoch
                or member.state is MemberState.UNREVOKED_PARTITIONS
                or self._could_take_more(group, member)):
            return _REBALANCE_IN_PROGRESS  # rejoin: revoke, or take what is free now
        return 0

    @staticmethod
    def _could_take_more(group: ConsumerGroup, member: ConsumerMember) -> bool:
        target = group.target.get(member.member_id, {})
        return any(group.owner_epoch(t, p) == -1
                   for t, ps in target.items() for p in ps - member.assigned.get(t, set()))

    def leave(self, group: ConsumerGroup, leaving: Sequence[LeavingMember]) -> LeaveResult:
        results = []
        for one in leaving:
            member_id = one.member_id
            if not member_id and one.group_instance_id is not None:
                member_id = group.static_members.get(one.group_instance_id, "")
            if member_id in group.members:
                self._consumer._remove(group, member_id, "left the group (classic)")
                results.append((one, 0))
            else:
                results.append((one, errors.UnknownMemberIdError.errno))
        self._consumer._save(group)
        return LeaveResult(0, tuple(results))


def _assignment_ids(data: bytes, ids: dict[str, uuid.UUID]) -> Assignment:
    if len(data) < 2:
        return {}
    version = min(int.from_bytes(data[:2], "big", signed=True),
                  ConsumerProtocolAssignment.MAX_VERSION)
    assignment, _ = ConsumerProtocolAssignment.decode_from(data, 2, max(version, 0))
    out: Assignment = {}
    for tp in assignment.assigned_partitions:
        if tp.topic in ids:
            out.setdefault(ids[tp.topic], set()).update(tp.partitions)
    return out
