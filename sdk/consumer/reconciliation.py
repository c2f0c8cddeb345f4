"""The KIP-848 consumer protocol on the client: reconciling the broker's assignment.

:class:`ConsumerProtocolCoordinator` replaces the classic :class:`ConsumerCoordinator`'s
join/sync protocol with :class:`~sdk.consumer.consumer_member.ConsumerGroupMember`'s
heartbeats and keeps the rest (commits, listener calls, the face's view). When a heartbeat
brings a new assignment (topic ids and partitions), reconciliation runs, in this order:

1. the partitions no longer assigned are revoked: with auto-commit their consumed offsets
   are committed (the member still owns them at its current epoch), then
   ``on_partitions_revoked`` runs (committing there works too), then they are dropped;
2. the new partitions are taken (positions from the committed offsets, as always) and
   ``on_partitions_assigned`` runs with them;
3. the next heartbeat, sent at once, reports what the member owns, which tells the broker
   the revoked partitions are free for their new owners.

Partitions never stop being consumed for a rebalance: only the revoked ones do.
Commits carry the member epoch as the generation (Kafka's rule for these groups); a commit
refused with STALE_MEMBER_EPOCH waits for the next heartbeat and is sent again with the
epoch it brought, for the partitions the member still owns.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING

from sdk.consumer.assignors import RebalanceProtocol
from sdk.consumer.consumer_member import ConsumerGroupMember, Subscription
from sdk.consumer.coordinator import ConsumerCoordinator, _names
from sdk.consumer.errors import CommitFailedError
from sdk.consumer.fetcher import Fetcher
from sdk.consumer.subscription import SubscriptionMode, SubscriptionState
from sdk.errors import KafkaError
from sdk.net import NetClient
from sdk.types import OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
    from sdk.consumer.config import ConsumerConfig

log = logging.getLogger(__name__)

_STALE_MEMBER_EPOCH = 113


class ConsumerProtocolCoordinator(ConsumerCoordinator):
    """A member of a ``group.protocol=consumer`` group; see the module docstring."""

    def __init__(self, group_client: NetClient, client: NetClient,
                 subscriptions: SubscriptionState, fetcher: Fetcher,
                 config: ConsumerConfig) -> None:
        super().__init__(group_client, client, subscriptions, fetcher, config)
        assert config.group_id is not None
        # Revoked partitions are given up one by one, never all at once.
        self.rebalance_protocol = RebalanceProtocol.COOPERATIVE
        self.membership = ConsumerGroupMember(  # type: ignore[assignment]
            group_client, self,
            group_id=config.group_id,
            group_instance_id=config.group_instance_id,
            rack_id=config.client_rack or None,
            server_assignor=config.group_remote_assignor,
            max_poll_interval_ms=config.max_poll_interval_ms,
            retry_backoff_ms=config.retry_backoff_ms,
            retry_backoff_max_ms=config.retry_backoff_max_ms,
            request_timeout_ms=config.request_timeout_ms,
        )
        self._ids: dict[uuid.UUID, str] = {}  # topic id -> name, of what we were assigned

    @property
    def member(self) -> ConsumerGroupMember:
        return self.membership  # type: ignore[return-value]

    # ============================================================ ConsumerProtocol

    def subscription(self) -> Subscription:
        if self._subs.mode is SubscriptionMode.PATTERN:
            pattern = self._subs._pattern  # sent as the broker-side (RE2/J) regex
            return Subscription(regex=pattern.pattern if pattern is not None else ".*")
        return Subscription(topics=tuple(sorted(self._subs.subscription)))

    def owned_topic_ids(self) -> dict[uuid.UUID, list[int]]:
        by_name = {name: tid for tid, name in self._ids.items()}
        owned: dict[uuid.UUID, list[int]] = {}
        for tp in self._subs.assigned_partitions():
            tid = by_name.get(tp.topic) or self._topic_id(tp.topic)
            if tid is not None:
                owned.setdefault(tid, []).append(tp.partition)
        return owned

    def _topic_id(self, name: str) -> uuid.UUID | None:
        info = self._client.metadata.topic(name)
        return info.topic_id if info is not None else None

    async def reconcile(self, target: dict[uuid.UUID, list[int]]) -> bool:
        names = await self._resolve(set(target))
        if names is None:
            return False
        assigned = {TopicPartition(names[tid], p) for tid, ps in target.items() for p in ps}
        owned = self._subs.assigned_partitions()
        revoked, added = owned - assigned, assigned - owned
        changed = bool(revoked or added or not self._joined)
        if changed:  # a reconciliation is this protocol's rebalance (metrics and hooks)
            self._observer.rebalance_started(owned)
        self._client.add_topics({tp.topic for tp in assigned})
        if revoked:
            await self._hand_over_open_commits(revoked)
            if self._config.enable_auto_commit:
                consumed = self.consumed_offsets()
                await self._commit_quietly(
                    {tp: consumed[tp] for tp in revoked if tp in consumed},
                    "of revoked partitions")
            await self._invoke("on_partitions_revoked", revoked)
            self._drop(revoked)
        self._subs.add_assigned(added)
        self._joined = True
        if added or not owned:
            await self._invoke("on_partitions_assigned", added)
        log.info("group %s: epoch %d: %d partitions (revoked %s; added %s)", self.group_id,
                 self.member.generation, len(assigned), _names(revoked) or "none",
                 _names(added) or "none")
        if changed:
            self._observer.rebalanced(self._subs.assigned_partitions())
        self._next_auto_commit = self._loop.time() + self._auto_commit_s
        self._fetcher.wake()
        return True

    async def _resolve(self, ids: set[uuid.UUID]) -> dict[uuid.UUID, str] | None:
        """Topic names of assigned topic ids, from metadata (refreshed when one is new)."""
        for attempt in range(2):
            known = {info.topic_id: name for name, info in self._client.metadata.topics.items()
                     if info.topic_id is not None}
            self._ids.update((tid, known[tid]) for tid in ids if tid in known)
            if ids <= set(self._ids):
                return {tid: self._ids[tid] for tid in ids}
            if attempt == 0:
                try:
                    # A topic id we cannot name: a regex match or a topic created later.
                    self._client.metadata_all_topics = True
                    await self._client.refresh_metadata()
                except KafkaError as exc:
                    log.info("group %s: metadata refresh failed: %s", self.group_id, exc)
        log.info("group %s: assigned topic ids not in metadata yet: %s", self.group_id,
                 sorted(str(t) for t in ids - set(self._ids)))
        return None

    async def on_lost(self) -> None:
        lost = self._subs.assigned_partitions()
        if lost:
            log.warning("group %s: partitions lost: %s", self.group_id, _names(lost))
            await self._invoke("on_partitions_lost", lost)
            self._drop(lost)

    # ============================================================ the face's hooks

    def consumes_while_rebalancing(self) -> bool:
        return self.member.joined

    def on_metadata(self) -> None:
        """The broker watches partition counts and topics itself under this protocol."""

    def _can_commit(self) -> bool:
        return not self._subs.uses_group or self.member.joined

    def _may_wait_for_rebalance(self, exc: CommitFailedError) -> bool:
        # A stale epoch: the commit is sent again after the next heartbeat, with its epoch,
        # for what the member still owns (the base class's commit loop).
        if getattr(exc.__cause__, "errno", None) != _STALE_MEMBER_EPOCH:
            return False
        self.member.expect_heartbeat()
        return True

    async def leave(self, assigned: set[TopicPartition],
                    offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        m = self.member
        if self._config.enable_auto_commit and offsets and m.joined:
            await self._commit_quietly(offsets, "on unsubscribe")
        if assigned and m.joined:
            await self._invoke("on_partitions_revoked", assigned)
        await m.leave_group("the consumer unsubscribed")
        self._drop(self._subs.assigned_partitions())
