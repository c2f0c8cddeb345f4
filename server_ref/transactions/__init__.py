"""The transaction coordinator of the reference broker (transactions v1, KIP-98/360/447).

``state`` (a transactional id's metadata and Kafka's states), ``statelog`` (the
``__transaction_state`` record layout, append and replay), ``markers`` (COMMIT/ABORT
control batches on data and offsets partitions), ``coordinator`` (the state machine,
two-phase completion, timeouts, recovery at start), ``txn_cluster`` (cluster mode: the ids of
the ``__transaction_state`` partitions this broker leads, loaded and dropped with their
leadership, markers sent to the partitions' leaders; ``server_ref/cluster/txn_link.py``).
"""

from server_ref.transactions.coordinator import COORDINATOR_EPOCH, TransactionCoordinator
from server_ref.transactions.state import TxnMetadata, TxnState
from server_ref.transactions.statelog import STATE_TOPIC

__all__ = ["COORDINATOR_EPOCH", "STATE_TOPIC", "TransactionCoordinator", "TxnMetadata",
           "TxnState"]
