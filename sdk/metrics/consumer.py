"""The consumer's metrics (Java's ``consumer-fetch-manager-metrics``,
``consumer-coordinator-metrics`` and the poll part of ``consumer-metrics``), its hooks
and tracing, fed by the fetcher (per fetch response and per hand-out) and the group
coordinator (per commit and rebalance).

Lag: ``records-lag`` (per partition: tags ``topic``, ``partition``) is the partition's
end offset (high watermark, or last stable offset under read_committed) minus the
position of the next record to hand out, read when the metrics are; ``records-lag-max``
is the largest of them now, and per partition (the same tags, as Java's per-partition
``records-lag-max``) that partition's lag now. Java samples the lag at each fetch and
reports the largest sample of the window; reading it at the time of asking gives the
value an admin client computes from the committed offsets once those are committed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sdk.metrics.hooks import HookSet
from sdk.metrics.registry import MetricName, MetricsRegistry

__all__ = ["ConsumerObserver"]

FETCH_GROUP = "consumer-fetch-manager-metrics"
COORDINATOR_GROUP = "consumer-coordinator-metrics"
CONSUMER_GROUP = "consumer-metrics"


class ConsumerObserver:
    """See the module docstring. ``lags`` returns ``{TopicPartition: lag or None}`` for
    the assigned partitions."""

    def __init__(self, registry: MetricsRegistry | None, hooks: HookSet, tracing: Any,
                 lags: Callable[[], Mapping[Any, int | None]]) -> None:
        self.registry = reg = registry
        self._consume_hook = hooks.on_consume
        self._commit_hook = hooks.on_commit
        self._rebalance_hook = hooks.on_rebalance
        self._tracing = tracing
        # Checked once per fetch / per hand-out by the fetcher: None costs nothing.
        self.hot = self if (reg is not None or self._consume_hook is not None
                            or tracing is not None) else None
        self._last_poll = math.nan
        self._rebalance_started: float | None = None
        self._owned_before: set[Any] = set()
        self._last_rebalance = math.nan
        self._fetch_bytes = 0
        self._lags = lags
        if reg is None:
            return
        s = reg.stats
        self._fetch = s(reg.sensor("fetch-latency"), FETCH_GROUP, "fetch",
                        {"-rate": "count-rate", "-total": "count-total"},
                        "Fetch responses received")
        s(self._fetch, FETCH_GROUP, "fetch-latency", {"-avg": "avg", "-max": "max"},
          "ms from sending a Fetch to its response")
        self._fetch_size = s(reg.sensor("fetch-size"), FETCH_GROUP, "fetch-size",
                             {"-avg": "avg", "-max": "max"}, "record bytes per Fetch response")
        s(self._fetch_size, FETCH_GROUP, "bytes-consumed", {"-rate": "rate", "-total": "total"},
          "record bytes fetched")
        self._records = s(reg.sensor("records-consumed"), FETCH_GROUP, "records-consumed",
                          {"-rate": "rate", "-total": "total"},
                          "records handed to the application")
        s(self._records, FETCH_GROUP, "records-per-poll", {"-avg": "avg"},
          "records per poll that returned some")
        self._commit = s(reg.sensor("commit"), COORDINATOR_GROUP, "commit",
                         {"-rate": "count-rate", "-total": "count-total"}, "offset commits")
        s(self._commit, COORDINATOR_GROUP, "commit-latency", {"-avg": "avg", "-max": "max"},
          "ms an OffsetCommit took")
        self._failed_commits = s(reg.sensor("commit-failed"), COORDINATOR_GROUP, "failed-commit",
                                 {"-total": "count-total"}, "offset commits that failed")
        self._rebalance = s(reg.sensor("rebalance"), COORDINATOR_GROUP, "rebalance",
                            {"-total": "count-total"}, "rebalances completed")
        s(self._rebalance, COORDINATOR_GROUP, "rebalance-latency",
          {"-avg": "avg", "-max": "max", "-total": "total"},
          "ms from leaving the old assignment to taking the new one")
        reg.gauge(reg.name("last-rebalance-seconds-ago", COORDINATOR_GROUP),
                  lambda: time.monotonic() - self._last_rebalance)
        reg.gauge(reg.name("assigned-partitions", COORDINATOR_GROUP),
                  lambda: float(len(self._lags())))
        reg.gauge(reg.name("last-poll-seconds-ago", CONSUMER_GROUP,
                           "seconds since the application last polled"),
                  lambda: time.monotonic() - self._last_poll)
        reg.provider(self._lag_metrics)

    def _lag_metrics(self) -> dict[MetricName, float]:
        reg = self.registry
        assert reg is not None
        out: dict[MetricName, float] = {}
        worst = math.nan
        for tp, lag in self._lags().items():
            value = math.nan if lag is None else float(lag)
            out[reg.name("records-lag", FETCH_GROUP, "records behind the end offset",
                         topic=tp.topic, partition=str(tp.partition))] = value
            out[reg.name("records-lag-max", FETCH_GROUP, "the partition's records-lag now",
                         topic=tp.topic, partition=str(tp.partition))] = value
            if lag is not None and not (lag <= worst):
                worst = float(lag)
        out[reg.name("records-lag-max", FETCH_GROUP,
                     "the largest records-lag of the assigned partitions")] = worst
        return out

    # ------------------------------------------------------------------ fetching (hot)

    def fetched_bytes(self, size: int) -> None:
        self._fetch_bytes += size

    def fetch_done(self, sent_at: float) -> None:
        """The answer to a Fetch written at ``sent_at`` (``time.monotonic()``) was read."""
        if self.registry is None:
            return
        now = time.monotonic()
        self._fetch.record((now - sent_at) * 1000, now)
        self._fetch_size.record(self._fetch_bytes, now)
        self._fetch_bytes = 0

    def consumed(self, records: Mapping[Any, list[Any]], count: int) -> None:
        """``records`` (by partition, ``count`` in all) are being handed out."""
        now = time.monotonic()
        self._last_poll = now
        if not count:
            return
        if self.registry is not None:
            self._records.record(count, now)
        if self._consume_hook is not None:
            self._consume_hook([r for part in records.values() for r in part])
        if self._tracing is not None:
            self._tracing.consumed(r for part in records.values() for r in part)

    def polled(self) -> None:
        self._last_poll = time.monotonic()

    # ------------------------------------------------------------------ group

    @staticmethod
    def commit_started() -> float:
        return time.monotonic()

    def committed(self, offsets: Mapping[Any, Any], started: float,
                  error: BaseException | None) -> None:
        if self.registry is not None:
            if error is None:
                self._commit.record((time.monotonic() - started) * 1000)
            else:
                self._failed_commits.record(1)
        if self._commit_hook is not None:
            self._commit_hook(dict(offsets), error)

    def rebalance_started(self, owned: Iterable[Any]) -> None:
        """A rebalance begins; ``owned``: the partitions held before it."""
        if self._rebalance_started is None:
            self._rebalance_started = time.monotonic()
            self._owned_before = set(owned)

    def rebalanced(self, owned: Iterable[Any]) -> None:
        """The member took its new assignment ``owned``."""
        now = time.monotonic()
        started, self._rebalance_started = self._rebalance_started, None
        before, self._owned_before = self._owned_before, set()
        after = set(owned)
        self._last_rebalance = now
        if self.registry is not None:
            self._rebalance.record((now - (started if started is not None else now)) * 1000,
                                   now)
        revoked, assigned = before - after, after - before
        if self._rebalance_hook is not None:
            self._rebalance_hook(sorted(revoked), sorted(assigned))
