"""The KIP-848 group coordinator: ConsumerGroupHeartbeat, session timeouts, describe.

One :class:`ConsumerGroupCoordinator` per broker, next to the classic coordinator, which
keeps the committed offsets of every group (a consumer group's offsets live in the classic
store's offset records, so they are journaled and reloaded exactly as before). A heartbeat:

1. finds or creates the group (epoch 0 only) and the member (a static member coming back
   with epoch 0 takes over its instance's place and partitions when the old member left
   with epoch -2; while the old one is still there: UNRELEASED_INSTANCE_ID);
2. checks the member epoch (ahead of ours, or behind and not the previous epoch with a
   subset of the assignment: FENCED_MEMBER_EPOCH);
3. applies the subscription; a change (or new topic metadata) bumps the group epoch, and a
   group epoch above the assignment epoch recomputes the target assignment at once;
4. reconciles the member (:meth:`ConsumerGroup.reconcile`) and answers its epoch, the
   heartbeat interval and, when it changed or the request was full, its assignment.

A member that sends nothing for the session timeout is removed (its partitions go to
others); a member that must revoke partitions and does not within its rebalance timeout is
removed too. The session timeout and the heartbeat interval answered are the group's
``consumer.session.timeout.ms`` / ``consumer.heartbeat.interval.ms`` (GROUP configs, read
at each heartbeat as Kafka does) or the broker's ``group.consumer.*`` values. Regex subscriptions are RE2/J syntax; Python's ``re``
reads the common subset (``fullmatch``, as Kafka matches whole names).
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from sdk import errors
from server_ref.groups.assignors import ASSIGNORS, DEFAULT_ASSIGNOR, Assignment
from server_ref.groups.consumer_group import (
    ConsumerGroup,
    ConsumerGroupState,
    ConsumerMember,
    MemberState,
)
from server_ref.groups.consumer_journal import consumer_group_key, encode_group
from server_ref.groups.timers import Timers

log = logging.getLogger(__name__)

LEAVE_EPOCH = -1
LEAVE_STATIC_EPOCH = -2
TopicLookup = Callable[[], Iterable[tuple[str, uuid.UUID, int, bool]]]  # name, id, count, internal


class HeartbeatResult:
    __slots__ = ("assignment", "interval_ms", "member_epoch", "member_id")

    def __init__(self, member_id: str, member_epoch: int, interval_ms: int,
                 assignment: Assignment | None) -> None:
        self.member_id = member_id
        self.member_epoch = member_epoch
        self.interval_ms = interval_ms
        self.assignment = assignment


class ConsumerGroupCoordinator:
    """Consumer-protocol groups of this broker; see the module docstring."""

    def __init__(self, topics: TopicLookup, timers: Timers, *, session_timeout_ms: int = 45_000,
                 heartbeat_interval_ms: int = 5_000, max_size: int = 2**31 - 1,
                 is_classic_group: Callable[[str], bool] = lambda _g: False) -> None:
        self._topics = topics
        self._timers = timers
        self.session_timeout_ms_default = session_timeout_ms
        self.heartbeat_interval_ms_default = heartbeat_interval_ms
        self.max_size = max_size
        self._is_classic_group = is_classic_group
        # A group's value of a GROUP config (its override, else the broker's): bound by the
        # handlers to the broker's group-config store; None (unbound): the broker values.
        self._group_config: Callable[[str, str], Any] | None = None
        self.groups: dict[str, ConsumerGroup] = {}
        # Journal writes (key, value or None for a tombstone): __consumer_offsets.
        self.persist: Callable[[bytes, bytes | None], None] | None = None
        # A classic group with members -> the same members in a consumer group, or None.
        self.convert_classic: Callable[[str], ConsumerGroup | None] | None = None
        # The downgrade: a group of classic members only -> a classic group again (True).
        self.downgrade: Callable[[ConsumerGroup], bool] | None = None
        self._saved: dict[str, bytes] = {}

    def restore(self, groups: Iterable[ConsumerGroup]) -> None:
        """Groups replayed from the journal; their members must heartbeat within a session
        (as after a coordinator failover in Kafka), else they expire."""
        for group in groups:
            self.groups[group.group_id] = group
            self._saved[group.group_id] = encode_group(group)
            for member in group.members.values():
                self._schedule_session(group, member)

    def _save(self, group: ConsumerGroup) -> None:
        if self.persist is None:
            return
        if group.deleted:
            self._saved.pop(group.group_id, None)
            self.persist(consumer_group_key(group.group_id), None)
            return
        value = encode_group(group)
        if self._saved.get(group.group_id) != value:
            self.persist(consumer_group_key(group.group_id), value)
            self._saved[group.group_id] = value

    def bind_topics(self, topics: TopicLookup) -> None:
        """Where the topics come from (the broker's registry; set by the handlers)."""
        self._topics = topics

    def bind_group_configs(self, lookup: Callable[[str, str], Any]) -> None:
        """Where a group's configs come from: ``lookup(group_id, name)`` (set by the
        handlers; server_ref.share.group_configs keeps them)."""
        self._group_config = lookup

    def session_timeout_ms(self, group_id: str) -> int:
        if self._group_config is None:
            return self.session_timeout_ms_default
        return int(self._group_config(group_id, "consumer.session.timeout.ms"))

    def heartbeat_interval_ms(self, group_id: str) -> int:
        if self._group_config is None:
            return self.heartbeat_interval_ms_default
        return int(self._group_config(group_id, "consumer.heartbeat.interval.ms"))

    def group(self, group_id: str) -> ConsumerGroup | None:
        group = self.groups.get(group_id)
        return None if group is None or group.deleted else group

    # ================================================================== heartbeat

    def heartbeat(self, group_id: str, member_id: str, member_epoch: int, *,
                  instance_id: str | None, rack_id: str | None, rebalance_timeout_ms: int,
                  subscribed_topic_names: list[str] | None, subscribed_topic_regex: str | None,
                  server_assignor: str | None, owned: dict[uuid.UUID, set[int]] | None,
                  client_id: str, client_host: str) -> HeartbeatResult:
        """One ConsumerGroupHeartbeat; raises the Kafka error to answer."""
        self._validate(group_id, member_id, member_epoch, instance_id, rebalance_timeout_ms,
                       subscribed_topic_names, subscribed_topic_regex, server_assignor, owned)
        if member_epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
            return self._leave(group_id, member_id, member_epoch, instance_id)
        group = self.group(group_id)
        if group is None and member_epoch == 0 and self.convert_classic is not None:
            group = self.convert_classic(group_id)  # the online upgrade (classic_members.py)
            if group is not None:
                self.groups[group_id] = group
        if group is None:
            if member_epoch != 0:
                raise errors.GroupIdNotFoundError(f"group {group_id} does not exist")
            if self._is_classic_group(group_id):
                raise errors.GroupIdNotFoundError(
                    f"group {group_id} is a classic group with members; this coordinator "
                    "does not convert classic groups to the consumer protocol")
            group = self.groups[group_id] = ConsumerGroup(group_id)
        member = self._member(group, member_id, member_epoch, instance_id, owned)
        previous_assigned = {t: set(p) for t, p in member.assigned.items()}
        was_epoch = member.member_epoch
        bump = False
        if instance_id is not None:
            member.instance_id = instance_id
        if rack_id is not None:
            member.rack_id = rack_id
        if rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = rebalance_timeout_ms
        if server_assignor is not None and server_assignor != member.server_assignor:
            member.server_assignor, bump = server_assignor, True
        # Names and regex are updated independently; an empty regex means none (what
        # librdkafka sends along with names, and how a client drops its regex).
        if subscribed_topic_names is not None:
            names = tuple(sorted(set(subscribed_topic_names)))
            if names != member.subscribed_topic_names:
                member.subscribed_topic_names, bump = names, True
        if subscribed_topic_regex is not None:
            regex = subscribed_topic_regex or None
            if regex != member.subscribed_topic_regex:
                member.subscribed_topic_regex, bump = regex, True
        member.client_id, member.client_host = client_id, client_host
        if member.member_id not in group.members:
            group.members[member.member_id] = member
            if member.instance_id is not None:
                group.static_members[member.instance_id] = member.member_id
            bump = True
        metadata = self._subscription_metadata(group)
        if metadata != group.subscription_metadata:
            group.subscription_metadata, bump = metadata, True
        if bump:
            group.group_epoch += 1
            log.info("consumer group %s: epoch %d", group_id, group.group_epoch)
        if group.group_epoch > group.assignment_epoch:
            self._assign(group)
        group.reconcile(member, owned)
        self._schedule_session(group, member)
        self._schedule_revocation(group, member, was_epoch)
        self._save(group)
        full = member_epoch == 0 or (rebalance_timeout_ms != -1
                                     and subscribed_topic_names is not None and owned is not None)
        changed = previous_assigned != member.assigned
        return HeartbeatResult(member.member_id, member.member_epoch,
                               self.heartbeat_interval_ms(group_id),
                               member.assigned if full or changed else None)

    def _validate(self, group_id: str, member_id: str, member_epoch: int,
                  instance_id: str | None, rebalance_timeout_ms: int,
                  names: list[str] | None, regex: str | None, assignor: str | None,
                  owned: dict[uuid.UUID, set[int]] | None) -> None:
        if not group_id:
            raise errors.InvalidRequestError("GroupId can't be empty.")
        if instance_id is not None and not instance_id:
            raise errors.InvalidRequestError("InstanceId can't be empty.")
        if member_epoch > 0 and not member_id:
            raise errors.InvalidRequestError("MemberId can't be empty.")
        if member_epoch == 0:
            if rebalance_timeout_ms == -1:
                raise errors.InvalidRequestError("RebalanceTimeoutMs must be provided in first request.")
            if owned:
                raise errors.InvalidRequestError("TopicPartitions must be empty when (re-)joining.")
            if not names and not regex:
                raise errors.InvalidRequestError(
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        if member_epoch < LEAVE_STATIC_EPOCH:
            raise errors.InvalidRequestError(f"MemberEpoch is invalid: {member_epoch}")
        if member_epoch == LEAVE_STATIC_EPOCH and instance_id is None:
            raise errors.InvalidRequestError("InstanceId can't be null when leaving with -2.")
        if assignor is not None and assignor not in ASSIGNORS:
            raise errors.UnsupportedAssignorError(
                f"ServerAssignor {assignor} is not supported. Supported assignors: "
                f"{', '.join(ASSIGNORS)}.")
        if regex:
            try:
                re.compile(regex)
            except re.error as exc:
                raise errors.InvalidRegularExpressionError(
                    f"SubscribedTopicRegex {regex!r} is not a valid regular expression: {exc}"
                ) from None

    def _member(self, group: ConsumerGroup, member_id: str, member_epoch: int,
                instance_id: str | None, owned: dict[uuid.UUID, set[int]] | None
                ) -> ConsumerMember:
        existing = group.members.get(member_id)
        if instance_id is not None and member_epoch == 0:
            old_id = group.static_members.get(instance_id)
            if old_id is not None and old_id != member_id:
                old = group.members[old_id]
                if old.member_epoch != LEAVE_STATIC_EPOCH:
                    raise errors.UnreleasedInstanceIdError(
                        f"Static member {old_id} with instance id {instance_id} is not "
                        "released yet")
                # The static member comes back: it takes the old place and partitions.
                group.remove_ownership(old)
                del group.members[old_id]
                old.member_id = member_id or str(uuid.uuid4())
                old.member_epoch = old.previous_member_epoch
                group.members[old.member_id] = old
                group.static_members[instance_id] = old.member_id
                target = group.target.pop(old_id, None)
                if target is not None:
                    group.target[old.member_id] = target
                group.add_ownership(old)
                return old
        if existing is None:
            if member_epoch != 0:
                raise errors.UnknownMemberIdError(
                    f"Member {member_id} is not a member of group {group.group_id}.")
            if len(group.members) >= self.max_size:
                raise errors.GroupMaxSizeReachedError(
                    f"The consumer group has reached its maximum capacity of {self.max_size} members.")
            return ConsumerMember(member_id or str(uuid.uuid4()))
        if member_epoch == 0:
            if existing.member_epoch == LEAVE_STATIC_EPOCH:
                existing.member_epoch = existing.previous_member_epoch
            return existing  # rejoining with its id: it keeps its target, owns nothing
        if member_epoch > existing.member_epoch:
            raise errors.FencedMemberEpochError(
                f"The consumer group member has a greater member epoch ({member_epoch}) than "
                f"the one known by the group coordinator ({existing.member_epoch}). The member "
                "must abandon all its partitions and rejoin.")
        if member_epoch < existing.member_epoch and (
                member_epoch != existing.previous_member_epoch
                or not _subset(owned, existing.assigned)):
            raise errors.FencedMemberEpochError(
                f"The consumer group member has a smaller member epoch ({member_epoch}) than "
                f"the one known by the group coordinator ({existing.member_epoch}). The member "
                "must abandon all its partitions and rejoin.")
        return existing

    def _leave(self, group_id: str, member_id: str, epoch: int,
               instance_id: str | None) -> HeartbeatResult:
        group = self.group(group_id)
        if group is None:
            raise errors.GroupIdNotFoundError(f"group {group_id} does not exist")
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current is None:
                raise errors.UnknownMemberIdError(f"Instance id {instance_id} is unknown.")
            if current != member_id:
                raise errors.FencedInstanceIdError(
                    f"Static member {member_id} with instance id {instance_id} was replaced.")
        member = group.members.get(member_id)
        if member is None:
            raise errors.UnknownMemberIdError(f"Member {member_id} is not a member of group {group_id}.")
        if epoch == LEAVE_STATIC_EPOCH:
            # Keeps its place and assignment for a restart within the session timeout.
            group.remove_ownership(member)
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = LEAVE_STATIC_EPOCH
            member.pending_revocation = {}
            group.add_ownership(member)
            self._schedule_session(group, member)
            log.info("consumer group %s: static member %s (%s) left temporarily", group_id,
                     member_id, instance_id)
        else:
            self._remove(group, member_id, "left the group")
        self._save(group)
        return HeartbeatResult(member_id, epoch, 0, None)

    def _remove(self, group: ConsumerGroup, member_id: str, why: str) -> None:
        member = group.remove_member(member_id)
        if member is None:
            return
        self._timers.cancel(_session_key(group.group_id, member_id))
        self._timers.cancel(_revocation_key(group.group_id, member_id))
        group.group_epoch += 1
        log.info("consumer group %s: member %s %s; epoch %d", group.group_id, member_id, why,
                 group.group_epoch)
        self._assign(group)
        if member.classic is None and self.downgrade is not None and group.members and all(
                m.classic is not None for m in group.members.values()):
            # The last consumer-protocol member is gone: Kafka's downgrade (bidirectional
            # migration policy) makes the classic members a classic group again.
            remaining = list(group.members)
            if self.downgrade(group):
                for mid in remaining:
                    self._timers.cancel(_session_key(group.group_id, mid))
                    self._timers.cancel(_revocation_key(group.group_id, mid))
                group.deleted = True  # the caller's _save writes the tombstone
                del self.groups[group.group_id]
                log.info("consumer group %s: downgraded to a classic group", group.group_id)
        # Members waiting for the removed member's partitions get them at their next
        # heartbeat (reconcile there); nothing to push.

    # ================================================================== assignment

    def _subscription_metadata(self, group: ConsumerGroup) -> dict[str, tuple[uuid.UUID, int]]:
        names: set[str] = set()
        regexes: set[str] = set()
        for m in group.members.values():
            names.update(m.subscribed_topic_names)
            if m.subscribed_topic_regex is not None:
                regexes.add(m.subscribed_topic_regex)
        compiled = [re.compile(r) for r in regexes]
        out: dict[str, tuple[uuid.UUID, int]] = {}
        for name, topic_id, count, internal in self._topics():
            if name in names or (not internal and any(c.fullmatch(name) for c in compiled)):
                out[name] = (topic_id, count)
        return out

    def _subscribed_ids(self, group: ConsumerGroup, member: ConsumerMember) -> frozenset[uuid.UUID]:
        meta = group.subscription_metadata
        ids = {meta[n][0] for n in member.subscribed_topic_names if n in meta}
        if member.subscribed_topic_regex is not None:
            pattern = re.compile(member.subscribed_topic_regex)
            ids.update(tid for name, (tid, _count) in meta.items() if pattern.fullmatch(name))
        return frozenset(ids)

    def _assign(self, group: ConsumerGroup) -> None:
        names = [m.server_assignor for m in group.members.values() if m.server_assignor]
        # Kafka takes the assignor most members ask for (the default when none asks).
        name = max(set(names), key=lambda n: (names.count(n), n)) if names else DEFAULT_ASSIGNOR
        group.assignor = name
        subscriptions = {mid: self._subscribed_ids(group, m) for mid, m in group.members.items()}
        counts = {tid: count for tid, count in group.subscription_metadata.values()}
        group.target = ASSIGNORS[name](subscriptions, counts, group.target)
        group.assignment_epoch = group.group_epoch

    def on_topics_changed(self) -> None:
        """Topics were created, deleted or grew: groups subscribed to them rebalance."""
        for group in list(self.groups.values()):
            if group.deleted or not group.members:
                continue
            metadata = self._subscription_metadata(group)
            if metadata != group.subscription_metadata:
                group.subscription_metadata = metadata
                group.group_epoch += 1
                self._assign(group)
                self._save(group)

    # ================================================================== timers

    def _schedule_session(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        key = _session_key(group.group_id, member.member_id)
        timeout = (member.classic.session_timeout_ms if member.classic is not None
                   else self.session_timeout_ms(group.group_id))
        self._timers.schedule(key, timeout,
                              lambda: self._expire(group, member.member_id, "session timed out"))

    def _schedule_revocation(self, group: ConsumerGroup, member: ConsumerMember,
                             was_epoch: int) -> None:
        key = _revocation_key(group.group_id, member.member_id)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if member.member_epoch != was_epoch or not self._timers.is_scheduled(key):
                self._timers.schedule(key, member.rebalance_timeout_ms, lambda: self._expire(
                    group, member.member_id, "did not revoke its partitions in time"))
        else:
            self._timers.cancel(key)

    def _expire(self, group: ConsumerGroup, member_id: str, why: str) -> None:
        if self.groups.get(group.group_id) is group and member_id in group.members:
            log.info("consumer group %s: member %s %s", group.group_id, member_id, why)
            self._remove(group, member_id, why)
            self._save(group)

    # ================================================================== offsets, admin

    def validate_commit(self, group_id: str, member_id: str, member_epoch: int) -> None:
        """OffsetCommit into a consumer group: an admin commit (no member, epoch < 0) only
        to an empty group; a member's commit must carry its current epoch."""
        group = self.group(group_id)
        if group is None:
            return
        if member_epoch < 0 and not member_id:
            if group.members:
                raise errors.UnknownMemberIdError(
                    f"group {group_id} has members; a commit without member id is not accepted")
            return
        member = group.members.get(member_id)
        if member is None:
            raise errors.UnknownMemberIdError(f"Member {member_id} is not a member of group {group_id}.")
        if member_epoch != member.member_epoch:
            raise errors.StaleMemberEpochError(
                f"The member epoch {member_epoch} is stale (the member is at "
                f"{member.member_epoch}).")

    def validate_fetch(self, group_id: str, member_id: str, member_epoch: int) -> None:
        """OffsetFetch v9 by a member: it must be one, at its current epoch (without a
        member id and epoch the fetch is an admin's and always allowed)."""
        group = self.group(group_id)
        if group is None or (member_epoch < 0 and not member_id):
            return
        member = group.members.get(member_id)
        if member is None:
            raise errors.UnknownMemberIdError(f"Member {member_id} is not a member of group {group_id}.")
        if member_epoch != member.member_epoch:
            raise errors.StaleMemberEpochError(
                f"The member epoch {member_epoch} is stale (the member is at "
                f"{member.member_epoch}).")

    def delete(self, group_id: str) -> None:
        group = self.group(group_id)
        if group is None:
            raise errors.GroupIdNotFoundError(f"group {group_id} does not exist")
        if group.members:
            raise errors.NonEmptyGroupError(f"group {group_id} is {group.state.value}")
        group.deleted = True
        del self.groups[group_id]
        self._save(group)

    def listed(self) -> list[ConsumerGroup]:
        return [g for g in self.groups.values() if not g.deleted]

    def state_of(self, group_id: str) -> ConsumerGroupState | None:
        group = self.group(group_id)
        return None if group is None else group.state

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        for name, tid, _count, _internal in self._topics():
            if tid == topic_id:
                return name
        return None


def _subset(owned: dict[uuid.UUID, set[int]] | None, assigned: Assignment) -> bool:
    if owned is None:
        return True
    return all(ps <= assigned.get(t, set()) for t, ps in owned.items())


def _session_key(group_id: str, member_id: str) -> tuple[str, ...]:
    return ("consumer-session", group_id, member_id)


def _revocation_key(group_id: str, member_id: str) -> tuple[str, ...]:
    return ("consumer-revocation", group_id, member_id)
