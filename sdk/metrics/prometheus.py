"""Prometheus export of a client's metrics through ``prometheus_client`` (the
``prometheus`` extra).

``enable_prometheus(client)`` registers a collector that reads ``client.metrics()`` at
each scrape; with ``port=`` it also starts ``prometheus_client``'s HTTP server. Names
follow the JMX exporter's habit: ``kafka_<group>_<name>`` with dashes as underscores
(``kafka_producer_metrics_record_send_total``), tags as labels (``client_id``,
``node_id``, ``topic``, ``partition``). Every metric is exported as a gauge: Java's
totals are running sums of a sensor, not Prometheus counters with resets.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from sdk.metrics.registry import MetricName, MetricsRegistry

try:
    from prometheus_client import REGISTRY, CollectorRegistry, start_http_server
    from prometheus_client.core import GaugeMetricFamily
    from prometheus_client.registry import Collector
except ImportError as exc:  # the optional extra
    raise ImportError("Prometheus export needs prometheus_client: "
                      "pip install 'kafka-sdk[prometheus]'") from exc

__all__ = ["KafkaClientCollector", "enable_prometheus", "prometheus_name"]

_BAD = re.compile(r"[^a-zA-Z0-9_]")


def prometheus_name(metric: MetricName, namespace: str = "kafka") -> str:
    """``producer-metrics`` / ``record-send-total`` -> ``kafka_producer_metrics_record_send_total``."""
    return _BAD.sub("_", f"{namespace}_{metric.group}_{metric.name}")


def _reader(source: Any) -> Callable[[], Mapping[MetricName, float]]:
    if isinstance(source, MetricsRegistry):
        return source.snapshot
    read = getattr(source, "metrics", None)
    if callable(read):
        return read
    if callable(source):
        return source
    raise TypeError(f"expected a kafka-sdk client, a MetricsRegistry or a function returning "
                    f"the metrics, not {source!r}")


class KafkaClientCollector(Collector):
    """A ``prometheus_client`` collector reading one client's metrics at each scrape."""

    def __init__(self, source: Any, namespace: str = "kafka") -> None:
        self._read = _reader(source)
        self._namespace = namespace

    def collect(self) -> Iterator[GaugeMetricFamily]:
        families: dict[str, tuple[list[str], list[tuple[MetricName, float]], str]] = {}
        for metric, value in sorted(self._read().items()):
            name = prometheus_name(metric, self._namespace)
            entry = families.get(name)
            if entry is None:
                entry = families[name] = ([], [], metric.description or metric.name)
            for key in metric.tags:
                label = _BAD.sub("_", key)
                if label not in entry[0]:
                    entry[0].append(label)
            entry[1].append((metric, value))
        for name, (labels, values, text) in families.items():
            family = GaugeMetricFamily(name, text, labels=labels)
            for metric, value in values:
                tags = {_BAD.sub("_", k): v for k, v in metric.tags.items()}
                family.add_metric([tags.get(label, "") for label in labels], value)
            yield family


def enable_prometheus(source: Any, *, registry: CollectorRegistry | None = None,
                      port: int | None = None, addr: str = "0.0.0.0",
                      namespace: str = "kafka") -> KafkaClientCollector:
    """Export ``source``'s metrics (a client, a MetricsRegistry or a function returning the
    mapping) in ``registry`` (default: prometheus_client's global one); with ``port``,
    also serve ``/metrics`` there. Returns the collector (``registry.unregister`` it to
    stop)."""
    collector = KafkaClientCollector(source, namespace)
    (registry if registry is not None else REGISTRY).register(collector)
    if port is not None:
        start_http_server(port, addr=addr, registry=registry if registry is not None
                          else REGISTRY)
    return collector
