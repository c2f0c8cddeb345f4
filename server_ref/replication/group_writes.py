"""Group membership answers in cluster mode wait for the ISR, as Kafka's coordinator does.

Kafka's group coordinator appends a group's records (the member list at the end of a join,
the assignment at SyncGroup, a KIP-848 group's epochs and target assignment) to its
``__consumer_offsets`` partition with acks=-1 and answers only once they are committed, so
a member never acts on an assignment a failover could forget. Our coordinator journals to
the local leader replica of that partition; ``group_write_replicated`` holds a successful
answer until the ISR has everything the partition's log holds at that moment (the records
the request wrote, and anything before them), and turns it into the error Kafka's
coordinator runtime answers when that fails (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR:
the client finds the coordinator again and retries). Offset commits use the same wait
(``cluster/coordinators.py`` ``replicated``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from server_ref.broker import Broker

__all__ = ["group_write_replicated", "needs_wait"]


def needs_wait(broker: Broker, group_id: str, error: int) -> bool:
    """Whether a successful answer about ``group_id`` must wait: cluster mode, and the
    group's partition holds records past its high watermark."""
    if error or broker.cluster is None:
        return False
    partition = broker.offsets_journal.partition_for(group_id)
    state = partition.replica
    return state is None or not state.is_leader or \
        partition.log.log_end_offset > state.high_watermark


async def group_write_replicated(broker: Broker, group_id: str, error: int) -> int:
    """``error`` once the ISR has the group's journal records, else the coordinator error
    Kafka answers for a failed write."""
    if not needs_wait(broker, group_id, error):
        return error
    from server_ref.cluster.coordinators import replicated  # cluster mode only

    partition = broker.offsets_journal.partition_for(group_id)
    return (await replicated(broker, partition, {group_id: error}))[group_id]
