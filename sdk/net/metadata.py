"""The cluster metadata cache: brokers, topics, partition leaders, controller. Pure state.

:class:`ClusterMetadata` is filled from Metadata responses by :meth:`ClusterMetadata.apply`
and read with cheap lookups (``leader_for``, ``partitions_for``, ``broker``...). It does no
IO: the network client (``sdk.net.client.NetClient``) decides when to refresh it (on
stale-metadata errors, on ``metadata_max_age_ms``, when a caller needs an unknown topic).

Two details matter to callers:

* ``TopicInfo.partition_ids`` and ``TopicInfo.available_ids`` are tuples that are replaced,
  not mutated, when a refresh changes them, so a caller may cache them and detect a change
  with an identity check (the producer's partitioners do).
* A refresh never moves a partition's leader back to an older leader epoch (KIP-320): a
  response from a broker with stale information does not undo newer knowledge.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from sdk.protocol.messages.metadata import MetadataResponse

__all__ = ["BrokerInfo", "ClusterMetadata", "PartitionInfo", "TopicInfo"]

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int  # NO_LEADER (-1) while no leader is known
    leader_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


@dataclass(slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID | None = None
    is_internal: bool = False
    error_code: int = 0
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    partition_ids: tuple[int, ...] = ()
    """All partition ids, sorted."""
    available_ids: tuple[int, ...] = ()
    """Partitions that currently have a leader, sorted."""

    def _recompute(self) -> None:
        ids = tuple(sorted(self.partitions))
        if ids != self.partition_ids:
            self.partition_ids = ids
        avail = tuple(p for p in ids if self.partitions[p].leader >= 0)
        if avail != self.available_ids:
            self.available_ids = avail


class ClusterMetadata:
    """What the client knows about the cluster. ``version`` grows with every applied update."""

    def __init__(self) -> None:
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.cluster_id: str | None = None
        self.controller_id: int = -1
        self.version = 0
        self.updated_at: float = 0.0  # time.monotonic() of the last update; 0 = never

    # ------------------------------------------------------------------ lookups

    def broker(self, node_id: int) -> BrokerInfo | None:
        return self.brokers.get(node_id)

    def topic(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def partitions_for(self, topic: str) -> tuple[int, ...] | None:
        """All partition ids of ``topic``, or None if the topic is unknown (or has an error)."""
        info = self.topics.get(topic)
        if info is None or info.error_code or not info.partition_ids:
            return None
        return info.partition_ids

    def leader_for(self, topic: str, partition: int) -> int | None:
        """The leader's node id, or None when the topic, partition or leader is unknown."""
        info = self.topics.get(topic)
        if info is None:
            return None
        p = info.partitions.get(partition)
        if p is None or p.leader < 0:
            return None
        return p.leader

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        info = self.topics.get(topic)
        return None if info is None else info.partitions.get(partition)

    def partitions_led_by(self, node_id: int) -> list[tuple[str, int]]:
        return [
            (name, p.partition)
            for name, info in self.topics.items()
            for p in info.partitions.values()
            if p.leader == node_id
        ]

    def age_s(self) -> float:
        """Seconds since the last update (infinite before the first)."""
        return float("inf") if not self.updated_at else time.monotonic() - self.updated_at

    # ------------------------------------------------------------------ updates

    def apply(self, response: MetadataResponse, *, all_topics: bool = False,
              requested: Iterable[str] = ()) -> None:
        """Merge a Metadata response.

        Brokers are replaced by the response's list. Topics in the response replace what
        was known of them; with ``all_topics`` (the request asked for every topic) topics
        missing from the response are forgotten, and so are ``requested`` topics that the
        response omitted.
        """
        if response.brokers:
            self.brokers = {
                b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers
            }
        if response.cluster_id is not None:
            self.cluster_id = response.cluster_id
        self.controller_id = response.controller_id
        seen: set[str] = set()
        for t in response.topics:
            if t.name is None:
                continue  # a topic-id-only answer; this client addresses topics by name
            seen.add(t.name)
            self._apply_topic(t)
        if all_topics:
            for name in [n for n in self.topics if n not in seen]:
                del self.topics[name]
        for name in requested:
            if name not in seen:
                self.topics.pop(name, None)
        self.version += 1
        self.updated_at = time.monotonic()

    def _apply_topic(self, t: MetadataResponse.MetadataResponseTopic) -> None:
        name = t.name
        assert name is not None
        old = self.topics.get(name)
        info = TopicInfo(
            name=name,
            topic_id=t.topic_id if t.topic_id.int else None,
            is_internal=t.is_internal,
            error_code=t.error_code,
        )
        if old is not None:  # keep the tuple objects when nothing changed (identity checks)
            info.partition_ids, info.available_ids = old.partition_ids, old.available_ids
        for p in t.partitions:
            fresh = PartitionInfo(
                partition=p.partition_index,
                leader=p.leader_id if p.leader_id is not None else NO_LEADER,
                leader_epoch=p.leader_epoch,
                replicas=tuple(p.replica_nodes),
                isr=tuple(p.isr_nodes),
                offline_replicas=tuple(p.offline_replicas),
                error_code=p.error_code,
            )
            known = old.partitions.get(p.partition_index) if old is not None else None
            if (
                known is not None
                and known.leader_epoch >= 0
                and 0 <= fresh.leader_epoch < known.leader_epoch
            ):
                fresh = known  # stale answer: keep the newer leader (KIP-320)
            info.partitions[fresh.partition] = fresh
        if t.error_code and not t.partitions and old is not None and t.error_code in (5,):
            # LEADER_NOT_AVAILABLE while a topic is being created/moved: keep what we had.
            info.partitions = dict(old.partitions)
        info._recompute()
        self.topics[name] = info

    def mark_leader_unknown(self, topic: str, partition: int) -> None:
        """Forget a partition's leader after a NOT_LEADER-style error, until the next refresh."""
        info = self.topics.get(topic)
        if info is None:
            return
        p = info.partitions.get(partition)
        if p is None or p.leader < 0:
            return
        info.partitions[partition] = PartitionInfo(
            p.partition, NO_LEADER, p.leader_epoch, p.replicas, p.isr, p.offline_replicas,
            p.error_code,
        )
        info._recompute()
        self.version += 1
