"""The broker's counters: plain integers and dicts updated on the broker's loop.

Everything here is written by the loop that owns the broker (handlers, dispatch) and read
by the exposition on the same loop, so no locks are taken and a count costs a dict update.
Counting is per request and per partition of a produce or fetch, never per record: the
record count of a batch is read from its header.

The Prometheus names are made from Kafka's JMX MBeans the way Kafka's JMX exporter setups
usually map them (``kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=T`` →
``kafka_server_brokertopicmetrics_bytesin_total{topic="T"}``): the domain, type and name
lower-cased and joined, a ``PerSec`` meter exposed as a counter (Prometheus computes the
rate), tags as labels. The families are built in ``collect.py``.

Cluster mode plugs in through :meth:`BrokerMetrics.record_isr_shrink`,
:meth:`record_isr_expand` and the ``*_source`` callables (see /tmp/s8/metrics_api.md and
the class docstring); a single broker reports 0 under-replicated partitions and is the
active controller.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from sdk.protocol.messages import ApiKey

if TYPE_CHECKING:
    from server_ref.handlers import RequestContext
    from server_ref.topics import TopicRegistry

__all__ = ["LATENCY_BUCKETS_MS", "BrokerMetrics", "LatencyHistogram", "request_name"]

# Upper bounds (ms) of the request latency buckets; Kafka's TotalTimeMs is a histogram too.
LATENCY_BUCKETS_MS: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0,
                                         100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0,
                                         10000.0, 30000.0)
_RECORD_COUNT_AT = 57  # int32 record count in a v2 batch header
_NS_PER_MS = 1_000_000


def request_name(api_key: int) -> str:
    """Kafka's name of an API as its request metrics tag it (``ListOffsets``)."""
    try:
        name = ApiKey(api_key).name
    except ValueError:
        return f"Unknown{api_key}"
    return "".join(part.capitalize() for part in name.split("_"))


class LatencyHistogram:
    """Counts per bucket (the last one is +Inf) and the sum, in milliseconds."""

    __slots__ = ("counts", "sum_ms")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS_MS) + 1)
        self.sum_ms = 0.0

    def observe(self, ms: float) -> None:
        self.counts[bisect_left(LATENCY_BUCKETS_MS, ms)] += 1
        self.sum_ms += ms

    def cumulative(self) -> list[tuple[str, int]]:
        """``(le, count)`` pairs as Prometheus wants them, ending with ``+Inf``."""
        out: list[tuple[str, int]] = []
        running = 0
        for bound, count in zip((*map(str, LATENCY_BUCKETS_MS), "+Inf"), self.counts):
            running += count
            out.append((bound, running))
        return out

    @property
    def count(self) -> int:
        return sum(self.counts)


class BrokerMetrics:
    """One broker's metrics. ``broker.metrics`` is None when no metrics port is set, so a
    broker without the endpoint pays one None check per request and per produce or fetch.

    For cluster mode (callable from the broker's loop only):

    - ``record_isr_shrink(n=1)`` / ``record_isr_expand(n=1)``: a partition this broker
      leads left or rejoined its ISR (Kafka's ReplicaManager IsrShrinksPerSec /
      IsrExpandsPerSec);
    - ``under_replicated_source``: a callable returning how many partitions this broker
      leads with fewer in-sync replicas than replicas (default: 0, a single broker);
    - ``active_controller_source``: a callable returning whether this node is the active
      controller (default: True, a single broker is its own controller);
    - ``leader_count_source`` / ``offline_partitions_source``: partitions this broker leads
      (default: all of them) and partitions without a leader (default: 0).
    """

    def __init__(self) -> None:
        self.started_s = time.time()
        # Requests by (api_key << 8 | version), latency histograms by api key.
        self.requests: dict[int, int] = {}
        self.latency: dict[int, LatencyHistogram] = {}
        # BrokerTopicMetrics, per topic.
        self.bytes_in: dict[str, int] = {}
        self.messages_in: dict[str, int] = {}
        self.bytes_out: dict[str, int] = {}
        self.produce_requests: dict[str, int] = {}
        self.fetch_requests: dict[str, int] = {}
        self.failed_produce: dict[str, int] = {}
        self.failed_fetch: dict[str, int] = {}
        # Connections accepted per listener (open ones are counted at scrape time).
        self.connections_created: dict[str, int] = {}
        # ReplicaManager events and the cluster-mode gauges.
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.under_replicated_source: Callable[[], int] | None = None
        self.active_controller_source: Callable[[], bool] | None = None
        self.leader_count_source: Callable[[], int] | None = None
        self.offline_partitions_source: Callable[[], int] | None = None
        self.endpoint: Any = None  # the HTTP endpoint (endpoint.MetricsEndpoint) once bound

    # ------------------------------------------------------------------ requests

    def request_started(self, api_key: int, api_version: int) -> int:
        """Count a request; returns the time its latency is measured from."""
        key = api_key << 8 | api_version
        requests = self.requests
        requests[key] = requests.get(key, 0) + 1
        return time.perf_counter_ns()

    def request_answered(self, ctx: RequestContext) -> None:
        """The response of ``ctx`` is encoded (or, for acks=0, dropped): its latency."""
        started = ctx.started_ns
        if not started:
            return
        ms = (time.perf_counter_ns() - started) / _NS_PER_MS
        histogram = self.latency.get(ctx.api_key)
        if histogram is None:
            histogram = self.latency[ctx.api_key] = LatencyHistogram()
        histogram.observe(ms)

    def connection_opened(self, listener: str) -> None:
        created = self.connections_created
        created[listener] = created.get(listener, 0) + 1

    # ------------------------------------------------------------------ produce and fetch

    def record_produce(self, topic: str, partitions: Iterable[Any],
                       responses: Iterable[Any]) -> None:
        """One topic of a Produce request: its partitions' data and their answers. Bytes
        and messages count only appended batches, as Kafka's BytesIn/MessagesIn."""
        total = failed = size = messages = 0
        for data, answer in zip(partitions, responses):
            total += 1
            if answer.error_code:
                failed += 1
                continue
            records = data.records
            if records:
                size += len(records)
                if len(records) >= _RECORD_COUNT_AT + 4:
                    messages += int.from_bytes(records[_RECORD_COUNT_AT:_RECORD_COUNT_AT + 4],
                                               "big")
        _add(self.produce_requests, topic, total)
        if failed:
            _add(self.failed_produce, topic, failed)
        if size:
            _add(self.bytes_in, topic, size)
            _add(self.messages_in, topic, messages)

    def record_fetch(self, topics: Iterable[Any], registry: TopicRegistry) -> None:
        """The topics of a Fetch response: partitions answered, failed, bytes sent (v13+
        responses name topics by id only: the name is looked up)."""
        for entry in topics:
            name = entry.topic
            if not name:
                found = registry.by_id(entry.topic_id)
                name = found.name if found is not None else str(entry.topic_id)
            total = failed = size = 0
            for data in entry.partitions:
                total += 1
                if data.error_code:
                    failed += 1
                elif data.records:
                    size += len(data.records)
            _add(self.fetch_requests, name, total)
            if failed:
                _add(self.failed_fetch, name, failed)
            if size:
                _add(self.bytes_out, name, size)

    # ------------------------------------------------------------------ cluster mode

    def record_isr_shrink(self, count: int = 1) -> None:
        self.isr_shrinks += count

    def record_isr_expand(self, count: int = 1) -> None:
        self.isr_expands += count

    async def close(self) -> None:
        if self.endpoint is not None:
            await self.endpoint.close()
            self.endpoint = None


def _add(counts: dict[str, int], key: str, amount: int) -> None:
    counts[key] = counts.get(key, 0) + amount
