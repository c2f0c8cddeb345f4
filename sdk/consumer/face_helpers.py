"""The consumer face's small helpers: argument checks, listener adapters, canned requests.

Kept apart from ``consumer.py`` so the face stays readable; ``consumer.py`` re-exports them.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from datetime import timedelta
from typing import Any

from sdk.consumer.coordinator import ConsumerRebalanceListener
from sdk.protocol.messages.metadata import MetadataRequest
from sdk.types import OffsetAndMetadata, TopicPartition


def poll_timeout_s(method: str, timeout: timedelta | None, timeout_ms: float | None) -> float:
    """The seconds ``poll`` / ``getmany`` wait, from ``timeout_ms=`` or a timedelta.

    A bare number by position is refused: ``poll(1.0)`` is one second in confluent-kafka and
    one millisecond in kafka-python, so either reading would surprise someone.
    """
    if timeout is None:
        if timeout_ms is None:
            return 0.0
        if (not isinstance(timeout_ms, int | float) or isinstance(timeout_ms, bool)
                or timeout_ms != timeout_ms):
            raise TypeError(f"{method}(timeout_ms=...) takes milliseconds as a number, not "
                            f"{timeout_ms!r}")
        if timeout_ms < 0:
            raise ValueError(f"{method}(timeout_ms=...) must be >= 0, not {timeout_ms!r}")
        return timeout_ms / 1000
    if not isinstance(timeout, timedelta):
        raise TypeError(
            f"{method}() takes its timeout as timeout_ms=<milliseconds> or a "
            f"datetime.timedelta, not a bare {type(timeout).__name__} ({timeout!r}): "
            f"{method}(1.0) would be 1 second in confluent-kafka but 1 ms in kafka-python. "
            f"Write {method}(timeout_ms=1000) or {method}(timedelta(seconds=1)) for one second")
    if timeout_ms is not None:
        raise TypeError(f"{method}() takes a timedelta or timeout_ms=, not both")
    if timeout < timedelta(0):
        raise ValueError(f"{method}() timeout must be >= 0, not {timeout!r}")
    return timeout.total_seconds()


def _all_topics_request(version: int) -> MetadataRequest:
    """Metadata for every topic: a null topic list (v1+), an empty one in v0. Auto-creation
    is moot then; it is sent as False where the field exists (v4+)."""
    if version == 0:
        return MetadataRequest(topics=[])
    return MetadataRequest(topics=None, allow_auto_topic_creation=version < 4)


class _Done:
    """An awaitable that is already finished (no event loop needed to make one)."""

    def __await__(self) -> Generator[None, None, None]:
        return
        yield  # makes this a generator


_DONE = _Done()


def _as_offsets(offsets: Mapping[TopicPartition, OffsetAndMetadata | int]) -> dict[TopicPartition, OffsetAndMetadata]:
    out = {}
    for tp, value in offsets.items():
        if not isinstance(tp, TopicPartition):
            raise TypeError(f"commit keys are TopicPartition objects, not {tp!r}")
        if isinstance(value, OffsetAndMetadata):
            out[tp] = value
        elif isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            out[tp] = OffsetAndMetadata(value)
        else:
            raise ValueError(f"commit offset for {tp} must be an int >= 0 or OffsetAndMetadata, "
                             f"not {value!r}")
    return out


class _FunctionListener(ConsumerRebalanceListener):
    """Wraps an object that has only some of the listener methods."""

    def __init__(self, target: Any) -> None:
        self._target = target

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> Any:
        fn = getattr(self._target, "on_partitions_revoked", None)
        return fn(revoked) if fn is not None else None

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> Any:
        fn = getattr(self._target, "on_partitions_assigned", None)
        return fn(assigned) if fn is not None else None

    def on_partitions_lost(self, lost: set[TopicPartition]) -> Any:
        fn = getattr(self._target, "on_partitions_lost", None)
        return fn(lost) if fn is not None else self.on_partitions_revoked(lost)


def _adapt_listener(listener: Any) -> ConsumerRebalanceListener:
    if not any(hasattr(listener, m) for m in
               ("on_partitions_revoked", "on_partitions_assigned", "on_partitions_lost")):
        raise TypeError("a listener needs on_partitions_revoked / on_partitions_assigned / "
                        "on_partitions_lost methods")
    return _FunctionListener(listener)
