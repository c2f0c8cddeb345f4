"""Generic group membership: find the coordinator, join, sync, heartbeat, leave.

:class:`GroupMembership` knows nothing about partitions; what the members exchange is opaque
bytes produced and consumed by a :class:`GroupProtocol` (the consumer protocol lives in
``coordinator.py``). It runs:

* the **join** (JoinGroup, then SyncGroup with the leader's assignment), in a task of its
  own so that a caller's timeout never cuts a rebalance in half: :meth:`ensure_active_group`
  only waits for it;
* the **heartbeat** task, independent of how often the application polls, timed by a
  :class:`HeartbeatTimer`: it keeps the session alive, notices rebalances
  (REBALANCE_IN_PROGRESS) and lost membership (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION), and
  enforces ``max_poll_interval_ms`` by leaving the group when the application stops polling;
* **leave** on close (dynamic members only: a static member keeps its place for a restart).

Coordinator failover: any NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE or lost connection
forgets the cached coordinator, and the next request looks it up again.

Group traffic travels on its own NetClient (its own connections), so a JoinGroup held by the
broker for a whole rebalance, or a heartbeat, never queues behind a long-polling Fetch.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Sequence
from typing import Protocol

from sdk.consumer.heartbeat import HeartbeatTimer
from sdk.errors import (
    FencedInstanceIdError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NoBrokersAvailableError,
    for_code,
)
from sdk.net import Coordinator, NetClient
from sdk.net.retry import Backoff
from sdk.protocol.messages.heartbeat import HeartbeatRequest
from sdk.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from sdk.protocol.messages.leave_group import LeaveGroupRequest
from sdk.protocol.messages.sync_group import SyncGroupRequest

log = logging.getLogger(__name__)

# Error codes, by what they mean for a member.
_COORDINATOR_MOVED = frozenset({14, 15, 16})  # load in progress, not available, not coordinator
_UNKNOWN_MEMBER = 25
_ILLEGAL_GENERATION = 22
_REBALANCE_IN_PROGRESS = 27
_MEMBER_ID_REQUIRED = 79
_FENCED_INSTANCE_ID = 82
_LEAVE_GROUP_BATCH_VERSION = 3
_JOIN_REQUEST_MARGIN_S = 5.0  # on top of the rebalance timeout the broker may hold a JoinGroup


class MemberState(enum.Enum):
    UNJOINED = "unjoined"
    JOINING = "joining"
    STABLE = "stable"


class GroupProtocol(Protocol):
    """What membership needs from the protocol on top (the consumer coordinator)."""

    protocol_type: str

    def join_protocols(self) -> list[tuple[str, bytes]]:
        """(protocol name, member metadata) in preference order."""
        ...

    async def on_join_prepare(self, generation: int, member_id: str) -> None:
        """Before (re)joining. ``generation`` is -1 when membership was lost."""
        ...

    async def perform_assignment(
        self, protocol_name: str, members: Sequence[JoinGroupResponse.JoinGroupResponseMember]
    ) -> dict[str, bytes]:
        """Leader only: member id -> assignment bytes."""
        ...

    async def on_join_complete(
        self, generation: int, member_id: str, protocol_name: str, assignment: bytes
    ) -> None:
        ...


class GroupMembership:
    """Membership of one group; see the module docstring."""

    def __init__(
        self,
        client: NetClient,
        protocol: GroupProtocol,
        *,
        group_id: str,
        group_instance_id: str | None,
        session_timeout_ms: int,
        heartbeat_interval_ms: int,
        max_poll_interval_ms: int,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
        request_timeout_ms: int,
    ) -> None:
        self._client = client
        self._protocol = protocol
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self.member_id = ""
        self.generation = -1
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.state = MemberState.UNJOINED
        self._session_timeout_ms = session_timeout_ms
        self._rebalance_timeout_ms = max_poll_interval_ms
        self._request_timeout_s = request_timeout_ms / 1000
        self._loop = asyncio.get_running_loop()
        self._timer = HeartbeatTimer(session_timeout_ms, heartbeat_interval_ms,
                                     max_poll_interval_ms, retry_backoff_ms,
                                     now=self._loop.time())
        self._backoff = Backoff(retry_backoff_ms, retry_backoff_max_ms)
        self._coordinator = Coordinator(group_id)
        self._rejoin_needed = True
        self._rejoin_reason = "initial join"
        self._prepared = False  # on_join_prepare ran for the rebalance in progress
        self._join_task: asyncio.Task[None] | None = None
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()  # set when a rejoin is needed (wakes pollers)
        self._heartbeat_wake = asyncio.Event()
        self._fatal: KafkaError | None = None
        self._closed = False

    # ------------------------------------------------------------------ state

    @property
    def rejoin_needed(self) -> bool:
        return self._rejoin_needed or self.state is not MemberState.STABLE

    @property
    def changed(self) -> asyncio.Event:
        """Set when the member must rejoin; pollers waiting for records wake up on it."""
        return self._changed

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def request_rejoin(self, reason: str) -> None:
        if not self._rejoin_needed:
            log.info("group %s: rejoining (%s)", self.group_id, reason)
        self._rejoin_needed = True
        self._rejoin_reason = reason
        self._changed.set()

    def polled(self) -> None:
        """The application asked for records; restarts the max_poll_interval_ms clock."""
        self._timer.polled(self._loop.time())

    def _reset_generation(self, *, forget_member_id: bool) -> None:
        self.generation = -1
        self.state = MemberState.UNJOINED
        if forget_member_id:
            self.member_id = ""

    # ------------------------------------------------------------------ joining

    async def ensure_active_group(self, timeout_s: float) -> bool:
        """Join or rejoin if needed, waiting at most ``timeout_s``; True when stable.

        The join continues in the background when the wait times out. Fatal group errors
        (e.g. FENCED_INSTANCE_ID, GROUP_AUTHORIZATION_FAILED) are raised.
        """
        if self._fatal is not None:
            raise self._fatal
        if self._join_task is not None and self._join_task.done():
            finished, self._join_task = self._join_task, None
            if not finished.cancelled() and finished.exception() is not None:
                raise finished.exception()  # type: ignore[misc]
        if not self.rejoin_needed:
            self._changed.clear()
            return True
        task = self._join_task
        if task is None:
            self._changed.clear()
            task = self._join_task = self._loop.create_task(self._join_loop(),
                                                            name="kafka-sdk-join")
        done, _ = await asyncio.wait({task}, timeout=max(timeout_s, 0))
        if done:
            # Several callers may wait for the same join (a poll and a commit waiting for a
            # rebalance): each looks at the task it waited for; the first one forgets it.
            if self._join_task is task:
                self._join_task = None
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
        return not self.rejoin_needed

    async def _join_loop(self) -> None:
        failures = 0
        while not self._closed:
            try:
                if await self._join_once():
                    return
                failures = 0
            except KafkaError as exc:
                if isinstance(exc, FencedInstanceIdError) or not _is_recoverable(exc):
                    self._fatal = exc
                    raise
                failures += 1
                if isinstance(exc, KafkaConnectionError) or getattr(exc, "errno", None) in _COORDINATOR_MOVED:
                    self._client.forget_coordinator(self.group_id)
                delay = self._backoff.delay(failures)
                log.info("group %s: join failed (%s); retrying in %.2f s", self.group_id, exc, delay)
                await asyncio.sleep(delay)

    async def _join_once(self) -> bool:
        """One JoinGroup + SyncGroup round; True when the member is stable."""
        self._rejoin_needed = False
        if not self._prepared:
            await self._protocol.on_join_prepare(self.generation, self.member_id)
            self._prepared = True
        self.state = MemberState.JOINING
        request = JoinGroupRequest(
            group_id=self.group_id,
            session_timeout_ms=self._session_timeout_ms,
            rebalance_timeout_ms=self._rebalance_timeout_ms,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type=self._protocol.protocol_type,
            protocols=[
                JoinGroupRequest.JoinGroupRequestProtocol(name=name, metadata=metadata)
                for name, metadata in self._protocol.join_protocols()
            ],
            reason=self._rejoin_reason,
        )
        # The broker may hold a JoinGroup for the whole rebalance (some brokers wait the
        # session timeout instead, when it is longer).
        held_ms = max(self._rebalance_timeout_ms, self._session_timeout_ms)
        timeout = held_ms / 1000 + _JOIN_REQUEST_MARGIN_S
        response: JoinGroupResponse = await self._client.send(
            request, self._coordinator, timeout_s=timeout)
        code = response.error_code
        if code == _MEMBER_ID_REQUIRED:
            self.member_id = response.member_id  # KIP-394: join again with the given id
            self._rejoin_needed = True
            return False
        if code in (_UNKNOWN_MEMBER, _ILLEGAL_GENERATION):
            self._reset_generation(forget_member_id=code == _UNKNOWN_MEMBER)
            self._rejoin_needed = True
            return False
        if code == _REBALANCE_IN_PROGRESS:
            self._rejoin_needed = True
            return False
        if code:
            raise for_code(code)(f"JoinGroup of group {self.group_id!r}")
        self.member_id = response.member_id
        self.generation = response.generation_id
        self.protocol_name = response.protocol_name
        self.leader_id = response.leader
        assignments: dict[str, bytes] = {}
        if response.leader == response.member_id and not response.skip_assignment:
            assignments = await self._protocol.perform_assignment(
                response.protocol_name or "", response.members)
        return await self._sync(assignments)

    async def _sync(self, assignments: dict[str, bytes]) -> bool:
        request = SyncGroupRequest(
            group_id=self.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type=self._protocol.protocol_type,
            protocol_name=self.protocol_name,
            assignments=[
                SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                for m, a in assignments.items()
            ],
        )
        response = await self._client.send(request, self._coordinator,
                                           timeout_s=self._request_timeout_s)
        code = response.error_code
        if code in (_UNKNOWN_MEMBER, _ILLEGAL_GENERATION):
            self._reset_generation(forget_member_id=code == _UNKNOWN_MEMBER)
            self._rejoin_needed = True
            return False
        if code == _REBALANCE_IN_PROGRESS:
            self._rejoin_needed = True
            return False
        if code:
            raise for_code(code)(f"SyncGroup of group {self.group_id!r}")
        self.state = MemberState.STABLE
        self._prepared = False
        self._timer.reset_session(self._loop.time())
        self._start_heartbeats()
        log.info("group %s: joined generation %d as %s (%s, leader %s)", self.group_id,
                 self.generation, self.member_id, self.protocol_name,
                 "self" if self.leader_id == self.member_id else self.leader_id)
        await self._protocol.on_join_complete(self.generation, self.member_id,
                                              self.protocol_name or "", response.assignment)
        return not self._rejoin_needed

    # ------------------------------------------------------------------ heartbeats

    def _start_heartbeats(self) -> None:
        if self._heartbeat_task is None or self._heartbeat_task.done():
            self._heartbeat_task = self._loop.create_task(self._heartbeat_loop(),
                                                          name="kafka-sdk-heartbeat")
        self._heartbeat_wake.set()

    async def _heartbeat_loop(self) -> None:
        timer = self._timer
        while not self._closed:
            self._heartbeat_wake.clear()
            now = self._loop.time()
            if self.state is not MemberState.STABLE:
                await self._heartbeat_wake.wait()
                continue
            if timer.poll_expired(now):
                await self._on_poll_timeout()
                continue
            if timer.session_expired(now):
                log.warning("group %s: no heartbeat answered for session.timeout.ms (%d ms); "
                            "looking for the coordinator again", self.group_id,
                            self._session_timeout_ms)
                self._client.forget_coordinator(self.group_id)
                timer.reset_session(now)
            if timer.should_heartbeat(now):
                await self._heartbeat_once()
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._heartbeat_wake.wait(), timer.time_to_next_event(now))

    async def _heartbeat_once(self) -> None:
        timer = self._timer
        generation = self.generation
        timer.sent_heartbeat(self._loop.time())
        try:
            response = await self._client.send(
                HeartbeatRequest(group_id=self.group_id, generation_id=generation,
                                 member_id=self.member_id,
                                 group_instance_id=self.group_instance_id),
                self._coordinator, timeout_s=self._request_timeout_s)
        except KafkaError as exc:
            log.info("group %s: heartbeat failed: %s", self.group_id, exc)
            if isinstance(exc, KafkaConnectionError):
                self._client.forget_coordinator(self.group_id)
            timer.failed_heartbeat(self._loop.time())
            return
        code = response.error_code
        if generation != self.generation or self.state is not MemberState.STABLE:
            timer.received_heartbeat(self._loop.time())
            return  # the answer is about a generation we already left
        if code == 0:
            timer.received_heartbeat(self._loop.time())
        elif code == _REBALANCE_IN_PROGRESS:
            timer.received_heartbeat(self._loop.time())
            self.request_rejoin("the group is rebalancing")
        elif code in (_UNKNOWN_MEMBER, _ILLEGAL_GENERATION):
            timer.received_heartbeat(self._loop.time())
            log.warning("group %s: membership lost (%s)", self.group_id, for_code(code).name)
            self._reset_generation(forget_member_id=code == _UNKNOWN_MEMBER)
            self.request_rejoin("membership lost")
        elif code == _FENCED_INSTANCE_ID:
            self._fatal = FencedInstanceIdError(
                f"another member uses group.instance.id {self.group_instance_id!r}")
            self._reset_generation(forget_member_id=True)
            self._changed.set()
        elif code in _COORDINATOR_MOVED:
            self._client.forget_coordinator(self.group_id)
            timer.failed_heartbeat(self._loop.time())
        else:
            log.warning("group %s: heartbeat error %s", self.group_id, for_code(code).name)
            timer.failed_heartbeat(self._loop.time())

    async def _on_poll_timeout(self) -> None:
        log.warning(
            "group %s: the application did not poll for max.poll.interval.ms (%d ms), so this "
            "member leaves the group and its partitions go to others. Processing the records "
            "of one poll takes too long: increase max_poll_interval_ms or lower "
            "max_poll_records.", self.group_id, self._rebalance_timeout_ms)
        await self.leave_group("consumer poll timeout has expired")
        self._reset_generation(forget_member_id=not self.is_static)
        self.request_rejoin("poll timeout expired")

    # ------------------------------------------------------------------ leaving

    async def leave_group(self, reason: str = "the consumer is closing") -> None:
        """Leave now (dynamic members only), so the group rebalances at once."""
        if self.is_static or not self.member_id or self.generation < 0:
            return
        def build(version: int) -> LeaveGroupRequest:
            if version >= _LEAVE_GROUP_BATCH_VERSION:  # v3+: a list of members, no member_id
                return LeaveGroupRequest(group_id=self.group_id, members=[
                    LeaveGroupRequest.MemberIdentity(member_id=self.member_id, reason=reason)])
            return LeaveGroupRequest(group_id=self.group_id, member_id=self.member_id)

        try:
            response = await self._client.call(build, self._coordinator, max_attempts=2,
                                               timeout_s=self._request_timeout_s)
            if response.error_code:
                log.info("group %s: LeaveGroup answered %s", self.group_id,
                         for_code(response.error_code).name)
        except KafkaError as exc:
            log.info("group %s: LeaveGroup failed: %s", self.group_id, exc)
        self.state = MemberState.UNJOINED

    async def close(self, *, leave: bool = True) -> None:
        if self._closed:
            return
        try:
            if leave:
                await self.leave_group()
        finally:
            # Also when leaving was cut short (the consumer's close timeout, a coordinator
            # that never answers): the heartbeat and join tasks must not outlive the close.
            self._closed = True
            for task in (self._join_task, self._heartbeat_task):
                if task is not None and not task.done():
                    task.cancel()
                    with contextlib.suppress(BaseException):
                        await task
            self._heartbeat_wake.set()


def _is_recoverable(exc: KafkaError) -> bool:
    """Join errors worth another attempt (after a backoff): lost or slow brokers and moving
    coordinators; not authorization, protocol or configuration errors."""
    return (
        exc.retriable
        or isinstance(exc, KafkaTimeoutError | NoBrokersAvailableError)
        or getattr(exc, "errno", None) in _COORDINATOR_MOVED
    )
