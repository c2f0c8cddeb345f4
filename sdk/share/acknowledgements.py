"""What a share consumer owes the broker for the records it acquired. Pure, no IO.

Every record handed out must be acknowledged once: ACCEPT (processed), RELEASE (give it
back now; it is delivered again, to any member), REJECT (never deliver it again: it is
archived). Offsets the broker acquired for us but that hold no record for the application
(transaction markers, compacted-away offsets) are acknowledged as GAP. On the wire a
partition's acknowledgements travel as batches of consecutive offsets with either one type
for the whole batch or one type per offset (Kafka's AcknowledgementBatch).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from sdk.types import TopicPartition

__all__ = ["AcknowledgeType", "Acknowledgements", "AckBatch", "to_batches"]


class AcknowledgeType(enum.IntEnum):
    """How a share consumer settles a record (Kafka's numbering on the wire)."""

    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


GAP = 0  # an acquired offset without a record to hand out

AckBatch = tuple[int, int, list[int]]  # first offset, last offset, types


def to_batches(acks: Iterable[tuple[int, int]]) -> list[AckBatch]:
    """(offset, type) pairs -> batches of consecutive offsets; one type when all agree."""
    out: list[AckBatch] = []
    first = last = -2
    types: list[int] = []
    for offset, kind in sorted(acks):
        if offset == last:  # the same offset twice: the later acknowledgement wins
            types[-1] = kind
            continue
        if offset != last + 1 and types:
            out.append(_batch(first, last, types))
            types = []
        if not types:
            first = offset
        types.append(kind)
        last = offset
    if types:
        out.append(_batch(first, last, types))
    return out


def _batch(first: int, last: int, types: list[int]) -> AckBatch:
    if all(t == types[0] for t in types):
        return first, last, [types[0]]
    return first, last, types


class Acknowledgements:
    """Records handed out and not yet acknowledged, and acknowledgements not yet sent."""

    def __init__(self) -> None:
        # Handed out, waiting for the application: partition -> offsets.
        self.delivered: dict[TopicPartition, set[int]] = {}
        # Settled, waiting to be sent: partition -> {offset: type}.
        self.pending: dict[TopicPartition, dict[int, int]] = {}

    def hand_out(self, tp: TopicPartition, offsets: Iterable[int]) -> None:
        self.delivered.setdefault(tp, set()).update(offsets)

    def gap(self, tp: TopicPartition, offsets: Iterable[int]) -> None:
        pending = self.pending.setdefault(tp, {})
        for offset in offsets:
            pending[offset] = GAP

    def acknowledge(self, tp: TopicPartition, offset: int, kind: AcknowledgeType) -> None:
        """Settle one handed-out record; IllegalStateError-worthy cases raise ValueError."""
        delivered = self.delivered.get(tp)
        if delivered is None or offset not in delivered:
            raise ValueError(f"record {tp}@{offset} was not handed out by this consumer, "
                             f"or was acknowledged already")
        delivered.discard(offset)
        if not delivered:
            del self.delivered[tp]
        self.pending.setdefault(tp, {})[offset] = int(kind)

    def unacknowledged(self) -> int:
        return sum(len(v) for v in self.delivered.values())

    def accept_all(self) -> None:
        """Implicit mode: what the application was given and did not settle is accepted."""
        for tp, offsets in self.delivered.items():
            pending = self.pending.setdefault(tp, {})
            for offset in offsets:
                pending[offset] = AcknowledgeType.ACCEPT
        self.delivered.clear()

    def forget_delivered(self, tp: TopicPartition) -> None:
        """The partition left the share session: its locks are the broker's business now."""
        self.delivered.pop(tp, None)

    def take(self, partitions: Iterable[TopicPartition] | None = None
             ) -> dict[TopicPartition, list[AckBatch]]:
        """Remove and return the pending acknowledgements (of ``partitions``, or all)."""
        chosen = list(self.pending) if partitions is None else \
            [tp for tp in partitions if tp in self.pending]
        out: dict[TopicPartition, list[AckBatch]] = {}
        for tp in chosen:
            acks = self.pending.pop(tp)
            if acks:
                out[tp] = to_batches(acks.items())
        return out
