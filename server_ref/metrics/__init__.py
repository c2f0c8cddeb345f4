"""Broker metrics with Kafka's names, on a Prometheus endpoint (``--metrics-port``).

``registry.py`` holds the counters (updated on the broker's loop, per request and per
produce/fetch partition), ``collect.py`` turns them and the broker's state into Prometheus
families, ``endpoint.py`` serves ``/metrics`` on the broker's loop, ``cluster.py`` reads
a cluster-mode broker's replica gauges and serves a controller node's metrics. ``prometheus_client``
(the ``broker-metrics`` extra) is imported only when the endpoint starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sdk.errors import ConfigError
from server_ref.metrics.registry import BrokerMetrics, request_name

if TYPE_CHECKING:
    from server_ref.broker import Broker
    from server_ref.metrics.endpoint import MetricsEndpoint
    from server_ref.server import KafkaServer

__all__ = ["BrokerMetrics", "request_name", "serve", "start_metrics"]


async def serve(collector: Any, host: str, port: int) -> MetricsEndpoint:
    """Serve ``collector``'s metrics on host:port (0: a free port) at ``/metrics``."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigError("invalid metrics port", key="metrics.port", value=port,
                          allowed="an int from 0 to 65535 (0: any free port)")
    try:
        from server_ref.metrics.endpoint import MetricsEndpoint
    except ImportError as exc:
        raise ConfigError(
            f"the metrics endpoint needs prometheus_client ({exc}); install it with "
            "pip install 'kafka-sdk[broker-metrics]'", key="metrics.port", value=port
        ) from None
    endpoint = MetricsEndpoint(collector)
    await endpoint.start(host, port)
    return endpoint


async def start_metrics(broker: Broker, server: KafkaServer | None, host: str,
                        port: int) -> BrokerMetrics:
    """Give ``broker`` its metrics and serve them on host:port (0: a free port, read back
    from ``broker.metrics.endpoint.port``)."""
    from server_ref.metrics.collect import BrokerCollector

    metrics = broker.metrics if broker.metrics is not None else BrokerMetrics()
    if broker.cluster is not None:
        from server_ref.metrics.cluster import attach_cluster_broker

        attach_cluster_broker(metrics, broker)
    metrics.endpoint = await serve(BrokerCollector(broker, server, metrics), host, port)
    broker.metrics = metrics
    return metrics
