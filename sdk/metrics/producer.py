"""The producer's metrics (Java's ``producer-metrics`` and ``producer-topic-metrics``) and
its batch-level hooks, fed by the sender once per batch or request on the loop thread.

``record-send-total`` counts records when their batch is first written to a broker (a
retry is counted in ``record-retry-total`` instead, so N records sent once read N);
``record-error-total`` counts records whose batch failed for good. Each is recorded once,
per topic; the client-wide figures are groups of the per-topic sensors, summed when read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sdk.metrics.hooks import HookSet
from sdk.metrics.registry import MetricsRegistry, Sensor, SensorGroup, Stat

__all__ = ["ProducerObserver"]

GROUP = "producer-metrics"
TOPIC_GROUP = "producer-topic-metrics"
_RATE_TOTAL: dict[str, Stat] = {"-rate": "rate", "-total": "total"}


class _TopicSensors:
    __slots__ = ("bytes", "compression", "errors", "records", "retries")

    def __init__(self, reg: MetricsRegistry, topic: str) -> None:
        def one(key: str, prefix: str, stats: dict[str, Any], text: str) -> Sensor:
            return reg.stats(reg.sensor(f"topic.{topic}.{key}"), TOPIC_GROUP, prefix, stats,
                             text, topic=topic)

        self.records = one("records", "record-send", _RATE_TOTAL, "records sent")
        self.bytes = one("bytes", "byte", _RATE_TOTAL, "bytes sent (batches as written)")
        self.retries = one("retries", "record-retry", _RATE_TOTAL, "records retried")
        self.errors = one("errors", "record-error", _RATE_TOTAL, "records failed")
        self.compression = one("compression", "compression-rate", {"": "avg"},
                               "compressed / uncompressed size of the batches")


class ProducerObserver:
    """Metrics and hooks of one producer's batches; None-free: the sender holds one only
    when metrics are on or a batch-level hook is set."""

    def __init__(self, registry: MetricsRegistry | None, hooks: HookSet,
                 buffer_total: int = 0, buffer_available: Callable[[], int] | None = None,
                 in_flight: Callable[[], int] | None = None, compression: bool = True
                 ) -> None:
        self.registry = reg = registry
        self._ack_hook = hooks.on_acknowledgement
        self._topics: dict[str, _TopicSensors] = {}
        # per topic: [sum, count, max] of the compression ratios of the batches built
        # for the request being prepared
        self._built: dict[str, list[float]] = {}
        if reg is None:
            return
        s = reg.stats
        # The client-wide counts of records, batches, retries, errors and compression are
        # the per-topic sensors summed (SensorGroup): each event is recorded once.
        self._records = s(reg.sensor_group("records"), GROUP, "record-send", _RATE_TOTAL,
                          "records sent")
        self._per_request = s(reg.sensor("records-per-request"), GROUP, "records-per-request",
                              {"-avg": "avg"}, "records per Produce request")
        s(self._per_request, GROUP, "produce-request",
          {"-rate": "count-rate", "-total": "count-total"}, "Produce requests written")
        self._batch_size = s(reg.sensor_group("batch-size"), GROUP, "batch-size",
                             {"-avg": "avg", "-max": "max"}, "bytes per batch as written")
        self._compression = reg.sensor_group("compression")
        if compression:
            s(self._compression, GROUP, "compression-rate", {"-avg": "avg"},
              "compressed / uncompressed batch size")
        else:  # batches are written as built: nothing to sample (Java reports 1.0 too)
            reg.gauge(reg.name("compression-rate-avg", GROUP,
                               "compressed / uncompressed batch size"), lambda: 1.0)
        self._queue_time = s(reg.sensor("queue-time"), GROUP, "record-queue-time",
                             {"-avg": "avg", "-max": "max"},
                             "ms a batch waited in the accumulator before its first send")
        self._retries = s(reg.sensor_group("retries"), GROUP, "record-retry", _RATE_TOTAL,
                          "records retried")
        self._errors = s(reg.sensor_group("errors"), GROUP, "record-error", _RATE_TOTAL,
                         "records whose send failed")
        self._splits = s(reg.sensor("splits"), GROUP, "batch-split", _RATE_TOTAL,
                         "batches split after MESSAGE_TOO_LARGE")
        reg.gauge(reg.name("buffer-total-bytes", GROUP, "buffer_memory"),
                  lambda: float(buffer_total))
        if buffer_available is not None:
            reg.gauge(reg.name("buffer-available-bytes", GROUP,
                               "buffer_memory not held by records waiting to be sent"),
                      buffer_available)
        if in_flight is not None:
            reg.gauge(reg.name("requests-in-flight", GROUP, "Produce requests awaiting answers"),
                      in_flight)

    def _topic(self, topic: str) -> _TopicSensors:
        sensors = self._topics.get(topic)
        if sensors is None:
            assert self.registry is not None
            sensors = self._topics[topic] = _TopicSensors(self.registry, topic)
            groups: tuple[tuple[SensorGroup, Sensor], ...] = (
                (self._records, sensors.records), (self._batch_size, sensors.bytes),
                (self._retries, sensors.retries), (self._errors, sensors.errors),
                (self._compression, sensors.compression))
            for group, member in groups:
                group.add(member)
        return sensors

    def sent(self, batches: Sequence[Any], now: float) -> None:
        """A Produce request with ``batches`` was written (their attempts counted) in the
        sender's pass of ``now``. One update per sensor and request, not per batch."""
        if self.registry is None:
            return
        records = fresh = 0
        waited = 0.0
        oldest = now
        per_topic: dict[str, list[int]] = {}  # topic -> [records, bytes, largest, batches]
        for batch in batches:
            count = batch.count
            records += count
            if batch.attempts != 1:
                continue
            payload = batch.payload
            size = len(payload) if payload is not None else 0
            fresh += 1
            created = batch.created
            if created < now:  # (a batch opened after the pass began waited nothing)
                waited += now - created
                if created < oldest:
                    oldest = created
            counts = per_topic.get(batch.topic)
            if counts is None:
                per_topic[batch.topic] = [count, size, size, 1]
            else:
                counts[0] += count
                counts[1] += size
                if size > counts[2]:
                    counts[2] = size
                counts[3] += 1
        self._per_request.record(records, now)
        topics = self._topics
        if fresh:
            self._queue_time.record_many(waited * 1000, fresh, (now - oldest) * 1000, now)
            for topic, (count, size, largest, n) in per_topic.items():
                sensors = topics.get(topic) or self._topic(topic)
                sensors.records.record(count, now)
                sensors.bytes.record_many(size, n, largest, now)
        if self._built:
            built, self._built = self._built, {}
            for topic, (ratios, built_count, highest) in built.items():
                sensors = topics.get(topic) or self._topic(topic)
                sensors.compression.record_many(ratios, int(built_count), highest, now)

    def compressed(self, topic: str, uncompressed: int, compressed: int) -> None:
        """A batch was compressed: its compressed / uncompressed ratio, kept until the
        request is written (:meth:`sent`)."""
        if self.registry is not None and uncompressed > 0:
            ratio = compressed / uncompressed
            ratios = self._built.get(topic)
            if ratios is None:
                self._built[topic] = [ratio, 1, ratio]
            else:
                ratios[0] += ratio
                ratios[1] += 1
                if ratio > ratios[2]:
                    ratios[2] = ratio

    def retried(self, batch: Any) -> None:
        if self.registry is not None:
            self._topic(batch.topic).retries.record(batch.count)

    def split(self) -> None:
        if self.registry is not None:
            self._splits.record(1)

    def acknowledged(self, batch: Any) -> None:
        hook = self._ack_hook
        if hook is not None:
            hook(batch.topic, batch.partition, batch.base_offset, batch.count, None)

    def failed(self, batch: Any, error: BaseException) -> None:
        if self.registry is not None:
            self._topic(batch.topic).errors.record(batch.count)
        hook = self._ack_hook
        if hook is not None:
            hook(batch.topic, batch.partition, -1, batch.count, error)
