"""Interop fixtures: a reference broker subprocess per test (helpers in interop_kit.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# --import-mode=importlib leaves sys.path alone; the tests here share interop_kit.py.
sys.path.insert(0, str(Path(__file__).parent))
from interop_kit import BrokerProcess


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.interop)


@pytest.fixture
def make_broker(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    started: list[BrokerProcess] = []

    def make(**options: Any) -> BrokerProcess:
        broker = BrokerProcess(tmp_path / f"data{len(started)}", **options)
        started.append(broker)
        return broker.start()

    yield make
    for broker in started:
        broker.kill()


@pytest.fixture
def broker(make_broker: Callable[..., BrokerProcess]) -> BrokerProcess:
    return make_broker()
