"""Windowed client metrics, named like the Java client's, cheap to feed.

A :class:`Sensor` is fed on the client's event-loop thread (per request, per batch, per
fetch, never per record) and keeps, besides running totals, a short ring of time-window
samples (count, sum, max), as Java's ``SampledStat`` with ``metrics.sample.window.ms``
and ``metrics.num.samples``. Averages, maxima and rates are computed only when someone
reads them (:meth:`MetricsRegistry.snapshot`), so a client nobody watches pays one
``time.monotonic()`` and a few additions per event.

Reading from another thread is safe without a lock: a sample is a small list updated in
place, and a reader that races a writer sees a value one event old.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Literal

__all__ = ["MetricName", "MetricsRegistry", "Sensor", "Stat"]

Stat = Literal["avg", "max", "rate", "total", "count-rate", "count-total", "value"]
"""What a metric reads from its sensor: the windowed average / maximum of the recorded
values, their sum per second (``rate``) or in all (``total``), the number of events per
second (``count-rate``) or in all (``count-total``), or the last value recorded."""


class MetricName:
    """A metric's identity, as Java's ``MetricName``: name, group and tags.

    Hashable and comparable; ``tags`` is a read-only mapping (``client-id`` always,
    ``node-id``, ``topic``, ``partition`` where the metric is per node, topic or
    partition)."""

    __slots__ = ("_hash", "_key", "description", "group", "name", "tags")

    def __init__(self, name: str, group: str, tags: Mapping[str, str] | None = None,
                 description: str = "") -> None:
        self.name = name
        self.group = group
        self.tags: Mapping[str, str] = dict(tags or {})
        self.description = description
        self._key = (name, group, tuple(sorted(self.tags.items())))
        self._hash = hash(self._key)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MetricName) and self._key == other._key

    def __lt__(self, other: MetricName) -> bool:
        return self._key < other._key

    def __repr__(self) -> str:
        tags = ", ".join(f"{k}={v}" for k, v in self._key[2])
        return f"MetricName({self.group}:{self.name} {{{tags}}})"


class Sensor:
    """Running totals plus windowed samples of one kind of event (see the module text)."""

    __slots__ = ("_samples", "_samples_max", "_window_s", "count", "last", "started", "total")

    def __init__(self, window_s: float, samples: int) -> None:
        self._window_s = window_s
        self._samples_max = samples
        # [window start, events, sum, max] per window, oldest first
        self._samples: list[list[float]] = []
        self.count = 0
        self.total = 0.0
        self.last = math.nan
        self.started = time.monotonic()

    def record(self, value: float = 1.0, now: float | None = None) -> None:
        """One event of ``value`` (a batch's record count, a request's latency, ...)."""
        if now is None:
            now = time.monotonic()
        self.count += 1
        self.total += value
        self.last = value
        samples = self._samples
        if samples:
            current = samples[-1]
            if now - current[0] < self._window_s:
                current[1] += 1
                current[2] += value
                if value > current[3]:
                    current[3] = value
                return
        samples.append([now, 1, value, value])
        if len(samples) > self._samples_max:
            del samples[0]

    def record_many(self, total: float, count: int, largest: float, now: float) -> None:
        """``count`` events summing to ``total``, the largest ``largest``, in one call (a
        request's batches: one update instead of one per batch)."""
        if count <= 0:
            return
        self.count += count
        self.total += total
        self.last = largest
        samples = self._samples
        if samples:
            current = samples[-1]
            if now - current[0] < self._window_s:
                current[1] += count
                current[2] += total
                if largest > current[3]:
                    current[3] = largest
                return
        samples.append([now, count, total, largest])
        if len(samples) > self._samples_max:
            del samples[0]

    def _live(self, now: float) -> list[list[float]]:
        """Samples younger than the whole window span (older ones no longer count)."""
        horizon = now - self._window_s * self._samples_max
        return [s for s in self._samples if s[0] > horizon]

    def read(self, stat: Stat, now: float) -> float:
        if stat == "total":
            return self.total
        if stat == "count-total":
            return float(self.count)
        if stat == "value":
            return self.last
        live = self._live(now)
        if stat == "avg":
            n = sum(s[1] for s in live)
            return sum(s[2] for s in live) / n if n else math.nan
        if stat == "max":
            return max(s[3] for s in live) if live else math.nan
        # rates: per second over the span the samples cover, at least the full windows
        # but the current one (Java's Rate), and never longer than the sensor has existed
        if not live:
            return 0.0
        elapsed = now - live[0][0]
        elapsed = max(elapsed, self._window_s * (self._samples_max - 1))
        elapsed = min(max(elapsed, 1e-3), max(now - self.started, 1e-3))
        amount = sum(s[1] for s in live) if stat == "count-rate" else sum(s[2] for s in live)
        return amount / elapsed


class MetricsRegistry:
    """One client's metrics: sensors, the metrics read from them, and gauges.

    ``window_ms`` and ``samples`` are Java's ``metrics.sample.window.ms`` (30 s) and
    ``metrics.num.samples`` (2). ``tags`` (at least ``client-id``) go on every metric."""

    def __init__(self, tags: Mapping[str, str], *, window_ms: int = 30_000,
                 samples: int = 2) -> None:
        if window_ms <= 0 or samples <= 0:
            raise ValueError("window_ms and samples must be positive")
        self.tags = dict(tags)
        self.window_s = window_ms / 1000
        self.samples = samples
        self._sensors: dict[str, Sensor] = {}
        self._reads: dict[MetricName, tuple[Sensor, Stat]] = {}
        self._gauges: dict[MetricName, Callable[[], float]] = {}
        self._providers: list[Callable[[], Mapping[MetricName, float]]] = []

    @property
    def client_id(self) -> str:
        return self.tags.get("client-id", "")

    def name(self, name: str, group: str, description: str = "",
             **tags: str) -> MetricName:
        """A MetricName with the registry's tags plus ``tags`` (``node_id`` -> ``node-id``)."""
        merged = dict(self.tags)
        merged.update({k.replace("_", "-"): v for k, v in tags.items()})
        return MetricName(name, group, merged, description)

    def sensor(self, key: str) -> Sensor:
        """The sensor named ``key`` (created on first use)."""
        sensor = self._sensors.get(key)
        if sensor is None:
            sensor = self._sensors[key] = Sensor(self.window_s, self.samples)
        return sensor

    def add(self, metric: MetricName, sensor: Sensor, stat: Stat) -> None:
        self._reads[metric] = (sensor, stat)

    def stats(self, sensor: Sensor, group: str, prefix: str, stats: Mapping[str, Stat],
              description: str = "", **tags: str) -> Sensor:
        """Register ``prefix + suffix`` for each ``suffix: stat`` (``-avg: avg``)."""
        for suffix, stat in stats.items():
            self.add(self.name(prefix + suffix, group, description, **tags), sensor, stat)
        return sensor

    def gauge(self, metric: MetricName, read: Callable[[], float]) -> None:
        """A metric computed when read (buffer-available-bytes, connection-count, ...)."""
        self._gauges[metric] = read

    def provider(self, read: Callable[[], Mapping[MetricName, float]]) -> None:
        """Metrics whose set changes (per assigned partition): computed when read."""
        self._providers.append(read)

    def remove(self, predicate: Callable[[MetricName], bool]) -> None:
        """Drop the metrics ``predicate`` picks (a revoked partition's lag, a gone node)."""
        for table in (self._reads, self._gauges):
            for metric in [m for m in table if predicate(m)]:
                del table[metric]

    def snapshot(self) -> dict[MetricName, float]:
        """Every metric's current value (NaN where there is nothing to average yet)."""
        now = time.monotonic()
        out: dict[MetricName, float] = {}
        for metric, (sensor, stat) in list(self._reads.items()):
            out[metric] = sensor.read(stat, now)
        for metric, read in list(self._gauges.items()):
            try:
                out[metric] = float(read())
            except Exception:  # a gauge over state being torn down (a closing client)
                out[metric] = math.nan
        for provider in self._providers:
            try:
                out.update(provider())
            except Exception:
                pass  # the same: state being torn down
        return out

    def __iter__(self) -> Iterator[MetricName]:
        yield from self._reads
        yield from self._gauges

    def __len__(self) -> int:
        return len(self._reads) + len(self._gauges)
