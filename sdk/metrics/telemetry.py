"""What each client (producer, consumer, admin) holds of observability, made once from its
config: the metrics registry (or None with ``metrics_enabled=False``), the hooks, the
network observer its connections report to, tracing, debug logging, and the periodic
``on_statistics`` task."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from sdk.metrics import logs
from sdk.metrics.hooks import HookSet
from sdk.metrics.network import NetworkObserver, protocol_log
from sdk.metrics.registry import MetricName, MetricsRegistry

__all__ = ["ClientTelemetry", "ObservedClient"]

log = logging.getLogger(__name__)


class ClientTelemetry:
    """See the module docstring. ``prefix``: ``producer``, ``consumer`` or
    ``admin-client`` (Java's metric group prefixes)."""

    def __init__(self, config: Any, prefix: str) -> None:
        self.client_id: str = config.client_id
        self.prefix = prefix
        logs.install()
        if config.debug:
            logs.apply_debug(logs.parse_debug(config.debug))
        self.hooks = HookSet(config.hooks)
        self.registry: MetricsRegistry | None = None
        if config.metrics_enabled:
            self.registry = MetricsRegistry(
                {"client-id": self.client_id}, window_ms=config.metrics_sample_window_ms,
                samples=config.metrics_num_samples)
        self.network: NetworkObserver | None = None
        if (self.registry is not None or self.hooks.network
                or protocol_log.isEnabledFor(logging.DEBUG)):
            self.network = NetworkObserver(self.registry, self.hooks, prefix)
        self.tracing_enabled = bool(getattr(config, "tracing", False))
        self.tracer_provider = getattr(config, "tracer_provider", None)
        self._interval_s = config.statistics_interval_ms / 1000
        self._on_statistics: Callable[[Mapping[MetricName, float]], object] | None = (
            config.on_statistics)
        self._task: asyncio.Task[None] | None = None

    def metrics(self) -> dict[MetricName, float]:
        """A snapshot of every metric (empty with ``metrics_enabled=False``)."""
        return self.registry.snapshot() if self.registry is not None else {}

    def start(self) -> None:
        """On the client's loop: begin the ``on_statistics`` calls, if configured."""
        if self._task is None and self._interval_s > 0 and self._on_statistics is not None:
            self._task = asyncio.get_running_loop().create_task(
                self._report(), name=f"kafka-sdk-statistics-{self.client_id}")

    async def _report(self) -> None:
        callback = self._on_statistics
        assert callback is not None
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                callback(self.metrics())
            except Exception:
                log.exception("on_statistics callback failed")

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


class ObservedClient:
    """Mixin of the client faces: ``metrics()`` from the client's :class:`ClientTelemetry`
    (found by ``_telemetry_of``), and the client id on its log lines: the coroutine
    methods named in ``_labelled`` (``start``) run with :data:`sdk.metrics.logs.client_id_var`
    set to the client's id, so the tasks they create (the sender, fetch loops, metadata
    upkeep, connections) log with it; the caller's context is left as it was."""

    _labelled: tuple[str, ...] = ("start", "close")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in cls._labelled:
            method = cls.__dict__.get(name)
            if method is not None and inspect.iscoroutinefunction(method):
                setattr(cls, name, _labelled(method))

    def _telemetry_of(self) -> ClientTelemetry | None:
        raise NotImplementedError

    def metrics(self) -> dict[MetricName, float]:
        """The client's metrics, named and tagged as the Java client's: a mapping of
        :class:`sdk.metrics.MetricName` (name, group, tags) to the current value. Rates
        are per second, latencies and times in milliseconds, averages and maxima over the
        last ``metrics_num_samples`` windows of ``metrics_sample_window_ms`` (NaN while
        there is nothing to average, as Java). Empty with ``metrics_enabled=False``."""
        telemetry = self._telemetry_of()
        return telemetry.metrics() if telemetry is not None else {}


def _labelled(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(method)
    async def labelled(self: Any, *args: Any, **kwargs: Any) -> Any:
        token = logs.client_id_var.set(self.config.client_id)
        try:
            return await method(self, *args, **kwargs)
        finally:
            logs.client_id_var.reset(token)

    return labelled
