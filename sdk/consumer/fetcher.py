"""The fetcher: Fetch requests to partition leaders, prefetching while the application works.

One background task (:meth:`Fetcher._run`) sends Fetches to every leader that has fetchable
partitions not already being fetched; responses become :class:`PartitionRecords` in a buffer
that :meth:`Fetcher.fetched_records` drains. A partition is fetched ahead of the
application: up to ``_MAX_BUFFERED_PER_PARTITION`` responses wait per partition.

Pipelining per broker: up to ``_MAX_IN_FLIGHT_PER_NODE`` Fetches (for different
partitions) are queued at each broker; when none is in flight the partitions are split over
them, so one is being answered while the records of another are handed out. A broker
answers the requests of one connection in order, so a Fetch that long-polls
(``fetch_max_wait_ms``) would hold up the one behind it: partitions already at the end of
their log only ride along with partitions that have data, and are fetched on their own
(long-polling) only when every partition of that broker has caught up.

Positions: the fetcher keeps its own *fetch position* per partition, ahead of the
subscription's position (what the application has been handed). Both carry the
partition's epoch from :class:`SubscriptionState`; a seek or reset bumps it, which drops
buffered and in-flight data of the old epoch.

Errors from responses: NOT_LEADER-style errors refresh metadata and retry; OFFSET_OUT_OF_RANGE
applies ``auto_offset_reset`` (with "none" it raises OffsetOutOfRangeError to the
application); other errors are raised to the application by the next ``fetched_records``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from sdk.consumer.partition_records import PartitionRecords
from sdk.consumer.subscription import IsolationLevel, OffsetResetStrategy, SubscriptionState
from sdk.errors import (
    KafkaError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    UnsupportedVersionError,
    for_code,
)
from sdk.metrics.consumer import ConsumerObserver
from sdk.metrics.telemetry import ClientTelemetry, ObservedClient
from sdk.net import NetClient
from sdk.net.retry import Backoff
from sdk.protocol.messages.fetch import FetchRequest, FetchResponse
from sdk.records import iter_batches
from sdk.types import ConsumerRecord, TopicPartition

if TYPE_CHECKING:
    from sdk.consumer.config import ConsumerConfig

log = logging.getLogger(__name__)

_FETCH_KEY = FetchRequest.API_KEY
_FETCH_MIN_VERSION = 4  # v4+: record batches v2, isolation level, last stable offset
_FETCH_TOPIC_IDS_VERSION = 13  # v13+ names topics by id
_MAX_BUFFERED_PER_PARTITION = 2
# Two Fetches per broker (for different partitions): while the broker answers one, the
# other is already queued behind it, so a round trip never leaves the buffer empty.
_MAX_IN_FLIGHT_PER_NODE = 2
_OFFSET_OUT_OF_RANGE = 1
_UNKNOWN_SERVER_ERROR = -1
# Errors after which the partition's leader is looked up again.
_STALE_LEADER_ERRORS = frozenset({3, 5, 6, 9, 56, 74, 76, 100})


class Fetcher:
    """Background fetching for one consumer; see the module docstring."""

    def __init__(self, client: NetClient, subscriptions: SubscriptionState,
                 config: ConsumerConfig) -> None:
        self._client = client
        self._subs = subscriptions
        self._config = config
        self._read_committed = config.isolation_level == IsolationLevel.READ_COMMITTED.value
        self._buffer: deque[PartitionRecords] = deque()
        self._buffered: Counter[TopicPartition] = Counter()
        self._fetch_positions: dict[TopicPartition, tuple[int, int]] = {}  # tp -> (offset, epoch)
        self._in_flight_nodes: Counter[int] = Counter()  # fetches in flight per broker
        self._in_flight: set[TopicPartition] = set()
        self._node_retry_at: dict[int, float] = {}
        self._node_failures: Counter[int] = Counter()
        self._backoff = Backoff(config.retry_backoff_ms, config.retry_backoff_max_ms)
        # With fetch_min_bytes=0 a Fetch that brought nothing is followed after this long
        # (the broker does not hold it): at most fetch_max_wait_ms, and retry_backoff_ms.
        self._idle_pause_s = (min(config.fetch_max_wait_ms, config.retry_backoff_ms) / 1000
                              if config.fetch_min_bytes == 0 else 0.0)
        self._errors: deque[KafkaError] = deque()
        self._wake = asyncio.Event()
        self._data = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._runner: asyncio.Task[None] | None = None
        self._closed = False
        self._wait_s = config.fetch_max_wait_ms / 1000
        self._timeout_s = config.request_timeout_ms / 1000 + self._wait_s
        # Metrics, hooks, tracing (sdk.metrics); the group client is hooked up by the
        # coordinator. ``_obs`` is None unless something watches fetches.
        self.telemetry = ClientTelemetry(config, "consumer")
        client.observer = self.telemetry.network
        tracing = None
        if self.telemetry.tracing_enabled:
            from sdk.metrics.tracing import ConsumerTracing

            tracing = ConsumerTracing(config.client_id, config.group_id,
                                      self.telemetry.tracer_provider)
        self.observer = ConsumerObserver(self.telemetry.registry, self.telemetry.hooks,
                                         tracing, self._assigned_lags)
        self._obs = self.observer.hot
        # The face's records fetched but not handed out yet (first per partition), for lag.
        self.pending_first: Callable[[], Mapping[TopicPartition, ConsumerRecord[Any, Any]]] | None = None

    def _assigned_lags(self) -> dict[TopicPartition, int | None]:
        """Per assigned partition: end offset - the next record the application gets
        (records the face holds but has not handed out yet count as lag)."""
        subs = self._subs
        held = self.pending_first() if self.pending_first is not None else {}
        lags: dict[TopicPartition, int | None] = {}
        for tp in subs.assigned_partitions():
            end, position = subs.end_offset(tp), subs.position(tp)
            first = held.get(tp)
            if first is not None:
                position = first.offset
            lags[tp] = None if end is None or position is None else max(0, end - position)
        return lags

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if self._runner is None:
            self._client.add_listener(self.wake)
            self._runner = asyncio.get_running_loop().create_task(
                self._run(), name="kafka-sdk-fetcher")
            self.telemetry.start()

    async def close(self) -> None:
        self._closed = True
        self._client.remove_listener(self.wake)
        await self.telemetry.close()
        tasks = [t for t in (self._runner, *self._tasks) if t is not None and not t.done()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        self._buffer.clear()
        self._buffered.clear()

    def wake(self) -> None:
        """Something changed (assignment, positions, metadata): reconsider what to fetch."""
        self._wake.set()

    # ------------------------------------------------------------------ sending

    async def _run(self) -> None:
        while not self._closed:
            self._wake.clear()
            delay = self._send_fetches()
            if delay is None:
                await self._wake.wait()
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), delay)

    def _send_fetches(self) -> float | None:
        """Start a Fetch per ready leader; the seconds until a backoff ends, if one blocks."""
        now = time.monotonic()
        wait: float | None = None
        by_node: dict[int, list[tuple[TopicPartition, int, int]]] = {}
        behind: set[int] = set()  # nodes with a partition that has data left to fetch
        for tp in self._subs.fetchable_partitions():
            leader = self._client.metadata.leader_for(tp.topic, tp.partition)
            if leader is None:
                self._client.add_topics([tp.topic])
                self._client.request_refresh()
                continue
            st = self._subs.state(tp)
            if not self._caught_up(tp, st.position, st.epoch):
                behind.add(leader)
            if tp in self._in_flight or self._buffered[tp] >= _MAX_BUFFERED_PER_PARTITION:
                continue
            if self._in_flight_nodes[leader] >= _MAX_IN_FLIGHT_PER_NODE:
                continue
            retry_at = max(self._node_retry_at.get(leader, 0.0),
                           now + self._client.backoff_remaining(leader))
            if retry_at > now:
                wait = retry_at - now if wait is None else min(wait, retry_at - now)
                continue
            offset, epoch = self._fetch_position(tp, st.position, st.epoch)
            by_node.setdefault(leader, []).append((tp, offset, epoch))
        for node, parts in by_node.items():
            if node in behind and all(self._caught_up(tp, o, e) for tp, o, e in parts):
                # Only caught-up partitions: the broker would hold this Fetch for up to
                # fetch_max_wait_ms, and Fetches for partitions with data would queue
                # behind it. They ride along with the next Fetch that has data instead.
                continue
            fresh = [p for p in parts if not self._caught_up(*p)]
            if self._in_flight_nodes[node] == 0 and len(fresh) > 1:
                # Nothing in flight: split the partitions with data over several Fetches, so
                # that from now on one is being answered while the records of another are
                # handed out. Caught-up partitions ride with the first (never alone).
                groups = min(_MAX_IN_FLIGHT_PER_NODE, len(fresh))
                caught = [p for p in parts if self._caught_up(*p)]
                for i in range(groups):
                    self._start_fetch(node, fresh[i::groups] + (caught if i == 0 else []))
            else:
                self._start_fetch(node, parts)
        return wait

    def _start_fetch(self, node: int, parts: list[tuple[TopicPartition, int, int]]) -> None:
        self._in_flight_nodes[node] += 1
        self._in_flight.update(tp for tp, _, _ in parts)
        task = asyncio.get_running_loop().create_task(
            self._fetch_from(node, parts), name=f"kafka-sdk-fetch-{node}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _caught_up(self, tp: TopicPartition, position: int | None, epoch: int) -> bool:
        """Whether ``tp`` will be fetched at (or past) the end of its log as last reported:
        a Fetch of it waits for new records."""
        known = self._fetch_positions.get(tp)
        offset = known[0] if known is not None and known[1] == epoch else position
        end = self._subs.end_offset(tp)
        return offset is not None and end is not None and offset >= end

    def _fetch_position(self, tp: TopicPartition, position: int | None, epoch: int) -> tuple[int, int]:
        known = self._fetch_positions.get(tp)
        if known is None or known[1] != epoch:
            assert position is not None  # fetchable partitions have a position
            known = (position, epoch)
            self._fetch_positions[tp] = known
        return known

    def _build_request(self, parts: list[tuple[TopicPartition, int, int]], version: int,
                       topic_ids: dict[str, Any]) -> FetchRequest:
        topics: dict[str, list[FetchRequest.FetchPartition]] = {}
        for tp, offset, _ in parts:
            topics.setdefault(tp.topic, []).append(FetchRequest.FetchPartition(
                partition=tp.partition, fetch_offset=offset,
                partition_max_bytes=self._config.max_partition_fetch_bytes,
            ))
        return FetchRequest(
            max_wait_ms=self._config.fetch_max_wait_ms,
            min_bytes=self._config.fetch_min_bytes,
            max_bytes=self._config.fetch_max_bytes,
            isolation_level=1 if self._read_committed else 0,
            session_id=0,
            session_epoch=-1,  # no fetch session: every request is a full fetch
            topics=[
                FetchRequest.FetchTopic(topic=name, topic_id=topic_ids.get(name) or _ZERO_ID,
                                        partitions=ps)
                for name, ps in topics.items()
            ],
            rack_id=self._config.client_rack,
        )

    async def _fetch_from(self, node: int, parts: list[tuple[TopicPartition, int, int]]) -> None:
        try:
            conn = await self._client.connection(node, timeout_s=self._timeout_s)
            version = conn.version_for(_FETCH_KEY, min_version=_FETCH_MIN_VERSION)
            topic_ids = self._topic_ids({tp.topic for tp, _, _ in parts})
            if version >= _FETCH_TOPIC_IDS_VERSION and topic_ids is None:
                version = conn.version_for(_FETCH_KEY, min_version=_FETCH_MIN_VERSION,
                                           max_version=_FETCH_TOPIC_IDS_VERSION - 1)
            request = self._build_request(parts, version, topic_ids or {})
            sent_at = time.monotonic()
            response: FetchResponse = await conn.send(request, version, timeout_s=self._timeout_s)
            got_data = self._handle_response(node, response, parts, version)
            if self._obs is not None:
                self._obs.fetch_done(sent_at)
            self._node_failures.pop(node, None)
            if not got_data and self._idle_pause_s:
                # fetch_min_bytes=0: the broker answers at once even with nothing to give;
                # asking again at once would spin. Pause as a broker's long poll would.
                self._node_retry_at[node] = time.monotonic() + self._idle_pause_s
        except asyncio.CancelledError:
            raise
        except UnsupportedVersionError as exc:
            self._errors.append(exc)
            self._data.set()
        except Exception as exc:  # a bug must not stop fetching for good: log, back off
            failures = self._node_failures[node] = self._node_failures[node] + 1
            self._node_retry_at[node] = time.monotonic() + self._backoff.delay(failures)
            if isinstance(exc, KafkaError):
                log.info("fetch from node %s failed (%s); retrying after a backoff", node, exc)
            else:
                log.exception("fetch from node %s failed unexpectedly", node)
            self._client.request_refresh()
        finally:
            self._in_flight_nodes[node] -= 1
            self._in_flight.difference_update(tp for tp, _, _ in parts)
            self._wake.set()

    def _topic_ids(self, topics: Iterable[str]) -> dict[str, Any] | None:
        ids: dict[str, Any] = {}
        for name in topics:
            info = self._client.metadata.topic(name)
            if info is None or info.topic_id is None:
                return None
            ids[name] = info.topic_id
        return ids

    # ------------------------------------------------------------------ responses

    def _handle_response(self, node: int, response: FetchResponse,
                         parts: list[tuple[TopicPartition, int, int]], version: int) -> bool:
        """Buffer what ``response`` brought; whether it brought anything."""
        if response.error_code:
            raise for_code(response.error_code)(f"Fetch from node {node}")
        sent = {tp: (offset, epoch) for tp, offset, epoch in parts}
        names: dict[Any, str] = {}
        if version >= _FETCH_TOPIC_IDS_VERSION:
            for tp in sent:
                info = self._client.metadata.topic(tp.topic)
                if info is not None and info.topic_id is not None:
                    names[info.topic_id] = tp.topic
        got_data = False
        for topic in response.responses:
            name = names.get(topic.topic_id, topic.topic) if names else topic.topic
            for p in topic.partitions:
                tp = TopicPartition(name, p.partition_index)
                if tp not in sent:
                    continue
                offset, epoch = sent[tp]
                got_data |= self._handle_partition(tp, offset, epoch, p)
        if got_data:
            self._data.set()
        return got_data

    def _is_current(self, tp: TopicPartition, offset: int, epoch: int) -> bool:
        if not self._subs.is_assigned(tp):
            return False
        st = self._subs.state(tp)
        return st.epoch == epoch and self._fetch_positions.get(tp) == (offset, epoch)

    def _handle_partition(self, tp: TopicPartition, offset: int, epoch: int,
                          p: FetchResponse.PartitionData) -> bool:
        if not self._is_current(tp, offset, epoch):
            return False  # sought, reset or unassigned meanwhile
        code = p.error_code
        if code == 0:
            self._subs.update_watermarks(tp, p.high_watermark, p.last_stable_offset,
                                         p.log_start_offset)
            records = p.records
            if not records:
                return False
            end = _end_offset(records)
            if end is None:
                # Not one whole batch: an old broker cut a batch larger than the limit.
                self._errors.append(RecordTooLargeError(
                    f"{tp} at offset {offset} holds a batch larger than "
                    f"max_partition_fetch_bytes ({self._config.max_partition_fetch_bytes})"))
                return True
            if end <= offset:
                return False
            aborted = None
            if self._read_committed and p.aborted_transactions:
                aborted = [(a.producer_id, a.first_offset) for a in p.aborted_transactions]
            self._buffer.append(PartitionRecords(
                tp, offset, records, epoch=epoch, aborted_transactions=aborted,
                read_committed=self._read_committed, check_crcs=self._config.check_crcs,
                key_deserializer=self._config.key_deserializer,
                value_deserializer=self._config.value_deserializer,
            ))
            self._buffered[tp] += 1
            self._fetch_positions[tp] = (end, epoch)
            if self._obs is not None:
                self._obs.fetched_bytes(len(records))
            return True
        if code == _OFFSET_OUT_OF_RANGE:
            return self._out_of_range(tp, offset)
        if code in _STALE_LEADER_ERRORS:
            log.debug("fetch of %s: %s; refreshing metadata", tp, for_code(code).name)
            self._client.metadata.mark_leader_unknown(tp.topic, tp.partition)
            self._client.request_refresh()
            return False
        error = for_code(code)(f"fetching {tp} at offset {offset}")
        if error.retriable:
            log.info("fetch of %s: %s; retrying", tp, error)
            return False
        if code == _UNKNOWN_SERVER_ERROR:
            # What Kafka answers when its remote tier (tiered storage) fails a read; Java's
            # consumer warns and fetches again, and so do we.
            log.warning("fetch of %s at offset %d: unknown server error; retrying", tp, offset)
            return False
        self._errors.append(error)
        return True

    def _out_of_range(self, tp: TopicPartition, offset: int) -> bool:
        st = self._subs.state(tp)
        if st.position != offset:
            return False  # the application moved on before this answer arrived
        if self._subs.default_reset is OffsetResetStrategy.NONE:
            error = OffsetOutOfRangeError(
                f"offset {offset} of {tp} is out of range and auto_offset_reset is 'none'; "
                "seek() to a valid position")
            error.partitions = {tp: offset}  # type: ignore[attr-defined]
            self._errors.append(error)
            return True
        log.info("offset %d of %s is out of range; resetting to %s", offset, tp,
                 self._subs.default_reset.value)
        self._subs.request_reset(tp)
        return True

    # ------------------------------------------------------------------ draining

    def fetched_records(self, max_records: int, observe: bool = True
                        ) -> dict[TopicPartition, list[ConsumerRecord[Any, Any]]]:
        """Hand out up to ``max_records`` buffered records, advancing positions (``observe``
        False: the caller reports them to the metrics when it hands them out itself).

        Raises the first pending fetch error when no records are ready (records come first,
        so what was fetched before an error is not lost).
        """
        out: dict[TopicPartition, list[ConsumerRecord[Any, Any]]] = {}
        taken = 0
        skipped: list[PartitionRecords] = []
        buffer = self._buffer
        try:
            while buffer and taken < max_records:
                chunk = buffer[0]
                tp = chunk.tp
                if not self._chunk_is_live(chunk):
                    self._drop_head()
                    continue
                st = self._subs.state(tp)
                if st.paused:
                    skipped.append(buffer.popleft())  # keep it for when it is resumed
                    continue
                try:
                    records = chunk.drain(max_records - taken)
                except KafkaError:
                    if out:
                        break  # hand out what we have; the error comes next time
                    # Raise it, but let other partitions' data go first next time; it is
                    # raised again when reached, until the application seeks past it.
                    buffer.rotate(-1)
                    raise
                if records:
                    held = out.get(tp)
                    if held is None:
                        out[tp] = records  # drain's list is ours: no copy
                    else:
                        held.extend(records)
                    taken += len(records)
                self._subs.advance(tp, chunk.next_offset, chunk.leader_epoch)
                if chunk.exhausted:
                    self._drop_head()
            if not out and self._errors:
                raise self._errors.popleft()
        finally:
            if skipped:
                buffer.extendleft(reversed(skipped))
        if not buffer:
            self._data.clear()
        if self._obs is not None and observe:  # also an empty poll (last-poll-seconds-ago)
            self._obs.consumed(out, taken)
        return out

    def _chunk_is_live(self, chunk: PartitionRecords) -> bool:
        tp = chunk.tp
        if not self._subs.is_assigned(tp):
            return False
        st = self._subs.state(tp)
        return st.epoch == chunk.epoch and st.position == chunk.next_offset

    def _drop_head(self) -> None:
        chunk = self._buffer.popleft()
        self._buffered[chunk.tp] -= 1
        if self._buffered[chunk.tp] <= 0:
            del self._buffered[chunk.tp]
        self._wake.set()

    def has_ready(self) -> bool:
        """Something for fetched_records: data of a partition that is not paused, or an error."""
        if self._errors:
            return True
        subs = self._subs
        return any(
            not subs.is_assigned(chunk.tp) or not subs.state(chunk.tp).paused
            for chunk in self._buffer
        )

    async def wait_for_data(self, timeout_s: float) -> bool:
        """Wait until :meth:`has_ready` may be true (or the timeout passes)."""
        if self.has_ready():
            return True
        self._data.clear()
        try:
            await asyncio.wait_for(self._data.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    @property
    def data_event(self) -> asyncio.Event:
        return self._data

    def known_partitions(self) -> set[TopicPartition]:
        """Partitions with buffered data or a fetch position."""
        return set(self._fetch_positions) | {c.tp for c in self._buffer}

    def discard(self, partitions: Iterable[TopicPartition]) -> None:
        """Forget buffered data and fetch positions of these partitions (revoked)."""
        gone = set(partitions)
        if not gone:
            return
        kept = [c for c in self._buffer if c.tp not in gone]
        if len(kept) != len(self._buffer):
            self._buffer = deque(kept)
            self._buffered = Counter(c.tp for c in kept)
        for tp in gone:
            self._fetch_positions.pop(tp, None)
        self._wake.set()


_ZERO_ID = FetchRequest.FetchTopic().topic_id


def _end_offset(records: bytes) -> int | None:
    """The offset after the last whole batch in fetched bytes; None if there is none."""
    end = None
    for batch in iter_batches(records):
        end = batch.next_offset
    return end


class ObservedConsumer(ObservedClient):
    """The consumer face's ``metrics()`` (sdk.metrics), read from its fetcher."""

    _fetcher: Fetcher

    def _telemetry_of(self) -> ClientTelemetry:
        return self._fetcher.telemetry
