"""Heartbeat, session and poll-interval timing of a group member, as a pure object.

Nothing here reads a clock: every method takes ``now`` (seconds, from any monotonic clock,
e.g. ``loop.time()``). The membership task asks it when to send the next heartbeat and whether
the session or the poll interval has run out; tests drive it with made-up times.

Three independent deadlines:

* heartbeat: send one every ``heartbeat_interval_ms`` after the last one was sent, or
  ``retry_backoff_ms`` after one failed;
* session: if no heartbeat succeeded for ``session_timeout_ms``, the coordinator has
  certainly dropped us, so we should treat our membership as lost and rejoin;
* poll: if the application did not call poll for ``max_poll_interval_ms``, the member leaves
  the group proactively, so a stuck application cannot hold partitions forever.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class HeartbeatTimer:
    session_timeout_ms: int
    heartbeat_interval_ms: int
    max_poll_interval_ms: int
    retry_backoff_ms: int = 100
    now: float = 0.0  # time of construction: the start of every interval
    last_sent: float = field(init=False)
    last_received: float = field(init=False)
    last_poll: float = field(init=False)
    session_start: float = field(init=False)
    in_flight: bool = field(init=False, default=False)
    _retry_at: float | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.heartbeat_interval_ms <= 0 or self.session_timeout_ms <= 0:
            raise ValueError("heartbeat interval and session timeout must be > 0")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError(
                f"heartbeat interval ({self.heartbeat_interval_ms} ms) must be lower than "
                f"the session timeout ({self.session_timeout_ms} ms)"
            )
        self.last_sent = self.last_received = self.last_poll = self.session_start = self.now

    # ------------------------------------------------------------------ events

    def sent_heartbeat(self, now: float) -> None:
        self.last_sent = now
        self.in_flight = True
        self._retry_at = None

    def received_heartbeat(self, now: float) -> None:
        """A heartbeat succeeded: the session is alive up to ``now``."""
        self.last_received = now
        self.in_flight = False

    def failed_heartbeat(self, now: float) -> None:
        """A heartbeat got no usable answer; try again after the retry backoff."""
        self.in_flight = False
        self._retry_at = now + self.retry_backoff_ms / 1000

    def polled(self, now: float) -> None:
        """The application asked for records: the poll interval starts again."""
        self.last_poll = now

    def reset_session(self, now: float) -> None:
        """A join (or sync) succeeded: the coordinator has just seen us, start afresh."""
        self.session_start = self.last_received = self.last_sent = now
        self.in_flight = False
        self._retry_at = None

    # ---------------------------------------------------------------- deadlines

    def next_heartbeat_at(self) -> float:
        if self._retry_at is not None:
            return self._retry_at
        return self.last_sent + self.heartbeat_interval_ms / 1000

    def should_heartbeat(self, now: float) -> bool:
        return not self.in_flight and now >= self.next_heartbeat_at()

    def time_to_next_heartbeat(self, now: float) -> float:
        """Seconds until a heartbeat is due (0 if due now)."""
        return max(0.0, self.next_heartbeat_at() - now)

    def session_deadline(self) -> float:
        return max(self.last_received, self.session_start) + self.session_timeout_ms / 1000

    def session_expired(self, now: float) -> bool:
        return now >= self.session_deadline()

    def poll_deadline(self) -> float:
        return self.last_poll + self.max_poll_interval_ms / 1000

    def poll_expired(self, now: float) -> bool:
        return now >= self.poll_deadline()

    def time_to_poll_deadline(self, now: float) -> float:
        return max(0.0, self.poll_deadline() - now)

    def time_to_next_event(self, now: float) -> float:
        """Seconds until something needs attention: a heartbeat, or a deadline to check."""
        due = [self.poll_deadline(), self.session_deadline()]
        if not self.in_flight:
            due.append(self.next_heartbeat_at())
        return max(0.0, min(due) - now)
