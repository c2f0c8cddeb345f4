"""The bridge from blocking code to the async core: one event loop on one background thread.

Blocking faces (``Producer``, ``Consumer``, ``AdminClient``) own a :class:`LoopThread` and
run their async core on it; they hold no logic of their own::

    lt = LoopThread(name="kafka-sdk-producer")
    core = lt.run(make_core(), timeout=10)        # build the async object on the loop
    meta = lt.run(core.send_and_wait(...), timeout=30)
    lt.stop(timeout=5)

* :meth:`LoopThread.run` blocks the calling thread until the coroutine finishes, at most
  ``timeout`` seconds; on timeout the coroutine is cancelled and
  :class:`sdk.errors.KafkaTimeoutError` is raised. It is interruptible: :meth:`interrupt`
  (from any thread) cancels every coroutine currently waited on by ``run`` and makes those
  calls raise :class:`sdk.errors.WakeupError` - the consumer's ``wakeup()`` builds on this.
* :meth:`LoopThread.submit` schedules a coroutine and returns a ``concurrent.futures.Future``
  without waiting; cancelling that future cancels the coroutine.
* :meth:`LoopThread.call_soon` runs a plain callback on the loop (thread-safe).
* Calling ``run`` from the loop thread itself would deadlock; it raises IllegalStateError.

The thread is a daemon, so a forgotten ``stop()`` does not keep the interpreter alive.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import signal
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from sdk.errors import IllegalStateError, KafkaTimeoutError, WakeupError
from sdk.metrics.logs import client_id_var

__all__ = ["LoopThread"]

T = TypeVar("T")


class LoopThread:
    """An asyncio event loop running on a dedicated daemon thread."""

    def __init__(self, name: str = "kafka-sdk-loop", client_id: str | None = None) -> None:
        # The client whose work this thread runs: coroutines submitted from other threads
        # run with it in sdk.metrics.logs.client_id_var, so their log lines name it.
        self.client_id = client_id
        self.loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._lock = threading.Lock()
        self._waited: set[concurrent.futures.Future[Any]] = set()
        self._interrupted: set[concurrent.futures.Future[Any]] = set()
        self._stopped = False
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()
        self._started.wait()

    def _main(self) -> None:
        # Ctrl-C must reach the main thread: the kernel may hand a process's SIGINT to any
        # thread that does not block it, and when this one took it, a main thread blocked
        # in a wait here was never woken to raise KeyboardInterrupt (a close hung instead
        # of stopping at once; seen once in CI with the stacks). Blocked here, it goes to
        # the main thread.
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._started.set)
        try:
            self.loop.run_forever()
        finally:
            try:
                self._cancel_leftovers()
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            finally:
                self.loop.close()

    def _cancel_leftovers(self) -> None:
        tasks = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            self.loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))

    # ------------------------------------------------------------------ state

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self._thread

    @property
    def running(self) -> bool:
        return not self._stopped and self._thread.is_alive()

    # ------------------------------------------------------------------ running work

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop; cancelling the returned future cancels it."""
        if not self.running:
            coro.close()
            raise IllegalStateError("the event loop thread is stopped")
        if self.client_id is None:
            return asyncio.run_coroutine_threadsafe(coro, self.loop)
        # The task is created in a copy of the context current at the call: set the id there.
        context = contextvars.copy_context()
        context.run(client_id_var.set, self.client_id)
        return context.run(asyncio.run_coroutine_threadsafe, coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for its result (see the module docstring)."""
        if self.in_loop_thread():
            coro.close()
            raise IllegalStateError(
                "a blocking call was made on the client's own event loop thread "
                "(e.g. from a delivery callback); use the async API there"
            )
        fut = self.submit(coro)
        with self._lock:
            self._waited.add(fut)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            if fut.done():
                raise  # the coroutine's own timeout error (TimeoutError is one class in 3.11)
            fut.cancel()
            raise KafkaTimeoutError(f"the operation did not finish within {timeout:g} s") from None
        except concurrent.futures.CancelledError:
            with self._lock:
                interrupted = fut in self._interrupted
            if interrupted:
                raise WakeupError("the blocking call was interrupted by wakeup()") from None
            raise
        finally:
            with self._lock:
                self._waited.discard(fut)
                self._interrupted.discard(fut)

    def interrupt(self) -> int:
        """Cancel every coroutine a ``run`` call is waiting for; those calls raise WakeupError.

        Returns how many calls were interrupted. Safe from any thread.
        """
        with self._lock:
            targets = [f for f in self._waited if not f.done()]
            self._interrupted.update(targets)
        for fut in targets:
            fut.cancel()
        return len(targets)

    def call_soon(self, callback: Callable[..., Any], *args: Any) -> None:
        """Run ``callback(*args)`` on the loop thread soon (thread-safe)."""
        if not self.running:
            raise IllegalStateError("the event loop thread is stopped")
        self.loop.call_soon_threadsafe(callback, *args)

    # ------------------------------------------------------------------ stopping

    def stop(self, timeout: float | None = None) -> None:
        """Stop the loop (cancelling what still runs on it) and join the thread.

        Waits at most ``timeout`` seconds for the thread; safe to call twice.
        """
        if self._stopped:
            return
        self._stopped = True
        if self.in_loop_thread():
            self.loop.stop()
            return
        with contextlib.suppress(RuntimeError):  # the loop may already be closed
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)

    def __repr__(self) -> str:
        return f"<LoopThread {self._thread.name} {'running' if self.running else 'stopped'}>"
