"""AsyncConsumer: the asyncio face of the consumer.

It composes the parts: a :class:`NetClient` for metadata, fetches and ListOffsets; a second
one for group traffic (its own connections, so heartbeats and a long-held JoinGroup never
queue behind a long-polling Fetch); :class:`SubscriptionState`; the :class:`Fetcher`; and,
with a ``group_id``, the :class:`ConsumerCoordinator`.

The poll path (:meth:`AsyncConsumer.getmany`, :meth:`getone`, ``async for``) drives
rebalances, auto-commits and position lookups (committed offsets, then
``auto_offset_reset``); fetching and heartbeats run in the background.

Iteration and the blocking face take records from the fetcher in bulk into
:class:`~sdk.consumer.pending.PendingRecords` and hand them out from there. Records not
handed out yet are not counted as consumed: commits carry the position of the first of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import timedelta
from typing import Any, Generic, overload

from sdk.consumer.coordinator import CommitCallback, ConsumerCoordinator, ConsumerRebalanceListener
from sdk.consumer.errors import NoOffsetForPartitionError
from sdk.consumer.face_helpers import (  # re-exported: sync.py and tests use them here
    _DONE,
    _adapt_listener,
    _all_topics_request,
    _as_offsets,
)
from sdk.consumer.face_helpers import (
    poll_timeout_s as poll_timeout_s,
)
from sdk.consumer.fetcher import Fetcher, ObservedConsumer
from sdk.consumer.group_metadata import ConsumerGroupMetadata
from sdk.consumer.offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    commit_offsets,
    fetch_committed,
    list_offsets,
)
from sdk.consumer.pending import PendingRecords
from sdk.consumer.subscription import (
    IsolationLevel,
    OffsetResetStrategy,
    SubscriptionMode,
    SubscriptionState,
)
from sdk.errors import (
    ConsumerClosedError,
    IllegalStateError,
    KafkaTimeoutError,
    WakeupError,
)
from sdk.net import ANY_NODE, NetClient
from sdk.net.describe import describe_client
from sdk.net.fork import watch
from sdk.types import (
    ConsumerRecord,
    K,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
    V,
)

log = logging.getLogger(__name__)

Records = dict[TopicPartition, list[ConsumerRecord[K, V]]]
"""What ``getmany``/``poll`` return: the records of each partition, in offset order."""


class AsyncConsumer(ObservedConsumer, Generic[K, V]):
    """Consume records from Kafka with asyncio.

    ``AsyncConsumer("orders", bootstrap_servers=..., group_id="billing")`` subscribes to the
    given topics; settings are keyword arguments or a ``config={"group.id": ...}`` mapping
    (see :class:`~sdk.consumer.config.ConsumerConfig`). Use as ``async with``, or call
    :meth:`start` and :meth:`close`.

    Type checkers see ``AsyncConsumer[K, V]``: ``K`` and ``V`` are what
    ``key_deserializer`` and ``value_deserializer`` return (a deserializer is called with
    the raw bytes, or None for a missing key or a tombstone), ``bytes`` without one. With a
    ``config`` mapping or a deserializer given by name the types are ``Any``.
    """

    @overload
    def __init__(self, *topics: str, config: None = None,
                 key_deserializer: Callable[[bytes | None], K | None] | None = None,
                 value_deserializer: Callable[[bytes | None], V | None] | None = None,
                 **settings: Any) -> None: ...

    @overload
    def __init__(self: AsyncConsumer[Any, Any], *topics: str | Mapping[str, Any],
                 config: Mapping[str, Any] | None = None,
                 key_deserializer: str | Callable[[bytes | None], Any] | None = None,
                 value_deserializer: str | Callable[[bytes | None], Any] | None = None,
                 **settings: Any) -> None: ...

    def __init__(self, *topics: str | Mapping[str, Any],
                 config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        # A mapping among the topics is settings (confluent-kafka's Consumer({...})).
        from sdk.consumer.config import ConsumerConfig  # pydantic: loaded on first use

        self.config, names = ConsumerConfig.from_arguments(
            topics, {**settings, "config": config}, topics=True)
        cfg = self.config
        self._subs = SubscriptionState(cfg.auto_offset_reset, cfg.isolation_level)
        self._client = NetClient(cfg, allow_auto_topic_creation=cfg.allow_auto_create_topics)
        self._group_client: NetClient | None = (
            NetClient(cfg, problems=self._client.problems) if cfg.group_id else None)
        self._fetcher = Fetcher(self._client, self._subs, cfg)
        self._coordinator: ConsumerCoordinator | None = None
        self._initial_topics = names
        self._initial_listener: ConsumerRebalanceListener | None = None
        self._pending = PendingRecords()  # fetched, not yet handed out
        # Whether what _pending holds was reported to the metrics and hooks when it was
        # fetched (iteration: per slice, not per record) or is reported as it is handed out.
        self._pending_counted = True
        self._fetcher.pending_first = self._pending.first_offsets  # lag metrics (sdk.metrics)
        self._background: set[asyncio.Task[Any]] = set()
        self._subscription_epoch = 0  # bumped by subscribe/assign/unsubscribe
        self._positions_lock: asyncio.Lock | None = None
        self._wakeup: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = False
        self._closing = False
        self._closed = False
        self._read_committed = cfg.isolation_level == IsolationLevel.READ_COMMITTED.value
        self._timeout_s = cfg.default_api_timeout_ms / 1000
        if names:
            self._subs.subscribe(names)
        watch(self)  # unusable in the child of a fork (sdk.net.fork)

    # ================================================================ lifecycle

    async def start(self) -> None:
        """Connect in the background and start fetching; safe to call twice."""
        if self._closed:
            raise ConsumerClosedError("the consumer is closed")
        if self._started:
            return
        self._started = True
        self._loop = asyncio.get_running_loop()
        self._positions_lock = asyncio.Lock()
        self._wakeup = asyncio.Event()
        await self._client.start()
        if self._group_client is not None:
            await self._group_client.start()
            kind = ConsumerCoordinator
            if self.config.group_protocol == "consumer":  # KIP-848: the broker assigns
                from sdk.consumer.reconciliation import ConsumerProtocolCoordinator as kind
            self._coordinator = kind(
                self._group_client, self._client, self._subs, self._fetcher, self.config)
            self._coordinator.listener = self._initial_listener
            self._coordinator.offsets_provider = self._commit_view
            self._coordinator.on_dropped = lambda gone: self._pending.drop(gone.__contains__)
        self._client.add_listener(self._on_metadata)
        self._sync_metadata_topics()
        self._fetcher.start()

    async def __aenter__(self) -> AsyncConsumer[K, V]:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self, timeout_ms: int | None = None) -> None:
        """Commit (with auto-commit), leave the group and close connections."""
        if self._closed or self._closing:
            return
        if not self._started:
            self._closed = True
            return
        self._closing = True  # a revoke listener may still commit while we close
        timeout_s = self._timeout_s if timeout_ms is None else timeout_ms / 1000
        try:
            if self._background:
                await asyncio.wait(self._background, timeout=timeout_s)
            if self._coordinator is not None:
                self._drop_pending_from_commit_view()
                await self._coordinator.close(timeout_s)
        finally:
            self._closed = True
            await self._fetcher.close()
            if self._group_client is not None:
                await self._group_client.close()
            await self._client.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ConsumerClosedError("the consumer is closed")
        if not self._started:
            raise IllegalStateError("start the consumer first (await start() or async with)")

    def _state(self) -> str:
        return ("closed" if self._closed else "closing" if self._closing
                else "started" if self._started else "new")

    def __repr__(self) -> str:
        return describe_client(type(self).__name__, self.config, self._state(),
                               group_id=self.config.group_id)

    # ================================================================ subscription

    def subscribe(self, topics: Iterable[str] = (), *, pattern: str | re.Pattern[str] | None = None,
                  listener: ConsumerRebalanceListener | None = None) -> None:
        """Subscribe to topics, or to every topic matching ``pattern``.

        With a group_id the group shares their partitions; without one this consumer reads
        every partition of them.
        """
        if isinstance(topics, str):
            topics = [topics]
        topics = list(topics)
        if pattern is not None and topics:
            raise ValueError("give topics or a pattern, not both")
        if pattern is None and not topics:
            raise ValueError("subscribe() needs topics or a pattern (unsubscribe() to stop)")
        if listener is not None and not isinstance(listener, ConsumerRebalanceListener):
            listener = _adapt_listener(listener)
        self._subscription_epoch += 1
        if pattern is not None:
            self._subs.subscribe_pattern(pattern)
            self._client.metadata_all_topics = True
            self._client.request_refresh()  # learn every topic now, to match the pattern
            self._subs.match_topics(self._client.metadata.topics, self._internal_topics())
            changed = True
        else:
            changed = self._subs.subscribe(topics)
        if self._coordinator is not None:
            self._coordinator.listener = listener
            if changed:
                self._coordinator.membership.request_rejoin("the subscription changed")
        else:
            self._initial_listener = listener
        self._sync_metadata_topics()

    def unsubscribe(self) -> Awaitable[None]:
        """Drop the subscription or manual assignment.

        A group member first calls its listener's ``on_partitions_revoked`` (committing
        there works) and then leaves the group, so the others take the partitions over at
        once. That happens in the background; await the returned future to wait for it.
        """
        self._subscription_epoch += 1
        if self._coordinator is not None and self._subs.uses_group and self._loop is not None:
            assigned = self._subs.assigned_partitions()
            self._subs.pause(assigned)  # nothing more is handed out from them
            task = self._loop.create_task(self._leave_group(assigned, self._subscription_epoch))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
            return task
        self._drop_subscription()
        return _DONE

    async def _leave_group(self, assigned: set[TopicPartition], epoch: int) -> None:
        assert self._coordinator is not None
        try:
            await self._coordinator.leave(assigned, self._commit_view())
        finally:
            if epoch == self._subscription_epoch:  # no new subscribe() meanwhile
                self._drop_subscription()

    def _drop_subscription(self) -> None:
        self._subs.unsubscribe()
        self._pending.clear()
        self._client.metadata_all_topics = False
        self._fetcher.discard(self._fetcher.known_partitions())

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly these partitions, without group membership."""
        partitions = list(partitions)
        self._subscription_epoch += 1
        self._subs.assign(partitions)
        self._pending.drop(lambda tp: not self._subs.is_assigned(tp))
        self._sync_metadata_topics()
        self._fetcher.wake()

    def assignment(self) -> set[TopicPartition]:
        """The partitions this consumer reads now (assigned by the group or by
        :meth:`assign`)."""
        return self._subs.assigned_partitions()

    def subscription(self) -> set[str]:
        """The subscribed topic names (those matching the pattern, with a pattern)."""
        return set(self._subs.subscription)

    def _sync_metadata_topics(self) -> None:
        self._client.add_topics(self._subs.metadata_topics)

    def _internal_topics(self) -> set[str]:
        if not self.config.exclude_internal_topics:
            return set()
        return {name for name, info in self._client.metadata.topics.items() if info.is_internal}

    def _on_metadata(self) -> None:
        if self._subs.mode is SubscriptionMode.PATTERN:
            if self._subs.match_topics(self._client.metadata.topics, self._internal_topics()):
                self._sync_metadata_topics()
                if self._coordinator is not None:
                    self._coordinator.membership.request_rejoin("pattern matches changed")
        if self._coordinator is not None:
            self._coordinator.on_metadata()

    # ================================================================ positions

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Consume ``partition`` from ``offset`` next."""
        self._subs.seek(partition, offset)
        self._pending.drop(partition.__eq__)
        self._fetcher.wake()

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Start from the earliest offset (of all assigned partitions if none given)."""
        self._request_reset(partitions, OffsetResetStrategy.EARLIEST)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Start after the last offset (of all assigned partitions if none given)."""
        self._request_reset(partitions, OffsetResetStrategy.LATEST)

    def _request_reset(self, partitions: tuple[TopicPartition, ...],
                       strategy: OffsetResetStrategy) -> None:
        targets = set(partitions) or self._subs.assigned_partitions()
        for tp in targets:
            self._subs.request_reset(tp, strategy)
        self._pending.drop(targets.__contains__)
        self._fetcher.wake()

    async def position(self, partition: TopicPartition, timeout_ms: int | None = None) -> int:
        """The offset of the next record to be handed out for ``partition``."""
        self._check_open()
        self._subs.state(partition)  # IllegalStateError if not assigned
        await self._ensure_positions(self._timeout(timeout_ms))
        first = self._pending.first_offsets().get(partition)
        if first is not None:
            return first.offset
        position = self._subs.position(partition)
        if position is None:
            raise KafkaTimeoutError(f"the position of {partition} is not known yet")
        return position

    async def _ensure_positions(self, timeout_s: float) -> None:
        """Give every assigned partition a position: committed offset, else the reset policy."""
        assert self._positions_lock is not None
        async with self._positions_lock:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout_s
            try:  # an answer dropped as stale is asked for again
                while (await self._lookup_positions(max(deadline - loop.time(), 0.001))
                       and loop.time() < deadline):
                    pass
            finally:
                self._fetcher.wake()  # whatever was found can be fetched now

    async def _lookup_positions(self, timeout_s: float) -> bool:
        """One round of lookups; whether an answer was dropped as stale."""
        stale = False
        missing = self._subs.missing_positions()
        if missing:
            # An answer applies only to the assignment it was asked for: a rebalance, seek
            # or reset meanwhile makes it stale (the next lookup asks again).
            tokens = {tp: self._subs.position_token(tp) for tp in missing}
            committed: Mapping[TopicPartition, OffsetAndMetadata | None] = {}
            if self._group_client is not None and self.config.group_id is not None:
                committed = await fetch_committed(
                    self._group_client, self.config.group_id, missing, timeout_s=timeout_s)
            for tp in missing:
                if not self._subs.still_current(tp, tokens[tp]):
                    stale = True
                    continue
                found = committed.get(tp)
                if found is not None:
                    self._subs.seek(tp, found.offset, found.leader_epoch)
                else:
                    self._subs.request_reset(tp)
        resets = self._subs.reset_pending()
        if not resets:
            return stale
        unresolved = [tp for tp, s in resets.items() if s is OffsetResetStrategy.NONE]
        if unresolved:
            raise NoOffsetForPartitionError(unresolved)
        timestamps = {
            tp: EARLIEST_TIMESTAMP if s is OffsetResetStrategy.EARLIEST else LATEST_TIMESTAMP
            for tp, s in resets.items()
        }
        tokens = {tp: self._subs.position_token(tp) for tp in resets}
        found_offsets = await list_offsets(self._client, timestamps,
                                           read_committed=self._read_committed,
                                           timeout_s=timeout_s)
        for tp, strategy in resets.items():
            result = found_offsets.get(tp)
            if not self._subs.still_current(tp, tokens[tp]):
                stale = True
            elif result is not None:
                self._subs.complete_reset(tp, result.offset, strategy, result.leader_epoch)
        return stale

    # ================================================================ offsets

    async def committed(self, partition: TopicPartition,
                        timeout_ms: int | None = None) -> OffsetAndMetadata | None:
        """The group's committed offset of ``partition`` (None if none)."""
        self._check_open()
        group_id = self._require_group("committed()")
        assert self._group_client is not None
        found = await fetch_committed(self._group_client, group_id, [partition],
                                      timeout_s=self._timeout(timeout_ms))
        return found.get(partition)

    async def beginning_offsets(self, partitions: Iterable[TopicPartition],
                                timeout_ms: int | None = None) -> dict[TopicPartition, int]:
        """The first offset still in the log, per partition."""
        return await self._offsets_at(partitions, EARLIEST_TIMESTAMP, timeout_ms)

    async def end_offsets(self, partitions: Iterable[TopicPartition],
                          timeout_ms: int | None = None) -> dict[TopicPartition, int]:
        """The offset after the last record (the last stable offset under read_committed)."""
        return await self._offsets_at(partitions, LATEST_TIMESTAMP, timeout_ms)

    async def _offsets_at(self, partitions: Iterable[TopicPartition], timestamp: int,
                          timeout_ms: int | None) -> dict[TopicPartition, int]:
        self._check_open()
        wanted = list(partitions)
        found = await list_offsets(self._client, dict.fromkeys(wanted, timestamp),
                                   read_committed=self._read_committed,
                                   timeout_s=self._timeout(timeout_ms))
        return {tp: (v.offset if v is not None else -1) for tp, v in found.items()}

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout_ms: int | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The earliest offset whose timestamp is >= the given one (ms), per partition."""
        self._check_open()
        for tp, ts in timestamps.items():
            if not isinstance(ts, int) or ts < 0:
                raise ValueError(f"timestamps must be ints >= 0 (ms); {tp}: {ts!r}")
        return await list_offsets(self._client, dict(timestamps),
                                  read_committed=self._read_committed,
                                  timeout_s=self._timeout(timeout_ms))

    def lag(self, partition: TopicPartition) -> int | None:
        """Records between the position and the end of ``partition`` as of the last fetch
        (None before the first fetch answered)."""
        lag = self._subs.lag(partition)
        if lag is None:
            return None
        return lag + self._pending.count(partition)

    def highwater(self, partition: TopicPartition) -> int | None:
        """The partition's high watermark as of the last fetch (None before one answered).
        No request is sent."""
        return self._subs.state(partition).high_watermark

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The group, generation and member id now, for a transactional producer's
        ``send_offsets_to_transaction`` (KIP-447). IllegalStateError without a group_id."""
        group_id = self._require_group("group_metadata()")
        m = self._coordinator.membership if self._coordinator is not None else None
        if m is None:
            return ConsumerGroupMetadata(group_id, group_instance_id=self.config.group_instance_id)
        return ConsumerGroupMetadata(group_id, m.generation, m.member_id, m.group_instance_id)

    # ================================================================ commits

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
                     timeout_ms: int | None = None) -> None:
        """Commit ``offsets`` (default: what has been handed to the application), waiting.

        Values may be OffsetAndMetadata (with metadata) or plain offsets: the offset of the
        next record to read, as in Kafka.
        """
        self._check_open()
        self._require_group("commit()")
        wanted = self._commit_view() if offsets is None else _as_offsets(offsets)
        if self._coordinator is not None:
            await self._coordinator.commit(wanted, self._timeout(timeout_ms))
            return
        assert self._group_client is not None and self.config.group_id is not None
        await commit_offsets(self._group_client, self.config.group_id, wanted,
                             timeout_s=self._timeout(timeout_ms))

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
                     callback: CommitCallback | None = None) -> asyncio.Future[None]:
        """Commit without waiting; ``callback(offsets, error_or_None)`` runs when done (plain
        or async). Returns a future that completes with the commit."""
        self._check_open()
        self._require_group("commit_async()")
        wanted = self._commit_view() if offsets is None else _as_offsets(offsets)
        assert self._coordinator is not None
        return self._coordinator.commit_async(wanted, callback)

    def _commit_view(self) -> dict[TopicPartition, OffsetAndMetadata]:
        offsets = self._subs.consumed_offsets()
        for tp, rec in self._pending.first_offsets().items():
            current = offsets.get(tp)  # not handed out yet: commit up to the first of them
            if current is not None and rec.offset < current.offset:
                offsets[tp] = OffsetAndMetadata(rec.offset, "", rec.leader_epoch)
        return offsets

    def _drop_pending_from_commit_view(self) -> None:
        # Before a final commit: rewind positions to the first record never handed out.
        for tp, om in self._commit_view().items():
            if self._subs.is_assigned(tp) and self._subs.position(tp) != om.offset:
                self._subs.advance(tp, om.offset, om.leader_epoch)
        self._pending.clear()

    def _require_group(self, what: str) -> str:
        if self.config.group_id is None:
            raise IllegalStateError(f"{what} needs a group_id")
        return self.config.group_id

    # ================================================================ consuming

    async def getmany(self, timeout: timedelta | None = None, /, *,
                      timeout_ms: float | None = None,
                      max_records: int | None = None) -> Records[K, V]:
        """Records by partition: what is ready now, else what arrives within the timeout:
        ``timeout_ms=`` milliseconds, or a ``datetime.timedelta`` (default: none, do not
        wait). A bare number is refused (TypeError): seconds or milliseconds?"""
        timeout_s = poll_timeout_s("getmany", timeout, timeout_ms)
        self._check_open()
        limit = self._limit(max_records)
        if not self._pending:
            return await self._poll(timeout_s, limit)
        if self._rejoin_first():  # the rebalance drops what revoked partitions left here
            await self.fill_pending(timeout_s, limit, count_now=False)
        return self.take_pending_batch(limit)

    async def getone(self) -> ConsumerRecord[K, V]:
        """The next record (waits as long as it takes)."""
        self._check_open()
        while True:
            record = self.take_pending()
            if record is not None:
                return record
            await self.fill_pending(1.0)

    def take_pending(self) -> ConsumerRecord[K, V] | None:
        """The next record already fetched for iteration, or None (never waits). Safe from
        any thread: the blocking face calls it from the application thread."""
        if self._rejoin_first():
            return None
        record = self._pending.pop_one()
        if record is not None:
            if self._coordinator is not None:
                self._coordinator.membership.polled()
            if not self._pending_counted:  # fetched for poll(), handed out by iteration
                obs = self._fetcher._obs
                if obs is not None:
                    obs.consumed({None: [record]}, 1)
        return record

    def take_pending_batch(self, limit: int) -> Records[K, V]:
        """Up to ``limit`` already fetched records by partition (never waits; any thread)."""
        if self._rejoin_first():
            return {}
        batch = self._pending.pop_batch(limit)
        if batch and self._coordinator is not None:
            self._coordinator.membership.polled()
        if not self._pending_counted:  # counted as handed out (an empty poll too)
            obs = self._fetcher._obs
            if obs is not None:
                obs.consumed(batch, sum(map(len, batch.values())))
        return batch

    async def fill_pending(self, timeout_s: float, limit: int | None = None, *,
                           count_now: bool = True) -> None:
        """Poll up to ``limit`` records into the pending buffer, for iteration and the
        blocking face (which then hand them out without a trip through the event loop).
        ``count_now`` False: they reach the metrics and ``on_consume`` as
        :meth:`take_pending_batch` hands them out (a poll's records, not its slice)."""
        self._check_open()
        if not self._pending or self._rejoin_first():
            self._pending.extend(await self._poll(timeout_s, self._limit(limit), count_now))
            self._pending_counted = count_now

    def _rejoin_first(self) -> bool:
        """An eager member must rejoin before handing out more (even already fetched
        records): the group is waiting for it."""
        coordinator = self._coordinator
        return (coordinator is not None and self._subs.uses_group
                and coordinator.membership.rejoin_needed
                and not coordinator.consumes_while_rebalancing())

    def _limit(self, max_records: int | None) -> int:
        limit = self.config.max_poll_records if max_records is None else max_records
        if limit < 1:
            raise ValueError(f"max_records must be >= 1, not {limit}")
        return limit

    def __aiter__(self) -> AsyncConsumer[K, V]:
        return self

    async def __anext__(self) -> ConsumerRecord[K, V]:
        if self._closed:
            raise StopAsyncIteration
        return await self.getone()

    def wakeup(self) -> None:
        """Make the current (or next) getmany/getone raise WakeupError. Loop-thread only;
        the blocking Consumer calls it through its loop."""
        if self._wakeup is not None:
            self._wakeup.set()

    def _raise_if_woken(self) -> None:
        if self._wakeup is not None and self._wakeup.is_set():
            self._wakeup.clear()
            raise WakeupError("the consumer was woken up")

    async def _poll(self, timeout_s: float, limit: int, observe: bool = True) -> Records[K, V]:
        assert self._loop is not None and self._wakeup is not None
        if self._subs.mode is SubscriptionMode.NONE:  # would wait for ever (Java refuses too)
            raise IllegalStateError(
                "the consumer is not subscribed to any topics or assigned any partitions: "
                "call subscribe() or assign() before polling or iterating (or pass topics "
                "to the constructor)")
        loop = self._loop
        deadline = loop.time() + max(timeout_s, 0.0)
        coordinator = self._coordinator
        while True:
            self._raise_if_woken()
            if self._client.auth_error is not None:
                # A broker refused our credentials or certificate (also at a
                # re-authentication): tell the application, as Java's poll does.
                raise self._client.auth_error
            remaining = max(0.0, deadline - loop.time())
            if coordinator is None and self._subs.uses_group:
                await self._assign_without_group(remaining)
            if coordinator is not None and not self._subs.uses_group:
                coordinator.maybe_auto_commit()  # manual assignment with a group id
            if coordinator is not None and self._subs.uses_group:
                coordinator.membership.polled()
                # Cooperative members keep consuming what they own while the group
                # rebalances; eager ones own nothing until it settles.
                keep_consuming = coordinator.consumes_while_rebalancing()
                stable = await coordinator.membership.ensure_active_group(
                    0.0 if keep_consuming else remaining)
                error = coordinator.take_listener_error()
                if error is not None:
                    raise error
                if stable:
                    coordinator.maybe_auto_commit()
                elif not keep_consuming:
                    if loop.time() >= deadline:
                        return {}
                    continue
            if self._subs.missing_positions() or self._subs.reset_pending():
                try:
                    await self._ensure_positions(max(remaining, 1.0))
                except KafkaTimeoutError as exc:
                    log.info("looking up positions: %s", exc)
            records = self._fetcher.fetched_records(limit, observe)
            if records:
                return records
            remaining = deadline - loop.time()
            if remaining <= 0:
                return {}
            await self._wait_for_something(remaining)

    async def _assign_without_group(self, timeout_s: float) -> None:
        """Without a group_id, a topic subscription means every partition of those topics."""
        wanted: set[TopicPartition] = set()
        for topic in self._subs.subscription:
            ids = self._client.metadata.partitions_for(topic)
            if ids is None:
                try:
                    info = await self._client.wait_for_topic(topic, max(timeout_s, 0.001))
                except KafkaTimeoutError:
                    continue
                ids = info.partition_ids
            wanted.update(TopicPartition(topic, p) for p in ids)
        if wanted != self._subs.assigned_partitions():
            self._subs.assign_from_group(wanted)
            self._pending.drop(lambda tp: tp not in wanted)
            self._fetcher.wake()

    async def _wait_for_something(self, timeout_s: float) -> None:
        assert self._wakeup is not None
        waits = [self._fetcher.wait_for_data(timeout_s), self._wakeup.wait()]
        if self._coordinator is not None:
            waits.append(self._coordinator.membership.changed.wait())
        tasks = [asyncio.ensure_future(w) for w in waits]
        try:
            await asyncio.wait(tasks, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(BaseException):
                    await task

    def _timeout(self, timeout_ms: int | None) -> float:
        return self._timeout_s if timeout_ms is None else timeout_ms / 1000

    # ================================================================ pausing

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop fetching and handing out these partitions until resumed."""
        self._subs.pause(partitions)
        # Records of them already taken for iteration go back: rewind to the first one.
        for tp, first in self._pending.drop(set(partitions).__contains__).items():
            self._subs.seek(tp, first.offset, first.leader_epoch)

    def resume(self, *partitions: TopicPartition) -> None:
        """Fetch paused partitions again, from where they stopped."""
        self._subs.resume(partitions)
        self._fetcher.wake()

    def paused(self) -> set[TopicPartition]:
        """The partitions paused now."""
        return self._subs.paused()

    # ================================================================ metadata

    async def topics(self, timeout_ms: int | None = None) -> set[str]:
        """Every topic in the cluster.

        Asks with a Metadata request of its own: joining the client's metadata refresh
        could return the answer of a refresh already running for the tracked topics only.
        """
        self._check_open()
        response = await self._client.call(_all_topics_request, ANY_NODE,
                                           timeout_s=self._timeout(timeout_ms))
        return {t.name for t in response.topics if t.name is not None}

    async def partitions_for_topic(self, topic: str, timeout_ms: int | None = None) -> set[int]:
        """The partition ids of ``topic`` (waits for its metadata up to ``timeout_ms``)."""
        self._check_open()
        info = await self._client.wait_for_topic(topic, self._timeout(timeout_ms))
        return set(info.partition_ids)
