"""Produce on a broker in cluster mode: appends only at the leader, acks=all waits for the ISR.

Each partition goes through the single-node checks and append (``handlers.produce``) with
the leader epoch stamped into the batch; a broker that does not lead the partition answers
NOT_LEADER_OR_FOLLOWER. With ``acks=all`` an ISR smaller than ``min.insync.replicas`` (capped
at the partition's replica count, ``min_isr.py``) refuses before appending
(NOT_ENOUGH_REPLICAS); after the append the answer waits until the high
watermark passes the batch (the whole ISR has it), and is NOT_ENOUGH_REPLICAS_AFTER_APPEND
if the ISR shrank below the minimum meanwhile, or REQUEST_TIMED_OUT after the request's
timeout. ``acks=1`` answers at once.
"""

from __future__ import annotations

import asyncio
import struct
from typing import TYPE_CHECKING, Any

from sdk.errors import KafkaError, NotLeaderOrFollowerError
from sdk.protocol.messages.produce import ProduceRequest, ProduceResponse

if TYPE_CHECKING:
    from server_ref.handlers import RequestContext

__all__ = ["cluster_produce"]

_LAST_OFFSET_DELTA = struct.Struct(">i")
LAST_OFFSET_DELTA_AT = 23


def cluster_produce(ctx: RequestContext, req: ProduceRequest, produce_partition: Any,
                    error: Any) -> Any:
    broker = ctx.broker
    manager = broker.cluster.replicas
    # A broker whose heartbeat lease ran out (paused, cut off) may have been replaced as
    # leader: it answers as a non-leader until it has caught up (replication/lease.py).
    leading = broker.cluster.lease.may_lead()
    now = broker.now_ms()
    waits: list[tuple[ProduceResponse.PartitionProduceResponse, Any, int]] = []
    responses = []
    for topic_data in req.topic_data:
        topic = broker.topics.get(topic_data.name)
        parts = []
        for data in topic_data.partition_data:
            partition = None
            if topic is not None and 0 <= data.index < len(topic.partitions):
                partition = topic.partitions[data.index]
            state = partition.replica if partition is not None else None
            if partition is not None and (not leading or state is None
                                          or not state.is_leader):
                parts.append(error(data.index, NotLeaderOrFollowerError(
                    f"this broker does not lead {partition.name}")))
                continue
            isr = len(state.isr) if state is not None else 1
            epoch = state.leader_epoch if state is not None else 0
            result = produce_partition(ctx, topic, topic_data.name, data, req.acks, now,
                                       req.transactional_id, leader_epoch=epoch, isr_size=isr)
            parts.append(result)
            if result.error_code == 0 and partition is not None:
                manager.appended(partition)
                if req.acks == -1 and data.records:
                    last = result.base_offset + _LAST_OFFSET_DELTA.unpack_from(
                        data.records, LAST_OFFSET_DELTA_AT)[0]
                    waits.append((result, partition, last))
        responses.append(ProduceResponse.TopicProduceResponse(name=topic_data.name,
                                                              partition_responses=parts))
    if req.acks == 0:
        return None
    response = ProduceResponse(responses=responses)
    if not waits:
        return response
    return _after_isr(manager, response, waits, req.timeout_ms)


async def _after_isr(manager: Any, response: ProduceResponse,
                     waits: list[tuple[Any, Any, int]], timeout_ms: int
                     ) -> ProduceResponse:
    outcomes = await asyncio.gather(*(manager.wait_for_isr(partition, last, timeout_ms)
                                      for _result, partition, last in waits))
    for (result, _partition, _last), outcome in zip(waits, outcomes, strict=True):
        if isinstance(outcome, KafkaError):
            result.error_code = outcome.errno  # type: ignore[attr-defined]
            result.error_message = outcome.message
            result.base_offset = -1
    return response
