"""__consumer_offsets record layout, and rebuilding the coordinator from its journal."""

from __future__ import annotations

import struct

import pytest

from sdk import errors
from server_ref.groups import CommittedOffset, GroupCoordinator, GroupState, OffsetToCommit
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

OK = 0
T0 = ("t", 0)


def test_offset_records_use_kafkas_layout():
    assert offset_key("g", "t", 3) == b"\x00\x01" b"\x00\x01g" b"\x00\x01t" b"\x00\x00\x00\x03"
    value = offset_value(CommittedOffset(10, 2, "md", 1234))
    assert value == (b"\x00\x03" + struct.pack(">qi", 10, 2) + b"\x00\x02md"
                     + struct.pack(">q", 1234))
    with_expiry = offset_value(CommittedOffset(10, -1, "", 1234, 5678))
    assert with_expiry == (b"\x00\x01" + struct.pack(">q", 10) + b"\x00\x00"
                           + struct.pack(">qq", 1234, 5678))
    assert decode_offset_value(value) == CommittedOffset(10, 2, "md", 1234)
    assert decode_offset_value(with_expiry) == CommittedOffset(10, -1, "", 1234, 5678)
    assert decode_key(offset_key("g", "t", 3)) == OffsetKey("g", "t", 3)
    # Version 0 keys and version 0 values (older Kafka) read the same way.
    assert decode_key(b"\x00\x00\x00\x01g\x00\x01t\x00\x00\x00\x01") == OffsetKey("g", "t", 1)
    v0 = b"\x00\x00" + struct.pack(">q", 4) + b"\x00\x00" + struct.pack(">q", 99)
    assert decode_offset_value(v0) == CommittedOffset(4, -1, "", 99)


def test_group_records_round_trip():
    stored = StoredGroup("consumer", 5, "range", "m-1", 777, (
        StoredMember("m-1", "inst", "client", "/10.0.0.1", 300_000, 45_000, b"sub", b"asg"),
        StoredMember("m-2", None, "client", "/10.0.0.2", 300_000, 45_000, b"", b""),
    ))
    assert group_key("g") == b"\x00\x02\x00\x01g"
    assert decode_key(group_key("g")) == GroupKey("g")
    assert decode_group_value(group_value(stored)) == stored
    empty = StoredGroup("consumer", 6, None, None, 888, ())
    assert decode_group_value(group_value(empty)) == empty


def test_unknown_record_types_are_skipped_and_garbage_is_refused():
    assert decode_key(b"\x00\x05\x00\x01g") is None  # e.g. a newer Kafka record type
    with pytest.raises(errors.MalformedDataError):
        decode_key(b"\x00\x01\x00\x05g")
    with pytest.raises(errors.MalformedDataError):
        decode_offset_value(b"\x00\x07" + bytes(20))
    with pytest.raises(errors.MalformedDataError):
        decode_group_value(group_value(StoredGroup("consumer", 1, None, None, 1, ())) + b"x")


def test_memory_journal_satisfies_the_protocol(kit):
    assert isinstance(kit.MemoryJournal(), GroupJournal)


async def test_reload_restores_offsets_and_the_stable_group(kit, journal, clock):
    first = GroupCoordinator(journal, kit.FAST, now_ms=clock)
    first.load()
    a = await kit.join(first, instance="inst-a", client_id="app", session_ms=10_000)
    await first.sync_group("g", a.member_id, 1, group_instance_id="inst-a",
                           assignments={a.member_id: kit.assignment(t=[0, 1])})
    first.commit_offsets("g", {T0: OffsetToCommit(17, 4, "meta")}, generation_id=1,
                         member_id=a.member_id, group_instance_id="inst-a")
    first.commit_offsets("solo", {T0: OffsetToCommit(3)})
    first.close()

    second = GroupCoordinator(journal, kit.FAST, now_ms=clock)
    second.load()
    try:
        group = second.group("g")
        assert group.state is GroupState.STABLE and group.generation_id == 1
        assert group.leader_id == a.member_id and group.protocol_name == "range"
        assert group.static_members == {"inst-a": a.member_id}
        described = second.describe_group("g")
        assert described.members[0].assignment == kit.assignment(t=[0, 1])
        assert described.members[0].client_id == "app"
        fetched = second.fetch_offsets("g", [T0]).offsets[T0]
        assert (fetched.offset, fetched.leader_epoch, fetched.metadata) == (17, 4, "meta")
        assert second.fetch_offsets("solo", [T0]).offsets[T0].offset == 3
        # The member carries on with its old id and generation.
        assert second.heartbeat("g", a.member_id, 1, "inst-a") == OK
        synced = await second.sync_group("g", a.member_id, 1, group_instance_id="inst-a")
        assert synced.assignment == kit.assignment(t=[0, 1])
    finally:
        second.close()


async def test_reloaded_members_that_never_return_expire(kit, journal, clock):
    first = GroupCoordinator(journal, kit.FAST, now_ms=clock)
    first.load()
    a = await kit.join(first, session_ms=100)
    await first.sync_group("g", a.member_id, 1, assignments={})
    first.close()

    second = GroupCoordinator(journal, kit.FAST, now_ms=clock)
    second.load()
    try:
        assert second.group("g").state is GroupState.STABLE
        await kit.eventually(lambda: second.group("g").state is GroupState.EMPTY)
        assert second.group("g").generation_id == 2
    finally:
        second.close()


async def test_reload_after_deletions_sees_tombstones(kit, journal, clock):
    first = GroupCoordinator(journal, kit.FAST, now_ms=clock)
    first.load()
    first.commit_offsets("gone", {T0: OffsetToCommit(1)})
    first.commit_offsets("kept", {T0: OffsetToCommit(1), ("t", 1): OffsetToCommit(2)})
    assert first.delete_groups(["gone"]) == {"gone": OK}
    assert first.delete_offsets("kept", [T0]) == (OK, {T0: OK})
    first.close()

    second = GroupCoordinator(journal, kit.FAST, now_ms=clock)
    second.load()
    try:
        assert second.group("gone") is None
        assert list(second.fetch_offsets("kept", None).offsets) == [("t", 1)]
    finally:
        second.close()


def test_load_without_a_running_loop_defers_timers(kit, journal, clock):
    """The broker may load before its loop runs; the timers start with the first request."""
    import asyncio

    async def build_state() -> None:
        c = GroupCoordinator(journal, kit.FAST, now_ms=clock)
        c.load()
        m = await kit.join(c, session_ms=100)
        await c.sync_group("g", m.member_id, 1, assignments={})
        c.close()

    asyncio.run(build_state())
    reloaded = GroupCoordinator(journal, kit.FAST, now_ms=clock)
    reloaded.load()  # no loop here

    async def serve() -> None:
        assert reloaded.fetch_offsets("g", []).error == OK  # arms the deferred timers
        await kit.eventually(lambda: reloaded.group("g").state is GroupState.EMPTY)
        reloaded.close()

    asyncio.run(serve())
