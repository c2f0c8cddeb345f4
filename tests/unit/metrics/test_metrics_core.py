"""sdk.metrics without a broker: windowed sensors, metric names, the hook set, debug
contexts and the client id on log lines, the traceparent check, and the settings."""

from __future__ import annotations

import asyncio
import logging
import math
from typing import Any

import pytest

from sdk.errors import ConfigError
from sdk.metrics import ClientHooks, HookSet, MetricName, MetricsRegistry, Sensor
from sdk.metrics.logs import apply_debug, client_id_var, install, parse_debug
from sdk.metrics.tracing import valid_traceparent
from sdk.producer.config import ProducerConfig


def test_sensor_windows_averages_maxima_rates_and_totals() -> None:
    sensor = Sensor(window_s=10.0, samples=2)
    sensor.record(4, now=100.0)
    sensor.record(8, now=105.0)
    assert sensor.read("avg", 105.0) == 6
    assert sensor.read("max", 105.0) == 8
    assert sensor.read("total", 105.0) == 12
    assert sensor.read("count-total", 105.0) == 2
    sensor.record(2, now=112.0)  # a second window
    assert sensor.read("avg", 112.0) == pytest.approx(14 / 3)
    # Rates divide by the span the samples cover, at least (samples - 1) windows.
    sensor.started = 0.0
    assert sensor.read("rate", 112.0) == pytest.approx(14 / 12)
    assert sensor.read("count-rate", 112.0) == pytest.approx(3 / 12)
    sensor.record(1, now=125.0)  # a third window: the first drops out of the ring
    assert sensor.read("max", 125.0) == 2
    # Everything older than samples * window no longer counts; totals keep counting.
    assert math.isnan(sensor.read("avg", 200.0))
    assert sensor.read("rate", 200.0) == 0.0
    assert sensor.read("total", 200.0) == 15


def test_registry_names_tags_gauges_and_providers() -> None:
    reg = MetricsRegistry({"client-id": "c1"}, window_ms=1000, samples=2)
    sensor = reg.stats(reg.sensor("s"), "producer-metrics", "record-send",
                       {"-rate": "rate", "-total": "total"})
    assert reg.sensor("s") is sensor
    sensor.record(10)
    reg.gauge(reg.name("buffer-total-bytes", "producer-metrics"), lambda: 5)
    reg.provider(lambda: {reg.name("records-lag", "g", topic="t", partition="0"): 3.0})
    snap = reg.snapshot()
    total = MetricName("record-send-total", "producer-metrics", {"client-id": "c1"})
    assert snap[total] == 10
    assert snap[MetricName("buffer-total-bytes", "producer-metrics", {"client-id": "c1"})] == 5
    lag = MetricName("records-lag", "g", {"client-id": "c1", "topic": "t", "partition": "0"})
    assert snap[lag] == 3.0 and lag.tags["topic"] == "t"
    assert hash(lag) == hash(MetricName("records-lag", "g",
                                        {"partition": "0", "topic": "t", "client-id": "c1"}))
    reg.remove(lambda m: m.name.startswith("record-send"))
    assert total not in reg.snapshot()
    with pytest.raises(ValueError):
        MetricsRegistry({}, window_ms=0)


class _Counting(ClientHooks):
    def __init__(self, calls: list[Any], name: str) -> None:
        self.calls, self.name = calls, name

    def on_request(self, *args: Any) -> None:
        self.calls.append((self.name, args))


class _Broken(ClientHooks):
    def on_request(self, *args: Any) -> None:
        raise RuntimeError("boom")


def test_hookset_resolves_overrides_once_calls_in_order_and_contains_errors(
        caplog: pytest.LogCaptureFixture) -> None:
    assert HookSet([]).on_send is None and not HookSet([]).any
    calls: list[Any] = []
    hooks = HookSet([_Counting(calls, "a"), _Broken(), _Counting(calls, "b")])
    assert hooks.on_send is None and hooks.on_response is None  # not overridden: no cost
    assert hooks.on_request is not None and hooks.network
    with caplog.at_level(logging.ERROR, logger="sdk.metrics.hooks"):
        hooks.on_request(1, 0, 9, 7, 100)
    assert calls == [("a", (1, 0, 9, 7, 100)), ("b", (1, 0, 9, 7, 100))]
    assert "boom" in caplog.text
    with pytest.raises(TypeError, match="ClientHooks"):
        HookSet([object()])


def test_settings_are_checked() -> None:
    cfg = ProducerConfig.build({"statistics.interval.ms": "100", "metrics.num.samples": 3,
                                "metrics.sample.window.ms": 1000, "debug": "protocol, fetch"},
                               bootstrap_servers="h:1", on_statistics=print)
    assert (cfg.statistics_interval_ms, cfg.metrics_num_samples) == (100, 3)
    assert cfg.debug == "protocol, fetch"
    with pytest.raises(ConfigError, match="unknown debug context"):
        ProducerConfig.build(bootstrap_servers="h:1", debug="protocol,bogus")
    with pytest.raises(ConfigError, match="ClientHooks"):
        ProducerConfig.build(bootstrap_servers="h:1", hooks=[42])
    with pytest.raises(ConfigError, match="on_statistics"):
        ProducerConfig.build(bootstrap_servers="h:1", on_statistics=3)
    with pytest.raises(ConfigError, match="on_statistics"):
        ProducerConfig.build({"stats_cb": print}, bootstrap_servers="h:1")


def test_debug_contexts_set_their_loggers() -> None:
    assert parse_debug(" Protocol ,cgrp") == ["protocol", "cgrp"]
    levels = {n: logging.getLogger(n).level for n in ("sdk.net.protocol",
                                                      "sdk.consumer.membership",
                                                      "sdk.consumer.coordinator")}
    try:
        assert apply_debug(["protocol", "cgrp"]) == sorted(levels)
        assert all(logging.getLogger(n).level == logging.DEBUG for n in levels)
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def test_log_lines_of_a_client_context_carry_its_id(caplog: pytest.LogCaptureFixture) -> None:
    install()
    log = logging.getLogger("sdk.net.client")

    async def in_client() -> None:
        client_id_var.set("c-7")
        log.warning("node %s unreachable", 3)
        log.warning("%s: already named", "c-7")
        logging.getLogger("other").warning("not ours")

    with caplog.at_level(logging.WARNING):
        asyncio.run(in_client())
        log.warning("outside any client")
    messages = [(r.name, r.getMessage(), getattr(r, "client_id", None)) for r in caplog.records]
    assert messages == [("sdk.net.client", "[c-7] node 3 unreachable", "c-7"),
                        ("sdk.net.client", "c-7: already named", "c-7"),
                        ("other", "not ours", None),
                        ("sdk.net.client", "outside any client", None)]


def test_valid_traceparent() -> None:
    good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert valid_traceparent(good)
    for bad in ("", good.upper(), good.replace("-01", ""), "01" + good[2:],
                "00-" + "0" * 32 + "-00f067aa0ba902b7-01",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-" + "0" * 16 + "-01",
                good.replace("4bf9", "xyz9")):
        assert not valid_traceparent(bad), bad


def test_every_sdk_logger_is_under_the_sdk_hierarchy() -> None:
    """Every logger the SDK's modules make is ``sdk`` or below it (``__name__`` of a module
    of the ``sdk`` package, or an ``sdk.*`` name), and none logs through the root logger
    (``logging.info(...)``), so the client id tagging and the ``debug=`` contexts reach
    every line."""
    import ast
    from pathlib import Path

    import sdk

    root_calls = {"debug", "info", "warning", "warn", "error", "exception", "critical", "log"}
    found: list[str] = []
    for path in sorted(Path(sdk.__file__).parent.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        # logging.getLogger().handlers: looking whether logging is configured at all.
        reads = {id(n.value) for n in ast.walk(tree)
                 if isinstance(n, ast.Attribute) and n.attr == "handlers"}
        for node in ast.walk(tree):
            if id(node) in reads or not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "logging"):
                continue
            where = f"{path.name}:{node.lineno}"
            if node.func.attr in root_calls:
                found.append(f"{where} logs through the root logger")
            elif node.func.attr == "getLogger":
                arg = node.args[0] if node.args else None
                ok = (isinstance(arg, ast.Name) and arg.id in ("__name__", "name")) or (
                    isinstance(arg, ast.Constant) and isinstance(arg.value, str)
                    and (arg.value == "sdk" or arg.value.startswith("sdk.")))
                if not ok:
                    found.append(f"{where} getLogger({ast.unparse(arg) if arg else ''})")
    assert found == []
