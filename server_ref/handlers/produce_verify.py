"""Produce in cluster mode with transactional batches: verified with the transaction
coordinator before they are appended (KIP-890 part 1; part 2 for Produce v12+).

A partition's leader need not be the coordinator of the producer's transactional id. Before
the append it asks the coordinator (``cluster/txn_link.verify``: AddPartitionsToTxn v5
from broker to broker, or in-process when this broker is the coordinator) whether the
producer is current and the partition is in its open transaction; for Produce v12+
(transactions v2) the question adds the partition to the transaction, and the coordinator
answers once the ISR of its state partition has that. Each verified (partition, producer)
has a guard from before the question until the append; a transaction marker for that
producer on that partition meanwhile removes it and the batch is refused (as Kafka's
verification state entries), so a batch verified in a transaction that then ended cannot
open a new one the coordinator does not know of. (The guards go with the markers; one left
by a refused verification is taken over by the next.) Coordinator answers the producer should retry (not there,
moving, loading, a transaction completing) are NOT_ENOUGH_REPLICAS, as Kafka answers them.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from sdk.errors import (
    BrokerResponseError,
    InvalidTxnStateError,
    TransactionAbortableError,
    for_code,
)
from sdk.protocol.messages.produce import ProduceRequest
from sdk.records.header import (
    ATTRIBUTES_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORD_BATCH_OVERHEAD,
    TRANSACTIONAL_MASK,
)
from server_ref.handlers import RequestContext

__all__ = ["check_verified", "has_transactional_batch", "verified_produce"]

_ATTRIBUTES = struct.Struct(">h")
_PRODUCER = struct.Struct(">qh")

# (topic, partition) -> (the coordinator's answer, the guard held while it was asked)
Verdicts = dict[tuple[str, int], tuple[int, object | None]]


def _transactional(records: bytes | None) -> tuple[int, int] | None:
    """(producer id, epoch) of a transactional batch, else None."""
    if not records or len(records) < RECORD_BATCH_OVERHEAD:
        return None
    if not _ATTRIBUTES.unpack_from(records, ATTRIBUTES_OFFSET)[0] & TRANSACTIONAL_MASK:
        return None
    pid, epoch = _PRODUCER.unpack_from(records, PRODUCER_ID_OFFSET)
    return int(pid), int(epoch)


def has_transactional_batch(req: ProduceRequest) -> bool:
    return req.transactional_id is not None and any(
        _transactional(data.records) is not None
        for topic in req.topic_data for data in topic.partition_data)


async def verified_produce(ctx: RequestContext, req: ProduceRequest,
                           produce: Callable[[Verdicts], Any]) -> Any:
    """Verify every transactional batch this broker leads, then ``produce(verdicts)``
    (the ordinary cluster produce, whose transaction check reads the verdicts)."""
    from server_ref.cluster.txn_link import verify

    broker = ctx.broker
    coordinator = broker.transactions
    assert coordinator is not None and req.transactional_id is not None
    wanted: dict[tuple[int, int], list[tuple[str, int]]] = defaultdict(list)
    for topic_data in req.topic_data:
        topic = broker.topics.get(topic_data.name)
        for data in topic_data.partition_data:
            producer = _transactional(data.records)
            if producer is None or topic is None or \
                    not 0 <= data.index < len(topic.partitions):
                continue
            replica = topic.partitions[data.index].replica
            if replica is not None and replica.is_leader:
                wanted[producer].append((topic_data.name, data.index))
    verdicts: Verdicts = {}
    guards = coordinator.produce_guards
    for (pid, epoch), partitions in wanted.items():
        # The guard exists before the question is asked: a marker for the producer on the
        # partition while it is out removes it (concurrent requests share one guard).
        held = {(name, index): guards.setdefault((name, index, pid), object())
                for name, index in partitions}
        codes = await verify(broker, coordinator._cluster.peers, req.transactional_id, pid,
                             epoch, partitions, add=ctx.api_version >= 12)
        for key, code in codes.items():
            verdicts[key] = (code, held.get(key))
    result = produce(verdicts)
    if hasattr(result, "__await__"):
        result = await result
    return result


def check_verified(ctx: RequestContext, verdicts: Verdicts, name: str, index: int,
                   producer_id: int) -> None:
    """Right before the append: the coordinator's verdict on this batch, and no marker
    for the producer came in between."""
    code, guard = verdicts.get((name, index), (None, None))
    if code is None:
        raise InvalidTxnStateError(f"{name}-{index} was not verified with the coordinator")
    if code:
        error: BrokerResponseError = for_code(code)(
            f"the transaction coordinator refused {name}-{index}")
        if isinstance(error, InvalidTxnStateError) and ctx.api_version >= 11:
            raise TransactionAbortableError(error.message) from None
        raise error
    coordinator = ctx.broker.transactions
    if guard is None or coordinator is None or \
            coordinator.produce_guards.get((name, index, producer_id)) is not guard:
        message = f"the transaction of producer {producer_id} on {name}-{index} ended"
        if ctx.api_version >= 11:
            raise TransactionAbortableError(message)
        raise InvalidTxnStateError(message)
