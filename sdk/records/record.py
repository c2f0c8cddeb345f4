"""The record shape every reader (v2 batches and legacy message sets) yields."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Record"]


class Record(NamedTuple):
    """One decoded record. A tuple, so the decode loop can build it with one C call."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
