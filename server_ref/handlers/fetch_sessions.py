"""Incremental fetch sessions (KIP-227).

A session remembers the partitions a client fetches (with offset and size limit) and what
the broker last told it about each (high watermark, log start offset). Later requests only
name partitions that changed, and responses only carry partitions with news: records, an
error, or a moved high watermark or log start offset.

Request ``(session_id, epoch)``:  ``(0, -1)`` sessionless full fetch; ``(0, 0)`` full fetch
that opens a session; ``(id, -1)`` closes ``id`` and fetches without a session; ``(id, n>0)``
incremental fetch, ``n`` being the next epoch of ``id``.
"""

from __future__ import annotations

import random
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

from sdk.errors import FetchSessionIdNotFoundError, InvalidFetchSessionEpochError

__all__ = ["FetchSession", "FetchSessionCache", "SessionPartition"]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = (1 << 31) - 1


@dataclass(slots=True)
class SessionPartition:
    topic: str
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_high_watermark: int = -1
    last_log_start: int = -1

    @property
    def key(self) -> tuple[str, int]:
        return self.topic, self.partition


@dataclass(slots=True)
class FetchSession:
    session_id: int
    epoch: int  # the epoch the next request must carry
    uses_topic_ids: bool
    # Keyed by (topic name, or topic id from Fetch v13 on; partition).
    partitions: OrderedDict[tuple[str | uuid.UUID, int], SessionPartition] = field(
        default_factory=OrderedDict)

    def bump(self) -> None:
        self.epoch = 1 if self.epoch >= INT32_MAX else self.epoch + 1


class FetchSessionCache:
    """Sessions of one broker, least recently used first; evicted beyond ``capacity``."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._rng = random.Random()

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, uses_topic_ids: bool) -> FetchSession | None:
        if self.capacity <= 0:
            return None
        while len(self._sessions) >= self.capacity:
            self._sessions.popitem(last=False)
        session_id = 0
        while session_id == 0 or session_id in self._sessions:
            session_id = self._rng.randint(1, INT32_MAX)
        session = FetchSession(session_id, 1, uses_topic_ids)
        self._sessions[session_id] = session
        return session

    def lookup(self, session_id: int, epoch: int) -> FetchSession:
        session = self._sessions.get(session_id)
        if session is None:
            raise FetchSessionIdNotFoundError(f"fetch session {session_id} is unknown")
        if epoch != session.epoch:
            raise InvalidFetchSessionEpochError(
                f"fetch session {session_id} expects epoch {session.epoch}, got {epoch}"
            )
        self._sessions.move_to_end(session_id)
        return session

    def remove(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)

    def clear(self) -> None:
        """Forget every session (an ACL change: the next full fetch is authorized again)."""
        self._sessions.clear()

    def forget_topic(self, topic: str) -> None:
        """A deleted topic leaves every session (clients get UNKNOWN_TOPIC on re-adding)."""
        for session in self._sessions.values():
            for key in [k for k in session.partitions if k[0] == topic]:
                del session.partitions[key]
