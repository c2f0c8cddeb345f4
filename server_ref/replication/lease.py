"""A broker leads only while its heartbeat lease holds (cluster mode).

The controller fences a broker it has not heard from for ``broker.session.timeout.ms`` and
moves its leaderships; a broker that was paused (SIGSTOP, a long GC-like stall) or cut off
does not know that yet when it comes back, and its metadata image still names it leader.
Kafka's brokers learn it from the metadata log, and until they do a stale leader may take
acks=1 writes the new leader never sees (acks=all ones cannot commit: the followers fetch
from the new leader and the controller refuses the stale leader's ISR changes).

Here a broker counts its lease from the *send* time of the last heartbeat the controller
answered unfenced: the controller received it later, so the broker's lease always runs out
before the controller can fence it. Once the lease has run out the broker answers as a
non-leader (NOT_LEADER_OR_FOLLOWER: clients refresh metadata and go to the new leader)
until both hold again: a heartbeat sent after the lapse answered unfenced, and a metadata
fetch sent after that answer, answered by the quorum leader, with everything committed
then applied. Whatever the controller decided before answering the heartbeat (fencing
this broker, moving its leaderships) is then in the image. A broker that cannot reach any controller
for a whole session (every controller down) also stops leading until one answers: the
safe side, where Kafka's brokers keep leading.
"""

from __future__ import annotations

import logging
import time
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["LeadershipLease"]


class LeadershipLease:
    def __init__(self, agent: Any, session_s: float) -> None:
        self.agent = agent  # ClusterAgent: its Raft observer and _reconcile
        self.session_s = session_s
        self._renewed: float | None = None  # send time of the last unfenced heartbeat
        self._answered_at = 0.0  # when that heartbeat's answer came
        self._lapsed_at: float | None = None  # when the lease was found run out

    def answered(self, sent: float, fenced: bool) -> None:
        """A heartbeat sent at ``sent`` (monotonic) was answered."""
        if fenced:  # the controller has taken (or is taking) this broker's leaderships
            # Always from now: only a heartbeat answered unfenced after the fence renews.
            self._lapsed_at = time.monotonic()
            return
        if self._renewed is not None and sent <= self._renewed:
            return
        if self._lapsed_at is not None and self._renewed is not None \
                and self._renewed >= self._lapsed_at:
            # Already renewed since the lapse: the catch-up is proven from that first
            # answer. Moving it with every later heartbeat could keep a broker whose
            # metadata fetches long-poll longer than the heartbeat interval from ever
            # leading again (seen: a fresh cluster's leader refusing produce for a minute).
            self._renewed = sent
            return
        if self._lapsed_at is None and not self._held(sent):
            # The lease had run out before this heartbeat (the broker was paused or cut
            # off, or has just started): renewing it is not enough, the metadata must
            # catch up too, even if no request asked may_lead() in between.
            self._lapsed_at = sent
        self._renewed = sent
        self._answered_at = time.monotonic()

    def _held(self, now: float) -> bool:
        return self._renewed is not None and now - self._renewed < self.session_s

    def may_lead(self) -> bool:
        """Whether this broker may act on the leaderships its image gives it now. After a
        lapse, the image is brought up to date (reconciled) before it says yes."""
        now = time.monotonic()
        if self._lapsed_at is None:
            if self._held(now):
                return True
            self._lapsed_at = now
            log.warning("heartbeat lease expired (last renewed %s s ago): not leading until "
                        "the controller answers and the metadata has caught up",
                        "never" if self._renewed is None else f"{now - self._renewed:.1f}")
            return False
        lapsed = self._lapsed_at
        if self._renewed is None or self._renewed < lapsed or not self._held(now) or \
                not self.agent.raft.caught_up_since(self._answered_at):
            return False
        self._lapsed_at = None
        self.agent.reconcile_now()  # leaderships as the caught-up image says
        log.info("heartbeat lease renewed and metadata caught up: leading again")
        return True
