"""LoopThread: the blocking faces' bridge to the event loop."""

from __future__ import annotations

import asyncio
import threading

import pytest

from sdk.errors import IllegalStateError, KafkaTimeoutError, WakeupError
from sdk.net.loop_thread import LoopThread


@pytest.fixture
def lt() -> LoopThread:
    thread = LoopThread(name="test-loop")
    yield thread
    thread.stop(timeout=5)


def test_run_returns_the_result_on_the_loop_thread(lt: LoopThread) -> None:
    async def where() -> str:
        await asyncio.sleep(0)
        return threading.current_thread().name

    assert lt.run(where(), timeout=5) == "test-loop"


def test_run_timeout_cancels_the_coroutine(lt: LoopThread) -> None:
    cancelled = threading.Event()

    async def slow() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(KafkaTimeoutError):
        lt.run(slow(), timeout=0.05)
    assert cancelled.wait(5)


def test_the_coroutines_own_timeout_error_passes_through(lt: LoopThread) -> None:
    async def fails() -> None:
        raise KafkaTimeoutError("inner")

    with pytest.raises(KafkaTimeoutError, match="inner"):
        lt.run(fails(), timeout=5)


def test_interrupt_wakes_a_blocked_call(lt: LoopThread) -> None:
    started = threading.Event()

    async def forever() -> None:
        started.set()
        await asyncio.sleep(60)

    result: list[BaseException] = []

    def call() -> None:
        try:
            lt.run(forever())
        except BaseException as exc:
            result.append(exc)

    t = threading.Thread(target=call)
    t.start()
    assert started.wait(5)
    while lt.interrupt() == 0:  # the run() may register a moment after the coroutine starts
        pass
    t.join(5)
    assert len(result) == 1 and isinstance(result[0], WakeupError)


def test_blocking_call_from_the_loop_thread_is_refused(lt: LoopThread) -> None:
    async def nested() -> None:
        inner = asyncio.sleep(0)
        lt.run(inner)  # would deadlock

    with pytest.raises(IllegalStateError, match="own event loop"):
        lt.run(nested(), timeout=5)


def test_submit_call_soon_and_stop(lt: LoopThread) -> None:
    async def value() -> int:
        return 7

    assert lt.submit(value()).result(5) == 7
    seen = threading.Event()
    lt.call_soon(seen.set)
    assert seen.wait(5)
    lt.stop(timeout=5)
    assert not lt.running
    with pytest.raises(IllegalStateError):
        lt.submit(value())
    lt.stop()  # twice is fine
