"""The group coordinator: the entry point the broker and the handlers use.

It owns the registry of groups and its journal (:mod:`~server_ref.groups.store`), runs the
rebalance protocol through :mod:`~server_ref.groups.membership`, committed offsets through
:mod:`~server_ref.groups.offsets`, and answers the group admin APIs itself. Everything runs
on the broker's event loop, the single owner of all state (no locks); timers are
``loop.call_later`` handles, all cancelled by :meth:`GroupCoordinator.close`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sdk import errors
from server_ref.groups.classic_members import ClassicMembers
from server_ref.groups.config import GroupConfig
from server_ref.groups.consumer_coordinator import ConsumerGroupCoordinator, TopicLookup
from server_ref.groups.consumer_group import ConsumerGroup
from server_ref.groups.consumer_journal import decode_consumer_group_key, decode_group
from server_ref.groups.group import Group, GroupState
from server_ref.groups.journal import GroupJournal
from server_ref.groups.membership import Membership
from server_ref.groups.offsets import OffsetManager
from server_ref.groups.results import (
    NO_ERROR,
    GroupDescription,
    GroupListing,
    JoinResult,
    LeaveResult,
    LeavingMember,
    MemberDescription,
    OffsetFetchResult,
    OffsetToCommit,
    Partition,
    SyncResult,
)
from server_ref.groups.store import GroupStore
from server_ref.groups.timers import Timers

log = logging.getLogger(__name__)

_OFFSET_EXPIRY = ("offset-expiry",)


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


class GroupCoordinator:
    """Coordinator of every group on this broker (rules: membership.py and offsets.py).

    ``journal`` persists offsets and group metadata (``__consumer_offsets``); call
    :meth:`load` once before serving and :meth:`close` at shutdown. ``now_ms`` is the clock
    for stored timestamps and retention (timers use the event loop's clock).
    """

    def __init__(self, journal: GroupJournal, config: GroupConfig | None = None, *,
                 now_ms: Callable[[], int] | None = None,
                 topics: TopicLookup | None = None) -> None:
        self.config = config or GroupConfig()
        self._now_ms = now_ms or _wall_clock_ms
        self._store = GroupStore(journal, self.config, self._now_ms)
        self.offsets = OffsetManager(self._store)
        self._timers = Timers()
        self._loaded = False
        self._closed = False
        self._membership = Membership(self._store, self.config, self._timers, self._now_ms,
                                      self._check_available)
        # The rebalance protocol: JoinGroup (returns when the rebalance it takes part in
        # completes), SyncGroup, Heartbeat (returns the error code) and LeaveGroup are
        # Membership's own methods; their documentation is there.
        self._classic_join_group = self._membership.join_group
        # KIP-848 consumer groups (their committed offsets are kept here like any group's).
        self.consumer = ConsumerGroupCoordinator(
            topics or (lambda: ()), self._timers,
            session_timeout_ms=self.config.consumer_session_timeout_ms,
            heartbeat_interval_ms=self.config.consumer_heartbeat_interval_ms,
            max_size=self.config.consumer_max_size,
            is_classic_group=self._has_classic_members)
        self.consumer.persist = self._store.append_record
        # Classic members of consumer groups: the online upgrade (classic_members.py).
        self.classic_members = ClassicMembers(self.consumer, self._store,
                                              self._forget_classic_group)
        self.consumer.convert_classic = self.classic_members.convert
        self.consumer.downgrade = self._downgrade

    def _downgrade(self, consumer_group: ConsumerGroup) -> bool:
        """The consumer group's classic members as a classic group that rebalances now
        (classic_members.py, the downgrade); False when it cannot be one."""
        classic = self.classic_members.downgrade(consumer_group, self._now_ms())
        if classic is None:
            return False
        self._membership.resume_downgraded(classic)
        return True

    def _has_classic_members(self, group_id: str) -> bool:
        group = self._store.get(group_id)
        return group is not None and bool(group.members)

    def _forget_classic_group(self, group: object) -> None:
        assert isinstance(group, Group)
        self._membership.forget(group)

    def _mixed(self, group_id: str) -> ConsumerGroup | None:
        """The consumer group ``group_id`` when it has members (classic calls go there)."""
        group = self.consumer.group(group_id)
        return group if group is not None and group.members else None

    async def join_group(self, group_id: str, member_id: str, **kwargs: Any) -> JoinResult:
        """JoinGroup (Membership.join_group). Into a consumer group with members: a classic
        member of it (classic_members.py); an empty one gives way to a classic group, as
        Kafka's does."""
        consumer_group = self.consumer.group(group_id)
        if consumer_group is not None:
            if consumer_group.members:
                try:
                    self._check_available()
                except errors.BrokerResponseError as exc:
                    return JoinResult(error=exc.errno, member_id=member_id)
                return self.classic_members.join(
                    consumer_group, member_id, protocol_type=kwargs["protocol_type"],
                    protocols=kwargs["protocols"],
                    session_timeout_ms=kwargs["session_timeout_ms"],
                    rebalance_timeout_ms=kwargs["rebalance_timeout_ms"],
                    group_instance_id=kwargs.get("group_instance_id"),
                    client_id=kwargs.get("client_id", ""),
                    client_host=kwargs.get("client_host", ""),
                    require_known_member_id=kwargs.get("require_known_member_id", False))
            self.consumer.delete(group_id)
        return await self._classic_join_group(group_id, member_id, **kwargs)

    async def sync_group(self, group_id: str, member_id: str, generation_id: int, *,
                         assignments: Mapping[str, bytes] | None = None,
                         group_instance_id: str | None = None,
                         protocol_type: str | None = None,
                         protocol_name: str | None = None) -> SyncResult:
        """SyncGroup (Membership.sync_group; a classic member of a consumer group: its
        assignment from the consumer group)."""
        mixed = self._mixed(group_id)
        if mixed is not None:
            return self.classic_members.sync(mixed, member_id, generation_id,
                                             group_instance_id=group_instance_id,
                                             protocol_name=protocol_name)
        return await self._membership.sync_group(
            group_id, member_id, generation_id, assignments=assignments,
            group_instance_id=group_instance_id, protocol_type=protocol_type,
            protocol_name=protocol_name)

    def heartbeat(self, group_id: str, member_id: str, generation_id: int,
                  group_instance_id: str | None = None) -> int:
        """Heartbeat (Membership.heartbeat, or a classic member of a consumer group)."""
        mixed = self._mixed(group_id)
        if mixed is not None:
            return self.classic_members.heartbeat(mixed, member_id, generation_id,
                                                  group_instance_id)
        return self._membership.heartbeat(group_id, member_id, generation_id,
                                          group_instance_id)

    def leave_group(self, group_id: str, members: Sequence[LeavingMember]) -> LeaveResult:
        """LeaveGroup (Membership.leave_group, or classic members of a consumer group)."""
        mixed = self._mixed(group_id)
        if mixed is not None:
            return self.classic_members.leave(mixed, members)
        return self._membership.leave_group(group_id, members)

    # ================================================================== lifecycle

    def load(self) -> None:
        """Replay the journal. Reloaded members must heartbeat within their session."""
        self._membership.resume(self._store.load())
        self.consumer.restore(self._replay_consumer_groups())
        self._loaded = True
        self._schedule_offset_expiry()
        log.info("group coordinator loaded %d groups", len(self._store.groups))

    def _replay_consumer_groups(self) -> list[ConsumerGroup]:
        """KIP-848 groups from their records in the journal (the last one of each wins)."""
        latest: dict[str, bytes | None] = {}
        for key, value in self._store.journal.replay():
            group_id = decode_consumer_group_key(bytes(key))
            if group_id is not None:
                latest[group_id] = None if value is None else bytes(value)
        return [decode_group(g, v) for g, v in latest.items() if v is not None]

    def close(self) -> None:
        """Cancel every timer and answer parked requests with NOT_COORDINATOR."""
        if self._closed:
            return
        self._closed = True
        self._timers.close()
        self._membership.close()

    async def start(self) -> None:
        """``load()`` from the event loop (the broker's start hook)."""
        if not self._loaded:
            self.load()

    async def stop(self) -> None:
        """``close()`` (the broker's stop hook)."""
        self.close()

    @property
    def loaded(self) -> bool:
        return self._loaded and not self._closed

    def group(self, group_id: str) -> Group | None:
        """The live group (for inspection; treat it as read-only)."""
        return self._store.get(group_id)

    def _check_available(self) -> None:
        if self._closed:
            raise errors.NotCoordinatorError("the coordinator is shut down")
        if not self._loaded:
            raise errors.CoordinatorLoadInProgressError("the group journal is not loaded yet")
        self._timers.arm_deferred()

    # ================================================================== group admin

    def list_groups(self, states: Iterable[str] = (),
                    types: Iterable[str] = ()) -> tuple[int, list[GroupListing]]:
        """ListGroups: (error, groups), filtered by state and type names (case-insensitive)."""
        try:
            self._check_available()
        except errors.BrokerResponseError as exc:
            return exc.errno, []
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        consumer_groups = self.consumer.listed()
        consumer_ids = {g.group_id for g in consumer_groups}
        listed = []
        if not wanted_types or "classic" in wanted_types:
            listed = [
                GroupListing(g.group_id, g.protocol_type or "", g.state.value)
                for g in self._store.all_groups()
                if g.state is not GroupState.DEAD and g.group_id not in consumer_ids
                and (not wanted_states or g.state.value.lower() in wanted_states)
            ]
        if not wanted_types or "consumer" in wanted_types:
            listed += [
                GroupListing(g.group_id, "consumer", g.state.value, "consumer")
                for g in consumer_groups
                if not wanted_states or g.state.value.lower() in wanted_states
            ]
        return NO_ERROR, listed

    def describe_group(self, group_id: str) -> GroupDescription:
        """DescribeGroups for one group; an unknown group is reported as Dead."""
        try:
            self._check_available()
            if not group_id:
                raise errors.InvalidGroupIdError("the group id is empty")
        except errors.BrokerResponseError as exc:
            return GroupDescription(group_id, GroupState.DEAD.value, error=exc.errno)
        group = self._store.get(group_id)
        if group is None or self.consumer.group(group_id) is not None:
            # Kafka describes a consumer-protocol group here as Dead (not a classic group).
            return GroupDescription(group_id, GroupState.DEAD.value)
        stable = group.state is GroupState.STABLE and group.protocol_name is not None
        members = tuple(
            MemberDescription(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.metadata_for(group.protocol_name) if stable and group.protocol_name else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        return GroupDescription(group_id, group.state.value, group.protocol_type or "",
                                (group.protocol_name or "") if stable else "", members)

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, int]:
        """DeleteGroups: each group's error; only a group without members can go."""
        results: dict[str, int] = {}
        for group_id in group_ids:
            try:
                self._check_available()
                if not group_id:
                    raise errors.InvalidGroupIdError("the group id is empty")
                if self.consumer.group(group_id) is not None:
                    self.consumer.delete(group_id)  # NON_EMPTY_GROUP while it has members
                    holder = self._store.get(group_id)
                    if holder is not None:
                        self._store.delete_group(holder)
                    results[group_id] = NO_ERROR
                    continue
                group = self._store.get(group_id)
                if group is None or group.state is GroupState.DEAD:
                    raise errors.GroupIdNotFoundError(f"group {group_id} does not exist")
                if group.state is not GroupState.EMPTY:
                    raise errors.NonEmptyGroupError(f"group {group_id} is {group.state.value}")
                self._membership.forget(group)
                self._store.delete_group(group)
            except errors.BrokerResponseError as exc:
                results[group_id] = exc.errno
                continue
            log.info("group %s deleted", group_id)
            results[group_id] = NO_ERROR
        return results

    # ================================================================== offsets

    def commit_offsets(self, group_id: str, offsets: Mapping[Partition, OffsetToCommit], *,
                       generation_id: int = -1, member_id: str = "",
                       group_instance_id: str | None = None,
                       retention_ms: int = -1) -> dict[Partition, int]:
        """OffsetCommit; each partition's error (GROUP_ID_NOT_FOUND for a member commit to
        a group that does not exist)."""
        try:
            self._check_available()
        except errors.BrokerResponseError as exc:
            return dict.fromkeys(offsets, exc.errno)
        if self.consumer.group(group_id) is not None:
            # KIP-848: the generation field carries the member epoch.
            try:
                self.consumer.validate_commit(group_id, member_id, generation_id)
            except errors.BrokerResponseError as exc:
                return dict.fromkeys(offsets, exc.errno)
            return self.offsets.commit(group_id, offsets, retention_ms=retention_ms)
        return self.offsets.commit(group_id, offsets, generation_id=generation_id,
                                   member_id=member_id, group_instance_id=group_instance_id,
                                   retention_ms=retention_ms)

    def fetch_offsets(self, group_id: str, partitions: Iterable[Partition] | None, *,
                      require_stable: bool = False, member_id: str | None = None,
                      member_epoch: int = -1) -> OffsetFetchResult:
        """OffsetFetch for one group; ``partitions=None`` means every committed partition.
        A consumer-protocol member asking (OffsetFetch v9) must be one, at its epoch."""
        try:
            self._check_available()
            if (member_id or member_epoch >= 0) and self.consumer.group(group_id) is not None:
                self.consumer.validate_fetch(group_id, member_id or "", member_epoch)
        except errors.BrokerResponseError as exc:
            return OffsetFetchResult(error=exc.errno)
        return self.offsets.fetch(group_id, partitions, require_stable=require_stable)

    def delete_offsets(self, group_id: str,
                       partitions: Iterable[Partition]) -> tuple[int, dict[Partition, int]]:
        """OffsetDelete: (group error, per-partition errors)."""
        try:
            self._check_available()
        except errors.BrokerResponseError as exc:
            return exc.errno, {}
        return self.offsets.delete(group_id, partitions)

    def stage_transactional_offsets(
        self, group_id: str, producer_id: int, offsets: Mapping[Partition, OffsetToCommit], *,
        generation_id: int = -1, member_id: str = "", group_instance_id: str | None = None,
        producer_epoch: int = 0,
    ) -> dict[Partition, int]:
        """TxnOffsetCommit: hold offsets until :meth:`complete_transaction`."""
        try:
            self._check_available()
        except errors.BrokerResponseError as exc:
            return dict.fromkeys(offsets, exc.errno)
        if self.consumer.group(group_id) is not None:
            if generation_id >= 0 or member_id:
                try:
                    self.consumer.validate_commit(group_id, member_id, generation_id)
                except errors.BrokerResponseError as exc:
                    return dict.fromkeys(offsets, exc.errno)
            return self.offsets.stage_transactional(group_id, producer_id, offsets,
                                                    producer_epoch=producer_epoch)
        return self.offsets.stage_transactional(
            group_id, producer_id, offsets, generation_id=generation_id, member_id=member_id,
            group_instance_id=group_instance_id, producer_epoch=producer_epoch)

    def complete_transaction(self, producer_id: int, committed: bool) -> None:
        """A transaction marker reached the group: apply or drop the producer's offsets."""
        self._check_available()
        self.offsets.complete_transaction(producer_id, committed)

    def on_topics_deleted(self, topics: Iterable[str]) -> int:
        """Topics were deleted (DeleteTopics): drop their committed offsets from every
        group, persisted through the journal (see ``OffsetManager.drop_topics``). Returns
        how many were dropped; 0 while the coordinator is not serving."""
        if not self.loaded:
            return 0
        return self.offsets.drop_topics(topics)

    def expire_offsets(self) -> int:
        """Apply offset retention now (it also runs every offsets.retention.check.interval)."""
        self._check_available()
        return self.offsets.expire()

    def _schedule_offset_expiry(self) -> None:
        self._timers.schedule(_OFFSET_EXPIRY, self.config.offsets_retention_check_interval_ms,
                              self._run_offset_expiry)

    def _run_offset_expiry(self) -> None:
        try:
            self.offsets.expire()
        finally:
            self._schedule_offset_expiry()
