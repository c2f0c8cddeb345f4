"""Deleting a topic drops its committed offsets from every group, through the journal."""

from __future__ import annotations

from server_ref.groups import FetchedOffset, GroupCoordinator, GroupState, OffsetToCommit
from server_ref.groups.journal import OffsetKey, decode_key

OK = 0
T0, T1, U0 = ("t", 0), ("t", 1), ("u", 0)


def _tombstoned(journal) -> set[tuple[str, str, int]]:
    keys = (decode_key(key) for key, value in journal.records if value is None)
    return {(k.group_id, k.topic, k.partition) for k in keys if isinstance(k, OffsetKey)}


async def test_offsets_of_deleted_topics_go_and_stay_gone_after_a_reload(kit, coordinator,
                                                                         journal, clock):
    joined = await kit.join(coordinator, "active", topics=("t", "u"))
    await coordinator.sync_group("active", joined.member_id, 1,
                                 assignments={joined.member_id: b"a"})
    assert coordinator.commit_offsets(
        "active", {T0: OffsetToCommit(3), T1: OffsetToCommit(4), U0: OffsetToCommit(5)},
        generation_id=1, member_id=joined.member_id) == {T0: OK, T1: OK, U0: OK}
    assert coordinator.commit_offsets("simple", {T0: OffsetToCommit(7), U0: OffsetToCommit(8)}
                                      ) == {T0: OK, U0: OK}

    assert coordinator.on_topics_deleted(["t", "absent"]) == 3

    for group in ("active", "simple"):
        fetched = coordinator.fetch_offsets(group, None).offsets
        assert list(fetched) == [U0]
        assert coordinator.fetch_offsets(group, [T0]).offsets[T0] == FetchedOffset(-1)
    assert coordinator.group("active").state is GroupState.STABLE  # members are untouched
    assert _tombstoned(journal) == {("active", "t", 0), ("active", "t", 1), ("simple", "t", 0)}

    reloaded = GroupCoordinator(journal, kit.FAST, now_ms=clock)
    reloaded.load()
    try:
        assert list(reloaded.fetch_offsets("active", None).offsets) == [U0]
        assert list(reloaded.fetch_offsets("simple", None).offsets) == [U0]
    finally:
        reloaded.close()


async def test_an_empty_group_left_without_offsets_is_deleted(coordinator, journal, clock, kit):
    coordinator.commit_offsets("only-t", {T0: OffsetToCommit(1), T1: OffsetToCommit(2)})
    coordinator.commit_offsets("no-t", {U0: OffsetToCommit(1)})
    assert coordinator.on_topics_deleted(["t"]) == 2
    assert coordinator.group("only-t") is None
    assert [g.group_id for g in coordinator.list_groups()[1]] == ["no-t"]

    reloaded = GroupCoordinator(journal, kit.FAST, now_ms=clock)
    reloaded.load()
    try:
        assert reloaded.group("only-t") is None
        assert reloaded.group("no-t") is not None
    finally:
        reloaded.close()


async def test_staged_transactional_offsets_of_deleted_topics_are_dropped(coordinator):
    coordinator.stage_transactional_offsets("g", 1000, {T0: OffsetToCommit(8),
                                                         U0: OffsetToCommit(3)})
    assert coordinator.on_topics_deleted(["t"]) == 0  # nothing was committed yet
    stable = coordinator.fetch_offsets("g", [T0], require_stable=True).offsets[T0]
    assert stable == FetchedOffset(-1)  # no longer UNSTABLE_OFFSET_COMMIT
    coordinator.complete_transaction(1000, committed=True)
    assert coordinator.fetch_offsets("g", None).offsets == {U0: FetchedOffset(3)}


async def test_a_journal_failure_keeps_what_it_could_not_tombstone(coordinator, journal):
    coordinator.commit_offsets("g", {T0: OffsetToCommit(1)})
    journal.failing = True
    assert coordinator.on_topics_deleted(["t"]) == 0
    assert coordinator.fetch_offsets("g", [T0]).offsets[T0].offset == 1
    journal.failing = False
    assert coordinator.on_topics_deleted(["t"]) == 1
    assert coordinator.group("g") is None


async def test_a_closed_coordinator_ignores_deletions(coordinator, journal):
    coordinator.commit_offsets("g", {T0: OffsetToCommit(1)})
    coordinator.close()
    assert coordinator.on_topics_deleted(["t"]) == 0
    assert coordinator.group("g").offsets  # untouched
