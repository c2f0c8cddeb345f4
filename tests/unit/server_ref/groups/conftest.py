"""Fixtures for the group coordinator tests: an in-memory journal, a manual clock, and a
coordinator with short delays, driven directly on the test's event loop (no sockets)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Sequence

import pytest

from sdk.protocol.messages.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from server_ref.groups import GroupConfig, GroupCoordinator, JoinResult, SyncResult


class MemoryJournal:
    """A GroupJournal kept in a list; ``failing`` makes appends raise like a full disk."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []
        self.failing = False

    def append(self, key: bytes, value: bytes | None) -> None:
        if self.failing:
            raise OSError("no space left on device")
        self.records.append((key, value))

    def replay(self) -> Iterable[tuple[bytes, bytes | None]]:
        return list(self.records)


class Clock:
    """Manual wall clock (ms) for stored timestamps and retention."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


FAST = GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=10)


def subscription(*topics: str, version: int = 1) -> bytes:
    """Consumer protocol member metadata: int16 version, then the subscription struct."""
    body = ConsumerProtocolSubscription(topics=list(topics)).encode(version)
    return version.to_bytes(2, "big") + body


def assignment(**topics: Sequence[int]) -> bytes:
    body = ConsumerProtocolAssignment(assigned_partitions=[
        ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=list(p))
        for t, p in topics.items()
    ]).encode(1)
    return (1).to_bytes(2, "big") + body


def protocols(*names: str, topics: Sequence[str] = ("t",)) -> list[tuple[str, bytes]]:
    return [(name, subscription(*topics)) for name in names]


async def join(coordinator: GroupCoordinator, group: str = "g", member_id: str = "", *,
               names: Sequence[str] = ("range",), topics: Sequence[str] = ("t",),
               session_ms: int = 10_000, rebalance_ms: int = 5_000,
               instance: str | None = None, client_id: str = "client",
               require_known: bool = False, skip_assignment: bool = False,
               protocol_type: str = "consumer") -> JoinResult:
    return await coordinator.join_group(
        group, member_id, protocol_type=protocol_type,
        protocols=protocols(*names, topics=topics), session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms, group_instance_id=instance, client_id=client_id,
        client_host="/127.0.0.1", require_known_member_id=require_known,
        supports_skip_assignment=skip_assignment,
    )


def start_join(coordinator: GroupCoordinator, group: str = "g", member_id: str = "",
               **kwargs: object) -> asyncio.Task[JoinResult]:
    return asyncio.ensure_future(join(coordinator, group, member_id, **kwargs))  # type: ignore[arg-type]


def start_sync(coordinator: GroupCoordinator, result: JoinResult, group: str = "g",
               assignments: dict[str, bytes] | None = None,
               instance: str | None = None) -> asyncio.Task[SyncResult]:
    return asyncio.ensure_future(coordinator.sync_group(
        group, result.member_id, result.generation_id, assignments=assignments,
        group_instance_id=instance))


async def eventually(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait until ``predicate()`` holds (generous timeout; no timing is asserted)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


class Kit:
    """The helpers above, handed to tests as the ``kit`` fixture (with
    ``--import-mode=importlib`` test modules cannot import conftest)."""

    MemoryJournal = MemoryJournal
    FAST = FAST
    subscription = staticmethod(subscription)
    assignment = staticmethod(assignment)
    protocols = staticmethod(protocols)
    join = staticmethod(join)
    start_join = staticmethod(start_join)
    start_sync = staticmethod(start_sync)
    eventually = staticmethod(eventually)


@pytest.fixture
def kit() -> type[Kit]:
    return Kit


@pytest.fixture
def journal() -> MemoryJournal:
    return MemoryJournal()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def coordinator(journal: MemoryJournal, clock: Clock) -> AsyncIterator[GroupCoordinator]:
    c = GroupCoordinator(journal, FAST, now_ms=clock)
    c.load()
    yield c
    c.close()


@pytest.fixture
def make_coordinator(journal: MemoryJournal,
                     clock: Clock) -> Iterable[Callable[..., GroupCoordinator]]:
    """Build (and later close) coordinators with other settings over the same journal."""
    made: list[GroupCoordinator] = []

    def build(**settings: int) -> GroupCoordinator:
        config = GroupConfig(**{"initial_rebalance_delay_ms": 0, "min_session_timeout_ms": 10,
                                **settings})
        c = GroupCoordinator(journal, config, now_ms=clock)
        c.load()
        made.append(c)
        return c

    yield build
    for c in made:
        c.close()
