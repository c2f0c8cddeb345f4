"""A share consumer's group membership: ShareGroupHeartbeat (KIP-932).

The member id is made here (a random UUID, as Kafka 4.1+ wants from clients) and kept for
the member's life. Epoch 0 joins, -1 leaves. The broker assigns partitions (its "simple"
assignor may give one partition to several members: that is how a share group scales past
the partition count) and answers with the assignment whenever it changes, as topic ids;
this class turns them into names through the metadata and tells the consumer. Fencing
(UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH) rejoins at epoch 0 with the same id; a lost
coordinator is looked up again. Heartbeats use their own connections (a NetClient of
their own), so they never wait behind a long ShareFetch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable

from sdk.errors import (
    FencedMemberEpochError,
    KafkaConnectionError,
    KafkaError,
    UnknownMemberIdError,
    for_code,
    is_retriable,
)
from sdk.net import Coordinator, NetClient
from sdk.protocol.messages.share_group_heartbeat import (
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from sdk.types import TopicPartition

log = logging.getLogger(__name__)

__all__ = ["ShareMembership"]

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
_UNASSIGNED_BEAT_S = 0.25


class ShareMembership:
    def __init__(self, net: NetClient, data_net: NetClient, group_id: str, rack: str,
                 on_assignment: Callable[[set[TopicPartition]], None]) -> None:
        self.net = net  # heartbeats' own connections
        self.data_net = data_net  # the consumer's metadata: topic ids -> names
        self.group_id = group_id
        self.rack = rack or None
        self.member_id = str(uuid.uuid4()).replace("-", "")[:22]
        self.member_epoch = JOIN_EPOCH
        self.interval_s = 0.5  # until the broker says
        self.subscription: list[str] = []
        self._send_subscription = True
        self._on_assignment = on_assignment
        self._pending_ids: dict[uuid.UUID, list[int]] | None = None  # names unknown yet
        self.assignment: set[TopicPartition] = set()
        self.joined = asyncio.Event()
        self.error: KafkaError | None = None  # a fatal one, raised by poll
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    def subscribe(self, topics: list[str]) -> None:
        self.subscription = sorted(set(topics))
        self._send_subscription = True
        self._wake.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"kafka-sdk-share-heartbeat-{self.group_id}")

    async def _run(self) -> None:
        while True:
            try:
                await self._beat()
            except asyncio.CancelledError:
                raise
            except KafkaError as exc:
                if not is_retriable(exc) and not isinstance(exc, KafkaConnectionError):
                    self.error = exc
                    log.warning("share group %s: heartbeat failed: %s", self.group_id, exc)
                self.net.forget_coordinator(self.group_id)
                await asyncio.sleep(min(self.interval_s, 0.5))
                continue
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval_s)

    async def _beat(self) -> None:
        if not self.subscription:  # unsubscribed: not a member until subscribe() again
            self._set_assignment(set())
            return
        send_topics = self._send_subscription or self.member_epoch == JOIN_EPOCH
        request = ShareGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=self.member_epoch,
            rack_id=self.rack if self.member_epoch == JOIN_EPOCH else None,
            subscribed_topic_names=list(self.subscription) if send_topics else None)
        response: ShareGroupHeartbeatResponse = await self.net.call(
            request, Coordinator(self.group_id), check=_check_coordinator)
        if response.error_code:
            error = for_code(response.error_code)(response.error_message or "")
            if isinstance(error, UnknownMemberIdError | FencedMemberEpochError):
                log.info("share group %s: %s; rejoining", self.group_id, error)
                self.member_epoch = JOIN_EPOCH
                self._send_subscription = True
                self._set_assignment(set())
                self._wake.set()
                return
            raise error
        self._send_subscription = False
        if response.member_id:
            self.member_id = response.member_id
        self.member_epoch = response.member_epoch
        self.interval_s = max(0.05, response.heartbeat_interval_ms / 1000)
        if response.assignment is not None:
            self._pending_ids = {t.topic_id: list(t.partitions)
                                 for t in response.assignment.topic_partitions}
        if self._pending_ids is not None:
            self._resolve_names()
        if not self.assignment and self.subscription:
            # Kafka 4.3 computes a new member's assignment in the background
            # (group.share.assignment.interval.ms, 1 s) and answers the join with an empty
            # one: waiting a whole heartbeat interval (5 s) for it would idle the member.
            self.interval_s = min(self.interval_s, _UNASSIGNED_BEAT_S)
        self.joined.set()

    def _resolve_names(self) -> None:
        assert self._pending_ids is not None
        names: dict[uuid.UUID, str] = {}
        for name in list(self.data_net.metadata.topics):
            info = self.data_net.metadata.topic(name)
            if info is not None and info.topic_id is not None:
                names[info.topic_id] = name
        missing = [tid for tid in self._pending_ids if tid not in names]
        if missing:  # a topic created since the last metadata: ask, keep beating meanwhile
            self.data_net.request_refresh()
            self._wake.set()
            return
        self._set_assignment({TopicPartition(names[tid], p)
                              for tid, parts in self._pending_ids.items() for p in parts})
        self._pending_ids = None

    def _set_assignment(self, assignment: set[TopicPartition]) -> None:
        if assignment != self.assignment:
            self.assignment = assignment
            self._on_assignment(assignment)

    async def leave(self, timeout_s: float) -> None:
        """Stop heartbeating and leave the group (epoch -1), if we ever joined."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None
        await self._send_leave(timeout_s)

    async def unsubscribed(self, timeout_s: float) -> None:
        """After ``subscribe([])``: leave the group (epoch -1) as Java's share consumer
        does on unsubscribe, so the group no longer counts this member; the heartbeat loop
        idles until a new subscription joins again (epoch 0, the same member id). Nothing
        is sent if a new subscription came meanwhile."""
        if not self.subscription:
            await self._send_leave(timeout_s)
            if not self.subscription:
                self._set_assignment(set())

    async def _send_leave(self, timeout_s: float) -> None:
        if self.member_epoch <= JOIN_EPOCH:
            return
        request = ShareGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=LEAVE_EPOCH)
        try:
            await self.net.call(request, Coordinator(self.group_id), timeout_s=timeout_s,
                                check=_check_coordinator)
        except KafkaError as exc:  # the session timeout removes us anyway
            log.info("share group %s: leave failed: %s", self.group_id, exc)
        self.member_epoch = JOIN_EPOCH


def _check_coordinator(response: ShareGroupHeartbeatResponse) -> None:
    """Coordinator moves and loads are retried by ``call``; other errors are ours."""
    if response.error_code in (14, 15, 16):  # LOAD_IN_PROGRESS, NOT_AVAILABLE, NOT_COORDINATOR
        raise for_code(response.error_code)(response.error_message or "")
