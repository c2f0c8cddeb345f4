"""What the consumer subscribed to, what it was assigned, and where it is in each partition.

Pure state, no IO: the fetcher, the coordinator and the public face all read and change it,
and it decides nothing on its own. A consumer is in one of three modes, chosen by the first
call and kept until :meth:`SubscriptionState.unsubscribe`:

* topics: ``subscribe(["a", "b"])`` — the group assigns partitions of those topics;
* pattern: ``subscribe_pattern("orders-.*")`` — like topics, re-matched against metadata;
* manual: ``assign([TopicPartition(...)])`` — no group membership.

Per assigned partition it keeps the *position*: the offset of the next record to hand to the
application (so committing positions commits exactly what was consumed), a pending offset
reset, the paused flag and the watermarks from the last fetch. Every change of position
bumps the partition's ``epoch``; data fetched for an older epoch is stale and is dropped.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass

from sdk.errors import IllegalStateError
from sdk.types import OffsetAndMetadata, TopicPartition


class OffsetResetStrategy(str, enum.Enum):
    """Where to start when there is no valid position (``auto_offset_reset``)."""

    EARLIEST = "earliest"
    LATEST = "latest"
    NONE = "none"  # raise instead of guessing


class IsolationLevel(str, enum.Enum):
    READ_UNCOMMITTED = "read_uncommitted"
    READ_COMMITTED = "read_committed"


class SubscriptionMode(enum.Enum):
    NONE = "none"
    TOPICS = "topics"
    PATTERN = "pattern"
    MANUAL = "manual"


@dataclass(slots=True)
class PartitionState:
    """Per-partition consumption state."""

    position: int | None = None  # next offset to return to the application
    leader_epoch: int | None = None  # epoch of the record before `position`, if known
    paused: bool = False
    reset_strategy: OffsetResetStrategy | None = None  # a reset is pending
    high_watermark: int | None = None
    last_stable_offset: int | None = None
    log_start_offset: int | None = None
    epoch: int = 0  # bumped on every seek or reset

    @property
    def has_valid_position(self) -> bool:
        return self.position is not None and self.reset_strategy is None

    @property
    def is_fetchable(self) -> bool:
        return not self.paused and self.has_valid_position


def _check_offset(offset: int) -> None:
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise ValueError(f"offset must be an int >= 0, not {offset!r}")


class SubscriptionState:
    """The consumer's subscription, assignment and positions."""

    def __init__(
        self,
        default_reset: OffsetResetStrategy | str = OffsetResetStrategy.LATEST,
        isolation_level: IsolationLevel | str = IsolationLevel.READ_UNCOMMITTED,
    ) -> None:
        self.default_reset = OffsetResetStrategy(default_reset)
        self.isolation_level = IsolationLevel(isolation_level)
        self.mode = SubscriptionMode.NONE
        self._topics: frozenset[str] = frozenset()  # explicit topics, or the pattern's matches
        self._pattern: re.Pattern[str] | None = None
        self._assignment: dict[TopicPartition, PartitionState] = {}
        # Topics of the whole group (leader only): metadata must cover all of them.
        self._group_topics: frozenset[str] = frozenset()
        # Bumped whenever the set of assigned partitions changes, so loops can notice.
        self.assignment_version = 0

    # ------------------------------------------------------------------ subscribing

    def _enter(self, mode: SubscriptionMode) -> None:
        if self.mode not in (SubscriptionMode.NONE, mode):
            raise IllegalStateError(
                f"the consumer is already in {self.mode.value} mode; subscribing to topics, to "
                "a pattern and assigning partitions manually are mutually exclusive "
                "(call unsubscribe() first)"
            )
        self.mode = mode

    def subscribe(self, topics: Iterable[str]) -> bool:
        """Subscribe to exactly these topics; True if the subscription changed."""
        if isinstance(topics, str):
            raise TypeError("subscribe() takes a collection of topic names, not one string")
        wanted = frozenset(topics)
        for topic in wanted:
            if not isinstance(topic, str) or not topic.strip():
                raise ValueError(f"invalid topic name {topic!r}")
        if not wanted:
            self.unsubscribe()
            return True
        self._enter(SubscriptionMode.TOPICS)
        changed = wanted != self._topics
        self._topics = wanted
        return changed

    def subscribe_pattern(self, pattern: str | re.Pattern[str]) -> None:
        """Subscribe to every topic whose whole name matches ``pattern`` (re.fullmatch)."""
        self._enter(SubscriptionMode.PATTERN)
        try:
            self._pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
        except re.error as exc:
            self.mode = SubscriptionMode.NONE
            raise ValueError(f"invalid topic pattern {pattern!r}: {exc}") from exc
        self._topics = frozenset()

    def match_topics(self, topics: Iterable[str], internal: Iterable[str] = ()) -> bool:
        """Re-match a pattern subscription against the cluster's topics (internal ones left
        out); True if the matched set changed. A no-op for other modes."""
        if self.mode is not SubscriptionMode.PATTERN or self._pattern is None:
            return False
        skip = set(internal)
        matched = frozenset(
            t for t in topics if t not in skip and self._pattern.fullmatch(t) is not None
        )
        changed = matched != self._topics
        self._topics = matched
        return changed

    @property
    def pattern(self) -> re.Pattern[str] | None:
        return self._pattern

    @property
    def subscription(self) -> frozenset[str]:
        """Subscribed topics (for a pattern: the topics it currently matches)."""
        return self._topics

    @property
    def uses_group(self) -> bool:
        return self.mode in (SubscriptionMode.TOPICS, SubscriptionMode.PATTERN)

    def set_group_topics(self, topics: Iterable[str]) -> None:
        self._group_topics = frozenset(topics)

    @property
    def metadata_topics(self) -> frozenset[str]:
        """Topics whose metadata the consumer needs."""
        if self.mode is SubscriptionMode.MANUAL:
            return frozenset(tp.topic for tp in self._assignment)
        return self._topics | self._group_topics

    def unsubscribe(self) -> None:
        """Drop the subscription, the assignment and every position."""
        self.mode = SubscriptionMode.NONE
        self._topics = frozenset()
        self._pattern = None
        self._group_topics = frozenset()
        if self._assignment:
            self._assignment = {}
            self.assignment_version += 1

    # ------------------------------------------------------------------- assignment

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Manual assignment; positions of partitions that stay assigned are kept."""
        wanted = list(partitions)
        for tp in wanted:
            if not isinstance(tp, TopicPartition):
                raise TypeError(f"assign() takes TopicPartition objects, not {tp!r}")
        if not wanted:
            self.unsubscribe()
            return
        self._enter(SubscriptionMode.MANUAL)
        self._replace_assignment(wanted)

    def assign_from_group(self, partitions: Iterable[TopicPartition]) -> None:
        """Install the group's assignment (replacing the previous one)."""
        self._require_group_mode()
        self._replace_assignment(self._checked_group_partitions(partitions))

    def add_assigned(self, partitions: Iterable[TopicPartition]) -> None:
        """Cooperative rebalancing: partitions added to the current assignment."""
        self._require_group_mode()
        added = [tp for tp in self._checked_group_partitions(partitions) if tp not in self._assignment]
        for tp in added:
            self._assignment[tp] = PartitionState()
        if added:
            self.assignment_version += 1

    def remove_assigned(self, partitions: Iterable[TopicPartition]) -> None:
        """Cooperative rebalancing: partitions revoked from the current assignment."""
        removed = False
        for tp in partitions:
            removed |= self._assignment.pop(tp, None) is not None
        if removed:
            self.assignment_version += 1

    def _require_group_mode(self) -> None:
        if not self.uses_group:
            raise IllegalStateError("group assignment needs a topic or pattern subscription")

    def _checked_group_partitions(self, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        wanted = list(partitions)
        strangers = sorted({tp.topic for tp in wanted} - self._topics)
        if strangers and self.mode is SubscriptionMode.TOPICS:
            raise IllegalStateError(f"assigned partitions of unsubscribed topics {strangers}")
        if strangers:
            # A leader with fresher metadata matched topics we have not seen yet.
            self._topics |= frozenset(strangers)
        return wanted

    def _replace_assignment(self, partitions: list[TopicPartition]) -> None:
        old = self._assignment
        new = {tp: old.get(tp) or PartitionState() for tp in partitions}
        if new.keys() != old.keys():
            self.assignment_version += 1
        self._assignment = new

    def assigned_partitions(self) -> set[TopicPartition]:
        return set(self._assignment)

    def is_assigned(self, tp: TopicPartition) -> bool:
        return tp in self._assignment

    def state(self, tp: TopicPartition) -> PartitionState:
        """The state of an assigned partition; IllegalStateError if it is not assigned."""
        try:
            return self._assignment[tp]
        except KeyError:
            raise IllegalStateError(f"partition {tp} is not assigned to this consumer") from None

    def position_token(self, tp: TopicPartition) -> tuple[PartitionState, int]:
        """What a position lookup for ``tp`` starts from: its state object (a new one once
        it was revoked, even if it is assigned again since) and its seek/reset epoch."""
        st = self.state(tp)
        return st, st.epoch

    def still_current(self, tp: TopicPartition, token: tuple[PartitionState, int]) -> bool:
        """Whether ``tp`` is assigned as ``token`` saw it: not revoked (nor revoked and
        given back), sought or reset since. A lookup's answer applies only then."""
        st = self._assignment.get(tp)
        return st is not None and st is token[0] and st.epoch == token[1]

    # -------------------------------------------------------------------- positions

    def seek(self, tp: TopicPartition, offset: int, leader_epoch: int | None = None) -> None:
        """Set the next offset to return; cancels a pending reset."""
        _check_offset(offset)
        st = self.state(tp)
        st.position = offset
        st.leader_epoch = leader_epoch
        st.reset_strategy = None
        st.epoch += 1

    def position(self, tp: TopicPartition) -> int | None:
        return self.state(tp).position

    def advance(self, tp: TopicPartition, next_offset: int, leader_epoch: int | None) -> None:
        """Records up to ``next_offset`` were handed to the application (not a seek: fetched
        data stays valid)."""
        st = self.state(tp)
        st.position = next_offset
        if leader_epoch is not None:
            st.leader_epoch = leader_epoch

    def request_reset(
        self, tp: TopicPartition, strategy: OffsetResetStrategy | str | None = None
    ) -> None:
        """Ask for the position to be reset (looked up by ListOffsets) with ``strategy``, or
        the default strategy."""
        st = self.state(tp)
        st.reset_strategy = OffsetResetStrategy(strategy) if strategy else self.default_reset
        st.epoch += 1

    def reset_pending(self) -> dict[TopicPartition, OffsetResetStrategy]:
        return {
            tp: st.reset_strategy for tp, st in self._assignment.items() if st.reset_strategy
        }

    def complete_reset(
        self, tp: TopicPartition, offset: int, strategy: OffsetResetStrategy,
        leader_epoch: int | None = None,
    ) -> bool:
        """Apply a looked-up reset offset, unless the partition was unassigned, sought or
        reset differently meanwhile. True if applied."""
        st = self._assignment.get(tp)
        if st is None or st.reset_strategy is not strategy:
            return False
        self.seek(tp, offset, leader_epoch)
        return True

    def missing_positions(self) -> list[TopicPartition]:
        """Assigned partitions with neither a position nor a pending reset: the consumer
        must look up their committed offsets (or reset them)."""
        return sorted(
            tp for tp, st in self._assignment.items()
            if st.position is None and st.reset_strategy is None
        )

    def has_all_positions(self) -> bool:
        return all(st.has_valid_position for st in self._assignment.values())

    def consumed_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """Positions to commit: exactly what has been handed to the application."""
        return {
            tp: OffsetAndMetadata(st.position, "", st.leader_epoch)
            for tp, st in self._assignment.items()
            if st.position is not None
        }

    # ---------------------------------------------------------------------- pausing

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.state(tp).paused = True

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.state(tp).paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, st in self._assignment.items() if st.paused}

    def fetchable_partitions(self) -> list[TopicPartition]:
        return [tp for tp, st in self._assignment.items() if st.is_fetchable]

    # ------------------------------------------------------------- watermarks, lag

    def update_watermarks(
        self,
        tp: TopicPartition,
        high_watermark: int | None = None,
        last_stable_offset: int | None = None,
        log_start_offset: int | None = None,
    ) -> None:
        """Record what a fetch or list-offsets told us; negative values mean unknown."""
        st = self._assignment.get(tp)
        if st is None:
            return
        if high_watermark is not None and high_watermark >= 0:
            st.high_watermark = high_watermark
        if last_stable_offset is not None and last_stable_offset >= 0:
            st.last_stable_offset = last_stable_offset
        if log_start_offset is not None and log_start_offset >= 0:
            st.log_start_offset = log_start_offset

    def end_offset(self, tp: TopicPartition) -> int | None:
        """Where the consumer can read up to: the last stable offset under read_committed,
        else the high watermark."""
        st = self.state(tp)
        if self.isolation_level is IsolationLevel.READ_COMMITTED:
            return st.last_stable_offset
        return st.high_watermark

    def lag(self, tp: TopicPartition) -> int | None:
        """Records between the position and the end offset, or None if either is unknown."""
        st = self.state(tp)
        end = self.end_offset(tp)
        if end is None or st.position is None:
            return None
        return max(0, end - st.position)
