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
:meth:`record_isr_expand` (the replica manager) and the ``*_source`` callables
(``cluster.py``); a single broker reports 0 under-replicated partitions and is the active
controller.
"""

from __future__ import annotations

import struct
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from sdk.protocol.messages import ApiKey

if TYPE_CHECKING:
    from server_ref.handlers import RequestContext
    from server_ref.topics import TopicRegistry

__all__ = ["LATENCY_BUCKETS_MS", "TOPIC_COUNTERS", "BrokerMetrics", "LatencyHistogram",
           "request_name"]

# Upper bounds (ms) of the request latency buckets; Kafka's TotalTimeMs is a histogram too.
LATENCY_BUCKETS_MS: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0,
                                         100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0,
                                         10000.0, 30000.0)
_BOUNDS_NS = tuple(int(ms * 1_000_000) for ms in LATENCY_BUCKETS_MS)  # compared as ints
# A topic's counters (BrokerMetrics.topics[name]), by index: Kafka's BrokerTopicMetrics.
TOPIC_COUNTERS = ("produce_requests", "failed_produce", "bytes_in", "messages_in",
                  "fetch_requests", "failed_fetch", "bytes_out")
(_PRODUCE, _FAILED_PRODUCE, _BYTES_IN, _MESSAGES_IN, _FETCH, _FAILED_FETCH,
 _BYTES_OUT) = range(len(TOPIC_COUNTERS))
_RECORD_COUNT = struct.Struct(">i").unpack_from  # a v2 batch header's record count ...
_RECORD_COUNT_AT = 57  # ... at this offset
_clock = time.perf_counter_ns


def request_name(api_key: int) -> str:
    """Kafka's name of an API as its request metrics tag it (``ListOffsets``)."""
    try:
        name = ApiKey(api_key).name
    except ValueError:
        return f"Unknown{api_key}"
    return "".join(part.capitalize() for part in name.split("_"))


class LatencyHistogram:
    """Counts per bucket (the last one is +Inf) and the sum, kept in nanoseconds."""

    __slots__ = ("counts", "sum_ns")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS_MS) + 1)
        self.sum_ns = 0

    def observe_ns(self, ns: int) -> None:
        self.counts[bisect_left(_BOUNDS_NS, ns)] += 1
        self.sum_ns += ns

    @property
    def sum_ms(self) -> float:
        return self.sum_ns / 1_000_000

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
      (default: all of them) and partitions without a leader (default: 0);
    - ``partition_count_source``: partitions this broker is a replica of (default: all).
    """

    def __init__(self) -> None:
        self.started_s = time.time()
        # Requests by (api_key << 8 | version), latency histograms by api key.
        self.requests: dict[int, int] = {}
        self.latency: dict[int, LatencyHistogram] = {}
        # Per topic, one list of counters indexed as TOPIC_COUNTERS: one dict lookup per
        # topic of a request, then list increments.
        self.topics: dict[str, list[int]] = {}
        # Connections accepted per listener (open ones are counted at scrape time).
        self.connections_created: dict[str, int] = {}
        # ReplicaManager events and the cluster-mode gauges.
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.under_replicated_source: Callable[[], int] | None = None
        self.active_controller_source: Callable[[], bool] | None = None
        self.leader_count_source: Callable[[], int] | None = None
        self.offline_partitions_source: Callable[[], int] | None = None
        self.partition_count_source: Callable[[], int] | None = None
        self.endpoint: Any = None  # the HTTP endpoint (endpoint.MetricsEndpoint) once bound

    def topic_counters(self, topic: str) -> list[int]:
        """The counters of ``topic`` (zeros for one not seen yet), indexed as
        TOPIC_COUNTERS."""
        return self.topics.get(topic) or [0] * len(TOPIC_COUNTERS)

    def _topic(self, topic: str) -> list[int]:
        stats = self.topics.get(topic)
        if stats is None:
            stats = self.topics[topic] = [0] * len(TOPIC_COUNTERS)
        return stats

    # ------------------------------------------------------------------ requests

    def request_started(self, api_key: int, api_version: int) -> int:
        """Count a request; returns the time its latency is measured from."""
        key = api_key << 8 | api_version
        requests = self.requests
        requests[key] = requests.get(key, 0) + 1
        return _clock()

    def request_answered(self, ctx: RequestContext) -> None:
        """The response of ``ctx`` is encoded (or, for acks=0, dropped): its latency."""
        started = ctx.started_ns
        if started:
            elapsed = _clock() - started
            histogram = self.latency.get(ctx.api_key)
            if histogram is None:
                histogram = self.latency[ctx.api_key] = LatencyHistogram()
            histogram.counts[bisect_left(_BOUNDS_NS, elapsed)] += 1
            histogram.sum_ns += elapsed

    def connection_opened(self, listener: str) -> None:
        created = self.connections_created
        created[listener] = created.get(listener, 0) + 1

    # ------------------------------------------------------------------ produce and fetch

    def record_produce(self, topic: str, partitions: Sequence[Any],
                       responses: Sequence[Any]) -> None:
        """One topic of a Produce request: its partitions' data and their answers. Bytes
        and messages count only appended batches, as Kafka's BytesIn/MessagesIn; the record
        count is read from the batch header, never by walking records."""
        stats = self._topic(topic)
        stats[_PRODUCE] += len(responses)
        for data, answer in zip(partitions, responses):
            if answer.error_code:
                stats[_FAILED_PRODUCE] += 1
                continue
            records = data.records
            if records is not None and len(records) > _RECORD_COUNT_AT + 4:
                stats[_BYTES_IN] += len(records)
                stats[_MESSAGES_IN] += _RECORD_COUNT(records, _RECORD_COUNT_AT)[0]

    def record_fetch(self, topics: Iterable[Any], registry: TopicRegistry) -> None:
        """The topics of a Fetch response: partitions answered, failed, bytes sent (v13+
        responses name topics by id only: the name is looked up)."""
        for entry in topics:
            name = entry.topic
            if not name:
                found = registry.by_id(entry.topic_id)
                name = found.name if found is not None else str(entry.topic_id)
            stats = self._topic(name)
            stats[_FETCH] += len(entry.partitions)
            for data in entry.partitions:
                if data.error_code:
                    stats[_FAILED_FETCH] += 1
                elif data.records:
                    stats[_BYTES_OUT] += len(data.records)

    # ------------------------------------------------------------------ cluster mode

    def record_isr_shrink(self, count: int = 1) -> None:
        self.isr_shrinks += count

    def record_isr_expand(self, count: int = 1) -> None:
        self.isr_expands += count

    async def close(self) -> None:
        if self.endpoint is not None:
            await self.endpoint.close()
            self.endpoint = None
