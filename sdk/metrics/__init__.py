"""Client observability: metrics, hooks, exporters, tracing and debug logging.

Every client (``Producer``/``AsyncProducer``, ``Consumer``/``AsyncConsumer``,
``AdminClient``/``AsyncAdminClient``) keeps metrics named and tagged like the Java
client's (groups ``producer-metrics``, ``producer-topic-metrics``, ``producer-node-metrics``,
``consumer-fetch-manager-metrics``, ``consumer-coordinator-metrics``, ``consumer-metrics``,
``consumer-node-metrics``, ``admin-client-metrics``, ``admin-client-node-metrics``)::

    for name, value in producer.metrics().items():
        print(name.group, name.name, dict(name.tags), value)

Settings (every client): ``metrics_enabled`` (True), ``metrics_sample_window_ms`` (30000),
``metrics_num_samples`` (2), ``statistics_interval_ms`` + ``on_statistics`` (periodic
snapshots), ``hooks=[ClientHooks subclass instances]``, ``tracing=True`` (OpenTelemetry,
producer and consumer), ``debug="protocol,fetch,..."`` (:data:`DEBUG_CONTEXTS`).

Exporters, each one line (optional extras ``kafka-sdk[prometheus]`` / ``kafka-sdk[otel]``)::

    sdk.metrics.enable_prometheus(producer)            # prometheus_client's default registry
    sdk.metrics.enable_opentelemetry(consumer)         # the global OTel meter provider
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sdk.metrics.hooks import ClientHooks, HookSet
from sdk.metrics.logs import DEBUG_CONTEXTS
from sdk.metrics.registry import MetricName, MetricsRegistry, Sensor, SensorGroup

if TYPE_CHECKING:
    from sdk.metrics.otel import enable_opentelemetry
    from sdk.metrics.prometheus import KafkaClientCollector, enable_prometheus

__all__ = [
    "DEBUG_CONTEXTS",
    "ClientHooks",
    "HookSet",
    "KafkaClientCollector",
    "MetricName",
    "MetricsRegistry",
    "Sensor",
    "SensorGroup",
    "enable_opentelemetry",
    "enable_prometheus",
]

_LAZY = {
    "enable_prometheus": "sdk.metrics.prometheus",
    "KafkaClientCollector": "sdk.metrics.prometheus",
    "enable_opentelemetry": "sdk.metrics.otel",
}


def __getattr__(name: str) -> Any:
    # The exporters import their optional libraries: loaded only when asked for.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sdk.metrics' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
