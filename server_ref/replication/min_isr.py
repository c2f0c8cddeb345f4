"""The minimum ISR a partition's acks=all writes need: ``min.insync.replicas`` capped at the
partition's replica count, as Apache Kafka's ``Partition.effectiveMinIsr``.

Kafka puts no upper bound on ``min.insync.replicas`` (a topic with one replica may say 2),
and its leader never demands more in-sync replicas than the partition has: RF=1 with
``min.insync.replicas=2`` takes acks=all writes, and RF=2 with ``min.insync.replicas=3``
takes them while both replicas are in sync. Every decision the broker makes from the
setting (refusing before the append, NOT_ENOUGH_REPLICAS_AFTER_APPEND, the coordinators'
durable writes) reads it through ``effective_min_isr``.

The replica count is the partition's assignment as this broker last saw it (during a
reassignment the adding replicas count too, as in Kafka, whose leader tracks every
assigned replica); a single node (no replica state) has one replica.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from server_ref.config import BrokerConfig
    from server_ref.topics import Partition

__all__ = ["configured_min_isr", "effective_min_isr", "min_isr_text", "replica_count"]


def replica_count(partition: Partition) -> int:
    """The partition's assigned replicas (1 on a single node)."""
    state = partition.replica
    if state is None or not state.replicas:
        return 1
    return len(state.replicas)


def configured_min_isr(partition: Partition, config: BrokerConfig) -> int:
    """``min.insync.replicas`` of the partition's topic (its override, else the broker's)."""
    return int(partition.topic.config_value("min.insync.replicas", config))


def effective_min_isr(partition: Partition, config: BrokerConfig) -> int:
    """``min.insync.replicas`` capped at the replica count: what acks=all requires."""
    return min(configured_min_isr(partition, config), replica_count(partition))


def min_isr_text(partition: Partition, config: BrokerConfig) -> str:
    """The setting for an error message: "2", or "3 (2 effective: the partition has 2
    replicas)" when capped."""
    configured = configured_min_isr(partition, config)
    replicas = replica_count(partition)
    if configured <= replicas:
        return str(configured)
    noun = "replica" if replicas == 1 else "replicas"
    return f"{configured} ({replicas} effective: the partition has {replicas} {noun})"
