"""Producer-state snapshots taken at each segment roll, as Kafka takes them.

``<20-digit offset>.snapshot`` in the partition directory holds the producer state as of
``offset`` (every batch below it applied): the state at the end of the segment that ends
there, which is the one uploaded with that segment to the remote tier. The log writes one at
each roll (the state comes from its ``producer_snapshot`` callable: the storage layer does
not know producers), drops those of deleted segments and those past a truncation. A
snapshot is only an optimisation of a replay of the log's batch headers: a missing or
unreadable one is rebuilt from an earlier one (or from the local log start).
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any

__all__ = [
    "SNAPSHOT_SUFFIX",
    "delete_snapshots",
    "read_snapshot",
    "snapshot_offsets",
    "write_snapshot",
]

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
_SNAPSHOT_FILE = re.compile(r"^(\d{20})\.snapshot$")


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def write_snapshot(directory: Path, offset: int, producers: dict[str, Any]) -> None:
    """Written whole then renamed (a crash leaves the old file or none, never half of one);
    not fsynced: a snapshot lost in a crash is rebuilt from the log."""
    path = snapshot_path(directory, offset)
    tmp = path.with_name(path.name + ".tmp")  # (.tmp files are removed at open)
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump({"offset": offset, "producers": producers}, fh, sort_keys=True)
    os.replace(tmp, path)


def read_snapshot(directory: Path, offset: int) -> dict[str, Any] | None:
    """The producers of the snapshot at ``offset``; None when there is none (or it cannot
    be read)."""
    path = snapshot_path(directory, offset)
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        if int(data["offset"]) != offset or not isinstance(data["producers"], dict):
            raise ValueError("not a producer snapshot of this offset")
        return data["producers"]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("ignoring unreadable producer snapshot %s: %s", path, exc)
        return None


def snapshot_offsets(directory: Path) -> list[int]:
    """Offsets of the snapshots in ``directory``, ascending."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for m in map(_SNAPSHOT_FILE.match, names) if m)


def delete_snapshots(directory: Path, *, below: int | None = None,
                     above: int | None = None) -> None:
    """Remove the snapshots at offsets < ``below`` and > ``above`` (every one when both are
    None)."""
    for offset in snapshot_offsets(directory):
        if (below is None and above is None) or (below is not None and offset < below) or \
                (above is not None and offset > above):
            snapshot_path(directory, offset).unlink(missing_ok=True)
