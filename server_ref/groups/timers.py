"""Named one-shot timers on the broker's event loop.

Scheduling a key again replaces its timer, so "reset the session timer on every heartbeat"
is one call. A timer asked for before the event loop runs (the broker may load the journal
first) waits and is armed by :meth:`Timers.arm_deferred` once a loop is running.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable
from typing import Any

log = logging.getLogger(__name__)


class Timers:
    def __init__(self) -> None:
        self._handles: dict[Hashable, asyncio.TimerHandle] = {}
        self._deferred: dict[Hashable, tuple[float, Callable[..., None], tuple[Any, ...]]] = {}
        self._closed = False

    def schedule(self, key: Hashable, delay_ms: int, callback: Callable[..., None],
                 *args: Any) -> None:
        """Run ``callback(*args)`` after ``delay_ms``, replacing any timer under ``key``."""
        if self._closed:
            return
        self.cancel(key)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._deferred[key] = (delay_ms / 1000, callback, args)
            return
        self._handles[key] = loop.call_later(delay_ms / 1000, self._fire, key, callback, args)

    def arm_deferred(self) -> None:
        """Arm the timers asked for while no loop was running; call from the loop."""
        if not self._deferred:
            return
        pending, self._deferred = self._deferred, {}
        loop = asyncio.get_running_loop()
        for key, (delay_s, callback, args) in pending.items():
            self._handles[key] = loop.call_later(delay_s, self._fire, key, callback, args)

    def cancel(self, key: Hashable) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()
        self._deferred.pop(key, None)

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._handles or key in self._deferred

    def close(self) -> None:
        self._closed = True
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()
        self._deferred.clear()

    def _fire(self, key: Hashable, callback: Callable[..., None], args: tuple[Any, ...]) -> None:
        self._handles.pop(key, None)
        try:
            callback(*args)
        except Exception:  # a timer must never take the event loop's other work down with it
            log.exception("group coordinator timer %r failed", key)
