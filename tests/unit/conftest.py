"""Fixtures shared by the unit tests: a reference broker in this process, for tests of the
network layer and the roles that need a real peer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def embedded_broker() -> Iterator[Any]:
    from server_ref import EmbeddedBroker

    broker = EmbeddedBroker(data_dir=None, port=0)
    broker.start()
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture
def control(embedded_broker: Any) -> Iterator[Any]:
    """The broker's control surface, cleared after each test."""
    yield embedded_broker.control
    embedded_broker.control.clear()
