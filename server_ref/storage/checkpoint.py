"""The partition's small state file, ``partition.checkpoint``, written atomically.

It holds what cannot be derived from the segments: the log start offset (DeleteRecords and
retention move it past the first segment's base), the recovery point (offsets below it are
known to be on disk), compaction's delete horizons, and, after a clean close, a description
of the active segment so the next open can skip recovery.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sdk.errors import KafkaStorageError

__all__ = ["CHECKPOINT_NAME", "CleanShutdown", "PartitionCheckpoint", "fsync_directory"]

CHECKPOINT_NAME = "partition.checkpoint"
_VERSION = 1


@dataclass(frozen=True)
class CleanShutdown:
    """The active segment as it was closed; recovery is skipped when the file still matches."""

    active_base_offset: int
    active_size: int
    log_end_offset: int


@dataclass
class PartitionCheckpoint:
    log_start_offset: int = 0
    recovery_point: int = 0
    clean_shutdown: CleanShutdown | None = None
    # segment base offset -> time after which that segment's tombstones may be dropped
    delete_horizons: dict[int, int] = field(default_factory=dict)
    # open transactions (producer id -> first offset) as of the recovery point
    ongoing_transactions: dict[int, int] = field(default_factory=dict)

    @classmethod
    def read(cls, directory: Path) -> PartitionCheckpoint:
        path = directory / CHECKPOINT_NAME
        try:
            raw: dict[str, Any] = json.loads(path.read_text())
        except FileNotFoundError:
            return cls()
        except (OSError, ValueError) as exc:
            raise KafkaStorageError(f"{path}: unreadable checkpoint ({exc})") from exc
        if raw.get("version") != _VERSION:
            raise KafkaStorageError(f"{path}: unknown checkpoint version {raw.get('version')!r}")
        clean = raw.get("clean_shutdown")
        return cls(
            log_start_offset=int(raw["log_start_offset"]),
            recovery_point=int(raw["recovery_point"]),
            clean_shutdown=CleanShutdown(**clean) if clean else None,
            delete_horizons={int(k): int(v) for k, v in raw.get("delete_horizons", {}).items()},
            ongoing_transactions={
                int(k): int(v) for k, v in raw.get("ongoing_transactions", {}).items()
            },
        )

    def write(self, directory: Path, *, fsync: bool) -> None:
        data = {
            "version": _VERSION,
            "log_start_offset": self.log_start_offset,
            "recovery_point": self.recovery_point,
            "clean_shutdown": self.clean_shutdown.__dict__ if self.clean_shutdown else None,
            "delete_horizons": {str(k): v for k, v in sorted(self.delete_horizons.items())},
            "ongoing_transactions": {
                str(k): v for k, v in sorted(self.ongoing_transactions.items())
            },
        }
        path = directory / CHECKPOINT_NAME
        tmp = directory / (CHECKPOINT_NAME + ".tmp")
        with open(tmp, "w") as f:
            json.dump(data, f)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
        if fsync:
            fsync_directory(directory)


def fsync_directory(directory: Path) -> None:
    """Make renames and unlinks in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
