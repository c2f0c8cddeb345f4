"""What the metadata says is wrong with the topics a NetClient tracks.

:class:`TopicProblems` belongs to one :class:`sdk.net.client.NetClient`:

* After each metadata update (:meth:`TopicProblems.check`) it reports, through the client's
  :class:`sdk.net.problems.ProblemReporter`, tracked topics that do not exist and
  partitions without a leader once the condition lasted ``PROBLEM_GRACE_S`` (a topic being
  created has no leader for a moment, and a broker that just created one may not know it
  yet); invalid or unauthorized topics at once.
* It remembers topics a ``wait_for_topic`` gave up on because the cluster said they do not
  exist (:meth:`remember_missing`): the next waits fail at once while the cluster keeps
  saying so (:meth:`fail_if_known_missing`), instead of blocking each send for
  ``max_block_ms`` again. The memory of a topic ends when a metadata answer lists it, when
  no answer confirmed it for ``MISSING_TOPIC_MEMORY_S``, and when this process creates the
  topic (:func:`topics_created`, called by ``AdminClient.create_topics``): a remembered
  answer otherwise stands for ``retry_backoff_ms`` after the last metadata answer, and a
  topic created by another process is seen only after that.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sdk.errors import (
    KafkaError,
    LeaderNotAvailableError,
    UnknownTopicOrPartitionError,
    for_code,
)

if TYPE_CHECKING:
    from sdk.net.client import NetClient

__all__ = [
    "FATAL_TOPIC_ERRORS",
    "MISSING_TOPIC_MEMORY_S",
    "PROBLEM_GRACE_S",
    "UNKNOWN_TOPIC",
    "TopicProblems",
    "topics_created",
]

# Topic errors that no refresh will cure: report them instead of waiting for the timeout.
FATAL_TOPIC_ERRORS = (17, 29)  # INVALID_TOPIC_EXCEPTION, TOPIC_AUTHORIZATION_FAILED
UNKNOWN_TOPIC = 3
# A missing topic or a partition without a leader is reported (a WARNING, on_error) only when
# it lasts this long.
PROBLEM_GRACE_S = 5.0
# After a wait for a topic ended because the cluster said it does not exist, later waits
# fail at once while the cluster's latest answer still says so and is at most this old
# (every such failure asks for a new answer, so a send loop keeps it fresh).
MISSING_TOPIC_MEMORY_S = 10.0

# Every live TopicProblems of this process, told when the process creates a topic.
_LIVE: weakref.WeakSet[TopicProblems] = weakref.WeakSet()


def topics_created(names: Iterable[str]) -> None:
    """This process created ``names``: every client forgets them as missing, so a send
    right after ``create_topics`` waits for the topic instead of failing on an answer that
    predates the creation.

    A client on another event loop (another thread) forgets them on its loop, before
    anything its thread asks that loop afterwards."""
    names = list(names)
    if not names:
        return
    try:
        here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        here = None
    for problems in list(_LIVE):
        loop = problems._client._loop
        if loop is None or loop is here or loop.is_closed():
            problems.forget_missing(names)
        else:
            try:
                loop.call_soon_threadsafe(problems.forget_missing, names)
            except RuntimeError:  # closed meanwhile: nothing to forget
                pass


class TopicProblems:
    """Topic and partition problems of one NetClient; see the module docstring."""

    __slots__ = ("__weakref__", "_client", "_missing", "_since")

    def __init__(self, client: NetClient) -> None:
        self._client = client
        self._since: dict[tuple[Any, ...], float] = {}  # reported key -> first seen
        self._missing: dict[str, float] = {}  # topic -> when the cluster last said so
        _LIVE.add(self)

    def remember_missing(self, topic: str) -> None:
        """A wait for ``topic`` ended on the cluster's answer that it does not exist."""
        self._missing[topic] = self._client.metadata.updated_at

    def forget_missing(self, topics: Iterable[str]) -> None:
        for topic in topics:
            self._missing.pop(topic, None)

    def is_remembered_missing(self, topic: str) -> bool:
        return topic in self._missing

    async def fail_if_known_missing(self, topic: str, deadline: float) -> None:
        """Raise at once for a topic a wait already gave up on, while the cluster still
        says it does not exist: its answer is at most ``retry_backoff_ms`` old, or a
        refresh now says so again (so a topic just created is seen). A remembered answer
        no refresh confirmed for MISSING_TOPIC_MEMORY_S is forgotten."""
        answered = self._missing.get(topic)
        if answered is None:
            return
        client = self._client
        now = time.monotonic()
        info = client.metadata.topic(topic)
        if (info is None or info.error_code != UNKNOWN_TOPIC
                or now - answered > MISSING_TOPIC_MEMORY_S):
            self._missing.pop(topic, None)  # forgotten: wait for it again
            return
        if now - answered >= client.config.retry_backoff_ms / 1000:
            timeout = max(0.001, min(deadline - now, client.config.request_timeout_ms / 1000))
            try:  # check() renews the memory if the topic is still missing
                await client.refresh_metadata_anew(timeout_s=timeout)
            except (KafkaError, TimeoutError):
                return  # no answer now: wait as usual
            info = client.metadata.topic(topic)
            if info is None or info.error_code != UNKNOWN_TOPIC:
                self._missing.pop(topic, None)
                return
        if topic not in self._missing:
            return  # created by this process meanwhile (topics_created)
        raise self.missing_topic_error(topic, " (a wait for it ended so before; not waiting "
                                              "for it again)")

    def missing_topic_error(self, topic: str, detail: str = "") -> UnknownTopicOrPartitionError:
        creation = ("" if self._client.allow_auto_topic_creation else
                    ", and allow_auto_create_topics=True on this client")
        return UnknownTopicOrPartitionError(
            f"topic {topic!r} does not exist{detail}: create it (AdminClient.create_topics, "
            f"or `kafka-sdk topics create {topic}`), or let the brokers create topics on "
            f"first use (auto.create.topics.enable=true on the brokers{creation})")

    def check(self, topics: Iterable[str]) -> None:
        """After a metadata update: report tracked ``topics`` that do not exist and
        partitions without a leader once they last ``PROBLEM_GRACE_S``; forget those that
        recovered."""
        client = self._client
        metadata = client.metadata
        now = time.monotonic()
        since = self._since
        current: set[tuple[Any, ...]] = set()
        for name in topics:
            info = metadata.topic(name)
            if info is None:
                continue
            if info.error_code:
                key: tuple[Any, ...] = ("topic", name)
                current.add(key)
                if info.error_code == UNKNOWN_TOPIC:
                    if name in self._missing:
                        self._missing[name] = metadata.updated_at
                    error: KafkaError = self.missing_topic_error(name)
                else:
                    error = for_code(info.error_code)(f"topic {name!r}")
                first = since.setdefault(key, now)
                if now - first >= PROBLEM_GRACE_S or info.error_code in FATAL_TOPIC_ERRORS:
                    client.problems.report(key, error)
                continue
            self._missing.pop(name, None)
            for p in info.partitions.values():
                if p.leader >= 0:
                    continue
                key = ("leader", name, p.partition)
                current.add(key)
                first = since.setdefault(key, now)
                if now - first >= PROBLEM_GRACE_S:
                    client.problems.report(key, LeaderNotAvailableError(
                        f"partition {name}-{p.partition} has had no leader for "
                        f"{now - first:.0f} s (replicas {list(p.replicas)}, in sync "
                        f"{list(p.isr)}, offline {list(p.offline_replicas)}): its records "
                        "are neither written nor read until the cluster elects one"))
        gone = [key for key in since if key not in current]
        for key in gone:
            del since[key]
            client.problems.resolved(key)
        if any(since[k] == now for k in current):
            # Look again once the grace has passed, to report what is still wrong then.
            asyncio.get_running_loop().call_later(PROBLEM_GRACE_S, client.request_refresh)
