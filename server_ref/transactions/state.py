"""A transactional id's state, as Kafka's TransactionMetadata keeps it.

States carry Kafka's ids (the byte in ``__transaction_state`` values) and names (what
ListTransactions and DescribeTransactions show). A transaction goes Empty → Ongoing (first
partition added) → PrepareCommit/PrepareAbort (EndTxn, or a timeout) → CompleteCommit/
CompleteAbort (every marker written) → Ongoing again with the next AddPartitionsToTxn.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

__all__ = ["TxnMetadata", "TxnState", "NO_PRODUCER_ID", "MAX_EPOCH"]

NO_PRODUCER_ID = -1
MAX_EPOCH = 32767  # Short.MAX_VALUE; Kafka hands out a new producer id at MAX_EPOCH - 1


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return _NAMES[self]

    @property
    def is_prepared(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @classmethod
    def from_kafka_name(cls, name: str) -> TxnState | None:
        for state, known in _NAMES.items():
            if known == name:
                return state
        return None


_NAMES = {
    TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit", TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit", TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead", TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}


@dataclass(slots=True)
class TxnMetadata:
    """One transactional id: its producer, the open transaction's partitions and times."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1  # when the first partition of the open transaction was added
    last_update_ms: int = -1
    # Epoch of the request that may legitimately retry (EndTxn, InitProducerId) after a
    # bump: Kafka's lastProducerEpoch. Either -1 or producer_epoch - 1 (the state log
    # stores only whether it is set, see statelog).
    last_epoch: int = -1
    client_version: int = 0  # the transaction protocol the producer speaks (0: v1, 2: v2)
    # Transactions v2 at the last epoch: the id the EndTxn handed out, taken at Complete*
    # (Kafka's NextProducerId), and the id before it, for a retry (PreviousProducerId).
    next_producer_id: int = -1
    previous_producer_id: int = -1

    def sorted_partitions(self) -> list[tuple[str, int]]:
        return sorted(self.partitions)
