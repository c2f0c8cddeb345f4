"""ConsumerGroupMetadata: what a transactional producer needs of a consumer's group.

``consumer.group_metadata()`` returns it; ``producer.send_offsets_to_transaction(offsets,
consumer.group_metadata())`` sends it with the offsets, so the group coordinator refuses a
member that a rebalance has fenced (KIP-447: an older generation, another member id).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ConsumerGroupMetadata"]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadata:
    """A consumer's group membership at one moment: the generation is -1 and the member id
    empty while the consumer is not a member (before the first join, after leaving)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
