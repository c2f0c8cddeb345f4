"""The rebalance protocol of the group coordinator, driven directly on the event loop."""

from __future__ import annotations

import asyncio

from sdk import errors
from server_ref.groups import GroupCoordinator, GroupState, LeavingMember, OffsetToCommit

OK = 0
MEMBER_ID_REQUIRED = errors.MemberIdRequiredError.errno
REBALANCE_IN_PROGRESS = errors.RebalanceInProgressError.errno
UNKNOWN_MEMBER_ID = errors.UnknownMemberIdError.errno
ILLEGAL_GENERATION = errors.IllegalGenerationError.errno
FENCED_INSTANCE_ID = errors.FencedInstanceIdError.errno


async def stable_group(kit, coordinator: GroupCoordinator, n: int, *, group: str = "g",
                       instances: list[str | None] | None = None, **join_args):
    """Join ``n`` members at once, sync with an assignment per member; returns the joins."""
    instances = instances or [None] * n
    tasks = [kit.start_join(coordinator, group, instance=instances[i], client_id=f"c{i}",
                            **join_args) for i in range(n)]
    joins = list(await asyncio.gather(*tasks))
    leader = next(j for j in joins if j.leader == j.member_id)
    plan = {j.member_id: f"assignment-{i}".encode() for i, j in enumerate(joins)}
    syncs = [kit.start_sync(coordinator, j, group, plan if j is leader else None,
                            instance=instances[i]) for i, j in enumerate(joins)]
    for sync in await asyncio.gather(*syncs):
        assert sync.error == OK
    return joins


async def test_first_member_leads_generation_one(kit, coordinator):
    result = await kit.join(coordinator, client_id="app")
    assert result.error == OK
    assert result.generation_id == 1
    assert result.member_id.startswith("app-")
    assert result.leader == result.member_id
    assert result.protocol_type == "consumer" and result.protocol_name == "range"
    assert [m.member_id for m in result.members] == [result.member_id]
    assert result.members[0].metadata == kit.subscription("t")
    assert coordinator.group("g").state is GroupState.COMPLETING_REBALANCE


async def test_member_id_required_then_join_with_given_id(kit, coordinator):
    first = await kit.join(coordinator, require_known=True)
    assert first.error == MEMBER_ID_REQUIRED and first.member_id
    assert not coordinator.group("g").members  # not a member until it comes back
    second = await kit.join(coordinator, member_id=first.member_id, require_known=True)
    assert second.error == OK and second.member_id == first.member_id
    assert second.leader == first.member_id


async def test_members_joining_together_share_a_generation_with_one_leader(kit,
                                                                           make_coordinator):
    coordinator = make_coordinator(initial_rebalance_delay_ms=100)
    results = await asyncio.gather(*(kit.start_join(coordinator, client_id=f"c{i}")
                                     for i in range(3)))
    assert {r.error for r in results} == {OK}
    assert {r.generation_id for r in results} == {1}
    leaders = [r for r in results if r.leader == r.member_id]
    assert len(leaders) == 1 and {r.leader for r in results} == {leaders[0].member_id}
    assert sorted(m.member_id for m in leaders[0].members) == sorted(r.member_id for r in results)
    assert all(not r.members for r in results if r is not leaders[0])


async def test_initial_delay_extends_while_members_keep_arriving(kit, make_coordinator):
    coordinator = make_coordinator(initial_rebalance_delay_ms=300)
    first = kit.start_join(coordinator, client_id="early")
    await asyncio.sleep(0.1)
    second = kit.start_join(coordinator, client_id="late")
    a, b = await asyncio.gather(first, second)
    assert a.generation_id == b.generation_id == 1
    assert len(next(r for r in (a, b) if r.leader == r.member_id).members) == 2


async def test_protocol_vote_picks_the_most_preferred_common_protocol(kit, make_coordinator):
    coordinator = make_coordinator(initial_rebalance_delay_ms=100)
    results = await asyncio.gather(
        kit.start_join(coordinator, names=("range", "roundrobin", "sticky")),
        kit.start_join(coordinator, names=("roundrobin", "range")),
        kit.start_join(coordinator, names=("roundrobin", "range")),
    )
    # "sticky" is not common; "roundrobin" has two votes against one.
    assert {r.protocol_name for r in results} == {"roundrobin"}


async def test_protocol_vote_tie_goes_to_the_leaders_preference(kit, make_coordinator):
    coordinator = make_coordinator(initial_rebalance_delay_ms=100)
    first = kit.start_join(coordinator, names=("range", "roundrobin"))
    await asyncio.sleep(0)  # the first member to join leads
    second = kit.start_join(coordinator, names=("roundrobin", "range"))
    results = await asyncio.gather(first, second)
    assert {r.protocol_name for r in results} == {"range"}


async def test_incompatible_protocols_are_rejected(kit, coordinator):
    first = await kit.join(coordinator, names=("range",))
    assert first.error == OK
    other = await kit.join(coordinator, names=("roundrobin",))
    assert other.error == errors.InconsistentGroupProtocolError.errno
    other_type = await kit.join(coordinator, protocol_type="connect")
    assert other_type.error == errors.InconsistentGroupProtocolError.errno
    empty = await kit.join(coordinator, "g2", names=())
    assert empty.error == errors.InconsistentGroupProtocolError.errno


async def test_bad_join_arguments(kit, make_coordinator):
    coordinator = make_coordinator(min_session_timeout_ms=1000, max_size=1)
    assert (await kit.join(coordinator, session_ms=500)).error == \
        errors.InvalidSessionTimeoutError.errno
    assert (await kit.join(coordinator, "", session_ms=5000)).error == \
        errors.InvalidGroupIdError.errno
    assert (await kit.join(coordinator, member_id="nobody", session_ms=5000)).error == \
        UNKNOWN_MEMBER_ID
    assert (await kit.join(coordinator, session_ms=5000)).error == OK
    assert (await kit.join(coordinator, session_ms=5000)).error == \
        errors.GroupMaxSizeReachedError.errno


async def test_sync_hands_each_member_its_assignment(kit, make_coordinator):
    coordinator = make_coordinator(initial_rebalance_delay_ms=100)
    a, b = await asyncio.gather(kit.start_join(coordinator), kit.start_join(coordinator))
    leader, follower = (a, b) if a.leader == a.member_id else (b, a)
    follower_sync = kit.start_sync(coordinator, follower)  # parks until the leader syncs
    await asyncio.sleep(0.05)
    assert not follower_sync.done()
    plan = {leader.member_id: kit.assignment(t=[0]), follower.member_id: kit.assignment(t=[1])}
    leader_sync = await kit.start_sync(coordinator, leader, assignments=plan)
    assert leader_sync.error == OK and leader_sync.assignment == plan[leader.member_id]
    synced = await follower_sync
    assert synced.error == OK and synced.assignment == plan[follower.member_id]
    assert synced.protocol_type == "consumer" and synced.protocol_name == "range"
    assert coordinator.group("g").state is GroupState.STABLE
    # A late SyncGroup in the Stable state still gets the member's share.
    again = await kit.start_sync(coordinator, follower)
    assert again.assignment == plan[follower.member_id]


async def test_sync_errors(kit, coordinator):
    joined = await kit.join(coordinator)
    wrong_generation = await coordinator.sync_group("g", joined.member_id, 7)
    assert wrong_generation.error == ILLEGAL_GENERATION
    wrong_protocol = await coordinator.sync_group("g", joined.member_id, 1,
                                                  protocol_name="roundrobin")
    assert wrong_protocol.error == errors.InconsistentGroupProtocolError.errno
    unknown = await coordinator.sync_group("g", "stranger", 1)
    assert unknown.error == UNKNOWN_MEMBER_ID
    no_group = await coordinator.sync_group("nope", joined.member_id, 1)
    assert no_group.error == UNKNOWN_MEMBER_ID


async def test_heartbeat_answers(kit, coordinator):
    [member] = await stable_group(kit, coordinator, 1)
    assert coordinator.heartbeat("g", member.member_id, 1) == OK
    assert coordinator.heartbeat("g", member.member_id, 2) == ILLEGAL_GENERATION
    assert coordinator.heartbeat("g", "stranger", 1) == UNKNOWN_MEMBER_ID
    assert coordinator.heartbeat("nope", member.member_id, 1) == UNKNOWN_MEMBER_ID
    assert coordinator.heartbeat("", member.member_id, 1) == errors.InvalidGroupIdError.errno


async def test_new_member_makes_the_group_rebalance(kit, coordinator):
    [a] = await stable_group(kit, coordinator, 1)
    newcomer = kit.start_join(coordinator, client_id="new")
    await kit.eventually(lambda: coordinator.group("g").state is GroupState.PREPARING_REBALANCE)
    assert coordinator.heartbeat("g", a.member_id, 1) == REBALANCE_IN_PROGRESS
    # Commits of the old generation are still accepted while the group prepares.
    committed = coordinator.commit_offsets("g", {("t", 0): OffsetToCommit(5)},
                                           generation_id=1, member_id=a.member_id)
    assert committed == {("t", 0): OK}
    rejoined = await kit.join(coordinator, member_id=a.member_id)
    b = await newcomer
    assert rejoined.generation_id == b.generation_id == 2
    assert rejoined.leader == a.member_id  # the leader keeps leading
    assert len(rejoined.members) == 2


async def test_follower_rejoining_unchanged_in_stable_gets_current_generation(kit, coordinator):
    a, b = await stable_group(kit, coordinator, 2)
    follower = b if a.leader == a.member_id else a
    again = await kit.join(coordinator, member_id=follower.member_id)
    assert again.error == OK and again.generation_id == 1 and not again.members
    assert coordinator.group("g").state is GroupState.STABLE


async def test_session_expiry_removes_the_member_and_rebalances(kit, coordinator):
    a, _b = await stable_group(kit, coordinator, 2, session_ms=200)
    stop = asyncio.Event()
    answers: list[int] = []

    async def keep_alive() -> None:
        while not stop.is_set():
            answers.append(coordinator.heartbeat("g", a.member_id, 1))
            await asyncio.sleep(0.02)

    beating = asyncio.ensure_future(keep_alive())
    try:
        await kit.eventually(lambda: REBALANCE_IN_PROGRESS in answers)
    finally:
        stop.set()
        await beating
    group = coordinator.group("g")
    assert list(group.members) == [a.member_id]  # b stopped heartbeating and was dropped
    rejoined = await kit.join(coordinator, member_id=a.member_id, session_ms=200)
    assert rejoined.generation_id == 2 and [m.member_id for m in rejoined.members] == \
        [a.member_id]


async def test_leave_group_rebalances_the_rest(kit, coordinator):
    a, b = await stable_group(kit, coordinator, 2)
    result = coordinator.leave_group("g", [LeavingMember(b.member_id, reason="shutdown")])
    assert result.error == OK and result.members[0][1] == OK
    assert coordinator.heartbeat("g", a.member_id, 1) == REBALANCE_IN_PROGRESS
    rejoined = await kit.join(coordinator, member_id=a.member_id)
    assert rejoined.generation_id == 2 and len(rejoined.members) == 1
    unknown = coordinator.leave_group("g", [LeavingMember("ghost")])
    assert unknown.members[0][1] == UNKNOWN_MEMBER_ID
    no_group = coordinator.leave_group("nope", [LeavingMember("ghost")])
    assert no_group.error == OK and no_group.members[0][1] == UNKNOWN_MEMBER_ID


async def test_last_member_leaving_empties_the_group_and_persists_it(kit, coordinator, journal):
    [a] = await stable_group(kit, coordinator, 1)
    coordinator.leave_group("g", [LeavingMember(a.member_id)])
    group = coordinator.group("g")
    assert group.state is GroupState.EMPTY and group.generation_id == 2
    assert group.protocol_name is None
    records_before = len(journal.records)
    assert records_before >= 2  # the Stable assignment, then the empty generation


async def test_rebalance_timeout_drops_members_that_do_not_rejoin(kit, coordinator):
    a, b = await stable_group(kit, coordinator, 2, rebalance_ms=300)
    newcomer = kit.start_join(coordinator, client_id="new", rebalance_ms=300)
    await kit.eventually(lambda: coordinator.group("g").state is GroupState.PREPARING_REBALANCE)
    rejoined = kit.start_join(coordinator, member_id=a.member_id, rebalance_ms=300)
    c, a2 = await asyncio.gather(newcomer, rejoined)  # b never rejoins
    assert c.generation_id == a2.generation_id == 2
    assert b.member_id not in coordinator.group("g").members
    assert coordinator.heartbeat("g", b.member_id, 1) == UNKNOWN_MEMBER_ID


async def test_members_that_never_sync_are_dropped(kit, coordinator):
    a, b = await asyncio.gather(kit.start_join(coordinator, rebalance_ms=200),
                                kit.start_join(coordinator, rebalance_ms=200))
    leader = a if a.leader == a.member_id else b
    follower = b if leader is a else a
    synced = await kit.start_sync(coordinator, leader, assignments={})
    assert synced.error == OK
    # The follower never sends SyncGroup: after the rebalance timeout it is removed.
    await kit.eventually(lambda: follower.member_id not in coordinator.group("g").members)
    assert coordinator.heartbeat("g", leader.member_id, 1) == REBALANCE_IN_PROGRESS


async def test_leader_leaving_during_sync_wait_answers_parked_followers(kit, coordinator):
    a, b = await asyncio.gather(kit.start_join(coordinator), kit.start_join(coordinator))
    leader = a if a.leader == a.member_id else b
    follower = b if leader is a else a
    parked = kit.start_sync(coordinator, follower)
    await asyncio.sleep(0.01)
    coordinator.leave_group("g", [LeavingMember(leader.member_id)])
    assert (await parked).error == REBALANCE_IN_PROGRESS


async def test_static_member_restart_takes_its_seat_without_rebalance(kit, coordinator):
    a, b = await stable_group(kit, coordinator, 2, instances=["inst-a", "inst-b"])
    plan_a = coordinator.group("g").members[a.member_id].assignment
    old_leader = a.leader
    restarted = await kit.join(coordinator, instance="inst-a", client_id="c0")
    assert restarted.error == OK
    assert restarted.member_id != a.member_id and restarted.member_id.startswith("inst-a-")
    assert restarted.generation_id == 1  # no rebalance
    assert restarted.leader == old_leader and not restarted.members
    assert coordinator.group("g").state is GroupState.STABLE
    assert coordinator.heartbeat("g", b.member_id, 1, "inst-b") == OK
    synced = await coordinator.sync_group("g", restarted.member_id, 1,
                                          group_instance_id="inst-a")
    assert synced.error == OK and synced.assignment == plan_a
    # The previous incarnation is fenced everywhere.
    assert coordinator.heartbeat("g", a.member_id, 1, "inst-a") == FENCED_INSTANCE_ID
    old_sync = await coordinator.sync_group("g", a.member_id, 1, group_instance_id="inst-a")
    assert old_sync.error == FENCED_INSTANCE_ID
    left = coordinator.leave_group("g", [LeavingMember(a.member_id, "inst-a")])
    assert left.members[0][1] == FENCED_INSTANCE_ID


async def test_static_leader_restart_with_skip_assignment(kit, coordinator):
    [_a] = await stable_group(kit, coordinator, 1, instances=["inst-a"])
    restarted = await kit.join(coordinator, instance="inst-a", skip_assignment=True)
    assert restarted.error == OK and restarted.skip_assignment
    assert restarted.leader == restarted.member_id
    assert [m.group_instance_id for m in restarted.members] == ["inst-a"]
    assert coordinator.group("g").state is GroupState.STABLE


async def test_static_member_with_new_protocols_triggers_rebalance(kit, coordinator):
    _a, b = await stable_group(kit, coordinator, 2, instances=["inst-a", "inst-b"],
                              names=("range", "roundrobin"))
    # Rejoining with only "roundrobin" changes the vote, so the group must rebalance.
    restarted = kit.start_join(coordinator, instance="inst-a", names=("roundrobin",))
    await kit.eventually(lambda: coordinator.group("g").state is GroupState.PREPARING_REBALANCE)
    other = await kit.join(coordinator, member_id=b.member_id, instance="inst-b",
                           names=("range", "roundrobin"))
    result = await restarted
    assert result.generation_id == other.generation_id == 2
    assert result.protocol_name == "roundrobin"


async def test_static_replacement_fences_a_parked_join(kit, coordinator):
    a, b = await stable_group(kit, coordinator, 2, instances=["inst-a", None])
    rebalance = kit.start_join(coordinator, client_id="new")  # a third member
    await kit.eventually(lambda: coordinator.group("g").state is GroupState.PREPARING_REBALANCE)
    old_join = kit.start_join(coordinator, member_id=a.member_id, instance="inst-a")
    await asyncio.sleep(0.01)
    new_join = kit.start_join(coordinator, instance="inst-a")
    assert (await old_join).error == FENCED_INSTANCE_ID
    b_join = await kit.join(coordinator, member_id=b.member_id)
    results = await asyncio.gather(new_join, rebalance)
    assert {r.generation_id for r in (*results, b_join)} == {2}
    assert a.member_id not in coordinator.group("g").members


async def test_admin_can_remove_a_static_member_by_instance_id(kit, coordinator):
    _a, _b = await stable_group(kit, coordinator, 2, instances=["inst-a", "inst-b"])
    result = coordinator.leave_group("g", [LeavingMember("", "inst-b"),
                                           LeavingMember("", "inst-x")])
    assert [error for _, error in result.members] == [OK, UNKNOWN_MEMBER_ID]
    assert list(coordinator.group("g").static_members) == ["inst-a"]


async def test_pending_member_leaving_is_forgotten(kit, coordinator):
    pending = await kit.join(coordinator, require_known=True)
    assert coordinator.group("g").pending_members == {pending.member_id}
    result = coordinator.leave_group("g", [LeavingMember(pending.member_id)])
    assert result.members[0][1] == OK and not coordinator.group("g").pending_members


async def test_pending_member_id_expires_after_the_session_timeout(kit, coordinator):
    pending = await kit.join(coordinator, require_known=True, session_ms=50)
    await kit.eventually(lambda: not coordinator.group("g").pending_members)
    late = await kit.join(coordinator, member_id=pending.member_id, require_known=True)
    assert late.error == UNKNOWN_MEMBER_ID


async def test_close_answers_parked_requests(kit, make_coordinator):
    coordinator = make_coordinator(initial_rebalance_delay_ms=60_000)
    parked = kit.start_join(coordinator)
    await asyncio.sleep(0.01)
    coordinator.close()
    assert (await parked).error == errors.NotCoordinatorError.errno
    assert coordinator.heartbeat("g", "m", 1) == errors.NotCoordinatorError.errno


async def test_not_loaded_coordinator_asks_clients_to_retry(kit, journal):
    coordinator = GroupCoordinator(journal, kit.FAST)
    result = await kit.join(coordinator)
    assert result.error == errors.CoordinatorLoadInProgressError.errno
    assert not coordinator.loaded
