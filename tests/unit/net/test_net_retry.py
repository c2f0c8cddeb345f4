"""Backoff arithmetic and the tenacity-based retry policy."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from sdk.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    NotLeaderOrFollowerError,
    TopicAuthorizationFailedError,
)
from sdk.net.retry import Backoff, RetryPolicy


def test_backoff_doubles_up_to_the_cap_without_jitter() -> None:
    b = Backoff(50, 1000, jitter=0)
    assert [b.delay(n) for n in range(7)] == [0.0, 0.05, 0.1, 0.2, 0.4, 0.8, 1.0]
    assert b.delay(1000) == 1.0


def test_backoff_jitter_stays_within_twenty_percent_and_the_cap() -> None:
    b = Backoff(100, 1000, rng=random.Random(7))
    for n in range(1, 6):
        base = min(0.1 * 2 ** (n - 1), 1.0)
        for _ in range(50):
            d = b.delay(n)
            assert base * 0.8 - 1e-9 <= d <= min(base * 1.2, 1.0) + 1e-9


def test_backoff_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        Backoff(-1, 10)
    with pytest.raises(ValueError):
        Backoff(1, 10, jitter=1.5)


async def test_retriable_errors_are_retried_until_success() -> None:
    calls: list[int] = []
    hooked: list[BaseException] = []

    async def op() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise NotLeaderOrFollowerError("moved")
        return "ok"

    async def hook(exc: BaseException) -> None:
        hooked.append(exc)

    policy = RetryPolicy(backoff_ms=1, backoff_max_ms=2, timeout_s=10)
    assert await policy.run(op, before_retry=hook) == "ok"
    assert len(calls) == 3
    assert [type(e) for e in hooked] == [NotLeaderOrFollowerError] * 2


async def test_non_retriable_error_is_raised_at_once() -> None:
    calls: list[int] = []

    async def op() -> None:
        calls.append(1)
        raise TopicAuthorizationFailedError("no")

    with pytest.raises(TopicAuthorizationFailedError):
        await RetryPolicy(backoff_ms=1, backoff_max_ms=1, timeout_s=10).run(op)
    assert len(calls) == 1


async def test_attempt_limit_reraises_the_last_error() -> None:
    calls: list[int] = []

    async def op() -> None:
        calls.append(1)
        raise KafkaConnectionError(f"attempt {len(calls)}")

    with pytest.raises(KafkaConnectionError, match="attempt 3"):
        await RetryPolicy(backoff_ms=1, backoff_max_ms=1, timeout_s=None, max_attempts=3).run(op)
    assert len(calls) == 3


async def test_time_budget_ends_in_a_timeout_chained_to_the_last_error() -> None:
    async def op() -> None:
        raise KafkaConnectionError("down")

    with pytest.raises(KafkaTimeoutError, match="did not succeed within") as info:
        await RetryPolicy(backoff_ms=5, backoff_max_ms=10, timeout_s=0.1).run(op, what="Ping")
    assert isinstance(info.value.__cause__, KafkaConnectionError)
    assert "Ping" in str(info.value)


@pytest.mark.parametrize("limit", [1, 2])
async def test_attempt_limit_counts_the_first_attempt(limit: int) -> None:
    calls: list[int] = []

    async def op() -> None:
        calls.append(1)
        raise KafkaConnectionError(f"attempt {len(calls)}")

    with pytest.raises(KafkaConnectionError, match=f"attempt {limit}"):
        await RetryPolicy(backoff_ms=1, backoff_max_ms=1, timeout_s=None,
                          max_attempts=limit).run(op)
    assert len(calls) == limit


class _CountingBackoff(Backoff):
    __slots__ = ("asked",)

    def __init__(self) -> None:
        super().__init__(1, 1)
        self.asked: list[int] = []

    def delay(self, failures: int) -> float:
        self.asked.append(failures)
        return super().delay(failures)


async def test_backoff_counts_failures_across_the_attempts() -> None:
    """The first attempt runs outside tenacity: the failure count still goes 1, 2, 3..."""
    policy = RetryPolicy(backoff_ms=1, backoff_max_ms=1, timeout_s=None, max_attempts=4)
    policy.backoff = backoff = _CountingBackoff()

    async def op() -> None:
        raise KafkaConnectionError("down")

    with pytest.raises(KafkaConnectionError):
        await policy.run(op)
    assert backoff.asked[:3] == [1, 2, 3]  # (tenacity also asks after the last, unused)


def test_a_call_that_succeeds_at_once_does_not_load_tenacity() -> None:
    """tenacity loads at the first retry, not at a client's first call (its start-up)."""
    code = """
import asyncio, sys
from sdk.errors import KafkaConnectionError
from sdk.net.retry import RetryPolicy

async def ok() -> int:
    return 1

policy = RetryPolicy(backoff_ms=1, backoff_max_ms=1, timeout_s=5)
asyncio.run(policy.run(ok))
print("tenacity" in sys.modules)
calls = []

async def flaky() -> int:
    calls.append(1)
    if len(calls) == 1:
        raise KafkaConnectionError("once")
    return 2

asyncio.run(policy.run(flaky))
print("tenacity" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.split() == ["False", "True"]
