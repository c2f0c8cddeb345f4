"""The sender: drains ready batches into one Produce request per broker and handles replies.

One task on the producer's event loop. Each pass (after a wake-up or a timer):

1. fails batches whose ``delivery_timeout_ms`` passed while they were not in flight;
2. with idempotence, obtains (or resets) the producer id first;
3. picks, per partition, the batch to send: a batch waiting for a retry (lowest sequence,
   only when none of the partition is in flight), else the oldest unsent one once it is
   ready (full, lingered ``linger_ms``, or a flush/close is running);
4. groups them by the partition leader; for each broker with a live connection and fewer
   than ``max_in_flight_requests_per_connection`` requests outstanding, builds Produce
   requests of at most ``max_request_size`` bytes (one batch per partition each) and
   writes them; brokers without a connection get one started in the background
   (reconnect backoff applies), partitions without a leader trigger a metadata refresh.

Responses arrive in request order per connection and are handled as they arrive: success
completes the batch's records; a retriable error puts the batch in its partition's retry
list (after ``retry_backoff_ms``, growing per attempt; a stale-metadata error also marks
the leader unknown and asks for a refresh); anything else fails it. A lost connection or a
request timeout is a retriable error whose outcome is unknown. ``sdk.producer.idempotence``
states exactly when a batch may fail under idempotence.

The sender wakes on: a new batch (``RecordAccumulator`` calls :meth:`Sender.wake`, from any
thread), a response, a metadata update or connection change (a NetClient listener), the
producer id arriving, flush and close.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from sdk.errors import (
    InvalidRecordError,
    KafkaConnectionError,
    KafkaError,
    ProducerClosedError,
    for_code,
)
from sdk.net.client import NetClient
from sdk.net.connection import BrokerConnection
from sdk.net.retry import Backoff
from sdk.producer.accumulator import PartitionQueue, RecordAccumulator
from sdk.producer.batch import ProducerBatch
from sdk.producer.failures import expired_error, take_unauthenticated, timeout_error
from sdk.producer.idempotence import SEQUENCE_MASK, ProducerIdManager, reset_bumps_epoch
from sdk.producer.staging import Stage
from sdk.producer.transactions import DOOMED, TransactionManager
from sdk.protocol.messages.produce import ProduceRequest, ProduceResponse
from sdk.records.compression import get_codec
from sdk.records.header import patch_producer_state

if TYPE_CHECKING:
    from sdk.metrics.producer import ProducerObserver
    from sdk.producer.config import ProducerConfig

__all__ = ["Sender"]

log = logging.getLogger(__name__)

_PRODUCE = 0
_PRODUCE_MIN_VERSION = 3  # v3+ carries v2 record batches
_IDLE_WAKE_S = 1.0  # look around at least this often, even without a wake-up
_ACKS0_BARRIER_EVERY = 256  # acks=0 requests between two barrier round trips
_OUT_OF_ORDER = 45
_DUPLICATE_SEQUENCE = 46
_MESSAGE_TOO_LARGE = 10
_PRODUCER_STATE_LOST = (59, 47, 90)  # UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_EPOCH, FENCED
# Answers given after the leader appended the batch (it then waited for the replicas in
# vain): the records may still be committed when the ISR grows back, so the outcome is
# unknown, as for a lost response. REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND.
_MAYBE_WRITTEN = (7, 20)


class Sender:
    """See the module docstring."""

    def __init__(self, *, client: NetClient, accumulator: RecordAccumulator,
                 config: ProducerConfig, producer_ids: ProducerIdManager | None,
                 stage: Stage | None = None,
                 transactions: TransactionManager | None = None,
                 observer: ProducerObserver | None = None) -> None:
        self._client = client
        self._obs = observer  # metrics and batch hooks (sdk.metrics); None when neither
        self._txn = transactions  # None unless transactional_id is set
        self._acc = accumulator
        self._stage = stage
        self._ids = producer_ids
        self._acks = config.acks
        self._retries = config.retries
        self._max_in_flight = config.max_in_flight_requests_per_connection
        self._max_request_size = config.max_request_size
        self._broker_timeout_ms = config.request_timeout_ms
        self._retry_backoff = Backoff(config.retry_backoff_ms, config.retry_backoff_max_ms)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread_id = 0
        self._task: asyncio.Task[None] | None = None
        self._sleeper: asyncio.Future[None] | None = None
        self._woken = False
        self._wake_scheduled = False
        self._caught_up = threading.Event()  # set when a pass leaves nothing it could send
        self._stopping = False
        self._pid_task: asyncio.Task[None] | None = None
        self._watching_writable: set[int] = set()
        self._unconfirmed_nodes: set[int] = set()  # got acks=0 requests since the last settle
        self._acks0_requests = 0
        self._rotation = 0

    # ================================================================== lifecycle

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread_id = threading.get_ident()
        self._client.add_listener(self.wake)
        self._task = self._loop.create_task(self._run(), name="kafka-sdk-sender")

    def wake(self) -> None:
        """Make the sender look again soon. Safe from any thread."""
        if threading.get_ident() == self._loop_thread_id:
            self._wake_on_loop()
        elif not self._wake_scheduled and self._loop is not None:
            self._wake_scheduled = True
            try:
                self._loop.call_soon_threadsafe(self._wake_on_loop)
            except RuntimeError:  # the loop is closed: nothing left to wake
                self._wake_scheduled = False

    def catch_up(self, timeout_s: float) -> None:
        """Block the calling thread (never the loop's) until the sender has written what it
        can send now, for at most ``timeout_s``.

        A thread that appends records rarely lets go of the GIL, and the loop thread needs
        it once per system call (poll, send, receive): left alone, the sender gets through
        one call per switch interval and falls behind, and the backlog is paid at flush.
        Waiting here after a bulk append lets the sender run its calls back to back. The
        wait ends early when the sender starts compressing with a quick codec (see
        ``_prepare_payload``): the calling thread then runs while the codec has no GIL.
        """
        self._caught_up.clear()
        self.wake()
        self._caught_up.wait(timeout_s)

    def _wake_on_loop(self) -> None:
        self._wake_scheduled = False
        self._woken = True
        sleeper = self._sleeper
        if sleeper is not None and not sleeper.done():
            sleeper.set_result(None)

    async def stop(self, timeout_s: float | None, reason: str | None = None) -> None:
        """Send what is left; after ``timeout_s`` fail the rest (ProducerClosedError, with
        ``reason`` in its message)."""
        deadline = time.monotonic() + (timeout_s or 0.0)
        self._stopping = True
        self.wake()
        task = self._task
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout_s)
            except TimeoutError:
                pass  # out of time: what is still unsent is failed below
        if timeout_s is None or time.monotonic() < deadline:
            await self.settle(None if timeout_s is None else deadline - time.monotonic())
        detail = f" ({reason})" if reason else ""
        unsent = sum(b.count for b in self._acc.snapshot_incomplete())
        if self._stage is not None:
            unsent += sum(len(r.values) - r.drained for r in list(self._stage.runs.values()))
        if unsent:
            log.warning("%s closed with %d record(s) not acknowledged%s",
                        self._client.config.client_id, unsent, detail)
        self.abort(ProducerClosedError(
            f"the producer was closed before the record was acknowledged{detail}"))
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass  # the cancellation asked for just above
        if self._pid_task is not None and not self._pid_task.done():
            self._pid_task.cancel()
        self._client.remove_listener(self.wake)

    async def settle(self, timeout_s: float | None) -> None:
        """With acks=0, wait until each broker has read the Produce requests written to it
        (a barrier round trip per connection), so closing right after cannot drop them."""
        nodes, self._unconfirmed_nodes = self._unconfirmed_nodes, set()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for node in nodes:
            conn = self._client.ready_connection(node)
            if conn is None:
                continue  # the connection broke: what it carried is lost (acks=0)
            remaining = None if deadline is None else max(0.001, deadline - time.monotonic())
            try:
                await conn.barrier(remaining)
            except KafkaError as exc:
                log.info("acks=0 barrier to node %s failed: %s", node, exc)

    def abort(self, error: KafkaError) -> None:
        """Fail every incomplete batch now (queued, retrying and in flight) and every
        staged record."""
        if self._stage is not None:
            self._stage.fail_all(error)
        for batch in self._acc.snapshot_incomplete():
            self._fail(batch, error)
        for pq in self._acc.all_queues():
            with self._acc.lock:
                pq.batches.clear()
                pq.open = None
            pq.retries.clear()
            pq.in_flight.clear()

    def fail_unsent(self, error: BaseException) -> bool:
        """Transactions: fail every batch not in flight; True if one had been sent (its
        partition's sequences then have a gap: the abort bumps the epoch)."""
        sent = False
        for pq in self._acc.all_queues():
            with self._acc.lock:
                waiting, pq.open = [*pq.batches, *pq.retries], None
                pq.batches.clear()
            pq.retries.clear()
            for batch in waiting:
                sent = sent or batch.base_sequence >= 0
                self._fail(batch, error)
        return sent

    def restart_sequences(self) -> None:
        """After a new epoch: every partition starts again at sequence 0."""
        for pq in self._acc.all_queues():
            pq.next_sequence = 0
            pq.last_acked_sequence = -1

    # ================================================================== the loop

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._woken = False
            now = time.monotonic()
            try:
                delay = self._run_once(now)
            except Exception:  # the sender must survive a bug in one pass
                log.exception("producer sender pass failed")
                delay = 0.1
            if self._stopping and not self._acc.incomplete and not (
                    self._stage is not None and self._stage.runs):
                return
            if self._woken:
                await asyncio.sleep(0)  # let the loop breathe between busy passes
                continue
            self._caught_up.set()
            fut = self._sleeper = loop.create_future()
            timer = loop.call_later(delay, _resolve, fut)
            try:
                await fut
            finally:
                timer.cancel()
                self._sleeper = None

    def _run_once(self, now: float) -> float:
        acc = self._acc
        next_time = now + _IDLE_WAKE_S
        if self._stage is not None:
            staged_next = self._stage.service(now, self._stopping or acc.flushing > 0)
            if staged_next is not None:
                next_time = min(next_time, staged_next)
        for batch in acc.expire_unsent(now):
            self._fail(batch, timeout_error(batch, "before it could be sent", self._ids))
        if self._client.auth_error is not None:  # one check per pass, none per record
            for batch in take_unauthenticated(acc, self._client, self._ids):
                self._fail(batch, self._client.auth_error)
        queues = [pq for pq in acc.all_queues() if pq.has_work() or pq.in_flight]
        for pq in queues:
            for batch in [b for b in pq.retries if b.deadline <= now]:
                pq.retries.remove(batch)
                self._fail_sent(batch, expired_error(batch, self._ids))
        txn = self._txn
        if txn is not None and txn.state in DOOMED:
            self.fail_unsent(txn.error or KafkaError("the transaction failed"))
        if self._ids is not None and not self._producer_id_ready(queues, now):
            # Waiting for InitProducerId: its task wakes us; else retry after its backoff.
            retry_at = self._ids.retry_at
            return retry_at - now if retry_at > now else _IDLE_WAKE_S
        by_node: dict[int, list[PartitionQueue]] = {}
        leader_missing = False
        metadata = self._client.metadata
        with acc.lock:
            for pq in queues:
                if pq.retries:
                    # Wake when a retry's delivery timeout ends, not only at its backoff.
                    next_time = min(next_time, min(b.deadline for b in pq.retries))
                    if pq.in_flight:
                        continue
                    head = pq.retries[0]
                    if head.retry_at > now:
                        next_time = min(next_time, head.retry_at)
                        continue
                elif pq.batches:
                    head = pq.batches[0]
                    next_time = min(next_time, head.deadline)
                    if not acc.is_ready(pq, now):
                        next_time = min(next_time, acc.next_linger_deadline(pq))
                        continue
                    if len(pq.in_flight) >= self._in_flight_limit(pq):
                        continue
                else:
                    continue
                leader = metadata.leader_for(pq.topic, pq.partition)
                if leader is None:
                    leader_missing = True
                    continue
                if txn is not None and not txn.partition_ready(pq.topic, pq.partition):
                    continue  # AddPartitionsToTxn first; its answer wakes the sender
                by_node.setdefault(leader, []).append(pq)
        if leader_missing:
            self._client.request_refresh()
            next_time = min(next_time, now + self._retry_backoff.base_s or 0.05)
        for node, pqs in by_node.items():
            conn = self._client.ready_connection(node)
            if conn is None:
                backoff = self._client.ensure_connecting(node)
                if backoff > 0:
                    next_time = min(next_time, now + backoff)
                continue
            self._send_to(conn, pqs, now)
        return max(0.0, next_time - now)

    def _producer_id_ready(self, queues: list[PartitionQueue], now: float) -> bool:
        ids = self._ids
        assert ids is not None
        if self._txn is not None:  # the id comes from init_transactions, resets from aborts
            return ids.producer_id >= 0
        if ids.reset_requested:
            if any(pq.in_flight for pq in queues):
                return False  # wait for every answer before the sequences are redone
            self._apply_reset(queues)
        if ids.producer_id >= 0:
            return True
        if not any(pq.has_work() for pq in queues):
            return True  # nothing to send yet: do not ask for an id
        if now >= ids.retry_at and (self._pid_task is None or self._pid_task.done()):
            self._pid_task = asyncio.get_running_loop().create_task(self._obtain_producer_id())
        return False

    async def _obtain_producer_id(self) -> None:
        assert self._ids is not None
        try:
            await self._ids.obtain()
        finally:
            self.wake()

    def _apply_reset(self, queues: list[PartitionQueue]) -> None:
        """Rules 4 and 5 of sdk.producer.idempotence: fail unknown-outcome retries, restart
        sequences, then bump the epoch or drop the id (``ProducerIdManager.apply_reset``)."""
        assert self._ids is not None
        for pq in queues:
            keep: list[ProducerBatch] = []
            for batch in pq.retries:
                if batch.outcome_unknown:
                    self._fail(batch, batch.last_error or KafkaConnectionError(
                        "the outcome of an earlier attempt is unknown"))
                else:
                    batch.base_sequence = -1  # resequenced under the new id/epoch when sent
                    keep.append(batch)
            pq.retries = keep
        self.restart_sequences()
        self._ids.apply_reset()

    # ================================================================== sending

    def _send_to(self, conn: BrokerConnection, pqs: list[PartitionQueue], now: float) -> None:
        if len(pqs) > 1:  # rotate the start so no partition always goes last
            self._rotation = (self._rotation + 1) % len(pqs)
            pqs = pqs[self._rotation:] + pqs[:self._rotation]
        while conn.in_flight < self._max_in_flight and not conn.closed:
            if conn.write_paused:
                self._watch_writable(conn)
                return
            batches = self._drain(pqs, now)
            if not batches:
                return
            self._send_request(conn, batches, now)
            if self._acks == 0:
                continue
            pqs = [pq for pq in pqs if pq.batches or pq.retries]

    def _in_flight_limit(self, pq: PartitionQueue) -> int:
        """Batches of ``pq`` that may be in flight at once. With idempotence, one until the
        partition acknowledged a batch of the current producer id: a broker with no state
        for a producer takes its first batch whatever its sequence, so a batch sent behind
        a first batch that fails (or is split) would be written ahead of it."""
        if self._ids is not None and pq.last_acked_sequence < 0:
            return 1
        return self._max_in_flight

    def _drain(self, pqs: list[PartitionQueue], now: float) -> list[ProducerBatch]:
        acc = self._acc
        batches: list[ProducerBatch] = []
        size = 0
        with acc.lock:
            for pq in pqs:
                if pq.retries:
                    if pq.in_flight or pq.retries[0].retry_at > now:
                        continue
                    batch = pq.retries[0]
                    est = len(batch.payload) if batch.payload is not None else 0
                    if batches and size + est > self._max_request_size:
                        break
                    pq.retries.pop(0)
                else:
                    if not pq.batches or not acc.is_ready(pq, now):
                        continue
                    if len(pq.in_flight) >= self._in_flight_limit(pq):
                        continue
                    est = acc.estimated_size(pq.batches[0])
                    if batches and size + est > self._max_request_size:
                        break
                    batch = acc.pop_head(pq)
                size += est
                batches.append(batch)
        return batches

    def _prepare_payload(self, batch: ProducerBatch) -> bytes:
        ids = self._ids
        pq = batch.queue
        if ids is not None and (batch.base_sequence < 0 or batch.producer_id != ids.producer_id
                                or batch.producer_epoch != ids.epoch):
            batch.producer_id, batch.producer_epoch = ids.producer_id, ids.epoch
            batch.base_sequence = pq.next_sequence
            pq.next_sequence += batch.count
        state = (batch.producer_id, batch.producer_epoch, batch.base_sequence & SEQUENCE_MASK)
        if batch.payload is None:
            builder = batch.builder
            assert builder is not None
            if ids is not None:
                builder.set_producer_state(*state, is_transactional=self._txn is not None)
            raw = builder.size_in_bytes()
            if builder.compression and get_codec(builder.compression).quick:
                # Let a thread waiting in catch_up go on while this compresses without the
                # GIL. Not for slow codecs: the sender then waits for the GIL after each
                # batch while the appending thread holds it (zstd lost a third).
                self._caught_up.set()
            batch.payload = builder.build()
            batch.builder = None
            self._acc.recycle(builder.take_buffer())
            if builder.compression:
                self._acc.observe_compression(batch.topic, raw, len(batch.payload))
                if self._obs is not None:
                    self._obs.compressed(batch.topic, raw, len(batch.payload))
        elif ids is not None and batch.payload_state != state:
            buf = bytearray(batch.payload)
            patch_producer_state(buf, 0, *state)
            batch.payload = bytes(buf)
        batch.payload_state = state
        return batch.payload

    def _send_request(self, conn: BrokerConnection, batches: list[ProducerBatch],
                      now: float) -> None:
        topics: dict[str, ProduceRequest.TopicProduceData] = {}
        for batch in batches:
            payload = self._prepare_payload(batch)
            td = topics.get(batch.topic)
            if td is None:
                td = topics[batch.topic] = ProduceRequest.TopicProduceData(name=batch.topic)
            td.partition_data.append(
                ProduceRequest.PartitionProduceData(index=batch.partition, records=payload)
            )
            batch.attempts += 1
            batch.in_flight = True
            batch.queue.in_flight.append(batch)
        if self._obs is not None:
            self._obs.sent(batches, now)  # the pass's time, as Java's drain time
        txn_id = self._txn.transactional_id if self._txn is not None else None
        request = ProduceRequest(transactional_id=txn_id, acks=self._acks,
                                 timeout_ms=self._broker_timeout_ms,
                                 topic_data=list(topics.values()))
        try:
            # A transactional producer's version says which transaction protocol it speaks
            # (Produce v12+ lets the broker add partitions itself, KIP-890).
            cap = self._txn.produce_max_version if self._txn is not None else None
            version = conn.version_for(_PRODUCE, min_version=_PRODUCE_MIN_VERSION,
                                       max_version=cap)
            fut = conn.send_nowait(request, version, expect_response=self._acks != 0)
        except KafkaError as exc:  # nothing was written: a definite failure
            for batch in batches:
                self._attempt_failed(batch, exc, unknown=False)
            return
        if fut is None:  # acks=0: nothing will come back
            self._unconfirmed_nodes.add(conn.node_id)
            self._acks0_requests += 1
            if self._acks0_requests % _ACKS0_BARRIER_EVERY == 0:
                # Lets the framing prune its record of unanswered requests (see settle()).
                conn.barrier_nowait().add_done_callback(_ignore_outcome)
            for batch in batches:
                self._succeeded(batch, -1, -1)
            return
        fut.add_done_callback(lambda f: self._on_response(f, batches))

    def _watch_writable(self, conn: BrokerConnection) -> None:
        if conn.node_id in self._watching_writable:
            return
        self._watching_writable.add(conn.node_id)

        async def watch() -> None:
            try:
                await conn.wait_writable()
            finally:
                self._watching_writable.discard(conn.node_id)
                self.wake()

        asyncio.get_running_loop().create_task(watch())

    # ================================================================== responses

    def _on_response(self, fut: asyncio.Future[Any], batches: list[ProducerBatch]) -> None:
        try:
            if fut.cancelled():
                error: BaseException | None = KafkaConnectionError("the request was cancelled")
            else:
                error = fut.exception()
            if error is not None:
                for batch in batches:
                    self._attempt_failed(batch, error, unknown=True)
                return
            response: ProduceResponse = fut.result()
            results: dict[tuple[str, int], ProduceResponse.PartitionProduceResponse] = {}
            for topic in response.responses:
                for one in topic.partition_responses:
                    results[(topic.name, one.index)] = one
            for batch in batches:
                part = results.get((batch.topic, batch.partition))
                if part is None:
                    self._attempt_failed(batch, KafkaConnectionError(
                        f"the Produce response has no result for {batch.topic}-{batch.partition}"
                    ), unknown=True)
                elif part.error_code == 0:
                    self._succeeded(batch, part.base_offset, part.log_append_time_ms)
                elif part.error_code == _DUPLICATE_SEQUENCE:
                    self._succeeded(batch, -1, -1)  # written before; the broker forgot where
                elif part.record_errors and self._refuse_records(batch, part):
                    pass  # the named records failed; the others go out again
                else:
                    text = part.error_message or f"producing to {batch.topic}-{batch.partition}"
                    self._attempt_failed(batch, for_code(part.error_code)(text),
                                         unknown=part.error_code in _MAYBE_WRITTEN)
        finally:
            self.wake()

    def _leave_flight(self, batch: ProducerBatch) -> None:
        batch.in_flight = False
        in_flight = batch.queue.in_flight
        if in_flight and in_flight[0] is batch:
            in_flight.pop(0)
        elif batch in in_flight:
            in_flight.remove(batch)

    def _succeeded(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        if batch.done:
            return
        self._leave_flight(batch)
        pq = batch.queue
        ids = self._ids
        if ids is not None and batch.producer_id == ids.producer_id \
                and batch.producer_epoch == ids.epoch:
            last = batch.base_sequence + batch.count - 1
            if last > pq.last_acked_sequence:
                pq.last_acked_sequence = last
        batch.complete(base_offset, log_append_time)
        self._acc.finished(batch)
        if self._obs is not None:
            self._obs.acknowledged(batch)
        if batch.parent is not None:
            self._part_done(batch)

    def _attempt_failed(self, batch: ProducerBatch, error: BaseException, *, unknown: bool) -> None:
        if batch.done:
            return
        self._leave_flight(batch)
        batch.last_error = error
        if unknown:
            batch.outcome_unknown = True
        now = time.monotonic()
        code = getattr(error, "errno", None)
        if self._txn is not None and code in (_OUT_OF_ORDER, *_PRODUCER_STATE_LOST):
            self._fail(batch, error)  # fatal (fenced) or abortable: the transaction says
            return
        if self._ids is not None and code in (_OUT_OF_ORDER, *_PRODUCER_STATE_LOST):
            sent_sequence = batch.payload_state[2] if batch.payload_state else -1
            expected = (batch.queue.last_acked_sequence + 1) & SEQUENCE_MASK
            if code != _OUT_OF_ORDER or sent_sequence == expected:
                self._ids.request_reset(f"{error} for {batch.topic}-{batch.partition}",
                                        bump_epoch=reset_bumps_epoch(code, sent_sequence))
            if now < batch.deadline:
                self._requeue(batch, now)
            else:
                self._fail_sent(batch, timeout_error(batch, "while being retried", self._ids))
            return
        if code == _MESSAGE_TOO_LARGE and batch.count > 1 and now < batch.deadline:
            self._split(batch, now)
            return
        retriable = isinstance(error, KafkaError) and error.retriable
        if retriable and batch.attempts <= self._retries and now < batch.deadline:
            if getattr(error, "invalid_metadata", False):
                self._client.metadata.mark_leader_unknown(batch.topic, batch.partition)
                self._client.request_refresh()
            self._requeue(batch, now)
            return
        if retriable and now >= batch.deadline:
            error = expired_error(batch, self._ids)
        self._fail_sent(batch, error)

    def _split(self, batch: ProducerBatch, now: float) -> None:
        """MESSAGE_TOO_LARGE for a batch of several records: the broker's max.message.bytes
        is below the batch (a topic setting, or a compression estimate that was too kind).
        Send its records again in smaller batches, at once and before anything after them,
        as Java does. The parts take the batch's sequence numbers, so idempotence holds:
        batches sent after it fail out of order and are retried behind the parts."""
        parts = self._acc.split_batch(batch)
        log.info("%s-%s: %d records refused as too large (%s); sending them in %d batches",
                 batch.topic, batch.partition, batch.count, batch.last_error, len(parts))
        split: list[tuple[int, ProducerBatch]] = []
        first = 0
        sequence = batch.base_sequence
        for part in parts:
            part.parent = batch
            split.append((first, part))
            first += part.count
            if sequence >= 0:
                part.producer_id, part.producer_epoch = batch.producer_id, batch.producer_epoch
                part.base_sequence = sequence
                sequence += part.count
            part.retry_at = now
            self._insert_retry(part)
        batch.split = split

    def _refuse_records(self, batch: ProducerBatch,
                        part: ProduceResponse.PartitionProduceResponse) -> bool:
        """KIP-467: the broker refused the whole batch because of the records it names in
        ``record_errors`` (e.g. keyless records on a compacted topic, timestamps out of
        range). Those records fail, each with its own message: with the partition's error
        class when it named one record, else ``InvalidRecordError`` (the message tells
        the cases apart), as Java does. Unlike Java and librdkafka, which fail the rest of
        the batch too (with a generic error), the other records are sent again, at once and
        before anything queued after them, as the parts of a split batch are: which records
        share a batch is an accident of timing the application cannot see, so a record
        fails only for its own fault. With idempotence they take the batch's first sequence
        numbers and later batches move down by the refused count, so order holds. Returns
        False (the batch fails as a whole) when the answer cannot be applied: an index out
        of range, or an earlier attempt whose outcome is unknown."""
        named: dict[int, str] = {}
        for entry in part.record_errors:
            named[entry.batch_index] = (entry.batch_index_error_message or part.error_message
                                        or f"record refused by the broker (error "
                                           f"{part.error_code})")
        if batch.outcome_unknown or not all(0 <= i < batch.count for i in named):
            return False
        cls = for_code(part.error_code) if len(named) == 1 else InvalidRecordError
        refused: dict[int, BaseException] = {i: cls(text) for i, text in named.items()}
        self._leave_flight(batch)
        batch.last_error = for_code(part.error_code)(
            part.error_message or f"producing to {batch.topic}-{batch.partition}")
        parts = self._acc.regroup_batch(batch, refused)
        batch.split = parts
        if len(refused) == batch.count:
            self._fail_sent(batch, batch.last_error)  # records read their own errors
            return True
        log.warning("%s-%s: the broker refused %d of %d records (%s); sending the other %d "
                    "again", batch.topic, batch.partition, len(refused), batch.count,
                    batch.last_error, batch.count - len(refused))
        ids = self._ids
        sequence = batch.base_sequence
        if (ids is not None and sequence >= 0 and batch.producer_id == ids.producer_id
                and batch.producer_epoch == ids.epoch):
            pq = batch.queue
            for later in (*pq.retries, *pq.in_flight):
                if later.base_sequence > sequence and later.producer_id == batch.producer_id:
                    later.base_sequence -= len(refused)
            pq.next_sequence -= len(refused)
        now = time.monotonic()
        for _, resend in parts:
            if resend.done:
                continue
            resend.parent = batch
            if sequence >= 0:
                resend.producer_id, resend.producer_epoch = (batch.producer_id,
                                                             batch.producer_epoch)
                resend.base_sequence = sequence
                sequence += resend.count
            resend.retry_at = now
            self._insert_retry(resend)
        return True

    def _part_done(self, batch: ProducerBatch) -> None:
        """A part of a split batch completed: complete the batch once all have."""
        parent = batch.parent
        assert parent is not None and parent.split is not None
        if parent.done or not all(part.done for _, part in parent.split):
            return
        error = next((p.error for _, p in parent.split if p.error is not None), None)
        if error is None:
            parent.complete(parent.split[0][1].base_offset)
        else:
            parent.fail(error)  # records read their own part's outcome (part_of)
        self._acc.finished(parent)
        if parent.parent is not None:
            self._part_done(parent)

    def _requeue(self, batch: ProducerBatch, now: float) -> None:
        batch.retry_at = now + self._retry_backoff.delay(batch.attempts)
        if self._obs is not None:
            self._obs.retried(batch)
        self._insert_retry(batch)

    def _insert_retry(self, batch: ProducerBatch) -> None:
        """Queue ``batch`` among its partition's retries: by sequence number (idempotence),
        else by creation time."""
        retries = batch.queue.retries
        if self._ids is not None and batch.base_sequence >= 0:
            keys = [b.base_sequence for b in retries]
            retries.insert(bisect.bisect_left(keys, batch.base_sequence), batch)
        else:
            keys_created = [b.created for b in retries]
            retries.insert(bisect.bisect_right(keys_created, batch.created), batch)

    # ================================================================== failing

    def _fail_sent(self, batch: ProducerBatch, error: BaseException) -> None:
        """Fail a batch that was sent at least once (rules 2 and 3 of idempotence)."""
        ids = self._ids
        if (ids is not None and batch.base_sequence >= 0 and batch.producer_id == ids.producer_id
                and batch.producer_epoch == ids.epoch):
            if self._txn is not None:
                pass  # the abort bumps the epoch (TransactionManager.fail: sent=True)
            elif batch.outcome_unknown:
                ids.request_reset(f"the outcome of a batch for {batch.topic}-{batch.partition} "
                                  "is unknown and it failed", bump_epoch=True)
            else:
                self._shift_sequences(batch)
        self._fail(batch, error)

    def _shift_sequences(self, failed: ProducerBatch) -> None:
        """A batch that was definitely not written leaves a gap: close it."""
        pq = failed.queue
        for batch in (*pq.retries, *pq.in_flight):
            if batch.base_sequence > failed.base_sequence and batch.producer_id == failed.producer_id:
                batch.base_sequence -= failed.count
        pq.next_sequence -= failed.count

    def _fail(self, batch: ProducerBatch, error: BaseException) -> None:
        if batch.done:
            return
        if self._txn is not None:
            self._txn.fail(error, sent=batch.base_sequence >= 0)
        if batch.in_flight:
            self._leave_flight(batch)
        batch.fail(error)
        self._acc.finished(batch)
        if self._obs is not None:
            self._obs.failed(batch, error)
        if batch.parent is not None:
            self._part_done(batch)


def _ignore_outcome(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()  # retrieve it so asyncio does not log it as unhandled


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
