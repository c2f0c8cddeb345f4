"""Where the coordinator persists its state, and the bytes of each record.

The coordinator writes every committed offset and every group's metadata as key/value
records into a :class:`GroupJournal` (the broker backs it with the ``__consumer_offsets``
log, which compaction keeps to the latest value per key) and replays them at start.
A ``None`` value is a tombstone: the offset or the group is gone.

The layout is Kafka's own, so Kafka's tools can read our ``__consumer_offsets``
(every integer big-endian, strings int16-length-prefixed, bytes int32-length-prefixed,
nullable ones with length -1 for null)::

    OffsetCommitKey   version int16 (0 or 1; we write 1), group string, topic string,
                      partition int32
    OffsetCommitValue version int16, then by version:
                      1: offset int64, metadata string, commit_timestamp int64,
                         expire_timestamp int64          (written when a retention was asked)
                      3: offset int64, leader_epoch int32, metadata string,
                         commit_timestamp int64          (written otherwise)
                      0 and 2 (read only): offset, metadata, commit_timestamp
    GroupMetadataKey  version int16 (2), group string
    GroupMetadataValue version int16 (we write 3), protocol_type string,
                      generation int32, protocol nullable string, leader nullable string,
                      current_state_timestamp int64 (v2+),
                      members array of: member_id string, group_instance_id nullable
                      string (v3), client_id string, client_host string,
                      rebalance_timeout int32 (v1+), session_timeout int32,
                      subscription bytes, assignment bytes

Keys with other versions (Kafka's newer record types) are skipped on replay.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from sdk.errors import MalformedDataError
from sdk.protocol.primitives import (
    read_array_length,
    read_bytes,
    read_nullable_string,
    read_string,
    write_bytes,
    write_string,
)
from server_ref.groups.group import CommittedOffset

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_TWO_INT32 = struct.Struct(">ii")

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
GROUP_VALUE_VERSION = 3


@runtime_checkable
class GroupJournal(Protocol):
    """Durable, ordered key/value records; the broker implements it over a compacted log."""

    def append(self, key: bytes, value: bytes | None) -> None:
        """Persist one record (``None``: a tombstone); raise if it could not be stored."""
        ...

    def replay(self) -> Iterable[tuple[bytes, bytes | None]]:
        """Every record still held, oldest first."""
        ...


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class StoredMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class StoredGroup:
    protocol_type: str
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    state_timestamp_ms: int | None
    members: tuple[StoredMember, ...]


# ---------------------------------------------------------------------------- encoding


def offset_key(group_id: str, topic: str, partition: int) -> bytes:
    w = bytearray(_INT16.pack(OFFSET_KEY_VERSION))
    write_string(w, group_id)
    write_string(w, topic)
    w += _INT32.pack(partition)
    return bytes(w)


def offset_value(committed: CommittedOffset) -> bytes:
    if committed.expire_timestamp_ms is not None:
        w = bytearray(_INT16.pack(1))
        w += _INT64.pack(committed.offset)
        write_string(w, committed.metadata)
        w += _INT64.pack(committed.commit_timestamp_ms)
        w += _INT64.pack(committed.expire_timestamp_ms)
        return bytes(w)
    w = bytearray(_INT16.pack(3))
    w += _INT64.pack(committed.offset)
    w += _INT32.pack(committed.leader_epoch)
    write_string(w, committed.metadata)
    w += _INT64.pack(committed.commit_timestamp_ms)
    return bytes(w)


def group_key(group_id: str) -> bytes:
    w = bytearray(_INT16.pack(GROUP_KEY_VERSION))
    write_string(w, group_id)
    return bytes(w)


def group_value(group: StoredGroup) -> bytes:
    w = bytearray(_INT16.pack(GROUP_VALUE_VERSION))
    write_string(w, group.protocol_type)
    w += _INT32.pack(group.generation_id)
    write_string(w, group.protocol_name)
    write_string(w, group.leader_id)
    w += _INT64.pack(-1 if group.state_timestamp_ms is None else group.state_timestamp_ms)
    w += _INT32.pack(len(group.members))
    for m in group.members:
        write_string(w, m.member_id)
        write_string(w, m.group_instance_id)
        write_string(w, m.client_id)
        write_string(w, m.client_host)
        w += _TWO_INT32.pack(m.rebalance_timeout_ms, m.session_timeout_ms)
        write_bytes(w, m.subscription)
        write_bytes(w, m.assignment)
    return bytes(w)


# ---------------------------------------------------------------------------- decoding


def decode_key(key: bytes) -> OffsetKey | GroupKey | None:
    """The record's key, or None for a record type this coordinator does not keep."""
    try:
        (version,) = _INT16.unpack_from(key, 0)
        if version in (0, 1):
            group_id, pos = read_string(key, 2)
            topic, pos = read_string(key, pos)
            (partition,) = _INT32.unpack_from(key, pos)
            _expect_end(key, pos + 4, "offset commit key")
            return OffsetKey(group_id, topic, partition)
        if version == GROUP_KEY_VERSION:
            group_id, pos = read_string(key, 2)
            _expect_end(key, pos, "group metadata key")
            return GroupKey(group_id)
    except struct.error as exc:
        raise MalformedDataError(f"truncated __consumer_offsets key ({exc})") from None
    return None


def decode_offset_value(value: bytes) -> CommittedOffset:
    try:
        (version,) = _INT16.unpack_from(value, 0)
        (offset,) = _INT64.unpack_from(value, 2)
        pos = 10
        leader_epoch = -1
        if version == 3:
            (leader_epoch,) = _INT32.unpack_from(value, pos)
            pos += 4
        elif version not in (0, 1, 2):
            raise MalformedDataError(f"offset commit value version {version} is not supported")
        metadata, pos = read_string(value, pos)
        (commit_ts,) = _INT64.unpack_from(value, pos)
        pos += 8
        expire_ts = None
        if version == 1:
            (expire_ts,) = _INT64.unpack_from(value, pos)
            pos += 8
        _expect_end(value, pos, "offset commit value")
    except struct.error as exc:
        raise MalformedDataError(f"truncated offset commit value ({exc})") from None
    return CommittedOffset(offset, leader_epoch, metadata, commit_ts, expire_ts)


def decode_group_value(value: bytes) -> StoredGroup:
    try:
        (version,) = _INT16.unpack_from(value, 0)
        if not 0 <= version <= GROUP_VALUE_VERSION:
            raise MalformedDataError(f"group metadata value version {version} is not supported")
        protocol_type, pos = read_string(value, 2)
        (generation,) = _INT32.unpack_from(value, pos)
        protocol, pos = read_nullable_string(value, pos + 4)
        leader, pos = read_nullable_string(value, pos)
        state_ts: int | None = None
        if version >= 2:
            (state_ts,) = _INT64.unpack_from(value, pos)
            pos += 8
            state_ts = None if state_ts < 0 else state_ts
        count, pos = read_array_length(value, pos)
        members = []
        for _ in range(max(count, 0)):
            member_id, pos = read_string(value, pos)
            instance_id = None
            if version >= 3:
                instance_id, pos = read_nullable_string(value, pos)
            client_id, pos = read_string(value, pos)
            client_host, pos = read_string(value, pos)
            if version >= 1:
                rebalance_timeout, session_timeout = _TWO_INT32.unpack_from(value, pos)
                pos += 8
            else:
                (session_timeout,) = _INT32.unpack_from(value, pos)
                rebalance_timeout = session_timeout
                pos += 4
            subscription, pos = read_bytes(value, pos)
            assignment, pos = read_bytes(value, pos)
            members.append(StoredMember(member_id, instance_id, client_id, client_host,
                                        rebalance_timeout, session_timeout, subscription,
                                        assignment))
        _expect_end(value, pos, "group metadata value")
    except struct.error as exc:
        raise MalformedDataError(f"truncated group metadata value ({exc})") from None
    return StoredGroup(protocol_type, generation, protocol, leader, state_ts, tuple(members))


def _expect_end(buf: bytes, pos: int, what: str) -> None:
    if pos != len(buf):
        raise MalformedDataError(f"{what} has {len(buf) - pos} trailing bytes")
