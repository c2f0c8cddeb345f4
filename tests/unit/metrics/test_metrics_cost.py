"""The cheap recording of sdk.metrics: an event is recorded once (per node, per topic) and
the client-wide figures are sensor groups summed when read; totals are derived from the
window ring and what left it. These check that the derived figures read what one sensor
fed every event would (the values the client-wide sensors gave when fed twice)."""

from __future__ import annotations

import importlib.util
import math
import random
from pathlib import Path
from types import ModuleType

import pytest

from sdk.metrics import MetricsRegistry, Sensor
from sdk.metrics.registry import SensorGroup, Stat

STATS: tuple[Stat, ...] = ("avg", "max", "rate", "count-rate", "total", "count-total")


def test_totals_keep_what_left_the_ring() -> None:
    sensor = Sensor(window_s=1.0, samples=2)
    for i in range(100):  # 50 windows of two events: 48 leave the ring
        sensor.record(i, now=10.0 + i / 2)
    assert sensor.count == 100 and sensor.read("count-total", 60.0) == 100.0
    assert sensor.total == sum(range(100)) == sensor.read("total", 60.0)
    sensor.record_many(10.0, 4, 7.0, now=60.0)
    assert sensor.count == 104 and sensor.total == sum(range(100)) + 10
    assert sensor.read("max", 60.0) == 99  # the ring: the windows of 59.0 and 60.0
    assert sensor.last == 7.0


def test_a_group_reads_as_one_sensor_fed_every_event() -> None:
    rng = random.Random(7)
    whole = Sensor(window_s=2.0, samples=3)
    group = SensorGroup(window_s=2.0, samples=3)
    nodes = [group.add(Sensor(window_s=2.0, samples=3)) for _ in range(3)]
    whole.started = group.started = 0.0
    for s in nodes:
        s.started = 0.0
    now = 100.0
    for window in range(8):
        start = 100.0 + 2.0 * window
        # every node opens the window at the same instant, as the whole sensor does, so
        # the windows coincide and the figures are equal, not just close
        for s in nodes:
            s.record(0.0, start)
        whole.record_many(0.0, len(nodes), 0.0, start)
        for _ in range(rng.randint(1, 40)):
            now = start + rng.uniform(0.0, 1.99)
            value = float(rng.randint(0, 5000))
            rng.choice(nodes).record(value, now)
            whole.record(value, now)
        for stat in STATS:
            assert group.read(stat, now) == pytest.approx(whole.read(stat, now)), stat
    assert group.count == whole.count and group.total == pytest.approx(whole.total)
    later = now + 60.0  # every window too old: nothing to average, totals stay
    assert math.isnan(group.read("avg", later)) and group.read("rate", later) == 0.0
    assert group.read("total", later) == pytest.approx(whole.total)


def test_an_empty_group_and_windows_staggered_across_members() -> None:
    group = SensorGroup(window_s=10.0, samples=2)
    assert group.read("count-total", 5.0) == 0.0 and math.isnan(group.read("max", 5.0))
    a, b = group.add(Sensor(10.0, 2)), group.add(Sensor(10.0, 2))
    a.started = b.started = group.started = 0.0
    a.record(4, now=100.0)
    b.record(8, now=105.0)  # b's window opens later than a's
    a.record(2, now=112.0)  # a second window for a
    assert group.read("avg", 112.0) == pytest.approx(14 / 3)
    assert group.read("max", 112.0) == 8
    # the span runs from the oldest window of any member, as one sensor's would
    assert group.read("rate", 112.0) == pytest.approx(14 / 12)


def test_registry_groups_are_named_and_readable() -> None:
    reg = MetricsRegistry({"client-id": "c"}, window_ms=1000, samples=2)
    group = reg.stats(reg.sensor_group("requests"), "producer-metrics", "request",
                      {"-total": "count-total"})
    assert reg.sensor_group("requests") is group
    for node in ("1", "2"):
        sensor = reg.stats(group.add(reg.sensor(f"node.{node}")), "producer-node-metrics",
                           "request", {"-total": "count-total"}, node_id=node)
        sensor.record(100)
        sensor.record(50)
    snap = {(m.group, m.name, m.tags.get("node-id")): v for m, v in reg.snapshot().items()}
    assert snap[("producer-metrics", "request-total", None)] == 4
    assert snap[("producer-node-metrics", "request-total", "1")] == 2


def _bench() -> ModuleType:
    path = Path(__file__).resolve().parents[3] / "bench" / "metrics_bench.py"
    spec = importlib.util.spec_from_file_location("metrics_bench_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_figures_median_interval_and_parts() -> None:
    bench = _bench()
    values = [float(v) for v in range(1, 31)]  # 30 rounds
    # 30 values: the 10th and 21st order statistics bound the median with >= 95%
    assert bench.median_ci(values) == (10.0, 21.0)
    assert bench.median_ci([1.0, 2.0, 3.0]) == (1.0, 3.0)  # too few: the whole range
    assert bench.quartiles(values)[1] == 15.5
    assert bench.quartiles([0.9]) == (0.9, 0.9, 0.9)
    assert bench._segments(10, 4) == [3, 3, 2, 2] and bench._segments(2, 5) == [1, 1]
    # the recording calls are timed with metrics on: one figure per hot-path call
    costs = bench.recording_costs(batches_per_request=2, records_per_batch=10)
    assert set(costs) == {"request", "produce", "fetch", "drain"}
