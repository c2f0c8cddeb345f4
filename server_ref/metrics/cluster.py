"""Cluster-mode metrics: a broker's replica gauges read from its replica manager and
metadata image, and a controller node's own endpoint.

A broker in cluster mode reports what it leads (``leadercount``), hosts
(``partitioncount``: partitions it is a replica of) and leads short of replicas
(``underreplicatedpartitions``); the ISR shrinks and expands are counted by the replica
manager when the controller commits a change it asked for (as Kafka's leader marks
IsrShrinksPerSec / IsrExpandsPerSec). ``activecontrollercount`` is 0 on a broker-only node;
the controllers serve their own endpoint where the active one reports 1, so the sum over
every node of a cluster is 1, as with Kafka's KRaft controllers.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prometheus_client.core import Metric

    from server_ref.broker import Broker
    from server_ref.metrics.endpoint import MetricsEndpoint
    from server_ref.metrics.registry import BrokerMetrics

__all__ = ["ControllerCollector", "attach_cluster_broker", "start_controller_metrics"]


def attach_cluster_broker(metrics: BrokerMetrics, broker: Broker) -> None:
    """Read the replica gauges of ``broker`` (in cluster mode) from its cluster agent."""
    agent: Any = broker.cluster

    def led() -> list[Any]:
        return [p.replica for p in agent.replicas.led.values()
                if p.replica is not None and p.replica.is_leader]

    def hosted() -> int:
        from server_ref.replication.state import OFFLINE

        return sum(1 for topic in broker.topics for p in topic.partitions
                   if p.replica is not None and p.replica.role != OFFLINE)

    def offline() -> int:
        return sum(1 for topic in agent.image.topics.values()
                   for p in topic.partitions.values() if p.leader < 0)

    metrics.leader_count_source = lambda: len(led())
    metrics.under_replicated_source = lambda: sum(
        1 for state in led() if len(state.isr) < len(state.replicas))
    metrics.partition_count_source = hosted
    metrics.offline_partitions_source = offline
    metrics.active_controller_source = lambda: False  # a broker-only node


class ControllerCollector:
    """A controller node's families (Kafka's KafkaController metrics of a KRaft
    controller), read from its quorum controller at scrape time, on its loop."""

    def __init__(self, controller: Any) -> None:
        self.controller = controller

    def collect(self) -> Iterable[Metric]:
        return list(self._families())

    def _families(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        controller = self.controller
        image = controller.image
        partitions = [p for t in image.topics.values() for p in t.partitions.values()]
        brokers = list(image.brokers.values())

        def gauge(name: str, text: str, value: float) -> GaugeMetricFamily:
            family = GaugeMetricFamily(f"kafka_controller_kafkacontroller_{name}", text)
            family.add_metric([], value)
            return family

        yield gauge("activecontrollercount", "1 on the active controller",
                    1 if controller.node.is_leader else 0)
        yield gauge("globaltopiccount", "Topics in the cluster", len(image.topics))
        yield gauge("globalpartitioncount", "Partitions in the cluster", len(partitions))
        yield gauge("offlinepartitionscount", "Partitions without a leader",
                    sum(1 for p in partitions if p.leader < 0))
        yield gauge("preferredreplicaimbalancecount",
                    "Partitions whose leader is not their first replica",
                    sum(1 for p in partitions if p.replicas and p.leader != p.replicas[0]))
        yield gauge("activebrokercount", "Registered brokers not fenced",
                    sum(1 for b in brokers if not b.fenced))
        yield gauge("fencedbrokercount", "Registered brokers fenced",
                    sum(1 for b in brokers if b.fenced))


async def start_controller_metrics(controller: Any, host: str, port: int) -> MetricsEndpoint:
    """Serve a controller node's metrics on host:port (0: a free port)."""
    from server_ref.metrics import serve

    return await serve(ControllerCollector(controller), host, port)
