"""Membership of a KIP-848 consumer group: the ConsumerGroupHeartbeat loop.

Under ``group.protocol=consumer`` there is no JoinGroup/SyncGroup: the member sends
ConsumerGroupHeartbeat (its subscription, the partitions it owns, its member epoch) and the
broker answers with its member epoch and, when it changed, the partitions it should own
(topic ids). The broker assigns (``group.remote.assignor``), the member only reconciles:
revoke what it no longer has, take what it was given, and acknowledge by heartbeating the
partitions it owns now. :class:`ConsumerGroupMember` runs that loop; the reconciliation
itself (listener, commits, the subscription state) is the protocol's
(:mod:`sdk.consumer.reconciliation`).

Epochs: 0 joins, the broker's epoch afterwards, -1 leaves (-2 for a static member, which
keeps its place and partitions for a restart within the session timeout).
FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID mean the partitions are someone else's now: they
are lost (``on_partitions_lost``) and the member joins again with epoch 0, keeping its id.

The object offers what the consumer face uses of classic membership (``generation`` is the
member epoch, which is also what OffsetCommit carries for these groups).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import enum
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from sdk.errors import KafkaConnectionError, KafkaError, UnsupportedVersionError, for_code
from sdk.net import Coordinator, NetClient
from sdk.net.retry import Backoff
from sdk.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)

log = logging.getLogger(__name__)

LEAVE_EPOCH = -1
LEAVE_STATIC_EPOCH = -2
_COORDINATOR_MOVED = frozenset({14, 15, 16})
_UNKNOWN_MEMBER = 25
_FENCED_MEMBER_EPOCH = 110
# Errors no retry mends: the application must hear them (raised from poll).
_FATAL = frozenset({
    23,   # INCONSISTENT_GROUP_PROTOCOL: a classic group of another protocol type
    30,   # GROUP_AUTHORIZATION_FAILED
    35,   # UNSUPPORTED_VERSION
    42,   # INVALID_REQUEST
    69,   # GROUP_ID_NOT_FOUND
    81,   # GROUP_MAX_SIZE_REACHED
    82,   # FENCED_INSTANCE_ID
    111,  # UNRELEASED_INSTANCE_ID
    112,  # UNSUPPORTED_ASSIGNOR
})
_REGEX_VERSION = 1  # SubscribedTopicRegex (and client-generated member ids, KIP-1082)
_REQUEST_MARGIN_S = 5.0


def new_member_id() -> str:
    """A random member id as Java writes a Uuid (22 URL-safe base64 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class MemberState(enum.Enum):
    UNJOINED = "unjoined"   # not a member (new, left, or fenced and not yet rejoined)
    JOINING = "joining"     # epoch 0 sent, no epoch yet
    RECONCILING = "reconciling"  # a member with an assignment not yet taken
    STABLE = "stable"


@dataclass(frozen=True)
class Subscription:
    """What the member subscribes to: topic names, or one broker-side (RE2/J) regex."""

    topics: tuple[str, ...] = ()
    regex: str | None = None


class ConsumerProtocol(Protocol):
    """What the heartbeat loop needs from the reconciliation on top."""

    def subscription(self) -> Subscription: ...

    def owned_topic_ids(self) -> dict[uuid.UUID, list[int]]:
        """The partitions this member owns now, by topic id (what heartbeats report)."""
        ...

    async def reconcile(self, target: dict[uuid.UUID, list[int]]) -> bool:
        """Move to ``target``; False when it cannot yet (unknown topic ids: asked again)."""
        ...

    async def on_lost(self) -> None:
        """The member was fenced or expired: its partitions are lost."""
        ...


class ConsumerGroupMember:
    """One member of a consumer-protocol group; see the module docstring."""

    def __init__(
        self,
        client: NetClient,
        protocol: ConsumerProtocol,
        *,
        group_id: str,
        group_instance_id: str | None,
        rack_id: str | None,
        server_assignor: str | None,
        max_poll_interval_ms: int,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
        request_timeout_ms: int,
    ) -> None:
        self._client = client
        self._protocol = protocol
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self.member_id = new_member_id()
        self.generation = -1  # the member epoch; -1 while not a member
        self.leader_id: str | None = None  # no leader in this protocol
        self.protocol_name = server_assignor
        self.state = MemberState.UNJOINED
        self._rack_id = rack_id
        self._server_assignor = server_assignor
        self._rebalance_timeout_ms = max_poll_interval_ms
        self._poll_interval_s = max_poll_interval_ms / 1000
        self._request_timeout_s = request_timeout_ms / 1000
        self._loop = asyncio.get_running_loop()
        self._last_poll = self._loop.time()
        self._interval_s = 1.0  # the broker's heartbeat interval (from every answer)
        self._backoff = Backoff(retry_backoff_ms, retry_backoff_max_ms)
        self._coordinator = Coordinator(group_id)
        self._target: dict[uuid.UUID, list[int]] | None = None  # not reconciled yet
        self._applied: dict[uuid.UUID, list[int]] | None = None  # the last one reconciled
        self._wanted = False  # the member should be in the group (subscribed, polling)
        self._changed = asyncio.Event()
        self._wake = asyncio.Event()
        self._settled = asyncio.Event()  # stable (or failed): ensure_active_group waits on it
        self._task: asyncio.Task[None] | None = None
        self._reconcile_task: asyncio.Task[None] | None = None
        self._fatal: KafkaError | None = None
        self._closed = False
        self._closing = False  # leaving for good: polls no longer rejoin
        self._sent_regex = self._sent_names = False  # what the last heartbeat subscribed by
        self._fresh_epoch_wanted = False
        self.on_heartbeat: Callable[[], Awaitable[None] | None] | None = None

    # ------------------------------------------------------------------ the face's view

    @property
    def rejoin_needed(self) -> bool:
        return self.state is not MemberState.STABLE

    @property
    def changed(self) -> asyncio.Event:
        return self._changed

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def joined(self) -> bool:
        return self.generation > 0

    def request_rejoin(self, reason: str) -> None:
        """The subscription changed: tell the broker at once (no rebalance barrier here)."""
        if self._closing:
            return
        log.info("group %s: heartbeat now (%s)", self.group_id, reason)
        self._wanted = True
        self._wake.set()

    def polled(self) -> None:
        self._last_poll = self._loop.time()
        if self._wanted is False and not self._closing:
            self._wanted = True
            self._wake.set()

    async def ensure_active_group(self, timeout_s: float) -> bool:
        """Start heartbeating if needed; wait up to ``timeout_s`` until the member holds its
        assignment. Fatal group errors are raised."""
        if self._fatal is not None:
            raise self._fatal
        if self._closing:
            return False
        if not self._wanted:
            log.debug("group %s: joining", self.group_id, stack_info=True)
        self._wanted = True
        if self._task is None or self._task.done():
            self._task = self._loop.create_task(self._run(), name="kafka-sdk-heartbeat-848")
            self._wake.set()
        if self._fresh_epoch_wanted:
            self._fresh_epoch_wanted = False
            await self.wait_for_heartbeat(timeout_s)
        if self.state is not MemberState.STABLE and timeout_s > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._settled.wait(), timeout_s)
        if self._fatal is not None:
            raise self._fatal
        if self.state is MemberState.STABLE:
            self._changed.clear()
        return self.state is MemberState.STABLE

    def expect_heartbeat(self) -> None:
        """The next ensure_active_group() waits for a heartbeat answer (a fresh epoch)."""
        self._fresh_epoch_wanted = True

    async def wait_for_heartbeat(self, timeout_s: float) -> None:
        """Until the next answered heartbeat (a commit refused with STALE_MEMBER_EPOCH
        retries with the epoch it brings)."""
        event = asyncio.Event()
        previous = self.on_heartbeat
        self.on_heartbeat = event.set
        self._wake.set()
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout_s)
        finally:
            self.on_heartbeat = previous

    # ------------------------------------------------------------------ the loop

    async def _run(self) -> None:
        failures = 0
        next_at = self._loop.time()
        while not self._closed and self._fatal is None:
            now = self._loop.time()
            if self._wanted and self.joined and now - self._last_poll > self._poll_interval_s:
                await self._poll_timeout()
                continue
            if not self._wanted:
                self._wake.clear()
                await self._wake.wait()
                next_at = self._loop.time()
                continue  # every wake-up looks at the state again (closed, left, ...)
            if now < next_at and not self._wake.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), next_at - now)
                continue
            self._wake.clear()
            try:
                await self._heartbeat()
                failures = 0
                next_at = self._loop.time() + self._interval_s
            except _Retry as retry:
                failures += 1
                next_at = self._loop.time() + (0 if retry.at_once else self._backoff.delay(failures))
            except KafkaError as exc:
                self._fatal = exc
                self._settled.set()
                self._changed.set()
                log.error("group %s: %s", self.group_id, exc)

    def _request(self) -> ConsumerGroupHeartbeatRequest:
        sub = self._protocol.subscription()
        # Joining (epoch 0) reports no partitions: Kafka refuses any (INVALID_REQUEST).
        owned = self._protocol.owned_topic_ids() if self.generation > 0 else {}
        return ConsumerGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=max(self.generation, 0),
            instance_id=self.group_instance_id,
            rack_id=self._rack_id,
            rebalance_timeout_ms=self._rebalance_timeout_ms,
            # Switching between names and a regex clears the other ("" is no regex).
            subscribed_topic_names=(list(sub.topics) if sub.regex is None
                                    else [] if self._sent_names else None),
            subscribed_topic_regex=(sub.regex if sub.regex is not None
                                    else "" if self._sent_regex else None),
            server_assignor=self._server_assignor,
            topic_partitions=[
                ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=t, partitions=sorted(p))
                for t, p in owned.items()
            ],
        )

    async def _heartbeat(self) -> None:
        request = self._request()
        self._sent_regex = bool(request.subscribed_topic_regex)
        self._sent_names = bool(request.subscribed_topic_names)
        if request.subscribed_topic_regex is not None:
            self._require_regex_version()
        if self.generation <= 0:
            self.state = MemberState.JOINING
        sent_epoch = request.member_epoch
        try:
            response: ConsumerGroupHeartbeatResponse = await self._client.send(
                request, self._coordinator,
                timeout_s=self._request_timeout_s + _REQUEST_MARGIN_S)
        except UnsupportedVersionError as exc:
            raise UnsupportedVersionError(
                f"group {self.group_id!r}: the broker does not support the consumer group "
                "protocol (KIP-848: ConsumerGroupHeartbeat, Apache Kafka 4.0+); set "
                f"group.protocol=classic ({exc})") from exc
        except KafkaError as exc:
            if isinstance(exc, KafkaConnectionError) or not exc.retriable:
                self._client.forget_coordinator(self.group_id)
            if not (exc.retriable or isinstance(exc, KafkaConnectionError)):
                raise
            log.info("group %s: heartbeat failed: %s", self.group_id, exc)
            raise _Retry() from exc
        code = response.error_code
        if code in _COORDINATOR_MOVED:
            self._client.forget_coordinator(self.group_id)
            raise _Retry()
        if code in (_FENCED_MEMBER_EPOCH, _UNKNOWN_MEMBER):
            log.warning("group %s: member %s %s at epoch %d; its partitions are lost, joining "
                        "again", self.group_id, self.member_id, for_code(code).name, sent_epoch)
            await self._lose()
            raise _Retry(at_once=True)
        if code in _FATAL:
            raise for_code(code)(
                f"ConsumerGroupHeartbeat of group {self.group_id!r}: "
                f"{response.error_message or for_code(code).name}")
        if code:
            log.warning("group %s: heartbeat answered %s (%s)", self.group_id,
                        for_code(code).name, response.error_message)
            raise _Retry()
        if self.generation < 0 and sent_epoch != 0:  # left meanwhile: ignore
            return
        if response.member_id:
            self.member_id = response.member_id
        self.generation = response.member_epoch
        if response.heartbeat_interval_ms > 0:
            self._interval_s = response.heartbeat_interval_ms / 1000
        if response.assignment is not None:
            # Kafka repeats the assignment in answers to full requests: only a change counts.
            target = {tp.topic_id: sorted(tp.partitions)
                      for tp in response.assignment.topic_partitions if tp.partitions}
            if target != self._applied or self._target is not None:
                self._target = target
        if self.state is MemberState.JOINING:
            log.info("group %s: joined as %s at epoch %d", self.group_id, self.member_id,
                     self.generation)
            self.state = MemberState.RECONCILING if self._target is not None else MemberState.STABLE
            if self.state is MemberState.STABLE:
                self._settled.set()
        self._start_reconciling()
        hook = self.on_heartbeat
        if hook is not None:
            result = hook()
            if result is not None:
                await result

    def _require_regex_version(self) -> None:
        if ConsumerGroupHeartbeatRequest.MAX_STABLE_VERSION < _REGEX_VERSION:
            raise for_code(35)(
                "subscribe(pattern=...) with group.protocol=consumer needs "
                "ConsumerGroupHeartbeat v1 (SubscribedTopicRegex), which this build's "
                "protocol classes do not have as a stable version")

    def _start_reconciling(self) -> None:
        if self._target is None or (self._reconcile_task is not None
                                    and not self._reconcile_task.done()):
            return
        self.state = MemberState.RECONCILING
        self._settled.clear()
        self._changed.set()
        self._reconcile_task = self._loop.create_task(self._reconcile(),
                                                      name="kafka-sdk-reconcile")

    async def _reconcile(self) -> None:
        while self._target is not None and not self._closed and self.joined:
            target = self._target
            try:
                done = await self._protocol.reconcile(target)
            except Exception:  # never leave the member half-reconciled without a word
                log.exception("group %s: reconciliation failed", self.group_id)
                done = False
            if not done:
                await asyncio.sleep(self._backoff.delay(1))
                continue
            self._applied = target
            if self._target is target:
                self._target = None
        if self.joined and self._target is None:
            self.state = MemberState.STABLE
            self._settled.set()
        self._wake.set()  # acknowledge what we own now with the next heartbeat, at once

    async def _lose(self) -> None:
        self._target = self._applied = None
        if self._reconcile_task is not None and not self._reconcile_task.done():
            self._reconcile_task.cancel()
            with contextlib.suppress(BaseException):
                await self._reconcile_task
        self.generation = -1
        self.state = MemberState.UNJOINED
        self._settled.clear()
        self._changed.set()
        await self._protocol.on_lost()

    async def _poll_timeout(self) -> None:
        log.warning(
            "group %s: the application did not poll for max.poll.interval.ms (%d ms), so this "
            "member leaves the group and its partitions go to others. Processing the records "
            "of one poll takes too long: increase max_poll_interval_ms or lower "
            "max_poll_records.", self.group_id, self._rebalance_timeout_ms)
        await self.leave_group("consumer poll timeout has expired")
        await self._protocol.on_lost()

    # ------------------------------------------------------------------ leaving

    async def leave_group(self, reason: str = "the consumer is closing") -> None:
        """Leave now: epoch -1 (a static member -2: it keeps its place for a restart)."""
        self._wanted = False
        if self._reconcile_task is not None and not self._reconcile_task.done():
            self._reconcile_task.cancel()
            with contextlib.suppress(BaseException):
                await self._reconcile_task
        self._target = self._applied = None
        if not self.joined:
            self.generation = -1
            self.state = MemberState.UNJOINED
            return
        epoch = LEAVE_STATIC_EPOCH if self.is_static else LEAVE_EPOCH
        self.generation = -1
        self.state = MemberState.UNJOINED
        self._settled.clear()
        request = ConsumerGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=epoch,
            instance_id=self.group_instance_id)
        try:
            response = await self._client.send(request, self._coordinator,
                                               timeout_s=self._request_timeout_s)
            if response.error_code:
                log.info("group %s: leaving answered %s", self.group_id,
                         for_code(response.error_code).name)
            else:
                log.info("group %s: %s left (%s)", self.group_id, self.member_id, reason)
        except KafkaError as exc:
            log.info("group %s: leaving failed: %s", self.group_id, exc)

    async def close(self, *, leave: bool = True) -> None:
        if self._closed:
            return
        self._closing = True
        try:
            if leave:
                await self.leave_group()
        finally:
            self._closed = True
            self._wake.set()
            self._settled.set()
            for task in (self._task, self._reconcile_task):
                if task is not None and not task.done():
                    task.cancel()
                    with contextlib.suppress(BaseException):
                        await task


class _Retry(Exception):
    """A heartbeat to send again: after the backoff, or at once (rejoining)."""

    def __init__(self, *, at_once: bool = False) -> None:
        super().__init__()
        self.at_once = at_once
