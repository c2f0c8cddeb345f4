"""Committed offsets: OffsetCommit, OffsetFetch and OffsetDelete, transactional staging and
retention.

Rules follow Kafka's classic groups:

* A commit from a member is checked against the group: static fencing
  (FENCED_INSTANCE_ID), membership (UNKNOWN_MEMBER_ID), generation (ILLEGAL_GENERATION),
  and REBALANCE_IN_PROGRESS while the group waits for its SyncGroup. A commit with
  generation -1 and no member (a "simple" commit, e.g. from an admin client or a consumer
  using ``assign()``) is accepted only while the group has no members, and creates the group
  when it does not exist. A member commit to an unknown group is GROUP_ID_NOT_FOUND (the
  handler turns that into ILLEGAL_GENERATION before OffsetCommit v9, as Kafka does).
* Retention (KIP-211): offsets of an Empty group expire ``offsets.retention.minutes`` after
  the group became empty; offsets of a group without a protocol type (only simple commits)
  expire that long after their commit; in a Stable consumer group only offsets of topics no
  member subscribes to expire. An explicit retention (OffsetCommit v2-v4) sets an expiry
  time of its own. An Empty group left with no offsets is deleted.
* Deleting a topic drops its partitions' offsets from every group (committed ones with a
  tombstone in the journal, staged ones in memory), and a group left Empty without offsets
  goes with them, as in Kafka.
* Transactional offsets (TxnOffsetCommit) are staged per producer and become committed
  offsets only when the transaction commits; OffsetFetch with ``require_stable`` answers
  UNSTABLE_OFFSET_COMMIT for a partition with a staged offset. Staged offsets are journaled
  as transactional records of the producer (Kafka's layout): the journal replays them at
  their COMMIT marker, drops them at an ABORT, and stages again those still undecided.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from sdk import errors
from server_ref.groups.group import (
    CONSUMER_PROTOCOL_TYPE,
    CommittedOffset,
    Group,
    GroupState,
)
from server_ref.groups.results import (
    NO_ERROR,
    FetchedOffset,
    OffsetFetchResult,
    OffsetToCommit,
    Partition,
)
from server_ref.groups.store import GroupStore

log = logging.getLogger(__name__)

_REBALANCING = (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
                GroupState.STABLE)


class OffsetManager:
    def __init__(self, store: GroupStore) -> None:
        self._store = store

    # ------------------------------------------------------------------ commit

    def commit(self, group_id: str, offsets: Mapping[Partition, OffsetToCommit], *,
               generation_id: int = -1, member_id: str = "",
               group_instance_id: str | None = None,
               retention_ms: int = -1) -> dict[Partition, int]:
        """Commit offsets; returns each partition's error (a group-level error for all)."""
        try:
            group = self._group_for_commit(group_id, generation_id, member_id,
                                           group_instance_id, transactional=False)
        except errors.BrokerResponseError as exc:
            return dict.fromkeys(offsets, exc.errno)
        now = self._store.now_ms()
        results: dict[Partition, int] = {}
        for partition, request in offsets.items():
            try:
                committed = self._to_committed(request, now, retention_ms)
                self._store.write_offset(group_id, partition, committed)
            except errors.BrokerResponseError as exc:
                results[partition] = exc.errno
                continue
            group.offsets[partition] = committed
            results[partition] = NO_ERROR
        return results

    def stage_transactional(self, group_id: str, producer_id: int,
                            offsets: Mapping[Partition, OffsetToCommit], *,
                            generation_id: int = -1, member_id: str = "",
                            group_instance_id: str | None = None,
                            producer_epoch: int = 0) -> dict[Partition, int]:
        """Hold TxnOffsetCommit offsets until :meth:`complete_transaction` decides them;
        each is journaled first as a transactional record of the producer, so a restart
        stages it again until the marker decides it."""
        try:
            group = self._group_for_commit(group_id, generation_id, member_id,
                                           group_instance_id, transactional=True)
        except errors.BrokerResponseError as exc:
            return dict.fromkeys(offsets, exc.errno)
        now = self._store.now_ms()
        staged = group.pending_txn_offsets.setdefault(producer_id, {})
        results: dict[Partition, int] = {}
        for partition, request in offsets.items():
            try:
                committed = self._to_committed(request, now, -1)
                self._store.write_txn_offset(group_id, partition, committed, producer_id,
                                             producer_epoch)
                staged[partition] = committed
            except errors.BrokerResponseError as exc:
                results[partition] = exc.errno
                continue
            results[partition] = NO_ERROR
        return results

    def complete_transaction(self, producer_id: int, committed: bool) -> None:
        """Apply (commit) or drop (abort) every offset the producer staged, in every group.

        Raises :class:`JournalWriteError` if the journal refuses a record; what was not
        written stays staged, so the transaction coordinator can retry its marker.
        """
        for group in self._store.all_groups():
            staged = group.pending_txn_offsets.get(producer_id)
            if staged is None:
                continue
            if committed:
                for partition in list(staged):
                    self._store.write_offset(group.group_id, partition, staged[partition])
                    group.offsets[partition] = staged.pop(partition)
            del group.pending_txn_offsets[producer_id]

    def _group_for_commit(self, group_id: str, generation_id: int, member_id: str,
                          group_instance_id: str | None, *, transactional: bool) -> Group:
        if not group_id:
            raise errors.InvalidGroupIdError("the group id is empty")
        group = self._store.get(group_id)
        if group is None:
            if generation_id < 0:
                return self._store.get_or_create(group_id)
            raise errors.GroupIdNotFoundError(f"group {group_id} does not exist")
        if group.state is GroupState.DEAD:
            raise errors.CoordinatorNotAvailableError(f"group {group_id} is being removed")
        if generation_id < 0 and group.state is GroupState.EMPTY:
            return group
        if generation_id >= 0 or member_id or group_instance_id is not None:
            group.validate_member(member_id, group_instance_id)
            if generation_id != group.generation_id:
                raise errors.IllegalGenerationError(
                    f"generation {generation_id} is not the group's {group.generation_id}"
                )
        elif not transactional:
            raise errors.UnknownMemberIdError(
                f"group {group_id} has members; a commit without member id is not accepted"
            )
        if not transactional and group.state is GroupState.COMPLETING_REBALANCE:
            raise errors.RebalanceInProgressError("the group is waiting for its assignment")
        return group

    def _to_committed(self, request: OffsetToCommit, now: int,
                      retention_ms: int) -> CommittedOffset:
        metadata = request.metadata or ""
        limit = self._store.config.offset_metadata_max_bytes
        if len(metadata.encode()) > limit:
            raise errors.OffsetMetadataTooLargeError(f"metadata is longer than {limit} bytes")
        commit_ts = request.commit_timestamp_ms if request.commit_timestamp_ms >= 0 else now
        expire_ts = commit_ts + retention_ms if retention_ms >= 0 else None
        return CommittedOffset(request.offset, request.leader_epoch, metadata, commit_ts,
                               expire_ts)

    # ------------------------------------------------------------------ fetch

    def fetch(self, group_id: str, partitions: Iterable[Partition] | None, *,
              require_stable: bool = False) -> OffsetFetchResult:
        """Committed offsets of ``partitions``, or of every partition when None."""
        if not group_id:
            return OffsetFetchResult(error=errors.InvalidGroupIdError.errno)
        group = self._store.get(group_id)
        result = OffsetFetchResult()
        if partitions is None:
            if group is not None:
                for partition in sorted(group.offsets):
                    result.offsets[partition] = self._fetched(group, partition, require_stable)
            return result
        for partition in partitions:
            if group is None:
                result.offsets[partition] = FetchedOffset(-1)
            else:
                result.offsets[partition] = self._fetched(group, partition, require_stable)
        return result

    @staticmethod
    def _fetched(group: Group, partition: Partition, require_stable: bool) -> FetchedOffset:
        if require_stable and group.has_pending_txn_offset(partition):
            return FetchedOffset(-1, error=errors.UnstableOffsetCommitError.errno)
        committed = group.offsets.get(partition)
        if committed is None:
            return FetchedOffset(-1)
        return FetchedOffset(committed.offset, committed.leader_epoch, committed.metadata)

    # ------------------------------------------------------------------ delete

    def delete(self, group_id: str,
               partitions: Iterable[Partition]) -> tuple[int, dict[Partition, int]]:
        """OffsetDelete: (group error, per-partition errors)."""
        if not group_id:
            return errors.InvalidGroupIdError.errno, {}
        group = self._store.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return errors.GroupIdNotFoundError.errno, {}
        if group.state in _REBALANCING and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            # Without the consumer protocol we cannot tell which topics the members use.
            return errors.NonEmptyGroupError.errno, {}
        results: dict[Partition, int] = {}
        for partition in partitions:
            if group.is_subscribed_to(partition[0]):
                results[partition] = errors.GroupSubscribedToTopicError.errno
                continue
            if partition in group.offsets:
                try:
                    self._store.delete_offset(group, partition)
                except errors.BrokerResponseError as exc:
                    results[partition] = exc.errno
                    continue
            results[partition] = NO_ERROR
        return NO_ERROR, results

    # ------------------------------------------------------------------ retention

    def expire(self) -> int:
        """Drop offsets past retention and Empty groups left without offsets.

        Returns the number of offsets removed.
        """
        now = self._store.now_ms()
        removed = 0
        for group in self._store.all_groups():
            try:
                for partition in self._expired_partitions(group, now):
                    self._store.delete_offset(group, partition)
                    removed += 1
                self._drop_if_abandoned(group)
            except errors.BrokerResponseError:
                return removed  # the journal is unavailable; try at the next check
        if removed:
            log.info("expired %d committed offsets", removed)
        return removed

    def _drop_if_abandoned(self, group: Group) -> None:
        """Delete ``group`` if it is Empty with no offsets left, committed or pending
        (journal first: raises, and keeps the group, when the tombstone is not written)."""
        if (group.state is GroupState.EMPTY and not group.offsets
                and not group.pending_members and not group.pending_txn_offsets):
            self._store.write_group_tombstone(group.group_id)
            self._store.drop(group)

    # ------------------------------------------------------------------ deleted topics

    def drop_topics(self, topics: Iterable[str]) -> int:
        """Forget the offsets of partitions of deleted ``topics`` in every group, as Kafka
        does when topics are deleted: committed offsets through a tombstone in the journal
        (so a reload does not bring them back), offsets staged by open transactions in
        memory. A group this leaves Empty without offsets is deleted, as retention does.

        Returns the number of committed offsets removed. A journal failure stops the
        cleanup (logged); what was not tombstoned stays committed, until retention or an
        OffsetDelete removes it.
        """
        names = frozenset(topics)
        removed = 0
        for group in self._store.all_groups():
            for staged in group.pending_txn_offsets.values():
                for partition in [p for p in staged if p[0] in names]:
                    del staged[partition]
            gone = [p for p in group.offsets if p[0] in names]
            if not gone:
                continue
            try:
                for partition in gone:
                    self._store.delete_offset(group, partition)
                    removed += 1
                self._drop_if_abandoned(group)
            except errors.BrokerResponseError as exc:
                log.warning("could not drop the offsets of deleted topics %s: %s",
                            sorted(names), exc)
                break
        if removed:
            log.info("dropped %d committed offsets of deleted topics %s", removed,
                     sorted(names))
        return removed

    def _expired_partitions(self, group: Group, now: int) -> list[Partition]:
        retention = self._store.config.offsets_retention_ms
        if group.protocol_type is not None and group.state is GroupState.EMPTY:
            subscribed: frozenset[str] = frozenset()
            since_empty = group.state_timestamp_ms
        elif (group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.state is GroupState.STABLE
              and group.subscribed_topics is not None):
            subscribed = group.subscribed_topics
            since_empty = None
        elif group.protocol_type is None:
            subscribed = frozenset()
            since_empty = None
        else:
            return []
        expired = []
        for partition, committed in group.offsets.items():
            if partition[0] in subscribed or group.has_pending_txn_offset(partition):
                continue
            if committed.expire_timestamp_ms is not None:
                if now >= committed.expire_timestamp_ms:
                    expired.append(partition)
                continue
            base = since_empty if since_empty is not None else committed.commit_timestamp_ms
            if now - base >= retention:
                expired.append(partition)
        return expired
