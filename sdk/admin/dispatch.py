"""How admin requests reach brokers: one-shot requests, and the per-item retry loop.

Most admin calls work on many items (topics, partitions, groups) that live on different
brokers. :meth:`Dispatcher.run_items` does the routing and retrying for all of them:

1. ``route(item)`` names where the item's request goes (a node id, ``CONTROLLER``, a group's
   ``Coordinator``, ...) or returns the error that keeps it from going anywhere (the topic
   does not exist: final; the partition has no leader yet: retried);
2. items going to the same node are sent together, every node concurrently, by
   ``send(node, items)``, which returns a result per item;
3. an item whose result (or whose whole request) failed with a retriable error is tried
   again in the next round, after a backoff and, when the error says the metadata is stale,
   a metadata refresh; coordinators that moved are forgotten and looked up again (the
   network client's rule, :meth:`sdk.net.NetClient.forget_stale`);
4. everything else is final. When the call's time budget runs out, items still failing
   retriably get a :class:`sdk.errors.KafkaTimeoutError` naming their last error.

So an item that fails never fails its neighbours, and a result set comes back even when a
broker is down. "Unknown topic" is not retried: in an admin call it is an answer, not a
transient state (the metadata was just fetched to route the request).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from sdk.errors import (
    KafkaError,
    KafkaTimeoutError,
    MalformedDataError,
    RequestTimeoutError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from sdk.net import ANY_NODE, Backoff, NetClient, Target
from sdk.protocol.message import Message

if TYPE_CHECKING:
    from sdk.admin.config import AdminConfig

__all__ = ["Deadline", "Dispatcher", "default_retry"]

I = TypeVar("I")  # noqa: E741 - an item: topic name, TopicPartition, group id, ...
R = TypeVar("R")

def default_retry(exc: BaseException) -> bool:
    """Retriable errors, except the "no such topic" answers (final in admin calls)."""
    if isinstance(exc, UnknownTopicOrPartitionError | UnknownTopicIdError):
        return False
    return isinstance(exc, KafkaError) and exc.retriable


class Deadline:
    """The time budget of one admin call."""

    __slots__ = ("at", "budget_s")

    def __init__(self, budget_s: float) -> None:
        self.budget_s = budget_s
        self.at = time.monotonic() + budget_s

    def remaining(self) -> float:
        return max(0.0, self.at - time.monotonic())

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self.at

    def timeout_error(self, what: str, last: BaseException | None) -> KafkaTimeoutError:
        detail = f"; last error: {last}" if last is not None else ""
        return KafkaTimeoutError(f"{what} did not succeed within {self.budget_s:g} s{detail}",
                                 cause=last)


class Dispatcher:
    """Sends admin requests through one NetClient; see the module docstring."""

    def __init__(self, client: NetClient, config: AdminConfig) -> None:
        self.client = client
        self.config = config
        self._request_timeout_s = config.request_timeout_ms / 1000
        self._backoff = Backoff(config.retry_backoff_ms, config.retry_backoff_max_ms)

    def operation_timeout_ms(self, deadline: Deadline) -> int:
        """The broker-side timeout for operations such as CreateTopics: what is left of the
        budget, capped so the broker answers before our request times out."""
        ms = int(min(deadline.remaining(), self._request_timeout_s * 0.9) * 1000)
        return max(ms, 1)

    async def request(self, node: int, build: Callable[[int], Message], api_key: int,
                      deadline: Deadline, *, min_version: int = 0,
                      max_version: int | None = None) -> Any:
        """Send one request to ``node`` (no retries); ``build(version)`` makes the body for
        the negotiated version."""
        budget = max(0.001, deadline.remaining())
        conn = await self.client.connection(node, timeout_s=budget)
        version = conn.version_for(api_key, min_version=min_version, max_version=max_version)
        timeout = max(0.001, min(deadline.remaining(), self._request_timeout_s))
        return await conn.send(build(version), version, timeout_s=timeout)

    async def call(self, build: Callable[[int], Message], api_key: int, deadline: Deadline,
                   target: Target = ANY_NODE, *, check: Callable[[Any], None] | None = None,
                   max_version: int | None = None) -> Any:
        """One request with whole-request retries (connection losses and whatever ``check``
        raises retriably), within the deadline."""
        del api_key  # NetClient.call probes the key from build(0)
        if deadline.expired:
            raise deadline.timeout_error("the request", None)
        return await self.client.call(build, target, check=check,
                                      timeout_s=max(0.001, deadline.remaining()),
                                      max_version=max_version)

    async def run_items(
        self,
        items: Sequence[I],
        *,
        what: str,
        deadline: Deadline,
        route: Callable[[I], Target | KafkaError],
        send: Callable[[int, list[I]], Awaitable[Mapping[I, R]]],
        fail: Callable[[I, KafkaError], R],
        error_of: Callable[[R], KafkaError | None],
        prepare: Callable[[list[I]], Awaitable[None]] | None = None,
        retry_if: Callable[[BaseException], bool] = default_retry,
    ) -> dict[I, R]:
        """Route, send and retry ``items``; returns one result per item, in item order."""
        order = list(dict.fromkeys(items))
        final: dict[I, R] = {}
        last_error: dict[I, KafkaError] = {}
        pending = order
        attempt = 0
        while pending:
            if attempt:
                await asyncio.sleep(min(self._backoff.delay(attempt), deadline.remaining()))
                if deadline.expired:
                    for item in pending:
                        final[item] = fail(item, deadline.timeout_error(
                            f"{what} for {item}", last_error.get(item)))
                    break
            attempt += 1
            rnd: _Round[I, R] = _Round(self.client, what, deadline, final, fail, retry_if,
                                       last_error)
            if prepare is not None:
                try:
                    await prepare(pending)
                except KafkaError as exc:
                    for item in pending:
                        rnd.settle(item, exc, None)
                    pending = rnd.retry
                    continue
            targets: dict[I, Target] = {}
            by_node: dict[int, list[I]] = {}
            for item in pending:
                routed = route(item)
                if isinstance(routed, KafkaError):
                    rnd.settle(item, routed, None)  # e.g. no leader yet: retried
                    continue
                targets[item] = routed
                try:
                    node = await self.client.resolve(routed,
                                                      timeout_s=max(0.001, deadline.remaining()))
                except KafkaError as exc:
                    rnd.settle(item, exc, routed)
                    continue
                by_node.setdefault(node, []).append(item)
            shards = list(by_node.items())
            outcomes = await asyncio.gather(*(send(node, its) for node, its in shards),
                                            return_exceptions=True)
            for (_node, its), outcome in zip(shards, outcomes):
                if isinstance(outcome, BaseException):
                    if not isinstance(outcome, KafkaError):
                        raise outcome
                    for item in its:
                        rnd.settle(item, outcome, targets[item])
                    continue
                for item in its:
                    result = outcome.get(item)
                    if result is None:
                        final[item] = fail(item, MalformedDataError(
                            f"the broker's answer to {what} did not mention {item}"))
                        continue
                    error = error_of(result)
                    if error is None:
                        final[item] = result
                    else:
                        rnd.settle(item, error, targets[item], result)
            if rnd.refresh and rnd.retry:
                with contextlib.suppress(KafkaError):
                    await self.client.refresh_metadata(
                        timeout_s=max(0.001, min(deadline.remaining(), self._request_timeout_s)))
            pending = rnd.retry
        return {item: final[item] for item in order}


class _Round(Generic[I, R]):
    """Book-keeping of one round of :meth:`Dispatcher.run_items`."""

    def __init__(self, client: NetClient, what: str, deadline: Deadline, final: dict[I, R],
                 fail: Callable[[I, KafkaError], R],
                 retry_if: Callable[[BaseException], bool],
                 last_error: dict[I, KafkaError]) -> None:
        self.client = client
        self.what = what
        self.deadline = deadline
        self.final = final
        self.fail = fail
        self.retry_if = retry_if
        self.last_error = last_error
        self.retry: list[I] = []
        self.refresh = False  # a metadata refresh is due before the next round

    def settle(self, item: I, exc: KafkaError, target: Target | None,
               result: R | None = None) -> None:
        """Make ``item``'s failure final, or queue it for the next round."""
        if not self.retry_if(exc):
            self.final[item] = result if result is not None else self.fail(item, exc)
            return
        if self.client.forget_stale(target, exc):
            self.refresh = True
        if self.deadline.expired:
            # A request cut short by the call's own budget says less than the broker's
            # last answer, so that answer stays the cause.
            previous = self.last_error.get(item)
            cause = previous if isinstance(exc, RequestTimeoutError) and previous else exc
            self.final[item] = self.fail(
                item, self.deadline.timeout_error(f"{self.what} for {item}", cause))
        else:
            self.last_error[item] = exc
            self.retry.append(item)
