"""Backoff arithmetic and the retry policy for requests, built on tenacity.

* :class:`Backoff` - exponential delays with +-20% jitter (Kafka's ``reconnect.backoff.ms`` /
  ``retry.backoff.ms`` rule: ``base * 2**(failures - 1)`` capped at a maximum), pure math.
* :class:`RetryPolicy` - runs an async callable until it succeeds, retrying errors marked
  :class:`sdk.errors.RetriableError` with a :class:`Backoff` between attempts, within an
  overall time budget and an optional attempt limit. A hook runs before each retry (the
  network client uses it to refresh metadata after an ``InvalidMetadataError`` or
  NOT_CONTROLLER, or to forget a coordinator). When the budget runs out the caller gets
  :class:`sdk.errors.KafkaTimeoutError` chained to the last error.

Example::

    policy = RetryPolicy(backoff_ms=100, backoff_max_ms=1000, timeout_s=30)
    result = await policy.run(lambda: client.send(request, node_id))
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from sdk.errors import KafkaTimeoutError, is_retriable

if TYPE_CHECKING:
    import tenacity

__all__ = ["Backoff", "RetryPolicy"]

T = TypeVar("T")


class Backoff:
    """``delay(n)`` for the n-th consecutive failure: ``base * 2**(n-1)``, capped, +-jitter."""

    __slots__ = ("_rng", "base_s", "jitter", "max_s")

    def __init__(self, base_ms: float, max_ms: float, *, jitter: float = 0.2,
                 rng: random.Random | None = None) -> None:
        if base_ms < 0 or max_ms < 0:
            raise ValueError("backoff times must be >= 0")
        if not 0 <= jitter < 1:
            raise ValueError("jitter must be in [0, 1)")
        self.base_s = base_ms / 1000.0
        self.max_s = max(max_ms, base_ms) / 1000.0
        self.jitter = jitter
        self._rng = rng or random.Random()

    def delay(self, failures: int) -> float:
        """Seconds to wait after ``failures`` consecutive failures (0 failures: no wait)."""
        if failures <= 0 or self.base_s == 0:
            return 0.0
        raw = min(self.base_s * (2 ** min(failures - 1, 30)), self.max_s)
        if self.jitter:
            raw *= 1 + self._rng.uniform(-self.jitter, self.jitter)
        return min(raw, self.max_s)


class RetryPolicy:
    """Retry an async operation on retriable errors, with backoff, within a time budget."""

    def __init__(
        self,
        *,
        backoff_ms: float,
        backoff_max_ms: float,
        timeout_s: float | None,
        max_attempts: int | None = None,
        retry_if: Callable[[BaseException], bool] = is_retriable,
    ) -> None:
        if max_attempts is not None and max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        self.backoff = Backoff(backoff_ms, backoff_max_ms)
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.retry_if = retry_if

    async def run(
        self,
        operation: Callable[[], Awaitable[T]],
        *,
        before_retry: Callable[[BaseException], Awaitable[None] | None] | None = None,
        what: str = "request",
    ) -> T:
        """Await ``operation()`` until it returns; re-raise a non-retriable error at once.

        Retriable errors are retried after a backoff until ``max_attempts`` (the last error is
        then re-raised) or ``timeout_s`` (KafkaTimeoutError chained to the last error).
        """
        deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
        last: list[BaseException] = []
        try:
            if deadline is None:
                return await self._attempts(operation, deadline, last, before_retry)
            # wait_for rather than asyncio.timeout: the package supports Python 3.10.
            return await asyncio.wait_for(self._attempts(operation, deadline, last, before_retry),
                                          max(0.0, deadline - time.monotonic()))
        except TimeoutError as exc:
            if isinstance(exc, KafkaTimeoutError) and not self._is_budget(deadline):
                raise
            cause = last[0] if last else exc
            raise KafkaTimeoutError(
                f"{what} did not succeed within {self.timeout_s:g} s"
                + (f"; last error: {cause}" if last else ""),
                cause=cause,
            ) from cause
        except BaseException as exc:
            if deadline is not None and self.retry_if(exc) and self._is_budget(deadline):
                raise KafkaTimeoutError(
                    f"{what} did not succeed within {self.timeout_s:g} s; last error: {exc}",
                    cause=exc,
                ) from exc
            raise

    async def _attempts(
        self,
        operation: Callable[[], Awaitable[T]],
        deadline: float | None,
        last: list[BaseException],
        before_retry: Callable[[BaseException], Awaitable[None] | None] | None,
    ) -> T:
        """The first attempt runs as is; tenacity runs the retries after a retriable failure.

        Most calls succeed at once: importing tenacity and building its retrying object for
        them cost 2-4 ms of a client's first call (its start-up; bench/startup_bench.py) and
        some µs per call after."""
        try:
            return await operation()
        except BaseException as exc:
            if not self.retry_if(exc) or self._stop(1, deadline):
                raise
            first = exc

        import tenacity  # here: only a retry pays for it

        async def remember_and_hook(exc: BaseException) -> None:
            last[:] = [exc]
            if before_retry is not None:
                maybe = before_retry(exc)
                if maybe is not None:
                    await maybe

        await remember_and_hook(first)
        await asyncio.sleep(self._wait(1, deadline))
        # Tenacity counts from 1 again: its attempt n is our attempt n + 1.

        def wait(state: tenacity.RetryCallState) -> float:
            return self._wait(state.attempt_number + 1, deadline)

        def should_stop(state: tenacity.RetryCallState) -> bool:
            return self._stop(state.attempt_number + 1, deadline)

        async def before_sleep(state: tenacity.RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            if exc is not None:
                await remember_and_hook(exc)

        retrying = tenacity.AsyncRetrying(
            retry=tenacity.retry_if_exception(self.retry_if),
            wait=wait,
            stop=should_stop,
            before_sleep=before_sleep,
            reraise=True,
        )
        return await retrying(operation)

    def _wait(self, failures: int, deadline: float | None) -> float:
        """The backoff after ``failures`` failed attempts, not past the deadline."""
        delay = self.backoff.delay(failures)
        if deadline is not None:
            delay = max(0.0, min(delay, deadline - time.monotonic()))
        return delay

    def _stop(self, attempts: int, deadline: float | None) -> bool:
        """No attempt after ``attempts`` failed ones: the limit is reached or time is up."""
        if self.max_attempts is not None and attempts >= self.max_attempts:
            return True
        return deadline is not None and time.monotonic() >= deadline

    @staticmethod
    def _is_budget(deadline: float | None) -> bool:
        return deadline is not None and time.monotonic() >= deadline
