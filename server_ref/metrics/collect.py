"""The broker's metrics as Prometheus families (``prometheus_client``), built on the
broker's loop at scrape time.

Counters come from :class:`~server_ref.metrics.registry.BrokerMetrics`; gauges (partitions,
leaders, groups by state, open connections, log sizes) are read from the broker's state
when scraped, so keeping them costs nothing between scrapes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from server_ref.metrics.registry import TOPIC_COUNTERS, BrokerMetrics, request_name

if TYPE_CHECKING:
    from server_ref.broker import Broker
    from server_ref.server import KafkaServer

__all__ = ["BrokerCollector", "collect"]

_TOPIC_FAMILIES = (
    # (counter of TOPIC_COUNTERS, Kafka's BrokerTopicMetrics name without PerSec, help)
    ("bytes_in", "bytesin", "Bytes of record batches appended by Produce requests"),
    ("bytes_out", "bytesout", "Bytes of record batches sent in Fetch responses"),
    ("messages_in", "messagesin", "Records appended by Produce requests"),
    ("produce_requests", "totalproducerequests", "Partitions of Produce requests"),
    ("fetch_requests", "totalfetchrequests", "Partitions answered in Fetch responses"),
    ("failed_produce", "failedproducerequests", "Partitions of Produce requests refused"),
    ("failed_fetch", "failedfetchrequests", "Partitions of Fetch responses with an error"),
)
# Kafka's classic group states, reported even when no group is in them.
_GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")
_CONSUMER_GROUP_STATES = ("Empty", "Assigning", "Reconciling", "Stable", "Dead")  # KIP-848


def collect(broker: Broker, server: KafkaServer | None, metrics: BrokerMetrics
            ) -> list[Metric]:
    """Every family, from the broker's state now (call on the broker's loop)."""
    families: list[Metric] = []
    families.extend(_request_families(metrics))
    families.extend(_topic_families(metrics))
    families.extend(_replica_families(broker, metrics))
    families.extend(_group_families(broker))
    families.extend(_connection_families(server, metrics))
    families.extend(_log_families(broker))
    started = GaugeMetricFamily("kafka_server_start_time_seconds",
                                "When this broker started (Unix time)")
    started.add_metric([], metrics.started_s)
    families.append(started)
    return families


class BrokerCollector(Collector):
    """A ``prometheus_client`` collector over one broker; ``collect`` must run on the
    broker's loop (the endpoint serves on it)."""

    def __init__(self, broker: Broker, server: KafkaServer | None,
                 metrics: BrokerMetrics) -> None:
        self.broker = broker
        self.server = server
        self.metrics = metrics

    def collect(self) -> Iterable[Metric]:
        return collect(self.broker, self.server, self.metrics)


def _request_families(metrics: BrokerMetrics) -> Iterator[Metric]:
    requests = CounterMetricFamily(
        "kafka_network_requestmetrics_requests",
        "Requests received, by API and version (Kafka's RequestMetrics RequestsPerSec)",
        labels=["request", "version"])
    for key, count in sorted(metrics.requests.items()):
        requests.add_metric([request_name(key >> 8), str(key & 0xFF)], count)
    yield requests
    latency = HistogramMetricFamily(
        "kafka_network_requestmetrics_totaltimems",
        "Milliseconds from a request's arrival to its response being queued for sending "
        "(Kafka's RequestMetrics TotalTimeMs)", labels=["request"])
    for api_key, histogram in sorted(metrics.latency.items()):
        latency.add_metric([request_name(api_key)], histogram.cumulative(),
                           histogram.sum_ms)
    yield latency


def _topic_families(metrics: BrokerMetrics) -> Iterator[Metric]:
    topics = sorted(metrics.topics.items())
    for counter, name, text in _TOPIC_FAMILIES:
        index = TOPIC_COUNTERS.index(counter)
        family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}", text,
                                     labels=["topic"])
        for topic, counts in topics:
            family.add_metric([topic], counts[index])
        yield family


def _gauge(name: str, text: str, value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, text)
    family.add_metric([], value)
    return family


def _counter(name: str, text: str, value: float) -> CounterMetricFamily:
    family = CounterMetricFamily(name, text)
    family.add_metric([], value)
    return family


def _replica_families(broker: Broker, metrics: BrokerMetrics) -> Iterator[Metric]:
    topics = list(broker.topics)
    partitions = sum(len(topic.partitions) for topic in topics)
    hosted = (metrics.partition_count_source() if metrics.partition_count_source is not None
              else partitions)
    leaders = (metrics.leader_count_source() if metrics.leader_count_source is not None
               else hosted)
    under = (metrics.under_replicated_source() if metrics.under_replicated_source is not None
             else 0)
    active = (metrics.active_controller_source()
              if metrics.active_controller_source is not None else True)
    offline = (metrics.offline_partitions_source()
               if metrics.offline_partitions_source is not None else 0)
    yield _gauge("kafka_server_replicamanager_partitioncount",
                 "Partitions this broker hosts", hosted)
    yield _gauge("kafka_server_replicamanager_leadercount",
                 "Partitions this broker leads", leaders)
    yield _gauge("kafka_server_replicamanager_underreplicatedpartitions",
                 "Partitions led here with fewer in-sync replicas than replicas", under)
    yield _counter("kafka_server_replicamanager_isrshrinks",
                   "Times a partition led here lost a replica from its ISR",
                   metrics.isr_shrinks)
    yield _counter("kafka_server_replicamanager_isrexpands",
                   "Times a replica rejoined the ISR of a partition led here",
                   metrics.isr_expands)
    yield _gauge("kafka_controller_kafkacontroller_activecontrollercount",
                 "1 on the active controller", 1 if active else 0)
    yield _gauge("kafka_controller_kafkacontroller_offlinepartitionscount",
                 "Partitions without a leader", offline)
    yield _gauge("kafka_controller_kafkacontroller_globaltopiccount",
                 "Topics in the cluster", len(topics))
    yield _gauge("kafka_controller_kafkacontroller_globalpartitioncount",
                 "Partitions in the cluster", partitions)


def _group_families(broker: Broker) -> Iterator[Metric]:
    """Groups by protocol and state, as Kafka's group-coordinator-metrics: classic groups
    (JoinGroup/SyncGroup, and commit-only groups) and KIP-848 consumer groups."""
    states: dict[str, Counter[str]] = {"classic": Counter(), "consumer": Counter()}
    coordinator = broker.groups
    if coordinator is not None and coordinator.loaded:
        error, listed = coordinator.list_groups()
        if not error:
            for listing in listed:
                kind = listing.group_type or "classic"
                states.setdefault(kind, Counter())[listing.state] += 1
    for kind, known in (("classic", _GROUP_STATES), ("consumer", _CONSUMER_GROUP_STATES)):
        by_state = GaugeMetricFamily(
            f"kafka_server_group_coordinator_metrics_{kind}_group_count",
            f"{kind.capitalize()} groups by state", labels=["state"])
        for state in sorted(set(known) | set(states[kind])):
            by_state.add_metric([state], states[kind].get(state, 0))
        yield by_state
    total = GaugeMetricFamily("kafka_server_group_coordinator_metrics_group_count",
                              "Groups by protocol", labels=["protocol"])
    for kind, counts in sorted(states.items()):
        total.add_metric([kind], sum(counts.values()))
    yield total


def _connection_families(server: KafkaServer | None, metrics: BrokerMetrics
                         ) -> Iterator[Metric]:
    open_now: Counter[str] = Counter()
    if server is not None:
        open_now.update(conn.listener_name for conn in server.connections if not conn.closed)
    listeners = sorted(set(open_now) | set(metrics.connections_created))
    count = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count",
                              "Open client connections", labels=["listener"])
    created = CounterMetricFamily("kafka_server_socket_server_metrics_connection_creation",
                                  "Client connections accepted", labels=["listener"])
    for listener in listeners:
        count.add_metric([listener], open_now.get(listener, 0))
        created.add_metric([listener], metrics.connections_created.get(listener, 0))
    yield count
    yield created


def _log_families(broker: Broker) -> Iterator[Metric]:
    size = GaugeMetricFamily("kafka_log_log_size", "Bytes of a partition's segments",
                             labels=["topic", "partition"])
    end = GaugeMetricFamily("kafka_log_log_logendoffset", "A partition's log end offset",
                            labels=["topic", "partition"])
    start = GaugeMetricFamily("kafka_log_log_logstartoffset",
                              "A partition's log start offset", labels=["topic", "partition"])
    for topic in broker.topics:
        for partition in topic.partitions:
            labels = [topic.name, str(partition.index)]
            plog: Any = partition.log
            size.add_metric(labels, plog.size_in_bytes())
            end.add_metric(labels, plog.log_end_offset)
            start.add_metric(labels, plog.log_start_offset)
    yield size
    yield end
    yield start
