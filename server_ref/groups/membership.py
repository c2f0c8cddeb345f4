"""Classic group membership: JoinGroup, SyncGroup, Heartbeat and LeaveGroup, and the
rebalances they drive.

Everything runs on the broker's event loop, which is the single owner of all state, so no
locks: a JoinGroup or SyncGroup that must wait for the rest of the group parks on a future
held by its member, and timers (``loop.call_later``) expire sessions, end rebalances and
drop members that never sent SyncGroup. No code path awaits while it changes state.

Rebalance protocol, as Kafka runs it (see ``group.py`` for the states):

* A member joins (JoinGroup): an Empty group starts a rebalance after
  ``group.initial.rebalance.delay.ms``, extended while new members keep arriving, up to the
  rebalance timeout; a running group starts one at once. The rebalance ends when every
  member has rejoined, or at the largest rebalance timeout, when members that did not
  rejoin are dropped (static members keep their seat until their session expires).
* The generation then increases, the protocol is voted (each member names its favourite
  protocol that all members support; most votes wins, ties go to the leader's order), and
  every member gets its JoinGroup answer; the leader's lists all members' metadata.
* The leader's SyncGroup carries the assignment: it is persisted, the group becomes Stable
  and every parked SyncGroup is answered with the member's share.
* JoinGroup v4+ without a member id gets MEMBER_ID_REQUIRED with an id to rejoin with.
* A static member (``group.instance.id``) that restarts rejoins without a member id and takes
  over its old seat and assignment; if the group is Stable and the selected protocol would
  not change, that happens without a rebalance. The old incarnation is fenced
  (FENCED_INSTANCE_ID).
* Heartbeats keep a member's session alive; while a rebalance runs they answer
  REBALANCE_IN_PROGRESS so members rejoin.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from sdk import errors
from server_ref.groups.config import GroupConfig
from server_ref.groups.group import Group, GroupState, Member
from server_ref.groups.results import (
    NO_ERROR,
    JoinResult,
    LeaveResult,
    LeavingMember,
    Protocol,
    SyncResult,
)
from server_ref.groups.store import GroupStore, JournalWriteError
from server_ref.groups.timers import Timers

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _JoinRequest:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    protocol_type: str
    protocols: tuple[Protocol, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    require_known_member_id: bool
    supports_skip_assignment: bool
    reason: str | None


class Membership:
    """Runs the rebalance protocol over the groups of a :class:`GroupStore`.

    ``check_available`` raises the coordinator-level error (not loaded, shut down) that
    every request must be refused with.
    """

    def __init__(self, store: GroupStore, config: GroupConfig, timers: Timers,
                 now_ms: Callable[[], int], check_available: Callable[[], None]) -> None:
        self._store = store
        self.config = config
        self._timers = timers
        self._now_ms = now_ms
        self._check_available = check_available
        self.closed = False

    def resume(self, groups: Sequence[Group]) -> None:
        """Start the session timers of members reloaded from the journal."""
        for group in groups:
            for member in group.members.values():
                self._touch(group, member)

    def close(self) -> None:
        """Answer every parked JoinGroup/SyncGroup with NOT_COORDINATOR."""
        self.closed = True
        gone = errors.NotCoordinatorError.errno
        for group in self._store.all_groups():
            for member in group.members.values():
                member.answer_join(JoinResult(error=gone, member_id=member.member_id))
                member.answer_sync(SyncResult(error=gone))

    # ================================================================== JoinGroup

    async def join_group(
        self, group_id: str, member_id: str, *, protocol_type: str,
        protocols: Sequence[Protocol], session_timeout_ms: int, rebalance_timeout_ms: int = -1,
        group_instance_id: str | None = None, client_id: str = "", client_host: str = "",
        require_known_member_id: bool = False, supports_skip_assignment: bool = False,
        reason: str | None = None,
    ) -> JoinResult:
        """JoinGroup; returns when the rebalance this join takes part in completes.

        ``require_known_member_id`` is JoinGroup v4+ (MEMBER_ID_REQUIRED for a first join
        without ``group_instance_id``); ``supports_skip_assignment`` is v9+.
        """
        request = _JoinRequest(
            member_id, group_instance_id, client_id, client_host, protocol_type,
            tuple(protocols), session_timeout_ms,
            rebalance_timeout_ms if rebalance_timeout_ms >= 0 else session_timeout_ms,
            require_known_member_id, supports_skip_assignment, reason,
        )
        try:
            outcome = self._join(group_id, request)
        except errors.BrokerResponseError as exc:
            return JoinResult(error=exc.errno, member_id=member_id)
        if isinstance(outcome, JoinResult):
            return outcome
        # Shielded: a client that disconnects must not cancel the member's place in the
        # rebalance (Kafka counts it as joined until the rebalance ends).
        return await asyncio.shield(outcome)

    def _join(self, group_id: str, req: _JoinRequest) -> JoinResult | asyncio.Future[JoinResult]:
        self._check_available()
        if not group_id:
            raise errors.InvalidGroupIdError("the group id is empty")
        cfg = self.config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            raise errors.InvalidSessionTimeoutError(
                f"session timeout {req.session_timeout_ms} ms is outside "
                f"[{cfg.min_session_timeout_ms}, {cfg.max_session_timeout_ms}]"
            )
        names = [name for name, _ in req.protocols]
        group = self._store.get(group_id)
        if group is None:
            if req.member_id:
                raise errors.UnknownMemberIdError(f"group {group_id} does not exist")
            if not req.protocol_type or not names:
                raise errors.InconsistentGroupProtocolError("no protocol type or protocols")
            group = self._store.get_or_create(group_id)
        elif group.state is GroupState.DEAD:
            raise errors.CoordinatorNotAvailableError(f"group {group_id} is being removed")
        if not group.supports_protocols(req.protocol_type, names):
            raise errors.InconsistentGroupProtocolError(
                f"protocols {names} of type {req.protocol_type!r} do not fit group {group_id}"
            )
        takes_new_seat = (req.member_id in group.pending_members if req.member_id
                          else req.group_instance_id not in group.static_members)
        if takes_new_seat and len(group.members) >= cfg.max_size:
            raise errors.GroupMaxSizeReachedError(f"group {group_id} has {cfg.max_size} members")
        if not req.member_id:
            return self._join_new_member(group, req)
        return self._join_known_member(group, req)

    def _join_new_member(self, group: Group,
                         req: _JoinRequest) -> JoinResult | asyncio.Future[JoinResult]:
        instance = req.group_instance_id
        if instance is not None:
            new_id = f"{instance}-{uuid.uuid4()}"
            old_id = group.static_members.get(instance)
            if old_id is not None:
                return self._replace_static_member(group, req, old_id, new_id)
            return self._add_member_and_rebalance(group, req, new_id)
        new_id = f"{req.client_id}-{uuid.uuid4()}"
        if req.require_known_member_id:
            # KIP-394: hand out the id first, so a client that times out and retries does
            # not leave a ghost member behind.
            group.pending_members.add(new_id)
            self._timers.schedule(("pending", group.group_id, new_id), req.session_timeout_ms,
                                  self._expire_pending_member, group, new_id)
            return JoinResult(error=errors.MemberIdRequiredError.errno, member_id=new_id)
        return self._add_member_and_rebalance(group, req, new_id)

    def _join_known_member(self, group: Group,
                           req: _JoinRequest) -> JoinResult | asyncio.Future[JoinResult]:
        if req.member_id in group.pending_members:
            group.pending_members.discard(req.member_id)
            self._timers.cancel(("pending", group.group_id, req.member_id))
            return self._add_member_and_rebalance(group, req, req.member_id)
        member = group.validate_member(req.member_id, req.group_instance_id)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            return self._update_member_and_rebalance(group, member, req)
        if state is GroupState.COMPLETING_REBALANCE:
            if member.matches(req.protocols):
                # It missed its JoinGroup answer; give the same one again.
                return self._current_join_result(group, member)
            return self._update_member_and_rebalance(group, member, req)
        if state is GroupState.STABLE:
            if member.member_id == group.leader_id or not member.matches(req.protocols):
                # The leader rejoining (e.g. to pick up new topics) rebalances the group.
                return self._update_member_and_rebalance(group, member, req)
            return self._current_join_result(group, member)
        raise errors.UnknownMemberIdError(f"group {group.group_id} is {state.value}")

    def _current_join_result(self, group: Group, member: Member) -> JoinResult:
        is_leader = member.member_id == group.leader_id
        return JoinResult(
            NO_ERROR, member.member_id, group.generation_id, group.protocol_type,
            group.protocol_name, group.leader_id or "",
            group.joined_members() if is_leader else (),
        )

    def _add_member_and_rebalance(self, group: Group, req: _JoinRequest,
                                  member_id: str) -> asyncio.Future[JoinResult]:
        member = Member(
            member_id=member_id, group_instance_id=req.group_instance_id,
            client_id=req.client_id, client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms, protocol_type=req.protocol_type,
            protocols=list(req.protocols),
        )
        waiter = self._park_join(member)
        group.add_member(member)
        if group.in_initial_delay:
            group.new_member_added = True
        self._touch(group, member)
        self._rebalance_or_check(group, f"member {member_id} joined ({req.reason})")
        return waiter

    def _update_member_and_rebalance(self, group: Group, member: Member,
                                     req: _JoinRequest) -> asyncio.Future[JoinResult]:
        member.protocols = list(req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        waiter = self._park_join(member)
        self._touch(group, member)
        self._rebalance_or_check(group, f"member {member.member_id} rejoined ({req.reason})")
        return waiter

    def _replace_static_member(self, group: Group, req: _JoinRequest, old_id: str,
                               new_id: str) -> JoinResult | asyncio.Future[JoinResult]:
        assert req.group_instance_id is not None
        old_leader = group.leader_id
        self._timers.cancel(("session", group.group_id, old_id))
        member = group.replace_static_member(req.group_instance_id, old_id, new_id)
        saved = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms,
                 member.client_id, member.client_host)
        member.protocols = list(req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.client_id, member.client_host = req.client_id, req.client_host
        reason = f"static member {req.group_instance_id} rejoined as {new_id} ({req.reason})"
        if group.state is GroupState.STABLE and group.select_protocol() == group.protocol_name:
            # Same protocol: take over the seat and the assignment without a rebalance.
            try:
                self._store.write_group(group)
            except JournalWriteError:
                group.replace_static_member(req.group_instance_id, new_id, old_id)
                (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms,
                 member.client_id, member.client_host) = saved
                self._touch(group, member)
                raise
            self._touch(group, member)
            log.info("group %s: %s without rebalance", group.group_id, reason)
            if req.supports_skip_assignment and group.leader_id == new_id:
                # KIP-814: the leader learns the members but must not reassign.
                return JoinResult(NO_ERROR, new_id, group.generation_id, group.protocol_type,
                                  group.protocol_name, new_id, group.joined_members(),
                                  skip_assignment=True)
            # Older clients get the old leader id, so a returning leader does not assign.
            return JoinResult(NO_ERROR, new_id, group.generation_id, group.protocol_type,
                              group.protocol_name, old_leader or "")
        waiter = self._park_join(member)
        self._touch(group, member)
        if group.state is GroupState.STABLE or group.state is GroupState.COMPLETING_REBALANCE:
            # In CompletingRebalance the leader may be assigning to the old member id.
            self._prepare_rebalance(group, reason)
        else:
            self._check_join_complete(group)
        return waiter

    def _park_join(self, member: Member) -> asyncio.Future[JoinResult]:
        """Give the member a fresh JoinGroup future; a superseded one is told to rejoin."""
        member.answer_join(JoinResult(error=errors.RebalanceInProgressError.errno,
                                      member_id=member.member_id))
        waiter: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join_waiter = waiter
        return waiter

    # ================================================================== rebalance

    def _rebalance_or_check(self, group: Group, reason: str) -> None:
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group, reason)
        else:
            self._check_join_complete(group)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            self._reset_assignments(group, errors.RebalanceInProgressError.errno)
        self._timers.cancel(("sync", group.group_id))
        from_empty = group.state is GroupState.EMPTY
        group.transition_to(GroupState.PREPARING_REBALANCE, self._now_ms())
        log.info("group %s: rebalance of generation %d: %s", group.group_id,
                 group.generation_id, reason)
        if from_empty:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.max_rebalance_timeout_ms() - delay, 0)
            group.in_initial_delay = True
            group.new_member_added = False
            self._timers.schedule(("join", group.group_id), delay,
                                  self._on_initial_delay_expired, group, delay, remaining)
            return
        self._timers.schedule(("join", group.group_id), group.max_rebalance_timeout_ms(),
                              self._complete_join, group)
        self._check_join_complete(group)

    def _on_initial_delay_expired(self, group: Group, delay: int, remaining: int) -> None:
        if not self._is_live(group) or group.state is not GroupState.PREPARING_REBALANCE:
            return
        if group.new_member_added and remaining > 0:
            # More members are arriving: wait another delay, within the rebalance timeout.
            group.new_member_added = False
            next_delay = min(delay, remaining)
            self._timers.schedule(("join", group.group_id), next_delay,
                                  self._on_initial_delay_expired, group, next_delay,
                                  max(remaining - delay, 0))
            return
        group.in_initial_delay = False
        self._complete_join(group)

    def _check_join_complete(self, group: Group) -> None:
        if (group.state is GroupState.PREPARING_REBALANCE and not group.in_initial_delay
                and group.has_all_members_joined()):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if not self._is_live(group) or group.state is not GroupState.PREPARING_REBALANCE:
            return
        self._timers.cancel(("join", group.group_id))
        group.in_initial_delay = False
        for member in group.not_yet_rejoined():
            if member.group_instance_id is None:
                log.info("group %s: member %s did not rejoin in time", group.group_id,
                         member.member_id)
                self._remove_member(group, member)
        if group.members and not group.elect_joined_leader():
            # Only static members that have not rejoined are left: wait for them to return
            # or for their sessions to expire.
            self._timers.schedule(("join", group.group_id), group.max_rebalance_timeout_ms(),
                                  self._complete_join, group)
            return
        group.init_next_generation(self._now_ms())
        # mypy keeps the narrowing from the guard above across the call that changed the state.
        if group.state is GroupState.EMPTY:  # type: ignore[comparison-overlap]
            self._write_group_quietly(group)
            return
        log.info("group %s: generation %d with %d members, protocol %s, leader %s",
                 group.group_id, group.generation_id, len(group.members), group.protocol_name,
                 group.leader_id)
        everyone = group.joined_members()
        for member in list(group.members.values()):
            group.pending_sync.add(member.member_id)
            is_leader = member.member_id == group.leader_id
            member.answer_join(JoinResult(
                NO_ERROR, member.member_id, group.generation_id, group.protocol_type,
                group.protocol_name, group.leader_id or "", everyone if is_leader else (),
            ))
            self._touch(group, member)
        self._timers.schedule(("sync", group.group_id), group.max_rebalance_timeout_ms(),
                              self._on_sync_expired, group, group.generation_id)

    def _on_sync_expired(self, group: Group, generation_id: int) -> None:
        """Members that got their JoinGroup answer but never sent SyncGroup are dropped."""
        if (not self._is_live(group) or group.generation_id != generation_id
                or not group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE)):
            return
        missing = [group.members[m] for m in list(group.pending_sync) if m in group.members]
        if not missing:
            return
        for member in missing:
            self._remove_member(group, member)
        self._prepare_rebalance(
            group, f"members {[m.member_id for m in missing]} did not send SyncGroup in time"
        )

    def _reset_assignments(self, group: Group, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.awaiting_sync:
                member.answer_sync(SyncResult(error=error))
                self._touch(group, member)

    # ================================================================== SyncGroup

    async def sync_group(
        self, group_id: str, member_id: str, generation_id: int, *,
        assignments: Mapping[str, bytes] | None = None, group_instance_id: str | None = None,
        protocol_type: str | None = None, protocol_name: str | None = None,
    ) -> SyncResult:
        """SyncGroup; a follower's waits until the leader's brings the assignment."""
        try:
            outcome = self._sync(group_id, member_id, generation_id, assignments or {},
                                 group_instance_id, protocol_type, protocol_name)
        except errors.BrokerResponseError as exc:
            return SyncResult(error=exc.errno)
        if isinstance(outcome, SyncResult):
            return outcome
        return await asyncio.shield(outcome)

    def _sync(self, group_id: str, member_id: str, generation_id: int,
              assignments: Mapping[str, bytes], group_instance_id: str | None,
              protocol_type: str | None,
              protocol_name: str | None) -> SyncResult | asyncio.Future[SyncResult]:
        group = self._member_group(group_id)
        member = group.validate_member(member_id, group_instance_id)
        if generation_id != group.generation_id:
            raise errors.IllegalGenerationError(
                f"generation {generation_id} is not the group's {group.generation_id}"
            )
        if ((protocol_type is not None and protocol_type != group.protocol_type)
                or (protocol_name is not None and protocol_name != group.protocol_name)):
            raise errors.InconsistentGroupProtocolError(
                f"group uses {group.protocol_type}/{group.protocol_name}"
            )
        if group.state is GroupState.PREPARING_REBALANCE:
            raise errors.RebalanceInProgressError("the group is rebalancing")
        if group.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            raise errors.UnknownMemberIdError(f"group {group_id} is {group.state.value}")
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self._timers.cancel(("sync", group.group_id))
        if group.state is GroupState.STABLE:
            self._touch(group, member)
            return SyncResult(NO_ERROR, group.protocol_type, group.protocol_name,
                              member.assignment)
        member.answer_sync(SyncResult(error=errors.RebalanceInProgressError.errno))
        waiter: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        member.sync_waiter = waiter
        self._touch(group, member)
        if member_id == group.leader_id:
            self._complete_sync(group, assignments)
        return waiter

    def _complete_sync(self, group: Group, assignments: Mapping[str, bytes]) -> None:
        """Persist the leader's assignment, go Stable and answer every parked SyncGroup."""
        # Members the leader left out get an empty assignment; unknown ids are ignored.
        full = {member_id: assignments.get(member_id, b"") for member_id in group.members}
        try:
            self._store.write_group(group, full)
        except JournalWriteError as exc:
            self._reset_assignments(group, exc.errno)
            self._prepare_rebalance(group, "the assignment could not be persisted")
            return
        for member_id, member in group.members.items():
            member.assignment = full[member_id]
        group.transition_to(GroupState.STABLE, self._now_ms())
        for member in group.members.values():
            if member.awaiting_sync:
                member.answer_sync(SyncResult(NO_ERROR, group.protocol_type,
                                              group.protocol_name, member.assignment))
                self._touch(group, member)

    # ================================================================== Heartbeat

    def heartbeat(self, group_id: str, member_id: str, generation_id: int,
                  group_instance_id: str | None = None) -> int:
        """Heartbeat; returns the error code (REBALANCE_IN_PROGRESS asks to rejoin)."""
        try:
            group = self._member_group(group_id)
            member = group.validate_member(member_id, group_instance_id)
            if generation_id != group.generation_id:
                raise errors.IllegalGenerationError(
                    f"generation {generation_id} is not the group's {group.generation_id}"
                )
            if group.state is GroupState.EMPTY:
                raise errors.UnknownMemberIdError(f"group {group_id} is empty")
        except errors.BrokerResponseError as exc:
            return exc.errno
        self._touch(group, member)
        if group.state is GroupState.PREPARING_REBALANCE:
            return errors.RebalanceInProgressError.errno
        return NO_ERROR

    # ================================================================== LeaveGroup

    def leave_group(self, group_id: str, members: Sequence[LeavingMember]) -> LeaveResult:
        """LeaveGroup for one member (v0-v2) or a batch (v3+, by member or instance id)."""
        try:
            group = self._lookup_group(group_id)
        except errors.BrokerResponseError as exc:
            return LeaveResult(exc.errno)
        if group is None:
            unknown = errors.UnknownMemberIdError.errno
            return LeaveResult(NO_ERROR, tuple((m, unknown) for m in members))
        return LeaveResult(NO_ERROR, tuple((m, self._leave_one(group, m)) for m in members))

    def _leave_one(self, group: Group, leaving: LeavingMember) -> int:
        try:
            if not leaving.member_id:
                # Admin removal of a static member by its instance id alone.
                current = (group.static_members.get(leaving.group_instance_id)
                           if leaving.group_instance_id is not None else None)
                if current is None:
                    raise errors.UnknownMemberIdError("no member with this instance id")
                member = group.members[current]
            elif leaving.member_id in group.pending_members:
                group.pending_members.discard(leaving.member_id)
                self._timers.cancel(("pending", group.group_id, leaving.member_id))
                self._check_join_complete(group)
                return NO_ERROR
            else:
                member = group.validate_member(leaving.member_id, leaving.group_instance_id)
        except errors.BrokerResponseError as exc:
            return exc.errno
        self._remove_member_and_update_group(
            group, member, f"member {member.member_id} left ({leaving.reason})"
        )
        return NO_ERROR

    # ================================================================== members

    def _lookup_group(self, group_id: str) -> Group | None:
        """The group a membership request names (None if unknown), or Kafka's error."""
        self._check_available()
        if not group_id:
            raise errors.InvalidGroupIdError("the group id is empty")
        group = self._store.get(group_id)
        if group is not None and group.state is GroupState.DEAD:
            raise errors.CoordinatorNotAvailableError(f"group {group_id} is being removed")
        return group

    def _member_group(self, group_id: str) -> Group:
        group = self._lookup_group(group_id)
        if group is None:
            raise errors.UnknownMemberIdError(f"group {group_id} does not exist")
        return group

    def _touch(self, group: Group, member: Member) -> None:
        """Restart the member's session timer; a member with a parked request is kept alive."""
        key = ("session", group.group_id, member.member_id)
        if member.awaiting_join or member.awaiting_sync:
            self._timers.cancel(key)
        else:
            self._timers.schedule(key, member.session_timeout_ms, self._expire_member, group,
                                  member.member_id)

    def _expire_member(self, group: Group, member_id: str) -> None:
        member = group.members.get(member_id)
        if not self._is_live(group) or member is None:
            return
        if member.awaiting_join or member.awaiting_sync:
            return
        log.info("group %s: session of member %s expired", group.group_id, member_id)
        self._remove_member_and_update_group(group, member, f"member {member_id} expired")

    def _expire_pending_member(self, group: Group, member_id: str) -> None:
        if self._is_live(group) and member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._check_join_complete(group)

    def _remove_member(self, group: Group, member: Member) -> None:
        """Take the member out; its parked requests are answered UNKNOWN_MEMBER_ID."""
        unknown = errors.UnknownMemberIdError.errno
        member.answer_join(JoinResult(error=unknown, member_id=member.member_id))
        member.answer_sync(SyncResult(error=unknown))
        group.remove_member(member.member_id)
        self._timers.cancel(("session", group.group_id, member.member_id))

    def _remove_member_and_update_group(self, group: Group, member: Member, reason: str) -> None:
        self._remove_member(group, member)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
        elif group.state is GroupState.PREPARING_REBALANCE:
            self._check_join_complete(group)

    def _is_live(self, group: Group) -> bool:
        return not self.closed and self._store.get(group.group_id) is group

    def _write_group_quietly(self, group: Group) -> None:
        try:
            self._store.write_group(group)
        except JournalWriteError:
            log.warning("group %s: metadata not persisted", group.group_id)

    def resume_downgraded(self, group: Group) -> None:
        """A consumer group turned back into the classic ``group`` (Stable, its members
        with their partitions): their sessions run from now and a rebalance starts, so
        each rejoins at its next heartbeat and the leader assigns again."""
        for member in group.members.values():
            self._touch(group, member)
        self._prepare_rebalance(group, "downgraded from the consumer protocol")
        self._write_group_quietly(group)

    def forget(self, group: Group) -> None:
        """Cancel the timers of a group that is being deleted."""
        self._timers.cancel(("join", group.group_id))
        self._timers.cancel(("sync", group.group_id))
        for member_id in list(group.members) + list(group.pending_members):
            self._timers.cancel(("session", group.group_id, member_id))
            self._timers.cancel(("pending", group.group_id, member_id))
