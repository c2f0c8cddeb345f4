"""Fixtures for the broker-core tests (helpers live in broker_kit.py)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

# --import-mode=importlib leaves sys.path alone; the tests here share broker_kit.py.
sys.path.insert(0, str(Path(__file__).parent))
from broker_kit import Served

DEFAULT_PROPERTIES = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 3}


@pytest.fixture
async def make_served(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[Served]]]:
    started: list[Served] = []

    async def make(options: dict[str, Any] | None = None, **properties: Any) -> Served:
        props = dict(DEFAULT_PROPERTIES)
        props.update({k.replace("_", "."): v for k, v in properties.items()})
        served = Served(tmp_path / f"broker{len(started)}", props, **(options or {}))
        started.append(served)
        return await served.start()

    yield make
    for served in started:
        await served.stop()


@pytest.fixture
async def served(make_served: Callable[..., Awaitable[Served]]) -> Served:
    return await make_served()
