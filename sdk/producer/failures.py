"""The errors batches fail with when they cannot be delivered, and which unsent batches an
authentication failure dooms (the sender's failure rules; see sdk.producer.idempotence)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from sdk.errors import AuthenticationError, BrokerResponseError, DeliveryTimeoutError, KafkaError

if TYPE_CHECKING:
    from sdk.net.client import NetClient
    from sdk.producer.accumulator import RecordAccumulator
    from sdk.producer.batch import ProducerBatch
    from sdk.producer.idempotence import ProducerIdManager

__all__ = ["expired_error", "take_unauthenticated", "timeout_error"]


def timeout_error(batch: ProducerBatch, when: str,
                  ids: ProducerIdManager | None) -> DeliveryTimeoutError:
    """The DeliveryTimeoutError of a batch whose ``delivery_timeout_ms`` passed ``when``."""
    cause = batch.last_error or (ids.last_error if ids is not None else None)
    age_ms = (time.monotonic() - batch.created) * 1000
    text = (f"{batch.count} record(s) for {batch.topic}-{batch.partition} expired {when} "
            f"({age_ms:.0f} ms since the batch was created; delivery_timeout_ms reached)")
    if cause is not None:
        text += f"; last error: {cause}"
    return DeliveryTimeoutError(text, cause=cause)


def expired_error(batch: ProducerBatch, ids: ProducerIdManager | None) -> KafkaError:
    """The error of a sent batch whose delivery timeout passed between retries: the
    broker's own error when it answered every attempt (the batch was refused, not lost:
    e.g. NOT_ENOUGH_REPLICAS), else DeliveryTimeoutError (rules 2 and 3)."""
    last = batch.last_error
    if batch.outcome_unknown or not isinstance(last, BrokerResponseError):
        return timeout_error(batch, "while being retried", ids)
    age_ms = (time.monotonic() - batch.created) * 1000
    return type(last)(f"{last} (retried for {age_ms:.0f} ms, until delivery_timeout_ms)")


def take_unauthenticated(acc: RecordAccumulator, client: NetClient,
                         ids: ProducerIdManager | None) -> list[ProducerBatch]:
    """Never-sent batches that wait on a broker (or a producer id, or metadata) this
    client failed to authenticate with, taken out of their queues: they fail with that
    error now, as Java's producer does, instead of at delivery_timeout_ms (credentials
    do not fix themselves). Sent batches keep their sequence rules (DESIGN.md section 5)."""
    ids_blocked = (ids is not None and ids.producer_id < 0
                   and isinstance(ids.last_error, AuthenticationError))
    failed: list[ProducerBatch] = []
    with acc.lock:
        for queues in acc.queues.values():
            for pq in queues.values():
                if not pq.batches:
                    continue
                leader = client.metadata.leader_for(pq.topic, pq.partition)
                blocked = ids_blocked or leader is None or (
                    client.ready_connection(leader) is None
                    and isinstance(client.last_error(leader), AuthenticationError))
                while blocked and pq.batches:
                    failed.append(acc.pop_head(pq))
    return failed
