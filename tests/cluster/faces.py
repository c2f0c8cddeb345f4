"""Both producer faces behind one blocking interface, so a scenario's steps are written once.

``ProducerFace("sync", ...)`` wraps ``Producer``; ``ProducerFace("async", ...)`` runs an
``AsyncProducer`` on an event loop of its own (:class:`LoopRunner`) and awaits its futures
there, as an asyncio application would. Each sent record keeps its future and the time its
``on_delivery`` callback ran.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from sdk import AsyncProducer, Producer

T = TypeVar("T")


class LoopRunner:
    """An event loop in a daemon thread; :meth:`run` runs a coroutine there and waits."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="face-loop",
                                        daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self.loop.close()


@dataclass(slots=True)
class Delivery:
    sent_at: float
    future: Any = None
    error: BaseException | None = None
    metadata: Any = None
    done_at: float | None = None


class ProducerFace:
    def __init__(self, face: str, **settings: Any) -> None:
        self.face = face
        self._runner: LoopRunner | None = None
        if face == "sync":
            self._sync: Producer | None = Producer(**settings)
        elif face == "async":
            self._sync = None
            self._runner = LoopRunner()

            async def make() -> AsyncProducer:
                producer = AsyncProducer(**settings)
                await producer.start()
                return producer

            self._async = self._runner.run(make(), 30)
        else:
            raise ValueError(f"face is 'sync' or 'async', not {face!r}")

    def send(self, topic: str, value: bytes, key: bytes | None = None) -> Delivery:
        delivery = Delivery(time.monotonic())

        def on_delivery(err: BaseException | None, metadata: Any) -> None:
            delivery.error, delivery.metadata = err, metadata
            delivery.done_at = time.monotonic()

        if self._sync is not None:
            delivery.future = self._sync.send(topic, value, key=key, on_delivery=on_delivery)
        else:
            assert self._runner is not None
            delivery.future = self._runner.run(
                self._async.send(topic, value, key=key, on_delivery=on_delivery), 60)
        return delivery

    def outcome(self, delivery: Delivery, timeout_s: float) -> BaseException | None:
        """Wait for the record's outcome (through its future, in the face's own way):
        None when acknowledged, else the error."""
        if self._sync is not None:
            return delivery.future.exception(timeout_s)

        async def wait() -> BaseException | None:
            task = asyncio.ensure_future(_awaitable(delivery.future))
            done, _ = await asyncio.wait([task], timeout=timeout_s)
            if not done:
                task.cancel()
                raise TimeoutError(f"no outcome after {timeout_s} s")
            return task.exception()

        assert self._runner is not None
        return self._runner.run(wait())

    def close(self, timeout_s: float = 10.0) -> None:
        if self._sync is not None:
            self._sync.close(timeout=timeout_s)
            return
        assert self._runner is not None
        try:
            self._runner.run(self._async.close(timeout=timeout_s), timeout_s + 10)
        finally:
            self._runner.close()


async def _awaitable(future: Any) -> Any:
    return await future
