"""Fetch: read stored batches for consumers, long-polling until ``min_bytes`` are there.

Limits as Kafka applies them: each partition gets at most its ``partition_max_bytes`` and
the response at most ``max_bytes`` (capped by the broker's ``fetch.max.bytes``), except that
the first partition with data always returns at least one whole batch, so a consumer
progresses past a batch larger than its limits (KIP-74). A partition whose next batch does
not fit in what is left of the response is answered without records this time.

When fewer than ``min_bytes`` are available and ``max_wait_ms`` allows, the handler waits
for appends to any requested partition (the partitions wake their waiters) and reads again.
Records of at least ``ZERO_COPY_MIN_BYTES`` are left in the segment files and sent with
sendfile (see fetch_encoding); smaller ones are copied into the response.

isolation_level=1 (read_committed) reads and waits only up to the last stable offset, the
first offset of the oldest open transaction, and lists the aborted transactions
(producer id, first offset) of the range read, from the segments' ``.txnindex``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass, field

from sdk.errors import (
    FetchSessionIdNotFoundError,
    InvalidFetchSessionEpochError,
    OffsetOutOfRangeError,
    UnknownLeaderEpochError,
    UnknownServerError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from sdk.protocol.messages.fetch import FetchRequest, FetchResponse
from sdk.protocol.primitives import ZERO_UUID
from server_ref.handlers import RequestContext, handles
from server_ref.handlers.fetch_encoding import FileRecords, zero_copy_available
from server_ref.handlers.fetch_sessions import FINAL_EPOCH, INITIAL_EPOCH, SessionPartition
from server_ref.tiered import RemoteRead, RemoteStorageError

__all__ = ["ZERO_COPY_MIN_BYTES", "fetch"]

log = logging.getLogger(__name__)

ZERO_COPY_MIN_BYTES = 64 * 1024
LEADER_EPOCH = 0
TOPIC_IDS_VERSION = 13
READ_COMMITTED = 1
_ZERO_COPY = zero_copy_available()


@dataclass(slots=True)
class _Plan:
    """What one request reads: partitions in order, and the session bookkeeping."""

    partitions: list[SessionPartition]
    uses_topic_ids: bool
    session_id: int = 0
    incremental: bool = False
    session_partitions: dict[tuple[object, int], SessionPartition] = field(default_factory=dict)
    replica_id: int = -1  # cluster mode: the follower fetching (it reads past the HW)


@handles(1, 4, 17)
def fetch(ctx: RequestContext, req: FetchRequest) -> FetchResponse | Awaitable[FetchResponse]:
    try:
        plan = _plan(ctx, req)
    except (FetchSessionIdNotFoundError, InvalidFetchSessionEpochError) as exc:
        return FetchResponse(error_code=exc.errno, session_id=0)
    if ctx.broker.cluster is not None:
        _cluster_fetch(ctx, req, plan)
    remote = [sp for sp in plan.partitions if _reads_remotely(ctx, sp, plan.uses_topic_ids)]
    if remote:
        return _fetch_remote(ctx, req, plan, remote)
    if req.max_wait_ms <= 0 or req.min_bytes <= 0:
        return _respond(ctx, req, plan)
    available, has_error = _available(ctx, req, plan)
    if has_error or available >= req.min_bytes:
        return _respond(ctx, req, plan)
    return _long_poll(ctx, req, plan)


async def _long_poll(ctx: RequestContext, req: FetchRequest, plan: _Plan) -> FetchResponse:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + req.max_wait_ms / 1000
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        waiter: asyncio.Future[None] = loop.create_future()
        watched = [p for p in (_resolve(ctx, sp)[1] for sp in plan.partitions)
                   if p is not None]
        for partition in watched:
            partition.waiters.append(waiter)  # type: ignore[attr-defined]
        try:
            # Checked with the waiter in place: this coroutine may start a loop turn after
            # the handler's check, and an append in between (a produce resumed by this very
            # fetch moving the high watermark) woke nobody, so a follower sat out the whole
            # max_wait_ms and an acks=all produce with it.
            available, has_error = _available(ctx, req, plan)
            if has_error or available >= req.min_bytes:
                break
            await asyncio.wait_for(waiter, remaining)
        except TimeoutError:
            break
        finally:
            for partition in watched:  # idle partitions must not collect stale waiters
                with contextlib.suppress(ValueError):
                    partition.waiters.remove(waiter)  # type: ignore[attr-defined]
    return _respond(ctx, req, plan)


# ---------------------------------------------------------------------------- sessions


def _key(sp_topic: str, topic_id: uuid.UUID, partition: int, by_id: bool
         ) -> tuple[str | uuid.UUID, int]:
    return (topic_id if by_id else sp_topic), partition


def _requested(req: FetchRequest, by_id: bool) -> list[SessionPartition]:
    out = []
    for topic in req.topics:
        for p in topic.partitions:
            out.append(SessionPartition(topic.topic, topic.topic_id if by_id else ZERO_UUID,
                                        p.partition, p.fetch_offset, p.partition_max_bytes,
                                        p.current_leader_epoch))
    return out


def _plan(ctx: RequestContext, req: FetchRequest) -> _Plan:
    by_id = ctx.api_version >= TOPIC_IDS_VERSION
    cache = ctx.broker.fetch_sessions
    if ctx.api_version < 7:
        return _Plan(_requested(req, by_id), by_id)
    if req.session_id == 0:
        plan = _Plan(_requested(req, by_id), by_id)
        if req.session_epoch == INITIAL_EPOCH:
            session = cache.create(by_id)
            if session is not None:
                for sp in plan.partitions:
                    session.partitions[_key(sp.topic, sp.topic_id, sp.partition, by_id)] = sp
                plan.session_id = session.session_id
        return plan
    if req.session_epoch == FINAL_EPOCH:
        cache.remove(req.session_id)
        return _Plan(_requested(req, by_id), by_id)
    session = cache.lookup(req.session_id, req.session_epoch)
    session.bump()
    for sp in _requested(req, by_id):
        key = _key(sp.topic, sp.topic_id, sp.partition, by_id)
        old = session.partitions.get(key)
        if old is not None:
            old.fetch_offset = sp.fetch_offset
            old.max_bytes = sp.max_bytes
            old.current_leader_epoch = sp.current_leader_epoch
        else:
            session.partitions[key] = sp
    for forgotten in req.forgotten_topics_data:
        for index in forgotten.partitions:
            session.partitions.pop(
                _key(forgotten.topic, forgotten.topic_id, index, by_id), None)
    return _Plan(list(session.partitions.values()), by_id, session.session_id, True)


# ---------------------------------------------------------------------------- reading


def _resolve(ctx: RequestContext, sp: SessionPartition) -> tuple[str | None, object]:
    """(topic name or None, Partition or None) for a session partition."""
    topics = ctx.broker.topics
    topic = topics.by_id(sp.topic_id) if sp.topic_id != ZERO_UUID else topics.get(sp.topic)
    if topic is None:
        return None, None
    if not 0 <= sp.partition < len(topic.partitions):
        return topic.name, None
    return topic.name, topic.partitions[sp.partition]


def _cluster_fetch(ctx: RequestContext, req: FetchRequest, plan: _Plan) -> None:
    """Cluster mode: note a follower's fetch offsets at the leader before reading."""
    from server_ref.replication.reads import follower_fetch, leader_error, replica_id_of

    plan.replica_id = replica_id_of(req, ctx.api_version)
    if plan.replica_id >= 0:
        by_id = ctx.api_version >= TOPIC_IDS_VERSION
        starts = {(t.topic, t.topic_id if by_id else ZERO_UUID, p.partition): p.log_start_offset
                  for t in req.topics for p in t.partitions}
        fetched = []
        for sp in plan.partitions:
            partition = _resolve(ctx, sp)[1]
            if partition is not None and not leader_error(partition, sp.current_leader_epoch):
                fetched.append((partition, sp.fetch_offset,
                                starts.get((sp.topic, sp.topic_id, sp.partition), -1)))
        follower_fetch(ctx.broker, fetched, plan.replica_id)


def _error_for(ctx: RequestContext, sp: SessionPartition, by_id: bool) -> int:
    name, partition = _resolve(ctx, sp)
    if name is None and by_id:
        return UnknownTopicIdError.errno
    if partition is None:
        return UnknownTopicOrPartitionError.errno
    if ctx.broker.cluster is not None:  # only the leader serves, at its epoch
        from server_ref.replication.reads import leader_error

        return leader_error(partition, sp.current_leader_epoch)
    if sp.current_leader_epoch > LEADER_EPOCH:
        return UnknownLeaderEpochError.errno
    return 0


def _available(ctx: RequestContext, req: FetchRequest, plan: _Plan) -> tuple[int, bool]:
    """Bytes a read would return now (within limits), and whether any partition errs."""
    total = 0
    budget = _budget(ctx, req)
    read_committed = req.isolation_level == READ_COMMITTED
    for sp in plan.partitions:
        if _error_for(ctx, sp, plan.uses_topic_ids):
            return total, True
        partition = _resolve(ctx, sp)[1]
        plog = partition.log  # type: ignore[attr-defined]
        if sp.fetch_offset < plog.log_start_offset or sp.fetch_offset > plog.log_end_offset:
            return total, True
        # read_committed waits for what is stable: open transactions do not count.
        end = plog.last_stable_offset if read_committed else plog.log_end_offset
        replica = partition.replica  # type: ignore[attr-defined]
        if replica is not None and plan.replica_id < 0:  # consumers: to the HW
            end = min(end, replica.high_watermark)
        if sp.fetch_offset < end:
            total += plog.read(sp.fetch_offset, min(sp.max_bytes, budget),
                               max_offset=end if read_committed or end < plog.log_end_offset
                               else None).size
            if total >= req.min_bytes:
                return total, False
    return total, False


def _reads_remotely(ctx: RequestContext, sp: SessionPartition, by_id: bool) -> bool:
    """Below the local log start of a tiered partition: the remote tier has the data."""
    if _error_for(ctx, sp, by_id):
        return False
    partition = _resolve(ctx, sp)[1]
    return ctx.broker.remote.reads_remotely(partition, sp.fetch_offset)  # type: ignore[arg-type]


async def _fetch_remote(ctx: RequestContext, req: FetchRequest, plan: _Plan,
                        wanted: list[SessionPartition]) -> FetchResponse:
    """Read the remote parts first (worker threads), then answer at once with them and
    whatever the local logs hold, as Kafka's delayed remote fetch does. A store that fails
    answers UNKNOWN_SERVER_ERROR for those partitions, as Kafka's (its RemoteStorageException
    has no error code of its own); clients retry it, and local reads go on meanwhile."""
    budget = _budget(ctx, req)
    read_committed = req.isolation_level == READ_COMMITTED
    reads: dict[int, RemoteRead | int] = {}
    for sp in wanted:
        partition = _resolve(ctx, sp)[1]
        try:
            result = await ctx.broker.remote.read(
                partition, sp.fetch_offset,  # type: ignore[arg-type]
                min(sp.max_bytes, budget), read_committed)
        except RemoteStorageError as exc:
            log.warning("fetch %s-%d at %d from the remote tier: %s", sp.topic, sp.partition,
                        sp.fetch_offset, exc)
            reads[id(sp)] = UnknownServerError.errno
        except OffsetOutOfRangeError:
            reads[id(sp)] = OffsetOutOfRangeError.errno
        else:
            reads[id(sp)] = result
            budget = max(0, budget - len(result.records))
    return _respond(ctx, req, plan, reads)


def _budget(ctx: RequestContext, req: FetchRequest) -> int:
    cap = int(ctx.broker.config.get("fetch.max.bytes"))
    if ctx.api_version < 3:
        return cap
    return max(0, min(req.max_bytes, cap))


def _respond(ctx: RequestContext, req: FetchRequest, plan: _Plan,
             remote: dict[int, RemoteRead | int] | None = None) -> FetchResponse:
    by_id = plan.uses_topic_ids
    budget = _budget(ctx, req)
    total = 0
    read_committed = req.isolation_level == READ_COMMITTED
    zero_copy = ctx.broker.config.zero_copy
    topics: dict[object, FetchResponse.FetchableTopicResponse] = {}
    for sp in plan.partitions:
        data = FetchResponse.PartitionData(partition_index=sp.partition, high_watermark=-1,
                                           last_stable_offset=-1, log_start_offset=-1,
                                           aborted_transactions=[] if read_committed else None,
                                           records=b"")
        code = _error_for(ctx, sp, by_id)
        if code:
            data.error_code = code
        else:
            partition = _resolve(ctx, sp)[1]
            plog = partition.log  # type: ignore[attr-defined]
            hw = leo = plog.log_end_offset
            replica = partition.replica  # type: ignore[attr-defined]
            if replica is not None:  # cluster mode: what the whole ISR has
                hw = replica.high_watermark
            data.high_watermark = hw
            # Every answer carries the last stable offset (the first offset of the oldest
            # open transaction), as Kafka's; read_committed stops there and lists the
            # aborted transactions in what it reads.
            lso = data.last_stable_offset = min(plog.last_stable_offset, hw)
            log_start = data.log_start_offset = ctx.broker.remote.log_start_offset(
                partition)  # type: ignore[arg-type]
            end = lso if read_committed else hw if plan.replica_id < 0 else leo
            bounded = read_committed or end < leo
            remaining = budget - total
            found = remote.get(id(sp)) if remote else None
            if isinstance(found, int):
                data.error_code = found
            elif found is not None:
                data.records = found.records
                total += len(found.records)
                if found.aborted is not None:
                    data.aborted_transactions = [
                        FetchResponse.AbortedTransaction(producer_id=a.producer_id,
                                                         first_offset=a.first_offset)
                        for a in found.aborted]
            elif sp.fetch_offset < end and (remaining > 0 or total == 0):
                limit = min(sp.max_bytes, remaining)
                try:
                    chunk = plog.read(sp.fetch_offset, limit,
                                      max_offset=end if bounded else None)
                except OffsetOutOfRangeError as exc:
                    log.info("fetch %s-%d from %s: %s", sp.topic, sp.partition, ctx.peer, exc)
                    data.error_code = OffsetOutOfRangeError.errno
                else:
                    if chunk.size and (total == 0 or chunk.size <= limit):
                        # A FileRecords stands in for the bytes until encode_frame swaps it
                        # for a token (zero copy); the generated field only knows bytes.
                        data.records = _records(chunk, zero_copy)  # type: ignore[assignment]
                        total += chunk.size
                        if read_committed:
                            data.aborted_transactions = [
                                FetchResponse.AbortedTransaction(
                                    producer_id=a.producer_id, first_offset=a.first_offset)
                                for a in plog.aborted_transactions(sp.fetch_offset, end)]
            elif not log_start <= sp.fetch_offset <= leo:
                data.error_code = OffsetOutOfRangeError.errno  # (past the LSO is no error)
        if plan.incremental and not _changed(sp, data):
            continue
        sp.last_high_watermark = data.high_watermark
        sp.last_log_start = data.log_start_offset
        key = sp.topic_id if by_id else sp.topic
        entry = topics.get(key)
        if entry is None:
            entry = topics[key] = FetchResponse.FetchableTopicResponse(
                topic=sp.topic, topic_id=sp.topic_id)
        entry.partitions.append(data)
    if ctx.broker.metrics is not None:
        ctx.broker.metrics.record_fetch(topics.values(), ctx.broker.topics)
    return FetchResponse(session_id=plan.session_id, responses=list(topics.values()))


def _changed(sp: SessionPartition, data: FetchResponse.PartitionData) -> bool:
    return bool(data.records) or data.error_code != 0 or \
        data.high_watermark != sp.last_high_watermark or \
        data.log_start_offset != sp.last_log_start


def _records(chunk: object, zero_copy: bool) -> bytes | FileRecords:
    size = chunk.size  # type: ignore[attr-defined]
    if zero_copy and _ZERO_COPY and size >= ZERO_COPY_MIN_BYTES:
        try:
            return FileRecords.reopen(chunk.chunks, size)  # type: ignore[attr-defined]
        except OSError:
            pass  # no zero-copy for this one (e.g. out of file descriptors): copy instead
    return chunk.to_bytes()  # type: ignore[attr-defined]
