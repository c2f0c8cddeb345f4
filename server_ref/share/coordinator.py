"""The share-group coordinator of one reference broker (KIP-932).

It owns the share groups (membership, assignment), the share-partitions (delivery state
of each group's topic partitions: ``partition.py``), the share sessions of the members
fetching from this broker, the group configs, and the journal in ``__share_group_state``.
It is made on the first share-group request (``ShareCoordinator.of(broker)``) and loads
the journal then, so a restarted broker carries on where the last one stopped: settled
records stay settled, delivery counts survive, and records that were locked come back
available. A ticker ends acquisition locks that time out and members whose session timed
out (their records go back too), and wakes fetches waiting for records.

Everything runs on the broker's loop; no method awaits while changing state.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from server_ref.groups.results import GroupListing
from server_ref.share.group import ShareGroup, ShareMember
from server_ref.share.group_configs import GroupConfigStore
from server_ref.share.journal import ShareStateJournal, StateKey
from server_ref.share.partition import SharePartition

if TYPE_CHECKING:
    from server_ref.broker import Broker
    from server_ref.topics import Partition

log = logging.getLogger(__name__)

__all__ = ["ShareCoordinator", "ShareSessionState"]

TICK_S = 0.05
_ATTRIBUTE = "_share_coordinator"
_DURATION = re.compile(r"by_duration:P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?")

# Errors as numbers (the handlers raise nothing: they answer with codes).
UNKNOWN_MEMBER_ID = 25
INVALID_REQUEST = 42
FENCED_MEMBER_EPOCH = 110
GROUP_MAX_SIZE_REACHED = 81
GROUP_ID_NOT_FOUND = 69
NON_EMPTY_GROUP = 68


@dataclass(slots=True)
class ShareSessionState:
    group_id: str
    member_id: str
    epoch: int  # the epoch the next request must carry
    partitions: set[tuple[uuid.UUID, int]] = field(default_factory=set)


class ShareCoordinator:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.journal = ShareStateJournal(broker)
        self.configs = GroupConfigStore(broker.data_dir, broker.config)
        self.groups: dict[str, ShareGroup] = {}
        self.partitions: dict[StateKey, SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSessionState] = {}
        self._dirty: set[StateKey] = set()
        self._waiters: list[asyncio.Future[None]] = []
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def of(cls, broker: Broker) -> ShareCoordinator:
        found = broker.__dict__.get(_ATTRIBUTE)
        if found is None:
            found = cls(broker)
            found.load()
            broker.__dict__[_ATTRIBUTE] = found
        found._ensure_ticking()
        return found

    def load(self) -> None:
        count = 0
        for key, value in self.journal.replay():
            if value is None:
                self.partitions.pop(key, None)
                continue
            sp = self.partitions.get(key)
            if sp is None:
                sp = self.partitions[key] = SharePartition(key[0], key[1], key[2], 0)
            sp.restore(value)
            count += 1
        for group_id, _, _ in self.partitions:
            self.groups.setdefault(group_id, ShareGroup(group_id))
        if count:
            log.info("share coordinator loaded %d share-partitions", len(self.partitions))

    @classmethod
    def leadership_changed(cls, broker: Broker, partition: Partition) -> None:
        """Cluster mode: this broker gained or lost the leadership of ``partition``; the
        share-partitions of it are dropped, and reloaded from the journal when it leads."""
        found = broker.__dict__.get(_ATTRIBUTE)
        if found is None or partition.topic.name.startswith("__"):
            return  # (a coordinator made later loads the journal then)
        from server_ref.share.cluster_state import reload_partition

        replica = getattr(partition, "replica", None)
        leads = replica is not None and bool(replica.is_leader)
        reload_partition(found, partition.topic.topic_id, partition.index, leads)
        found.wake()

    def _ensure_ticking(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._tick(),
                                                                name="share-coordinator")

    # ------------------------------------------------------------------ configs

    def config(self, group_id: str, name: str) -> Any:
        return self.configs.value(group_id, name)

    def lock_ms(self, group_id: str) -> int:
        return int(self.config(group_id, "share.record.lock.duration.ms"))

    def delivery_limit(self, group_id: str) -> int:
        return int(self.config(group_id, "share.delivery.count.limit"))

    def max_locks(self, group_id: str) -> int:
        return int(self.config(group_id, "share.partition.max.record.locks"))

    # ------------------------------------------------------------------ membership

    def heartbeat(self, group_id: str, member_id: str, epoch: int, rack: str | None,
                  topics: list[str] | None, client_id: str, host: str
                  ) -> tuple[int, str | None, ShareMember | None, bool]:
        """(error, message, member, send the assignment?) for one ShareGroupHeartbeat."""
        if not group_id or not member_id:
            return INVALID_REQUEST, "GroupId and MemberId can't be empty.", None, False
        group = self.groups.get(group_id)
        now = self.broker.now_ms()
        if epoch == -1:
            if group is not None and member_id in group.members:
                self._remove_member(group, member_id)
            return 0, None, ShareMember(member_id, client_id, host, rack, [], epoch=-1), False
        if group is None:
            group = self.groups[group_id] = ShareGroup(group_id)
        member = group.members.get(member_id)
        if epoch == 0:
            if member is None:
                if topics is None:
                    return INVALID_REQUEST, "SubscribedTopicNames must be set in first " \
                                            "request.", None, False
                limit = int(self.broker.config.get("group.share.max.size"))
                if len(group.members) >= limit:
                    return GROUP_MAX_SIZE_REACHED, f"The share group has reached its " \
                                                   f"maximum capacity of {limit} members.", \
                        None, False
                member = group.members[member_id] = ShareMember(
                    member_id, client_id, host, rack, sorted(set(topics)),
                    epoch=group.assignment_epoch)  # until an assignment includes it
                self._changed(group)
            elif topics is not None and sorted(set(topics)) != member.topics:
                member.topics = sorted(set(topics))
                self._changed(group)
            member.sent_epoch = -1  # a rejoin is told its assignment again
        else:
            if member is None:
                return UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group " \
                                          f"{group_id}.", None, False
            if epoch > member.epoch:
                return FENCED_MEMBER_EPOCH, f"The share group member has a greater member " \
                                            f"epoch ({epoch}) than the one known by the " \
                                            f"group coordinator ({member.epoch}).", None, False
            if topics is not None and sorted(set(topics)) != member.topics:
                member.topics = sorted(set(topics))
                self._changed(group)
        if group.assignment_stale and group.can_assign(now, self.assignment_interval_ms(
                group_id)):
            self._assign(group, now)
        member.last_seen_ms = now
        if rack is not None:
            member.rack = rack
        tell = member.sent_epoch != member.epoch
        member.sent_epoch = member.epoch
        return 0, None, member, tell

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return int(self.config(group_id, "share.heartbeat.interval.ms"))

    def assignment_interval_ms(self, group_id: str) -> int:
        """The group's share.assignment.interval.ms, else the broker's (dynamic)
        group.share.assignment.interval.ms: read at each heartbeat, so a change applies
        to the next assignment."""
        return int(self.config(group_id, "share.assignment.interval.ms"))

    def _subscribed_partitions(self, group: ShareGroup) -> dict[str, tuple[uuid.UUID, int]]:
        partitions_of: dict[str, tuple[uuid.UUID, int]] = {}
        for name in group.subscribed_topics():
            topic = self.broker.topics.get(name)
            if topic is not None:
                partitions_of[name] = (topic.topic_id, len(topic.partitions))
        return partitions_of

    def _changed(self, group: ShareGroup) -> None:
        """Membership or a subscription changed: a new group epoch; the assignment follows
        at a heartbeat once the group's assignment interval allows."""
        group.partitions_of = self._subscribed_partitions(group)
        group.bump()

    def _assign(self, group: ShareGroup, now_ms: int) -> None:
        group.partitions_of = self._subscribed_partitions(group)
        group.assign(group.partitions_of, now_ms)

    def refresh_assignments(self) -> None:
        """Topics appear and grow: groups whose subscribed partitions changed get a new
        epoch (Kafka's metadata hash), and a new assignment as membership changes do."""
        for group in self.groups.values():
            if group.members and self._subscribed_partitions(group) != group.partitions_of:
                self._changed(group)

    def _remove_member(self, group: ShareGroup, member_id: str) -> None:
        del group.members[member_id]
        limit = self.delivery_limit(group.group_id)
        for key, sp in self.partitions.items():
            if key[0] == group.group_id and sp.release_member(member_id, limit):
                self._dirty.add(key)
        for skey in [k for k in self.sessions if k == (group.group_id, member_id)]:
            del self.sessions[skey]
        self._changed(group)  # the others take its partitions at their next heartbeat
        self.wake()

    # ------------------------------------------------------------------ share-partitions

    def share_partition(self, group_id: str, topic_id: uuid.UUID, partition: Partition
                        ) -> SharePartition:
        key = (group_id, topic_id, partition.index)
        sp = self.partitions.get(key)
        if sp is None:
            sp = self.partitions[key] = SharePartition(
                group_id, topic_id, partition.index, self._initial_offset(group_id, partition))
            self.groups.setdefault(group_id, ShareGroup(group_id))
            self._dirty.add(key)
        return sp

    def _initial_offset(self, group_id: str, partition: Partition) -> int:
        plog = partition.log
        reset = str(self.config(group_id, "share.auto.offset.reset"))
        if reset == "earliest":
            return plog.log_start_offset
        match = _DURATION.fullmatch(reset)
        if match:
            days, hours, minutes, seconds = (float(g or 0) for g in match.groups())
            back_ms = int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)
            found = plog.offset_for_timestamp(self.broker.now_ms() - back_ms)
            return plog.log_end_offset if found is None else found[0]
        return plog.log_end_offset

    def mark_dirty(self, sp: SharePartition) -> None:
        self._dirty.add((sp.group_id, sp.topic_id, sp.partition))

    def flush(self) -> None:
        """Journal every share-partition changed since the last flush."""
        dirty, self._dirty = self._dirty, set()
        for key in sorted(dirty, key=str):
            sp = self.partitions.get(key)
            self.journal.write(key, None if sp is None else sp.snapshot())

    def forget_partitions(self, group_id: str, topic_ids: set[uuid.UUID] | None = None) -> None:
        for key in [k for k in self.partitions if k[0] == group_id
                    and (topic_ids is None or k[1] in topic_ids)]:
            del self.partitions[key]
            self._dirty.add(key)

    # ------------------------------------------------------------------ sessions

    def release_in_session(self, session: ShareSessionState,
                           parts: set[tuple[uuid.UUID, int]] | None = None) -> None:
        limit = self.delivery_limit(session.group_id)
        for topic_id, index in (session.partitions if parts is None else parts):
            sp = self.partitions.get((session.group_id, topic_id, index))
            if sp is not None and sp.release_member(session.member_id, limit):
                self.mark_dirty(sp)
        self.wake()

    # ------------------------------------------------------------------ waiting, timers

    def wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def waiter(self) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        return fut

    async def _tick(self) -> None:
        while self.broker.opened:
            await asyncio.sleep(TICK_S)
            if not self.broker.opened:
                break
            try:
                self._expire(self.broker.now_ms())
            except Exception:
                log.exception("share coordinator tick failed")

    def _expire(self, now: int) -> None:
        woke = False
        for key, sp in self.partitions.items():
            if sp.expire(now, self.delivery_limit(key[0])):
                self._dirty.add(key)
                woke = True
        for group in list(self.groups.values()):
            timeout = int(self.config(group.group_id, "share.session.timeout.ms"))
            for member_id, member in list(group.members.items()):
                if now - member.last_seen_ms > timeout:
                    log.info("share group %s: member %s timed out", group.group_id, member_id)
                    self._remove_member(group, member_id)
                    woke = True
        if self._dirty:
            self.flush()
        if woke:
            self.wake()

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        with contextlib.suppress(Exception):
            self.flush()

    @classmethod
    async def shutdown(cls, broker: Broker) -> None:
        """Broker stop: journal what changed and end the ticker (left pending, asyncio
        warned "Task was destroyed but it is pending" at every broker stop)."""
        found = broker.__dict__.get(_ATTRIBUTE)
        if found is None:
            return
        found.stop()
        if found._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await found._task


# ---------------------------------------------------------------------------- group admin


def listed_share_groups(broker: Broker, states: Any, types: Any) -> list[GroupListing]:
    """ListGroups' share groups, filtered as Kafka filters (case-insensitive)."""
    if types and "share" not in {str(t).lower() for t in types}:
        return []
    wanted = {str(s).lower() for s in states or ()}
    coordinator = ShareCoordinator.of(broker)
    return [GroupListing(g.group_id, "share", g.state, "share")
            for g in coordinator.groups.values()
            if not wanted or g.state.lower() in wanted]


def delete_share_group(broker: Broker, group_id: str) -> int | None:
    """DeleteGroups for a share group: its error code, or None if it is not one."""
    coordinator = ShareCoordinator.of(broker)
    group = coordinator.groups.get(group_id)
    if group is None:
        return None
    if group.members:
        return NON_EMPTY_GROUP
    del coordinator.groups[group_id]
    coordinator.forget_partitions(group_id)
    if getattr(broker, "cluster", None) is None:  # cluster mode: they are the controller's
        coordinator.configs.forget(group_id)
    coordinator.flush()
    return 0
