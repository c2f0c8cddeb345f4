"""Connection and request metrics (Java's ``<client>-metrics`` network part and
``<client>-node-metrics``), the connection-level hooks and the ``protocol`` debug log.

A :class:`NetworkObserver` is attached to each connection a client opens; the connection
calls :meth:`NetworkObserver.sent` per request written and :meth:`received` per chunk of
responses read, so the cost is per request, and nothing at all when a client has no
observer (metrics off, no network hook, protocol debugging off). A request is recorded
once, into its node's sensors; the client-wide figures are groups of those, summed when
read.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Protocol

from sdk.metrics.hooks import HookSet
from sdk.metrics.registry import MetricsRegistry, Sensor

__all__ = ["NetworkObserver", "ObservedConnection"]

protocol_log = logging.getLogger("sdk.net.protocol")


class ObservedConnection(Protocol):
    node_id: int
    host: str
    port: int
    sent_at: dict[int, tuple[float, int, int]]
    last_used: float  # stamped by the connection right before it reports a request sent

    @property
    def in_flight(self) -> int: ...


class _NodeSensors:
    # One sensor per event kind, several metrics read from each: a request's size gives
    # request-rate/-total (events) and outgoing-byte-rate/-total (sums); a response's
    # latency gives response-rate/-total and request-latency-avg/-max.
    __slots__ = ("incoming", "latency", "requests")

    def __init__(self, reg: MetricsRegistry, group: str, node: str) -> None:
        def one(key: str, prefix: str, stats: dict[str, Any], text: str) -> Sensor:
            return reg.stats(reg.sensor(f"node.{node}.{key}"), group, prefix, stats, text,
                             node_id=node)

        self.requests = one("requests", "request", {"-rate": "count-rate",
                                                    "-total": "count-total"}, "requests sent")
        reg.stats(self.requests, group, "outgoing-byte", {"-rate": "rate", "-total": "total"},
                  "bytes written", node_id=node)
        self.latency = one("latency", "request-latency", {"-avg": "avg", "-max": "max"},
                           "ms from writing a request to reading its response")
        reg.stats(self.latency, group, "response", {"-rate": "count-rate",
                                                    "-total": "count-total"},
                  "responses received", node_id=node)
        self.incoming = one("incoming", "incoming-byte", {"-rate": "rate", "-total": "total"},
                            "bytes read")


class NetworkObserver:
    """See the module docstring. ``prefix`` is Java's metric-group prefix: ``producer``,
    ``consumer`` or ``admin-client``."""

    def __init__(self, registry: MetricsRegistry | None, hooks: HookSet, prefix: str) -> None:
        self.registry = reg = registry
        self.group = f"{prefix}-metrics"
        self.node_group = f"{prefix}-node-metrics"
        self._connect_hook = hooks.on_broker_connect
        self._disconnect_hook = hooks.on_broker_disconnect
        self._request_hook = hooks.on_request
        self._response_hook = hooks.on_response
        self._nodes: dict[int, _NodeSensors] = {}
        self._open: set[Any] = set()
        if reg is None:
            return
        g = self.group
        s = reg.stats
        # As per node: one sensor per event, several metrics read from it; the client-wide
        # ones are the per-node sensors summed (each request is recorded once, per node).
        self._requests = s(reg.sensor_group("requests"), g, "request",
                           {"-rate": "count-rate", "-total": "count-total"}, "requests sent")
        s(self._requests, g, "request-size", {"-avg": "avg", "-max": "max"},
          "bytes per request")
        s(self._requests, g, "outgoing-byte", {"-rate": "rate", "-total": "total"},
          "bytes written")
        self._latency = s(reg.sensor_group("latency"), g, "request-latency",
                          {"-avg": "avg", "-max": "max"},
                          "ms from writing a request to reading its response")
        s(self._latency, g, "response", {"-rate": "count-rate", "-total": "count-total"},
          "responses received")
        self._incoming = s(reg.sensor_group("incoming"), g, "incoming-byte",
                           {"-rate": "rate", "-total": "total"}, "bytes read")
        self._created = s(reg.sensor("connection-creation"), g, "connection-creation",
                          {"-rate": "count-rate", "-total": "count-total"},
                          "connections opened")
        self._closed = s(reg.sensor("connection-close"), g, "connection-close",
                         {"-rate": "count-rate", "-total": "count-total"},
                         "connections closed")
        reg.gauge(reg.name("connection-count", g, "open connections"),
                  lambda: float(len(self._open)))

    def _node(self, node_id: int) -> _NodeSensors:
        sensors = self._nodes.get(node_id)
        if sensors is None:
            assert self.registry is not None
            sensors = self._nodes[node_id] = _NodeSensors(
                self.registry, self.node_group, f"node-{node_id}")
            self._requests.add(sensors.requests)
            self._latency.add(sensors.latency)
            self._incoming.add(sensors.incoming)
        return sensors

    # ------------------------------------------------------------------ connections

    def attach(self, conn: Any) -> None:
        """Watch ``conn`` (just opened) until it closes."""
        conn.observer = self
        self._open.add(conn)
        conn.add_close_callback(self._detach)
        if self.registry is not None:
            self._created.record(1)
        protocol_log.debug("connected to %s:%s (node %s)", conn.host, conn.port, conn.node_id)
        if self._connect_hook is not None:
            self._connect_hook(conn.node_id, conn.host, conn.port)

    def _detach(self, conn: Any) -> None:
        self._open.discard(conn)
        conn.sent_at.clear()
        if self.registry is not None:
            self._closed.record(1)
        protocol_log.debug("connection to %s:%s (node %s) closed: %s", conn.host, conn.port,
                           conn.node_id, conn.close_reason or "by the client")
        if self._disconnect_hook is not None:
            self._disconnect_hook(conn.node_id, conn.host, conn.port, conn.close_reason)

    # ------------------------------------------------------------------ requests

    def sent(self, conn: Any, api_key: int, version: int, cid: int, size: int,
             expect_response: bool) -> None:
        now = conn.last_used  # the write's time, just taken by the connection
        if expect_response:
            conn.sent_at[cid] = (now, api_key, version)
        if self.registry is not None:
            node = self._nodes.get(conn.node_id)
            if node is None:
                node = self._node(conn.node_id)
            node.requests.record(size, now)
        if protocol_log.isEnabledFor(logging.DEBUG):
            protocol_log.debug("-> node %s: api %s v%s correlation id %s, %d bytes",
                               conn.node_id, api_key, version, cid, size)
        if self._request_hook is not None:
            self._request_hook(conn.node_id, api_key, version, cid, size)

    def received(self, conn: Any, responses: list[tuple[int, Any]], size: int) -> None:
        now = time.monotonic()
        node = None
        if self.registry is not None:
            node = self._nodes.get(conn.node_id)
            if node is None:
                node = self._node(conn.node_id)
            node.incoming.record(size, now)
        sent_at = conn.sent_at
        debug = protocol_log.isEnabledFor(logging.DEBUG)
        for cid, _ in responses:
            entry = sent_at.pop(cid, None)
            if entry is None:
                continue
            at, api_key, version = entry
            latency_s = now - at
            if node is not None:
                node.latency.record(latency_s * 1000, now)
            if debug:
                protocol_log.debug("<- node %s: api %s v%s correlation id %s after %.3f ms",
                                   conn.node_id, api_key, version, cid, latency_s * 1000)
            if self._response_hook is not None:
                self._response_hook(conn.node_id, api_key, version, cid, latency_s)
