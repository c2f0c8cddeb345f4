"""Share groups (KIP-932): ShareGroupHeartbeat v1, ShareGroupDescribe v1, ShareFetch v1-v2,
ShareAcknowledge v1-v2, translated to the :class:`~server_ref.share.ShareCoordinator`.

Version 0 (Kafka 4.0's early access) is not served, as Kafka 4.1+ does not. A ShareFetch
applies its acknowledgements first, then acquires records of every partition in the share
session (released ones first, then new ones) up to ``max_records``, and waits up to
``max_wait_ms`` when there are none. Records go out as the whole stored batches holding the
acquired offsets; the client keeps only the acquired ones (``acquired_records``).
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import uuid
from collections.abc import Awaitable
from typing import Any

from sdk.protocol.messages.share_acknowledge import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
)
from sdk.protocol.messages.share_fetch import ShareFetchRequest, ShareFetchResponse
from sdk.protocol.messages.share_group_describe import (
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
)
from sdk.protocol.messages.share_group_heartbeat import (
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from server_ref.handlers import RequestContext, handles
from server_ref.handlers.groups import client_host
from server_ref.share.coordinator import INVALID_REQUEST, ShareCoordinator, ShareSessionState
from server_ref.share.partition import InvalidAcknowledgement

INVALID_RECORD_STATE = 121
SHARE_SESSION_NOT_FOUND = 122
INVALID_SHARE_SESSION_EPOCH = 123
SHARE_SESSION_LIMIT_REACHED = 133
UNKNOWN_TOPIC_OR_PARTITION = 3
UNKNOWN_TOPIC_ID = 100
GROUP_ID_NOT_FOUND = 69
DEFAULT_MAX_RECORDS = 500
_READ_CHUNK = 1 << 18
_HEADER = struct.Struct(">qi")  # base offset, batch length
_LAST_DELTA = struct.Struct(">i")  # at byte 23 of a v2 batch
# Without an authorizer Kafka reports READ(3), DELETE(6), DESCRIBE(8) for a group.
_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)

PartKey = tuple[uuid.UUID, int]


def _next_epoch(epoch: int) -> int:
    return 1 if epoch >= (1 << 31) - 1 else epoch + 1


# ---------------------------------------------------------------------------- heartbeat


@handles(76, 1, 1)
def share_group_heartbeat(ctx: RequestContext, req: ShareGroupHeartbeatRequest
                          ) -> ShareGroupHeartbeatResponse:
    coordinator = ShareCoordinator.of(ctx.broker)
    coordinator.refresh_assignments()
    error, message, member, tell = coordinator.heartbeat(
        req.group_id, req.member_id, req.member_epoch, req.rack_id,
        req.subscribed_topic_names, ctx.client_id or "", client_host(ctx.peer))
    coordinator.flush()
    if error or member is None:
        return ShareGroupHeartbeatResponse(error_code=error, error_message=message)
    response = ShareGroupHeartbeatResponse(
        member_id=member.member_id, member_epoch=member.epoch,
        heartbeat_interval_ms=coordinator.heartbeat_interval_ms(req.group_id))
    if tell:
        response.assignment = ShareGroupHeartbeatResponse.Assignment(topic_partitions=[
            ShareGroupHeartbeatResponse.TopicPartitions(topic_id=tid, partitions=sorted(parts))
            for tid, parts in sorted(member.assignment.items(), key=lambda kv: str(kv[0]))])
    return response


@handles(77, 1, 1)
def share_group_describe(ctx: RequestContext, req: ShareGroupDescribeRequest
                         ) -> ShareGroupDescribeResponse:
    coordinator = ShareCoordinator.of(ctx.broker)
    r = ShareGroupDescribeResponse
    groups = []
    for group_id in req.group_ids:
        group = coordinator.groups.get(group_id)
        if group is None:
            groups.append(r.DescribedGroup(
                group_id=group_id, error_code=GROUP_ID_NOT_FOUND,
                error_message=f"Group {group_id} not found.", group_state="Dead",
                assignor_name=""))
            continue
        members = []
        for m in group.members.values():
            parts = []
            for tid, indexes in m.assignment.items():
                topic = ctx.broker.topics.by_id(tid)
                parts.append(r.TopicPartitions(topic_id=tid, topic_name=topic.name if topic
                                               else "", partitions=sorted(indexes)))
            members.append(r.Member(
                member_id=m.member_id, rack_id=m.rack, member_epoch=m.epoch,
                client_id=m.client_id, client_host=m.client_host,
                subscribed_topic_names=list(m.topics),
                assignment=r.Assignment(topic_partitions=parts)))
        groups.append(r.DescribedGroup(
            group_id=group_id, group_state=group.state, group_epoch=group.epoch,
            assignment_epoch=group.assignment_epoch, assignor_name="simple", members=members,
            authorized_operations=_GROUP_OPERATIONS if req.include_authorized_operations
            else -(1 << 31)))
    return r(groups=groups)


# ---------------------------------------------------------------------------- fetch


class _Fetch:
    """One ShareFetch: its session, the partitions' answers, what was acquired."""

    def __init__(self, ctx: RequestContext, coordinator: ShareCoordinator,
                 session: ShareSessionState, max_records: int, max_bytes: int) -> None:
        self.ctx = ctx
        self.coordinator = coordinator
        self.session = session
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.answers: dict[PartKey, ShareFetchResponse.PartitionData] = {}
        self.acquired = 0

    def answer(self, key: PartKey) -> ShareFetchResponse.PartitionData:
        data = self.answers.get(key)
        if data is None:
            data = self.answers[key] = ShareFetchResponse.PartitionData(
                partition_index=key[1], records=b"",
                current_leader=ShareFetchResponse.LeaderIdAndEpoch(
                    leader_id=self.ctx.broker.node_id, leader_epoch=0))
        return data

    def acquire_all(self) -> None:
        broker = self.ctx.broker
        group_id, member_id = self.session.group_id, self.session.member_id
        coordinator = self.coordinator
        lock_ms = coordinator.lock_ms(group_id)
        max_locks = coordinator.max_locks(group_id)
        committed = coordinator.config(group_id, "share.isolation.level") == "read_committed"
        budget = self.max_bytes
        for key in sorted(self.session.partitions, key=lambda k: (str(k[0]), k[1])):
            if self.acquired >= self.max_records or budget <= 0:
                break
            topic = broker.topics.by_id(key[0])
            if topic is None or not 0 <= key[1] < len(topic.partitions):
                self.answer(key).error_code = (UNKNOWN_TOPIC_ID if topic is None
                                               else UNKNOWN_TOPIC_OR_PARTITION)
                continue
            partition = topic.partitions[key[1]]
            plog = partition.log
            end = plog.last_stable_offset if committed else plog.log_end_offset
            if broker.cluster is not None:  # the partition's leader serves, to its HW
                from server_ref.replication.reads import leader_error

                code = leader_error(partition, -1)
                if code:  # the client looks for the leader the metadata log names
                    data = self.answer(key)
                    data.error_code = code
                    found = broker.cluster.image.topics.get(topic.name)
                    p = None if found is None else found.partitions.get(key[1])
                    if p is not None:
                        data.current_leader = ShareFetchResponse.LeaderIdAndEpoch(
                            leader_id=p.leader, leader_epoch=p.leader_epoch)
                    continue
                end = min(end, partition.replica.high_watermark)
            sp = coordinator.share_partition(group_id, key[0], partition)
            ranges = sp.acquire(member_id, plog.log_start_offset, end,
                                self.max_records - self.acquired, lock_ms, max_locks,
                                broker.now_ms())
            if not ranges:
                continue
            coordinator.mark_dirty(sp)
            data = self.answer(key)
            data.acquired_records = [ShareFetchResponse.AcquiredRecords(
                first_offset=f, last_offset=last, delivery_count=c) for f, last, c in ranges]
            data.records = _batches_covering(plog, ranges)
            budget -= len(data.records)
            self.acquired += sum(last - f + 1 for f, last, _ in ranges)

    def watched(self) -> list[Any]:
        out = []
        for topic_id, index in self.session.partitions:
            topic = self.ctx.broker.topics.by_id(topic_id)
            if topic is not None and 0 <= index < len(topic.partitions):
                out.append(topic.partitions[index])
        return out


def _batches_covering(plog: Any, ranges: list[tuple[int, int, int]]) -> bytes:
    """The stored batches holding the acquired offsets, each once, in log order."""
    parts: list[bytes] = []
    covered = -1  # offsets below this are in the batches taken already
    for first, last, _ in ranges:
        offset = max(first, covered)
        while offset <= last:
            chunk = plog.read(offset, _READ_CHUNK).to_bytes()
            pos = 0
            while pos + 27 <= len(chunk):
                base, length = _HEADER.unpack_from(chunk, pos)
                size = length + 12
                if base > last or pos + size > len(chunk):
                    break
                (delta,) = _LAST_DELTA.unpack_from(chunk, pos + 23)
                end = base + delta + 1
                if end > covered:
                    parts.append(chunk[pos:pos + size])
                    covered = end
                pos += size
            if covered <= offset:  # nothing more to read (the log ends here)
                break
            offset = covered
    return b"".join(parts)


def _not_leader(broker: Any, key: PartKey) -> int:
    """Cluster mode: NOT_LEADER_OR_FOLLOWER for a partition this broker does not lead."""
    if broker.cluster is None:
        return 0
    from server_ref.replication.reads import leader_error

    topic = broker.topics.by_id(key[0])
    if topic is None or not 0 <= key[1] < len(topic.partitions):
        return 0  # (answered as before: no records were acquired here)
    return leader_error(topic.partitions[key[1]], -1)


def _apply_acks(coordinator: ShareCoordinator, session: ShareSessionState,
                topics: list[Any], renew_ack: bool = False
                ) -> dict[PartKey, tuple[int, str | None]]:
    """Every acknowledgement batch of the request; per partition the first error.
    ``renew_ack``: a v2 request with IsRenewAck, which may carry RENEW (KIP-1222)."""
    results: dict[PartKey, tuple[int, str | None]] = {}
    limit = coordinator.delivery_limit(session.group_id)
    renew_deadline = None  # RENEW refused: the group's share.renew.acknowledge.enable is off
    if renew_ack and coordinator.config(session.group_id, "share.renew.acknowledge.enable"):
        renew_deadline = coordinator.broker.now_ms() + coordinator.lock_ms(session.group_id)
    woke = False
    for topic in topics:
        for p in topic.partitions:
            if not p.acknowledgement_batches:
                continue
            key = (topic.topic_id, p.partition_index)
            moved = _not_leader(coordinator.broker, key)
            if moved:  # cluster mode: acknowledged at a broker that no longer leads it
                results[key] = (moved, "this broker does not lead the partition")
                continue
            sp = coordinator.partitions.get((session.group_id, key[0], key[1]))
            code, message = 0, None
            for batch in p.acknowledgement_batches:
                if sp is None:
                    code, message = INVALID_RECORD_STATE, "no records were acquired here"
                    break
                try:
                    woke |= sp.acknowledge(session.member_id, batch.first_offset,
                                           batch.last_offset, list(batch.acknowledge_types),
                                           limit, renew_ack=renew_ack,
                                           renew_deadline=renew_deadline)
                except InvalidAcknowledgement as exc:
                    if not code:
                        code = INVALID_REQUEST if exc.invalid_request else INVALID_RECORD_STATE
                        message = str(exc)
            if sp is not None:
                coordinator.mark_dirty(sp)
            results[key] = (code, message)
    if woke:
        coordinator.wake()
    return results


def _open_session(ctx: RequestContext, coordinator: ShareCoordinator, group_id: str,
                  member_id: str, epoch: int, requested: set[PartKey],
                  forgotten: set[PartKey]) -> ShareSessionState | int:
    """The session this request runs in (opened, moved on, or closed), or an error code."""
    key = (group_id, member_id)
    session = coordinator.sessions.get(key)
    if epoch == 0:
        if session is not None:  # a new session replaces the member's old one
            coordinator.release_in_session(session)
        elif len(coordinator.sessions) >= int(ctx.broker.config.get(
                "group.share.max.share.sessions")):
            return SHARE_SESSION_LIMIT_REACHED
        session = coordinator.sessions[key] = ShareSessionState(group_id, member_id, 1,
                                                                set(requested))
        return session
    if session is None:
        return SHARE_SESSION_NOT_FOUND
    if epoch == -1:
        return session
    if epoch != session.epoch:
        return INVALID_SHARE_SESSION_EPOCH
    session.partitions |= requested
    gone = forgotten & session.partitions
    if gone:
        coordinator.release_in_session(session, gone)
        session.partitions -= gone
    session.epoch = _next_epoch(session.epoch)
    return session


@handles(78, 1, 2)
def share_fetch(ctx: RequestContext, req: ShareFetchRequest
                ) -> ShareFetchResponse | Awaitable[ShareFetchResponse]:
    coordinator = ShareCoordinator.of(ctx.broker)
    if not req.group_id or not req.member_id:
        return ShareFetchResponse(error_code=INVALID_REQUEST,
                                  error_message="GroupId and MemberId must be set")
    epoch = req.share_session_epoch
    if epoch == 0 and any(p.acknowledgement_batches for t in req.topics for p in t.partitions):
        return ShareFetchResponse(error_code=INVALID_REQUEST, error_message=(
            "Acknowledge data present in the initial fetch request of a share session"))
    renew_ack = ctx.api_version >= 2 and req.is_renew_ack
    if renew_ack:  # acknowledgements only (KIP-1222), Kafka's check and message
        nonzero = "".join(f"{name} must be set to 0, " for name, value in (
            ("maxBytes", req.max_bytes), ("minBytes", req.min_bytes),
            ("maxRecords", req.max_records), ("maxWaitMs", req.max_wait_ms)) if value)
        if nonzero:
            return ShareFetchResponse(error_code=INVALID_REQUEST,
                                      error_message=f"{nonzero}if isRenewAck is true.")
    requested = {(t.topic_id, p.partition_index) for t in req.topics for p in t.partitions}
    forgotten = {(f.topic_id, p) for f in req.forgotten_topics_data for p in f.partitions}
    session = _open_session(ctx, coordinator, req.group_id, req.member_id, epoch, requested,
                            forgotten)
    if isinstance(session, int):
        coordinator.flush()
        return ShareFetchResponse(error_code=session)
    max_records = req.max_records if ctx.api_version >= 1 and req.max_records > 0 \
        else DEFAULT_MAX_RECORDS
    fetch = _Fetch(ctx, coordinator, session, max_records,
                   max(1, min(req.max_bytes, int(ctx.broker.config.get("fetch.max.bytes")))))
    for key, (code, message) in _apply_acks(coordinator, session, req.topics,
                                            renew_ack).items():
        data = fetch.answer(key)
        data.acknowledge_error_code, data.acknowledge_error_message = code, message
    if renew_ack and epoch != -1:  # nothing is acquired by a renewing fetch
        coordinator.flush()
        return _fetch_response(ctx, coordinator, fetch, epoch == 0, requested)
    if epoch == -1:  # the last request of the session: settle, give back, close
        coordinator.release_in_session(session)
        coordinator.sessions.pop((session.group_id, session.member_id), None)
        coordinator.flush()
        return _fetch_response(ctx, coordinator, fetch, epoch == 0, requested)
    fetch.acquire_all()
    if fetch.acquired or req.max_wait_ms <= 0 or any(
            d.error_code for d in fetch.answers.values()):
        coordinator.flush()
        return _fetch_response(ctx, coordinator, fetch, epoch == 0, requested)
    return _long_poll(ctx, coordinator, fetch, req.max_wait_ms, epoch == 0, requested)


async def _long_poll(ctx: RequestContext, coordinator: ShareCoordinator, fetch: _Fetch,
                     max_wait_ms: int, full: bool, requested: set[PartKey]
                     ) -> ShareFetchResponse:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_wait_ms / 1000
    while not fetch.acquired:
        remaining = deadline - loop.time()
        if remaining <= 0 or fetch.session is not coordinator.sessions.get(
                (fetch.session.group_id, fetch.session.member_id)):
            break
        waiter = coordinator.waiter()
        watched = fetch.watched()
        for partition in watched:
            partition.waiters.append(waiter)
        try:
            # Checked with the waiter in place (as the Fetch long poll): this coroutine
            # starts a loop turn after the handler's check, and a record appended (or
            # released) in between woke nobody, so the fetch sat out max_wait_ms.
            if ctx.broker.opened:
                fetch.acquire_all()
            if not fetch.acquired:
                await asyncio.wait_for(asyncio.shield(waiter), remaining)
        except TimeoutError:
            pass
        finally:
            for partition in watched:
                with contextlib.suppress(ValueError):
                    partition.waiters.remove(waiter)
        if ctx.broker.opened and not fetch.acquired:
            fetch.acquire_all()
    coordinator.flush()
    return _fetch_response(ctx, coordinator, fetch, full, requested)


def _fetch_response(ctx: RequestContext, coordinator: ShareCoordinator, fetch: _Fetch,
                    full: bool, requested: set[PartKey]) -> ShareFetchResponse:
    if full:  # a new session answers for every partition it names
        for key in requested:
            fetch.answer(key)
    by_topic: dict[uuid.UUID, ShareFetchResponse.ShareFetchableTopicResponse] = {}
    for key in sorted(fetch.answers, key=lambda k: (str(k[0]), k[1])):
        entry = by_topic.get(key[0])
        if entry is None:
            entry = by_topic[key[0]] = ShareFetchResponse.ShareFetchableTopicResponse(
                topic_id=key[0])
        entry.partitions.append(fetch.answers[key])
    response = ShareFetchResponse(responses=list(by_topic.values()))
    if ctx.api_version >= 1:
        response.acquisition_lock_timeout_ms = coordinator.lock_ms(fetch.session.group_id)
    return response


# ---------------------------------------------------------------------------- acknowledge


@handles(79, 1, 2)
def share_acknowledge(ctx: RequestContext, req: ShareAcknowledgeRequest
                      ) -> ShareAcknowledgeResponse:
    coordinator = ShareCoordinator.of(ctx.broker)
    if not req.group_id or not req.member_id:
        return ShareAcknowledgeResponse(error_code=INVALID_REQUEST,
                                        error_message="GroupId and MemberId must be set")
    epoch = req.share_session_epoch
    session = coordinator.sessions.get((req.group_id, req.member_id))
    if epoch == 0:
        return ShareAcknowledgeResponse(error_code=INVALID_SHARE_SESSION_EPOCH,
                                        error_message="ShareAcknowledge cannot open a session")
    if session is None:
        return ShareAcknowledgeResponse(error_code=SHARE_SESSION_NOT_FOUND)
    if epoch != -1 and epoch != session.epoch:
        return ShareAcknowledgeResponse(error_code=INVALID_SHARE_SESSION_EPOCH)
    results = _apply_acks(coordinator, session, req.topics,
                          ctx.api_version >= 2 and req.is_renew_ack)
    if epoch == -1:
        coordinator.release_in_session(session)
        coordinator.sessions.pop((session.group_id, session.member_id), None)
    else:
        session.epoch = _next_epoch(session.epoch)
    coordinator.flush()
    r = ShareAcknowledgeResponse
    by_topic: dict[uuid.UUID, Any] = {}
    for (topic_id, index), (code, message) in sorted(results.items(),
                                                      key=lambda kv: (str(kv[0][0]), kv[0][1])):
        entry = by_topic.get(topic_id)
        if entry is None:
            entry = by_topic[topic_id] = r.ShareAcknowledgeTopicResponse(topic_id=topic_id)
        entry.partitions.append(r.PartitionData(
            partition_index=index, error_code=code, error_message=message,
            current_leader=r.LeaderIdAndEpoch(leader_id=ctx.broker.node_id, leader_epoch=0)))
    response = r(responses=list(by_topic.values()))
    if ctx.api_version >= 2:
        response.acquisition_lock_timeout_ms = coordinator.lock_ms(session.group_id)
    return response
