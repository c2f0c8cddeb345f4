"""Committed offsets, retention, offset deletion and the group admin operations."""

from __future__ import annotations

import asyncio

from sdk import errors
from server_ref.groups import FetchedOffset, GroupState, LeavingMember, OffsetToCommit

OK = 0
MINUTE = 60_000
T0, T1, U0 = ("t", 0), ("t", 1), ("u", 0)


async def stable_member(kit, coordinator, group="g", topics=("t",), instance=None):
    joined = await kit.join(coordinator, group, topics=topics, instance=instance)
    synced = await coordinator.sync_group(group, joined.member_id, joined.generation_id,
                                          assignments={joined.member_id: b"a"},
                                          group_instance_id=instance)
    assert synced.error == OK
    return joined


async def test_member_commit_then_fetch_with_metadata_and_epoch(kit, coordinator):
    m = await stable_member(kit, coordinator)
    result = coordinator.commit_offsets(
        "g", {T0: OffsetToCommit(42, leader_epoch=3, metadata="checkpoint"),
              T1: OffsetToCommit(7, metadata=None)},
        generation_id=1, member_id=m.member_id)
    assert result == {T0: OK, T1: OK}
    fetched = coordinator.fetch_offsets("g", [T0, T1, U0])
    assert fetched.error == OK
    assert fetched.offsets == {T0: FetchedOffset(42, 3, "checkpoint"),
                               T1: FetchedOffset(7, -1, ""), U0: FetchedOffset(-1)}
    everything = coordinator.fetch_offsets("g", None)
    assert list(everything.offsets) == [T0, T1]


async def test_commit_generation_and_membership_checks(kit, coordinator):
    m = await stable_member(kit, coordinator, instance="inst")
    offsets = {T0: OffsetToCommit(1)}
    assert coordinator.commit_offsets("g", offsets, generation_id=2, member_id=m.member_id,
                                      group_instance_id="inst") == \
        {T0: errors.IllegalGenerationError.errno}
    assert coordinator.commit_offsets("g", offsets, generation_id=1, member_id="stranger") == \
        {T0: errors.UnknownMemberIdError.errno}
    assert coordinator.commit_offsets("g", offsets, generation_id=1, member_id="stranger",
                                      group_instance_id="inst") == \
        {T0: errors.FencedInstanceIdError.errno}
    # A simple commit (no generation, no member) is refused while the group has members.
    assert coordinator.commit_offsets("g", offsets) == {T0: errors.UnknownMemberIdError.errno}
    # A member commit to a group that does not exist.
    assert coordinator.commit_offsets("nope", offsets, generation_id=1, member_id="x") == \
        {T0: errors.GroupIdNotFoundError.errno}
    assert coordinator.commit_offsets("", offsets) == {T0: errors.InvalidGroupIdError.errno}


async def test_commit_while_waiting_for_the_assignment_is_rebalance_in_progress(kit,
                                                                                coordinator):
    joined = await kit.join(coordinator)
    assert coordinator.group("g").state is GroupState.COMPLETING_REBALANCE
    result = coordinator.commit_offsets("g", {T0: OffsetToCommit(1)}, generation_id=1,
                                        member_id=joined.member_id)
    assert result == {T0: errors.RebalanceInProgressError.errno}


async def test_simple_commit_creates_an_offsets_only_group(coordinator):
    assert coordinator.commit_offsets("standalone", {T0: OffsetToCommit(9)}) == {T0: OK}
    group = coordinator.group("standalone")
    assert group.state is GroupState.EMPTY and group.protocol_type is None
    error, listed = coordinator.list_groups()
    assert error == OK
    assert [(g.group_id, g.protocol_type, g.state) for g in listed] == \
        [("standalone", "", "Empty")]
    assert coordinator.fetch_offsets("standalone", [T0]).offsets[T0].offset == 9


async def test_oversized_metadata_is_refused_per_partition(make_coordinator):
    coordinator = make_coordinator(offset_metadata_max_bytes=8)
    result = coordinator.commit_offsets("g", {T0: OffsetToCommit(1, metadata="x" * 9),
                                              T1: OffsetToCommit(2, metadata="x" * 8)})
    assert result == {T0: errors.OffsetMetadataTooLargeError.errno, T1: OK}


async def test_failed_journal_write_leaves_offsets_unchanged(coordinator, journal):
    coordinator.commit_offsets("g", {T0: OffsetToCommit(1)})
    journal.failing = True
    assert coordinator.commit_offsets("g", {T0: OffsetToCommit(2)}) == \
        {T0: errors.CoordinatorNotAvailableError.errno}
    assert coordinator.fetch_offsets("g", [T0]).offsets[T0].offset == 1


async def test_failed_assignment_write_makes_the_group_rebalance(kit, coordinator, journal):
    joined = await kit.join(coordinator)
    journal.failing = True
    synced = await coordinator.sync_group("g", joined.member_id, 1,
                                          assignments={joined.member_id: b"a"})
    assert synced.error == errors.CoordinatorNotAvailableError.errno
    assert coordinator.group("g").state is GroupState.PREPARING_REBALANCE
    journal.failing = False
    again = await kit.join(coordinator, member_id=joined.member_id)
    assert again.error == OK and again.generation_id == 2


async def test_require_stable_reports_staged_transactional_offsets(coordinator):
    coordinator.commit_offsets("g", {T0: OffsetToCommit(5)})
    staged = coordinator.stage_transactional_offsets("g", 1000, {T0: OffsetToCommit(8),
                                                                 T1: OffsetToCommit(3)})
    assert staged == {T0: OK, T1: OK}
    unstable = errors.UnstableOffsetCommitError.errno
    assert coordinator.fetch_offsets("g", [T0], require_stable=True).offsets[T0].error == \
        unstable
    assert coordinator.fetch_offsets("g", [T0]).offsets[T0].offset == 5  # not stable: old value
    coordinator.complete_transaction(1000, committed=True)
    after = coordinator.fetch_offsets("g", [T0, T1], require_stable=True).offsets
    assert (after[T0].offset, after[T1].offset) == (8, 3)

    coordinator.stage_transactional_offsets("g", 1001, {T0: OffsetToCommit(99)})
    coordinator.complete_transaction(1001, committed=False)
    assert coordinator.fetch_offsets("g", [T0], require_stable=True).offsets[T0].offset == 8


async def test_offsets_of_an_empty_group_expire_after_retention(kit, coordinator, clock):
    m = await stable_member(kit, coordinator)
    coordinator.commit_offsets("g", {T0: OffsetToCommit(1)}, generation_id=1,
                               member_id=m.member_id)
    clock.advance(8 * 24 * 60 * MINUTE)  # older than the 7-day retention, but group active
    assert coordinator.expire_offsets() == 0
    coordinator.leave_group("g", [LeavingMember(m.member_id)])
    assert coordinator.group("g").state is GroupState.EMPTY
    clock.advance(7 * 24 * 60 * MINUTE - 1)
    assert coordinator.expire_offsets() == 0  # retention counts from when it became empty
    clock.advance(1)
    assert coordinator.expire_offsets() == 1
    assert coordinator.group("g") is None  # empty and without offsets: deleted


async def test_stable_group_keeps_offsets_of_subscribed_topics(kit, coordinator, clock):
    m = await stable_member(kit, coordinator, topics=("t",))
    coordinator.commit_offsets("g", {T0: OffsetToCommit(1), U0: OffsetToCommit(2)},
                               generation_id=1, member_id=m.member_id)
    clock.advance(7 * 24 * 60 * MINUTE)
    assert coordinator.expire_offsets() == 1
    assert list(coordinator.fetch_offsets("g", None).offsets) == [T0]


async def test_explicit_retention_and_simple_groups_expire_by_commit_time(coordinator, clock):
    coordinator.commit_offsets("g", {T0: OffsetToCommit(1)}, retention_ms=MINUTE)
    coordinator.commit_offsets("g", {T1: OffsetToCommit(1)})
    clock.advance(MINUTE)
    assert coordinator.expire_offsets() == 1
    assert list(coordinator.fetch_offsets("g", None).offsets) == [T1]


async def test_offset_delete_respects_subscriptions(kit, coordinator):
    m = await stable_member(kit, coordinator, topics=("t",))
    coordinator.commit_offsets("g", {T0: OffsetToCommit(1), U0: OffsetToCommit(2)},
                               generation_id=1, member_id=m.member_id)
    error, results = coordinator.delete_offsets("g", [T0, U0])
    assert error == OK
    assert results == {T0: errors.GroupSubscribedToTopicError.errno, U0: OK}
    assert list(coordinator.fetch_offsets("g", None).offsets) == [T0]
    coordinator.leave_group("g", [LeavingMember(m.member_id)])
    assert coordinator.delete_offsets("g", [T0]) == (OK, {T0: OK})
    assert coordinator.fetch_offsets("g", None).offsets == {}
    assert coordinator.delete_offsets("nope", [T0])[0] == errors.GroupIdNotFoundError.errno


async def test_offset_delete_in_an_active_non_consumer_group_is_refused(kit, coordinator):
    joined = await kit.join(coordinator, protocol_type="connect")
    await coordinator.sync_group("g", joined.member_id, 1, assignments={})
    assert coordinator.delete_offsets("g", [T0])[0] == errors.NonEmptyGroupError.errno


async def test_delete_groups(kit, coordinator, journal):
    m = await stable_member(kit, coordinator, group="busy")
    coordinator.commit_offsets("idle", {T0: OffsetToCommit(1)})
    results = coordinator.delete_groups(["busy", "idle", "nope", ""])
    assert results == {"busy": errors.NonEmptyGroupError.errno, "idle": OK,
                       "nope": errors.GroupIdNotFoundError.errno,
                       "": errors.InvalidGroupIdError.errno}
    assert coordinator.group("idle") is None
    assert coordinator.fetch_offsets("idle", [T0]).offsets[T0].offset == -1
    assert journal.records[-1][1] is None and journal.records[-2][1] is None  # tombstones
    coordinator.leave_group("busy", [LeavingMember(m.member_id)])
    assert coordinator.delete_groups(["busy"]) == {"busy": OK}


async def test_describe_group_in_each_state(kit, coordinator):
    m = await kit.join(coordinator, client_id="app")
    waiting = coordinator.describe_group("g")
    assert waiting.state == "CompletingRebalance" and waiting.protocol_data == ""
    assert waiting.members[0].metadata == b"" and waiting.members[0].assignment == b""
    await coordinator.sync_group("g", m.member_id, 1, assignments={m.member_id: b"plan"})
    stable = coordinator.describe_group("g")
    assert (stable.state, stable.protocol_type, stable.protocol_data) == \
        ("Stable", "consumer", "range")
    [member] = stable.members
    assert member.member_id == m.member_id and member.client_id == "app"
    assert member.client_host == "/127.0.0.1"
    assert member.metadata == kit.subscription("t") and member.assignment == b"plan"
    unknown = coordinator.describe_group("nope")
    assert (unknown.state, unknown.error, unknown.members) == ("Dead", OK, ())
    assert coordinator.describe_group("").error == errors.InvalidGroupIdError.errno


async def test_list_groups_filters_by_state_and_type(kit, coordinator):
    await stable_member(kit, coordinator, group="active")
    coordinator.commit_offsets("offsets-only", {T0: OffsetToCommit(1)})
    _, every = coordinator.list_groups()
    assert sorted(g.group_id for g in every) == ["active", "offsets-only"]
    _, stable = coordinator.list_groups(states=["stable"])
    assert [g.group_id for g in stable] == ["active"]
    _, classic = coordinator.list_groups(types=["Classic"])
    assert len(classic) == 2
    _, consumer_type = coordinator.list_groups(types=["consumer"])
    assert consumer_type == []


async def test_fetch_for_an_unknown_group_finds_nothing(coordinator):
    result = coordinator.fetch_offsets("nobody", [T0])
    assert result.error == OK and result.offsets[T0].offset == -1
    assert coordinator.fetch_offsets("nobody", None).offsets == {}
    assert coordinator.fetch_offsets("", [T0]).error == errors.InvalidGroupIdError.errno


async def test_periodic_expiry_runs_on_its_own(make_coordinator, clock):
    coordinator = make_coordinator(offsets_retention_check_interval_ms=20,
                                   offsets_retention_ms=MINUTE)
    coordinator.commit_offsets("g", {T0: OffsetToCommit(1)})
    clock.advance(MINUTE)
    for _ in range(500):
        if coordinator.group("g") is None:
            break
        await asyncio.sleep(0.01)
    assert coordinator.group("g") is None
