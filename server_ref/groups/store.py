"""The registry of groups and its persistence in the :class:`GroupJournal`.

Every change is appended to the journal *before* it is applied in memory, so a failed append
leaves the coordinator's state as it was and the caller answers with an error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from sdk import errors
from server_ref.groups.config import GroupConfig
from server_ref.groups.group import CommittedOffset, Group, GroupState, Member
from server_ref.groups.journal import (
    GroupJournal,
    GroupKey,
    OffsetKey,
    StoredGroup,
    StoredMember,
    decode_group_value,
    decode_key,
    decode_offset_value,
    group_key,
    group_value,
    offset_key,
    offset_value,
)
from server_ref.groups.results import Partition

log = logging.getLogger(__name__)


class JournalWriteError(errors.CoordinatorNotAvailableError):
    """The journal refused a record; the change was not applied (retriable for clients)."""


class GroupStore:
    def __init__(self, journal: GroupJournal, config: GroupConfig,
                 now_ms: Callable[[], int]) -> None:
        self.journal = journal
        self.config = config
        self.now_ms = now_ms
        self.groups: dict[str, Group] = {}

    # ------------------------------------------------------------------ registry

    def get(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def get_or_create(self, group_id: str) -> Group:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id, self.now_ms())
        return group

    def drop(self, group: Group) -> None:
        """Forget a group (already Dead or about to be)."""
        if group.state is not GroupState.DEAD:
            group.transition_to(GroupState.DEAD, self.now_ms())
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    # ------------------------------------------------------------------ writes

    def _append(self, key: bytes, value: bytes | None) -> None:
        try:
            self.journal.append(key, value)
        except Exception as exc:
            log.warning("group journal append failed: %s", exc)
            raise JournalWriteError(f"could not persist group state: {exc}") from exc

    def append_record(self, key: bytes, value: bytes | None) -> None:
        """A record of another group type (KIP-848 groups: consumer_journal.py)."""
        self._append(key, value)

    def write_group(self, group: Group, assignments: dict[str, bytes] | None = None) -> None:
        """Persist the group's metadata; ``assignments`` overrides the members' current ones."""
        if group.protocol_type is None:
            return  # a group only used for offsets has no metadata record, as in Kafka
        protocol = group.protocol_name
        members = tuple(
            StoredMember(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.rebalance_timeout_ms, m.session_timeout_ms,
                m.metadata_for(protocol) if protocol is not None else b"",
                assignments.get(m.member_id, b"") if assignments is not None else m.assignment,
            )
            for m in group.members.values()
        )
        stored = StoredGroup(group.protocol_type, group.generation_id, protocol,
                             group.leader_id, group.state_timestamp_ms, members)
        self._append(group_key(group.group_id), group_value(stored))

    def write_group_tombstone(self, group_id: str) -> None:
        self._append(group_key(group_id), None)

    def write_offset(self, group_id: str, partition: Partition, committed: CommittedOffset) -> None:
        self._append(offset_key(group_id, *partition), offset_value(committed))

    def write_txn_offset(self, group_id: str, partition: Partition, committed: CommittedOffset,
                         producer_id: int, producer_epoch: int) -> None:
        """A TxnOffsetCommit offset, durable but decided by the transaction's marker (a
        journal without transactional records keeps it in memory only)."""
        append = getattr(self.journal, "append_transactional", None)
        if append is None:
            return
        try:
            append(offset_key(group_id, *partition), offset_value(committed), producer_id,
                   producer_epoch)
        except Exception as exc:
            log.warning("group journal append failed: %s", exc)
            raise JournalWriteError(f"could not persist group state: {exc}") from exc

    def write_offset_tombstone(self, group_id: str, partition: Partition) -> None:
        self._append(offset_key(group_id, *partition), None)

    def delete_offset(self, group: Group, partition: Partition) -> None:
        """Tombstone one committed offset of ``group``, then forget it."""
        self.write_offset_tombstone(group.group_id, partition)
        del group.offsets[partition]

    def delete_group(self, group: Group) -> None:
        """Tombstone the group's offsets and metadata, then forget it."""
        for partition in list(group.offsets):
            self.delete_offset(group, partition)
        self.write_group_tombstone(group.group_id)
        self.drop(group)

    # ------------------------------------------------------------------ replay

    def load(self) -> list[Group]:
        """Rebuild every group from the journal; returns the groups that have members."""
        stored_groups: dict[str, StoredGroup] = {}
        offsets: dict[str, dict[Partition, CommittedOffset]] = {}
        for key_bytes, value in self.journal.replay():
            key = decode_key(bytes(key_bytes))
            if isinstance(key, GroupKey):
                if value is None:
                    stored_groups.pop(key.group_id, None)
                    offsets.pop(key.group_id, None)  # Kafka tombstones those too; be sure
                else:
                    stored_groups[key.group_id] = decode_group_value(bytes(value))
            elif isinstance(key, OffsetKey):
                partition = (key.topic, key.partition)
                if value is None:
                    offsets.get(key.group_id, {}).pop(partition, None)
                else:
                    committed = decode_offset_value(bytes(value))
                    offsets.setdefault(key.group_id, {})[partition] = committed
        self.groups.clear()
        with_members: list[Group] = []
        for group_id, stored in stored_groups.items():
            group = self._restore_group(group_id, stored)
            self.groups[group_id] = group
            if group.members:
                with_members.append(group)
        for group_id, partitions in offsets.items():
            if partitions:
                self.get_or_create(group_id).offsets.update(partitions)
        # Offsets of transactions still undecided when the journal ended are staged again;
        # the transaction coordinator's markers decide them after the restart.
        open_txns = getattr(self.journal, "open_transactional", None) or {}
        for producer_id, records in open_txns.items():
            for key_bytes, value in records:
                key = decode_key(bytes(key_bytes))
                if isinstance(key, OffsetKey) and value is not None:
                    group = self.get_or_create(key.group_id)
                    group.pending_txn_offsets.setdefault(producer_id, {})[
                        (key.topic, key.partition)] = decode_offset_value(bytes(value))
        return with_members

    def _restore_group(self, group_id: str, stored: StoredGroup) -> Group:
        group = Group(group_id, self.now_ms())
        group.protocol_type = stored.protocol_type
        group.generation_id = stored.generation_id
        group.protocol_name = stored.protocol_name
        if stored.members and stored.protocol_name is None:
            raise errors.MalformedDataError(
                f"stored group {group_id} has members but no selected protocol"
            )
        for m in stored.members:
            assert stored.protocol_name is not None
            group.add_member(Member(
                member_id=m.member_id, group_instance_id=m.group_instance_id,
                client_id=m.client_id, client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms, protocol_type=stored.protocol_type,
                protocols=[(stored.protocol_name, m.subscription)], assignment=m.assignment,
            ))
        group.leader_id = stored.leader_id if stored.leader_id in group.members else (
            next(iter(group.members), None))
        # A group reloaded with members resumes as Stable; members that are gone expire.
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        group.state_timestamp_ms = stored.state_timestamp_ms
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

    def all_groups(self) -> Iterable[Group]:
        return list(self.groups.values())
