"""Problems a client cannot fix by itself, told once: a WARNING log line and ``on_error``.

A client that cannot reach its brokers, or whose topic does not exist, keeps retrying in the
background and would otherwise say nothing at the default log level (a consumer's ``poll``
just returns nothing). :class:`ProblemReporter` turns each such condition into one WARNING
naming the real cause (``connection to 127.0.0.1:9999 refused (ECONNREFUSED)``) and one call
of the client's ``on_error(exc)`` setting, with a typed :class:`sdk.errors.KafkaError`.

Each condition has a key (the broker address, the topic, the partition). A key reported
again within :data:`REPEAT_AFTER_S` is counted, not logged; the next report after that says
how many were held back. :meth:`ProblemReporter.resolved` forgets a key when the condition
ends (connected, the topic appeared), so the next failure is told at once: a state change
always logs.

The reporter runs on the client's event loop (the loop thread of a blocking face), and so
does ``on_error``: it must return quickly and must not call the client's blocking methods.
An exception it raises is logged and otherwise ignored.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable

from sdk.errors import KafkaError

__all__ = ["REPEAT_AFTER_S", "ErrorCallback", "ProblemReporter"]

log = logging.getLogger(__name__)

REPEAT_AFTER_S = 30.0
"""A condition still present is told again at most this often."""

ErrorCallback = Callable[[KafkaError], object]


class ProblemReporter:
    """Rate-limited WARNING lines and ``on_error`` calls, one per condition (see module)."""

    __slots__ = ("_client_id", "_on_error", "_told")

    def __init__(self, client_id: str, on_error: ErrorCallback | None = None) -> None:
        self._client_id = client_id
        self._on_error = on_error
        self._told: dict[Hashable, tuple[float, int]] = {}  # key -> (last told, held back)

    def report(self, key: Hashable, error: KafkaError) -> bool:
        """Tell ``error`` unless ``key`` was told less than REPEAT_AFTER_S ago; True if told."""
        now = time.monotonic()
        told = self._told.get(key)
        if told is not None and now - told[0] < REPEAT_AFTER_S:
            self._told[key] = (told[0], told[1] + 1)
            return False
        held = told[1] if told is not None else 0
        self._told[key] = (now, 0)
        more = f" ({held} more time(s) in the last {now - told[0]:.0f} s)" if told and held else ""
        log.warning("%s: %s%s", self._client_id, error, more)
        if self._on_error is not None:
            try:
                self._on_error(error)
            except Exception:
                log.exception("%s: the on_error callback %r raised", self._client_id,
                              self._on_error)
        return True

    def resolved(self, key: Hashable) -> bool:
        """The condition of ``key`` ended: its next report is told at once. True if it was
        reported before."""
        return self._told.pop(key, None) is not None

    def active(self, kind: str) -> list[Hashable]:
        """Keys of one kind (tuples starting with ``kind``) currently reported."""
        return [k for k in self._told if isinstance(k, tuple) and k and k[0] == kind]
