"""Windowed client metrics, named like the Java client's, cheap to feed.

A :class:`Sensor` is fed on the client's event-loop thread (per request, per batch, per
fetch, never per record) and keeps a short ring of time-window samples (count, sum, max),
as Java's ``SampledStat`` with ``metrics.sample.window.ms`` and ``metrics.num.samples``.
Totals, averages, maxima and rates are computed only when someone reads them
(:meth:`MetricsRegistry.snapshot`), so an event costs a comparison and a few additions on
the current window, with the timestamp the caller already took. An event is recorded
once: a client-wide figure that sums per-node or per-topic ones is a :class:`SensorGroup`
of those sensors, added up when read.

Reading from another thread is safe without a lock: a window is a small list updated in
place, and a reader that races a writer sees a value one event old.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Literal, TypeVar

__all__ = ["MetricName", "MetricsRegistry", "Sensor", "SensorGroup", "Stat"]

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
    """Windowed samples of one kind of event (see the module text), fed by :meth:`record`.

    The hot path touches only the current window (``[start, events, sum, max]``, updated
    in place); running totals are not kept per event but derived when read, from the
    samples in the ring plus what the ring already let go (``_state``). A window change
    swaps ``_state`` in one assignment, so a reader on another thread never sees a total
    go down (Prometheus would take that for a counter reset)."""

    __slots__ = ("_cur", "_end", "_samples_max", "_state", "_window_s", "last", "started")

    def __init__(self, window_s: float, samples: int) -> None:
        self._window_s = window_s
        self._samples_max = samples
        # (samples in the ring, oldest first; events and sum of those dropped from it)
        self._state: tuple[tuple[list[float], ...], int, float] = ((), 0, 0.0)
        self._cur: list[float] = [-math.inf, 0, 0.0, -math.inf]  # not in the ring yet
        self._end = -math.inf  # when the current window closes
        self.last = math.nan
        self.started = time.monotonic()

    def record(self, value: float = 1.0, now: float | None = None) -> None:
        """One event of ``value`` (a batch's record count, a request's latency, ...)."""
        if now is None:
            now = time.monotonic()
        self.last = value
        if now < self._end:
            cur = self._cur
            cur[1] += 1
            cur[2] += value
            if value > cur[3]:
                cur[3] = value
            return
        self._open(now, 1, value, value)

    def record_many(self, total: float, count: int, largest: float, now: float) -> None:
        """``count`` events summing to ``total``, the largest ``largest``, in one call (a
        request's batches: one update instead of one per batch)."""
        if count <= 0:
            return
        self.last = largest
        if now < self._end:
            cur = self._cur
            cur[1] += count
            cur[2] += total
            if largest > cur[3]:
                cur[3] = largest
            return
        self._open(now, count, total, largest)

    def _open(self, now: float, count: int, total: float, largest: float) -> None:
        # a new window: the oldest sample leaves the ring once it holds ``samples``
        self._cur = cur = [now, count, total, largest]
        self._end = now + self._window_s
        ring, gone_count, gone_total = self._state
        if len(ring) >= self._samples_max:
            old, ring = ring[0], ring[1:]
            gone_count += int(old[1])
            gone_total += old[2]
        self._state = (*ring, cur), gone_count, gone_total

    @property
    def count(self) -> int:
        """Events recorded in all."""
        ring, gone, _ = self._state
        return gone + sum(int(s[1]) for s in ring)

    @property
    def total(self) -> float:
        """The sum of the values recorded in all."""
        ring, _, gone = self._state
        return gone + sum(s[2] for s in ring)

    def read(self, stat: Stat, now: float) -> float:
        return _read((self,), stat, now, self._window_s, self._samples_max, self.started)


class SensorGroup:
    """Several sensors read as one (the client-wide figure over the per-node sensors): each
    event is recorded once, into its member, and the group adds the members' samples up
    when read. Members join as they are made (a node first seen) and never leave, so the
    group's totals keep what a node whose metrics were removed had counted."""

    __slots__ = ("_samples_max", "_window_s", "members", "started")

    def __init__(self, window_s: float, samples: int) -> None:
        self._window_s = window_s
        self._samples_max = samples
        self.members: list[Sensor] = []
        self.started = time.monotonic()

    def add(self, sensor: Sensor) -> Sensor:
        self.members.append(sensor)
        return sensor

    @property
    def count(self) -> int:
        return sum(s.count for s in list(self.members))

    @property
    def total(self) -> float:
        return sum(s.total for s in list(self.members))

    def read(self, stat: Stat, now: float) -> float:
        return _read(list(self.members), stat, now, self._window_s, self._samples_max,
                     self.started)


def _read(sensors: Sequence[Sensor], stat: Stat, now: float, window_s: float,
          samples_max: int, started: float) -> float:
    """``stat`` over the samples of ``sensors`` (one sensor, or a group's members)."""
    if stat == "total":
        return sum(s.total for s in sensors) + 0.0
    if stat == "count-total":
        return float(sum(s.count for s in sensors))
    if stat == "value":
        return sensors[0].last if len(sensors) == 1 else math.nan
    # samples younger than the whole window span (older ones no longer count)
    horizon = now - window_s * samples_max
    live = [sample for s in sensors for sample in s._state[0] if sample[0] > horizon]
    if stat == "avg":
        n = sum(s[1] for s in live)
        return sum(s[2] for s in live) / n if n else math.nan
    if stat == "max":
        return max(s[3] for s in live) if live else math.nan
    # rates: per second over the span the samples cover, at least the full windows but
    # the current one (Java's Rate), and never longer than the sensor has existed
    if not live:
        return 0.0
    elapsed = now - min(s[0] for s in live)
    elapsed = max(elapsed, window_s * (samples_max - 1))
    elapsed = min(max(elapsed, 1e-3), max(now - started, 1e-3))
    amount = sum(s[1] for s in live) if stat == "count-rate" else sum(s[2] for s in live)
    return amount / elapsed


_S = TypeVar("_S", Sensor, SensorGroup)


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
        self._groups: dict[str, SensorGroup] = {}
        self._reads: dict[MetricName, tuple[Sensor | SensorGroup, Stat]] = {}
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

    def sensor_group(self, key: str) -> SensorGroup:
        """The sensor group named ``key`` (created on first use; members join with
        :meth:`SensorGroup.add`)."""
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = SensorGroup(self.window_s, self.samples)
        return group

    def add(self, metric: MetricName, sensor: Sensor | SensorGroup, stat: Stat) -> None:
        self._reads[metric] = (sensor, stat)

    def stats(self, sensor: _S, group: str, prefix: str, stats: Mapping[str, Stat],
              description: str = "", **tags: str) -> _S:
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
