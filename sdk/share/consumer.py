"""AsyncShareConsumer: a member of a share group (KIP-932, queues on Kafka).

Many members of one share group read the same partitions cooperatively: each ShareFetch
*acquires* records for this member for the group's acquisition lock duration, and the
member settles each record it was given (``acknowledge``: ACCEPT, RELEASE, REJECT).
Released records, and records whose lock timed out (the member died, or took too long),
are delivered again, to any member, with a higher ``delivery_count``; past the group's
delivery limit they are archived. Delivery is at least once, with no order per partition.

Acknowledgements ride on the next ShareFetch to the partition's leader, or go at once with
``commit_sync``/``commit_async`` (ShareAcknowledge). In implicit mode (the default) what a
poll handed out and the application did not settle is accepted by the next poll or commit;
in explicit mode every record must be acknowledged before the next poll.

One share session per broker (``sdk.share.session``) and one request at a time on it (the
epoch orders them). Membership runs in the background (``sdk.share.membership``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Generic

from sdk.errors import (
    ConsumerClosedError,
    IllegalStateError,
    KafkaError,
    RecordDeserializationError,
    WakeupError,
    for_code,
)
from sdk.net import NetClient
from sdk.net.describe import describe_client
from sdk.net.fork import watch
from sdk.protocol.messages.share_acknowledge import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
)
from sdk.protocol.messages.share_fetch import ShareFetchRequest, ShareFetchResponse
from sdk.records import iter_batches
from sdk.records.consumer_records import decode_consumer_records
from sdk.records.reader import RecordBatch
from sdk.share.acknowledgements import AckBatch, Acknowledgements, AcknowledgeType
from sdk.share.membership import ShareMembership
from sdk.share.session import CLOSE_EPOCH, ShareSession
from sdk.types import K, ShareConsumerRecord, TopicPartition, V

log = logging.getLogger(__name__)

__all__ = ["AcknowledgementCommitCallback", "AsyncShareConsumer"]

AcknowledgementCommitCallback = Callable[[dict[TopicPartition, set[int]], KafkaError | None],
                                         None]
"""Told, per partition, which offsets' acknowledgements the broker took or refused."""

_SESSION_ERRORS = (122, 123)  # SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH
_STALE_LEADER = (3, 6, 100)  # UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_ID
_RECORD_LIMIT_MODE = 1


class AsyncShareConsumer(Generic[K, V]):
    """A share-group member. ``AsyncShareConsumer("jobs", bootstrap_servers=...,
    group_id="workers")``; ``async with`` it, then ``await poll()`` and ``acknowledge``."""

    def __init__(self, *topics: str | Mapping[str, Any], config: Mapping[str, Any] | None = None,
                 acknowledgement_commit_callback: AcknowledgementCommitCallback | None = None,
                 **settings: Any) -> None:
        from sdk.share.config import ShareConsumerConfig  # pydantic: loaded on first use

        self.config, names = ShareConsumerConfig.from_arguments(
            topics, {**settings, "config": config}, topics=True)
        cfg = self.config
        self._client = NetClient(cfg)
        self._group_client = NetClient(cfg, problems=self._client.problems)
        self._acks = Acknowledgements()
        self._sessions: dict[int, ShareSession] = {}
        self._node_locks: dict[int, asyncio.Lock] = {}
        self._membership: ShareMembership | None = None
        self._initial_topics = names
        self._callback = acknowledgement_commit_callback
        self._completions: list[tuple[dict[TopicPartition, set[int]], KafkaError | None]] = []
        self._background: set[asyncio.Task[Any]] = set()
        self._assigned: asyncio.Event | None = None  # made on the loop, in start()
        self._wakeup: asyncio.Event | None = None
        self.acquisition_lock_timeout_ms: int | None = None  # as the broker last said
        self._iter_buffer: list[ShareConsumerRecord[K, V]] = []  # async iteration's rest
        self._explicit = cfg.share_acknowledgement_mode == "explicit"
        self._timeout_s = cfg.default_api_timeout_ms / 1000
        self._started = self._closed = False
        watch(self)

    # ================================================================ lifecycle

    async def start(self) -> None:
        if self._closed:
            raise ConsumerClosedError("the share consumer is closed")
        if self._started:
            return
        self._started = True
        self._assigned = asyncio.Event()
        self._wakeup = asyncio.Event()
        await self._client.start()
        await self._group_client.start()
        self._membership = ShareMembership(self._group_client, self._client,
                                           self.config.group_id, self.config.client_rack,
                                           self._on_assignment)
        if self._initial_topics:
            self.subscribe(self._initial_topics)

    async def __aenter__(self) -> AsyncShareConsumer[K, V]:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self, timeout_ms: int | None = None) -> None:
        """Send what is settled (implicit mode: accept what was handed out), close the share
        sessions (the brokers release what we still hold) and leave the group."""
        if self._closed:
            return
        timeout_s = self._timeout_s if timeout_ms is None else timeout_ms / 1000
        if not self._started:
            self._closed = True
            return
        try:
            if self._background:
                await asyncio.wait(self._background, timeout=timeout_s)
            if not self._explicit:
                self._acks.accept_all()
            await asyncio.wait_for(self._close_sessions(), timeout_s)
        except (TimeoutError, KafkaError) as exc:
            log.info("share consumer %s: closing sessions: %s", self.config.client_id, exc)
        finally:
            self._closed = True
            if self._membership is not None:
                await self._membership.leave(timeout_s)
            self._run_callbacks()
            await self._group_client.close()
            await self._client.close()

    def _check_open(self) -> ShareMembership:
        if self._closed:
            raise ConsumerClosedError("the share consumer is closed")
        if self._membership is None:
            raise IllegalStateError("start the share consumer first (await start() or async with)")
        if self._membership.error is not None:
            raise self._membership.error
        return self._membership

    def __repr__(self) -> str:
        state = "closed" if self._closed else "started" if self._started else "new"
        return describe_client(type(self).__name__, self.config, state,
                               group_id=self.config.group_id)

    # ================================================================ subscription

    def subscribe(self, topics: list[str] | tuple[str, ...] | str) -> None:
        """Join the share group for these topics (replacing the subscription)."""
        membership = self._check_open()
        names = [topics] if isinstance(topics, str) else list(topics)
        if not names or not all(isinstance(t, str) and t for t in names):
            raise ValueError(f"topics must be non-empty names, got {topics!r}")
        self._client.add_topics(names)
        membership.subscribe(names)

    def unsubscribe(self) -> asyncio.Task[None]:
        """Drop the subscription and leave the group, as Java's share consumer does: in
        implicit mode what was handed out is accepted, the acknowledgements go out as the
        share sessions close (the brokers release what this member still holds: in
        explicit mode, the records not acknowledged), then the leave. ``subscribe`` joins again. Runs in the background: await the returned task
        to wait for it (the blocking face waits)."""
        membership = self._check_open()
        membership.subscribe([])
        if not self._explicit:
            self._acks.accept_all()
        else:  # records left unsettled are released as the sessions close: not ours now
            for tp in list(self._acks.delivered):
                self._acks.forget_delivered(tp)
        task = asyncio.get_running_loop().create_task(self._leave_on_unsubscribe(membership))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _leave_on_unsubscribe(self, membership: ShareMembership) -> None:
        try:
            await asyncio.wait_for(self._close_sessions(), self._timeout_s)
        except (TimeoutError, KafkaError) as exc:  # the locks time out: redelivered
            log.info("share consumer %s: closing sessions: %s", self.config.client_id, exc)
        await membership.unsubscribed(self._timeout_s)

    def subscription(self) -> set[str]:
        return set(self._membership.subscription) if self._membership else set()

    def assignment(self) -> set[TopicPartition]:
        """The partitions the group gave this member (others may share them)."""
        return set(self._membership.assignment) if self._membership else set()

    def _on_assignment(self, assignment: set[TopicPartition]) -> None:
        assert self._assigned is not None
        if assignment:
            self._assigned.set()
        else:
            self._assigned.clear()

    # ================================================================ acknowledging

    def acknowledge(self, record: ShareConsumerRecord[K, V],
                    type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """Settle a record this consumer handed out (explicit mode)."""
        self._check_open()
        if not self._explicit:
            raise IllegalStateError(
                "acknowledge() needs share.acknowledgement.mode=explicit; in implicit mode "
                "the next poll or commit accepts every record handed out")
        kind = AcknowledgeType(type)
        try:
            self._acks.acknowledge(record.topic_partition, record.offset, kind)
        except ValueError as exc:
            raise IllegalStateError(str(exc)) from None

    async def commit_sync(self, timeout_ms: int | None = None
                          ) -> dict[TopicPartition, KafkaError | None]:
        """Send every settled acknowledgement now and wait for the brokers' answers."""
        self._check_open()
        if not self._explicit:
            self._acks.accept_all()
        timeout_s = self._timeout_s if timeout_ms is None else timeout_ms / 1000
        results = await asyncio.wait_for(self._send_acknowledgements(), timeout_s)
        self._run_callbacks()
        return results

    def commit_async(self) -> asyncio.Task[dict[TopicPartition, KafkaError | None]]:
        """Like :meth:`commit_sync` without waiting; the callback tells the outcome."""
        self._check_open()
        if not self._explicit:
            self._acks.accept_all()
        task = asyncio.get_running_loop().create_task(self._send_acknowledgements())
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    def set_acknowledgement_commit_callback(
            self, callback: AcknowledgementCommitCallback | None) -> None:
        self._callback = callback

    def _complete(self, tp: TopicPartition, batches: list[AckBatch],
                  error: KafkaError | None) -> None:
        offsets = {o for first, last, _ in batches for o in range(first, last + 1)}
        self._completions.append(({tp: offsets}, error))

    def _run_callbacks(self) -> None:
        done, self._completions = self._completions, []
        if self._callback is None:
            return
        for offsets, error in done:
            try:
                self._callback(offsets, error)
            except Exception:  # the application's bug must not break the consumer
                log.exception("acknowledgement commit callback failed")

    # ================================================================ polling

    async def poll(self, timeout_ms: int = 1000) -> list[ShareConsumerRecord[K, V]]:
        """Records acquired for this member (empty after ``timeout_ms`` without any)."""
        membership = self._check_open()
        if self._acks.unacknowledged():
            if self._explicit:
                raise IllegalStateError(
                    f"{self._acks.unacknowledged()} record(s) handed out by the last poll "
                    "are not acknowledged (share.acknowledgement.mode=explicit)")
            self._acks.accept_all()
        self._run_callbacks()
        assert self._assigned is not None and self._wakeup is not None
        if self._wakeup.is_set():
            self._wakeup.clear()
            raise WakeupError("share consumer woken up")
        inner = asyncio.ensure_future(self._poll(membership, timeout_ms))
        woken = asyncio.ensure_future(self._wakeup.wait())
        try:
            await asyncio.wait((inner, woken), return_when=asyncio.FIRST_COMPLETED)
        finally:
            woken.cancel()
            if not inner.done():  # woken (or cancelled): the fetch in flight is dropped
                inner.cancel()
                await asyncio.gather(inner, return_exceptions=True)
        if inner.cancelled():
            self._wakeup.clear()
            raise WakeupError("share consumer woken up")
        return inner.result()

    def wakeup(self) -> None:
        """Make the poll in progress (or the next one) raise WakeupError. Loop-thread only;
        the blocking ShareConsumer calls it through its loop."""
        if self._wakeup is not None:
            self._wakeup.set()

    async def _poll(self, membership: ShareMembership, timeout_ms: int
                    ) -> list[ShareConsumerRecord[K, V]]:
        assert self._assigned is not None
        deadline = time.monotonic() + max(0, timeout_ms) / 1000
        while True:
            remaining = deadline - time.monotonic()
            if not membership.assignment:
                await self._send_acknowledgements()  # settled records of lost partitions
                if remaining > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._assigned.wait(), remaining)
                    if membership.assignment:
                        continue
                self._check_open()
                return []
            records = await self._fetch_round(max(0.0, remaining))
            self._run_callbacks()
            if records or time.monotonic() >= deadline:
                return records
            self._check_open()

    def __aiter__(self) -> AsyncShareConsumer[K, V]:
        return self

    async def __anext__(self) -> ShareConsumerRecord[K, V]:
        while not self._closed:
            if not self._iter_buffer:
                self._iter_buffer = list(reversed(await self.poll(1000)))
                continue
            return self._iter_buffer.pop()
        raise StopAsyncIteration

    async def _fetch_round(self, wait_s: float) -> list[ShareConsumerRecord[K, V]]:
        membership = self._membership
        assert membership is not None
        by_node: dict[int, set[TopicPartition]] = {}
        for tp in membership.assignment:
            leader = self._client.metadata.leader_for(tp.topic, tp.partition)
            if leader is None:
                self._client.request_refresh()
                continue
            by_node.setdefault(leader, set()).add(tp)
        for node in list(self._sessions):  # sessions with nothing left: forget all
            by_node.setdefault(node, set())
        await self._send_acknowledgements(skip=set(by_node))
        wait_ms = int(min(wait_s * 1000, self.config.fetch_max_wait_ms))
        results = await asyncio.gather(
            *(self._fetch_from(node, wanted, wait_ms) for node, wanted in by_node.items()),
            return_exceptions=True)
        out: list[ShareConsumerRecord[K, V]] = []
        for result in results:
            if isinstance(result, BaseException):
                if not isinstance(result, KafkaError):
                    raise result
                log.info("share fetch failed: %s", result)
                self._client.request_refresh()
            else:
                out.extend(result)
        if not out and not by_node:
            await asyncio.sleep(min(wait_s, 0.1))
        return out

    def _lock(self, node: int) -> asyncio.Lock:
        lock = self._node_locks.get(node)
        if lock is None:
            lock = self._node_locks[node] = asyncio.Lock()
        return lock

    async def _fetch_from(self, node: int, wanted: set[TopicPartition], wait_ms: int
                          ) -> list[ShareConsumerRecord[K, V]]:
        async with self._lock(node):
            session = self._sessions.setdefault(node, ShareSession(node))
            acks = self._acks.take(self._led_by(node, None))
            other = {tp: b for tp, b in acks.items() if tp not in wanted}
            acks = {tp: b for tp, b in acks.items() if tp in wanted}
            if not wanted:  # nothing to fetch here any more: settle and close the session
                await self._close_session(node, session, other)
                return []
            if other:  # partitions we no longer fetch: their own ShareAcknowledge
                await self._send_acks(node, session, other, close=False)
            if not session.is_open:  # acknowledgements cannot open a session
                self._fail(acks, for_code(122)("the share session was lost"))
                acks = {}
            named, forgotten = session.plan(wanted)
            for tp in acks:  # partitions with acknowledgements are named again
                if tp not in named:
                    named.append(tp)
            cfg = self.config
            member_id = self._membership.member_id if self._membership else ""

            def build(version: int) -> ShareFetchRequest:
                topics: dict[Any, ShareFetchRequest.FetchTopic] = {}
                for tp in named:
                    tid = self._topic_id(tp.topic)
                    entry = topics.get(tid)
                    if entry is None:
                        entry = topics[tid] = ShareFetchRequest.FetchTopic(topic_id=tid)
                    part = ShareFetchRequest.FetchPartition(
                        partition_index=tp.partition,
                        acknowledgement_batches=[
                            ShareFetchRequest.AcknowledgementBatch(
                                first_offset=f, last_offset=last, acknowledge_types=t)
                            for f, last, t in acks.get(tp, [])])
                    if version == 0:
                        part.partition_max_bytes = cfg.max_partition_fetch_bytes
                    entry.partitions.append(part)
                gone: dict[Any, list[int]] = {}
                for tp in forgotten:
                    gone.setdefault(self._topic_id(tp.topic), []).append(tp.partition)
                req = ShareFetchRequest(
                    group_id=cfg.group_id, member_id=member_id,
                    share_session_epoch=session.epoch, max_wait_ms=wait_ms,
                    min_bytes=cfg.fetch_min_bytes, max_bytes=cfg.fetch_max_bytes,
                    topics=list(topics.values()),
                    forgotten_topics_data=[ShareFetchRequest.ForgottenTopic(
                        topic_id=tid, partitions=parts) for tid, parts in gone.items()])
                if version >= 1:
                    req.max_records = cfg.max_poll_records
                    req.batch_size = cfg.max_poll_records
                if version >= 2 and cfg.share_acquire_mode == "record_limit":
                    req.share_acquire_mode = _RECORD_LIMIT_MODE
                return req

            try:
                response: ShareFetchResponse = await self._client.call(
                    build, node, timeout_s=self.config.request_timeout_ms / 1000 + wait_ms / 1000,
                    max_attempts=1)
            except (KafkaError, asyncio.CancelledError) as exc:
                # The answer is lost: the broker moved the epoch on, or will; start over.
                session.reset()
                self._fail(acks, exc if isinstance(exc, KafkaError)
                           else KafkaError("the fetch carrying them was cancelled"))
                raise
            if response.error_code:
                error = for_code(response.error_code)(response.error_message or "")
                session.reset()
                self._fail(acks, error)
                if response.error_code in _SESSION_ERRORS:
                    return []
                raise error
            session.sent(named, forgotten)
            return self._take_response(response, acks)

    def _take_response(self, response: ShareFetchResponse,
                       acks: dict[TopicPartition, list[AckBatch]]
                       ) -> list[ShareConsumerRecord[K, V]]:
        lock_ms = getattr(response, "acquisition_lock_timeout_ms", 0)
        if lock_ms > 0:
            self.acquisition_lock_timeout_ms = lock_ms
        names = self._topic_names()
        out: list[ShareConsumerRecord[K, V]] = []
        for topic in response.responses:
            name = names.get(topic.topic_id)
            for p in topic.partitions:
                if name is None:
                    continue
                tp = TopicPartition(name, p.partition_index)
                if tp in acks:
                    error = for_code(p.acknowledge_error_code)(
                        p.acknowledge_error_message or "") if p.acknowledge_error_code else None
                    self._complete(tp, acks.pop(tp), error)
                if p.error_code:
                    if p.error_code in _STALE_LEADER:
                        self._client.request_refresh()
                    log.info("share fetch %s: %s", tp, for_code(p.error_code).__name__)
                    continue
                if p.acquired_records:
                    out.extend(self._records_of(tp, p.records, p.acquired_records))
        for tp, batches in acks.items():  # not in the answer: the broker has no word on them
            self._complete(tp, batches, None)
        return out

    def _records_of(self, tp: TopicPartition, data: bytes | None,
                    acquired: list[ShareFetchResponse.AcquiredRecords]
                    ) -> list[ShareConsumerRecord[K, V]]:
        ranges = sorted((a.first_offset, a.last_offset, a.delivery_count) for a in acquired)
        out: list[Any] = []
        seen: set[int] = set()
        rejected: list[int] = []
        kd, vd = self.config.key_deserializer, self.config.value_deserializer
        i = 0
        for batch in iter_batches(data or b""):
            if not isinstance(batch, RecordBatch) or batch.is_control:
                continue  # markers and legacy sets: their acquired offsets become gaps
            if batch.next_offset <= ranges[0][0] or batch.base_offset > ranges[-1][1]:
                continue
            if self.config.check_crcs:
                batch.validate_crc()
            for rec in decode_consumer_records(batch, tp.topic, tp.partition,
                                               ShareConsumerRecord):
                offset = rec.offset
                while i < len(ranges) and ranges[i][1] < offset:
                    i += 1
                if i == len(ranges):
                    break
                if offset < ranges[i][0] or offset in seen:
                    continue
                seen.add(offset)
                rec.delivery_count = ranges[i][2]  # type: ignore[attr-defined]
                try:
                    if kd is not None:
                        rec.key = kd(rec.key)
                    if vd is not None:
                        rec.value = vd(rec.value)
                except Exception as exc:  # a poison record: never hand it out again
                    log.warning("%s", RecordDeserializationError(
                        tp, offset, "key or value", exc))
                    rejected.append(offset)
                    continue
                out.append(rec)
        gaps = [o for first, last, _ in ranges for o in range(first, last + 1)
                if o not in seen]
        if gaps:
            self._acks.gap(tp, gaps)
        for offset in rejected:
            self._acks.pending.setdefault(tp, {})[offset] = AcknowledgeType.REJECT
        self._acks.hand_out(tp, (r.offset for r in out))
        return out

    # ================================================================ acknowledgements

    async def _send_acknowledgements(self, skip: set[int] | None = None
                                     ) -> dict[TopicPartition, KafkaError | None]:
        """ShareAcknowledge to every node with settled records (but those in ``skip``,
        whose next ShareFetch carries them)."""
        by_node: dict[int, list[TopicPartition]] = {}
        for tp in list(self._acks.pending):
            node = self._client.metadata.leader_for(tp.topic, tp.partition)
            if node is None or (skip is not None and node in skip):
                continue
            by_node.setdefault(node, []).append(tp)
        results: dict[TopicPartition, KafkaError | None] = {}
        outcomes = await asyncio.gather(*(self._acknowledge_at(node, tps)
                                          for node, tps in by_node.items()))
        for outcome in outcomes:
            results.update(outcome)
        return results

    async def _acknowledge_at(self, node: int, tps: list[TopicPartition], *,
                              close: bool = False) -> dict[TopicPartition, KafkaError | None]:
        async with self._lock(node):
            session = self._sessions.setdefault(node, ShareSession(node))
            acks = self._acks.take(tps)
            if not session.is_open:
                return self._fail(acks, for_code(122)("no share session with this broker"))
            return await self._send_acks(node, session, acks, close=close)

    async def _send_acks(self, node: int, session: ShareSession,
                         acks: dict[TopicPartition, list[AckBatch]], *, close: bool
                         ) -> dict[TopicPartition, KafkaError | None]:
        topics: dict[Any, ShareAcknowledgeRequest.AcknowledgeTopic] = {}
        for tp, batches in acks.items():
            tid = self._topic_id(tp.topic)
            entry = topics.get(tid)
            if entry is None:
                entry = topics[tid] = ShareAcknowledgeRequest.AcknowledgeTopic(topic_id=tid)
            entry.partitions.append(ShareAcknowledgeRequest.AcknowledgePartition(
                partition_index=tp.partition, acknowledgement_batches=[
                    ShareAcknowledgeRequest.AcknowledgementBatch(
                        first_offset=f, last_offset=last, acknowledge_types=t)
                    for f, last, t in batches]))
        member_id = self._membership.member_id if self._membership else ""
        request = ShareAcknowledgeRequest(
            group_id=self.config.group_id, member_id=member_id,
            share_session_epoch=CLOSE_EPOCH if close else session.epoch,
            topics=list(topics.values()))
        try:
            response: ShareAcknowledgeResponse = await self._client.call(
                request, node, max_attempts=1)
        except KafkaError as exc:
            session.reset()
            return self._fail(acks, exc)
        if response.error_code:
            session.reset()
            return self._fail(acks, for_code(response.error_code)(response.error_message or ""))
        if close:
            session.reset()
        else:
            session.sent([], [])
        lock_ms = getattr(response, "acquisition_lock_timeout_ms", 0)
        if lock_ms > 0:
            self.acquisition_lock_timeout_ms = lock_ms
        names = self._topic_names()
        results: dict[TopicPartition, KafkaError | None] = {}
        for topic in response.responses:
            name = names.get(topic.topic_id)
            for p in topic.partitions:
                tp = TopicPartition(name or "?", p.partition_index)
                if tp in acks:
                    error = for_code(p.error_code)(p.error_message or "") if p.error_code \
                        else None
                    self._complete(tp, acks.pop(tp), error)
                    results[tp] = error
        for tp, batches in acks.items():
            self._complete(tp, batches, None)
            results[tp] = None
        return results

    def _fail(self, acks: dict[TopicPartition, list[AckBatch]], error: KafkaError
              ) -> dict[TopicPartition, KafkaError | None]:
        for tp, batches in acks.items():
            self._complete(tp, batches, error)
        return dict.fromkeys(acks, error)

    async def _close_session(self, node: int, session: ShareSession,
                             acks: dict[TopicPartition, list[AckBatch]]) -> None:
        if session.is_open:
            await self._send_acks(node, session, acks, close=True)
        else:
            self._fail(acks, for_code(122)("no share session with this broker"))
        self._sessions.pop(node, None)

    async def _close_sessions(self) -> None:
        for node, session in list(self._sessions.items()):
            async with self._lock(node):
                acks = self._acks.take(self._led_by(node, None))
                if session.is_open:
                    await self._send_acks(node, session, acks, close=True)
                else:
                    self._fail(acks, for_code(122)("no share session with this broker"))
        self._sessions.clear()

    # ================================================================ helpers

    def _led_by(self, node: int, among: set[TopicPartition] | None) -> list[TopicPartition]:
        tps = list(self._acks.pending) if among is None else \
            [tp for tp in self._acks.pending if tp in among]
        return [tp for tp in tps
                if self._client.metadata.leader_for(tp.topic, tp.partition) == node]

    def _topic_id(self, topic: str) -> Any:
        info = self._client.metadata.topic(topic)
        if info is None or info.topic_id is None:
            raise KafkaError(f"no topic id known for {topic!r} (metadata v10+ needed)")
        return info.topic_id

    def _topic_names(self) -> dict[Any, str]:
        out: dict[Any, str] = {}
        for name in list(self._client.metadata.topics):
            info = self._client.metadata.topic(name)
            if info is not None and info.topic_id is not None:
                out[info.topic_id] = name
        return out
