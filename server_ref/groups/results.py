"""What the coordinator's operations take and return, free of wire versions.

The handlers translate these to and from the versioned request and response messages; the
coordinator only deals in error numbers (``0`` is success) and plain values.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Partition = tuple[str, int]  # (topic, partition)
Protocol = tuple[str, bytes]  # (protocol name, member metadata for it)

NO_ERROR = 0


@dataclass(frozen=True, slots=True)
class JoinedMember:
    """One member as the leader sees it in its JoinGroup response."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinedMember, ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveResult:
    """A group-level error, and each leaving member with its own error."""

    error: int
    members: tuple[tuple[LeavingMember, int], ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetToCommit:
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    commit_timestamp_ms: int = -1  # OffsetCommit v1 only; -1: the coordinator's clock


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    offset: int  # -1 when nothing is committed
    leader_epoch: int = -1
    metadata: str = ""
    error: int = NO_ERROR


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"  # or "consumer" (KIP-848)


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str = ""
    protocol_data: str = ""  # the selected protocol, only in the Stable state
    members: tuple[MemberDescription, ...] = ()
    error: int = NO_ERROR


@dataclass(slots=True)
class OffsetFetchResult:
    """A group-level error, or the offsets found (in request order, or sorted for "all")."""

    error: int = NO_ERROR
    offsets: dict[Partition, FetchedOffset] = field(default_factory=dict)
