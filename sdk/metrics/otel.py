"""OpenTelemetry metrics bridge (the ``otel`` extra): observable gauges reading a client's
metrics at each collection.

``enable_opentelemetry(client)`` creates, on the given meter provider (default: the
global one), one observable gauge per metric name, called ``kafka.<group>.<name>``
(``kafka.producer-metrics.record-send-rate``), whose callback reports one observation
per tag set (``client-id``, ``node-id``, ``topic``, ``partition`` as attributes).
Metrics that appear later (a new topic, node or partition) are covered: the gauges are
made for every name the client's kind can have.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sdk.metrics.registry import MetricName, MetricsRegistry

try:
    from opentelemetry import metrics as otel_metrics
    from opentelemetry.metrics import CallbackOptions, Observation
except ImportError as exc:  # the optional extra
    raise ImportError("the OpenTelemetry bridge needs opentelemetry-api: "
                      "pip install 'kafka-sdk[otel]'") from exc

__all__ = ["enable_opentelemetry", "instrument_name"]


def instrument_name(metric: MetricName) -> str:
    return f"kafka.{metric.group}.{metric.name}"


def _catalogue() -> set[tuple[str, str]]:
    """(group, name) of the per-topic, per-node and per-partition metrics, which exist
    only once a topic, node or partition was seen."""
    from sdk.metrics.network import _NodeSensors
    from sdk.metrics.producer import _TopicSensors

    reg = MetricsRegistry({"client-id": ""})
    _TopicSensors(reg, "t")
    for prefix in ("producer", "consumer", "admin-client"):
        _NodeSensors(reg, f"{prefix}-node-metrics", "node-0")
    names = {(m.group, m.name) for m in reg}
    names.add(("consumer-fetch-manager-metrics", "records-lag"))
    return names


class _Bridge:
    def __init__(self, read: Callable[[], Mapping[MetricName, float]]) -> None:
        self._read = read
        self._snapshot: dict[tuple[str, str], list[tuple[MetricName, float]]] = {}
        self._taken_for = -1

    def observe(self, key: tuple[str, str]) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def callback(options: CallbackOptions) -> Iterable[Observation]:
            # One read of the client per collection: the first callback takes the snapshot.
            if not self._snapshot or key not in self._snapshot:
                self._refresh()
            out = [Observation(value, dict(metric.tags))
                   for metric, value in self._snapshot.pop(key, []) if not math.isnan(value)]
            return out

        return callback

    def _refresh(self) -> None:
        grouped: dict[tuple[str, str], list[tuple[MetricName, float]]] = {}
        for metric, value in self._read().items():
            grouped.setdefault((metric.group, metric.name), []).append((metric, value))
        self._snapshot = grouped


def enable_opentelemetry(source: Any, meter_provider: Any = None) -> list[Any]:
    """Report ``source``'s metrics (a client or a MetricsRegistry) through OpenTelemetry;
    returns the instruments created."""
    if isinstance(source, MetricsRegistry):
        read = source.snapshot
    elif callable(getattr(source, "metrics", None)):
        read = source.metrics
    else:
        raise TypeError(f"expected a kafka-sdk client or a MetricsRegistry, not {source!r}")
    provider = meter_provider or otel_metrics.get_meter_provider()
    meter = provider.get_meter("kafka-sdk", "0.1.0")
    bridge = _Bridge(read)
    current = {(m.group, m.name): m for m in read()}
    prefixes = {group.split("-metrics")[0].rsplit("-node", 1)[0] for group, _ in current}
    keys = set(current) | {(g, n) for g, n in _catalogue()
                           if any(g.startswith(p + "-") for p in prefixes)}
    instruments = []
    for group, name in sorted(keys):
        metric = current.get((group, name))
        instruments.append(meter.create_observable_gauge(
            f"kafka.{group}.{name}", callbacks=[bridge.observe((group, name))],
            description=metric.description if metric is not None else ""))
    return instruments
