"""The reference broker's group coordinator: classic consumer groups and committed offsets.

:class:`GroupCoordinator` is the entry point; the broker builds it over a
:class:`GroupJournal` (its ``__consumer_offsets`` log), calls ``load()`` at start and
``close()`` at shutdown. The request handlers in ``server_ref/handlers/groups.py`` and
``offsets.py`` translate wire versions to its calls.
"""

from server_ref.groups.config import GroupConfig
from server_ref.groups.coordinator import GroupCoordinator
from server_ref.groups.group import CommittedOffset, Group, GroupState, Member
from server_ref.groups.journal import GroupJournal
from server_ref.groups.results import (
    FetchedOffset,
    GroupDescription,
    GroupListing,
    JoinedMember,
    JoinResult,
    LeaveResult,
    LeavingMember,
    MemberDescription,
    OffsetFetchResult,
    OffsetToCommit,
    SyncResult,
)

__all__ = [
    "CommittedOffset",
    "FetchedOffset",
    "Group",
    "GroupConfig",
    "GroupCoordinator",
    "GroupDescription",
    "GroupJournal",
    "GroupListing",
    "GroupState",
    "JoinResult",
    "JoinedMember",
    "LeaveResult",
    "LeavingMember",
    "Member",
    "MemberDescription",
    "OffsetFetchResult",
    "OffsetToCommit",
    "SyncResult",
]
