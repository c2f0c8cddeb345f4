"""Opening a partition directory: finish interrupted file operations, load segments, recover.

File suffixes, as Kafka uses them:

- ``.cleaned``: compaction output being written. Not committed: deleted at open.
- ``.swap``: compaction output ready to replace the segment of the same base offset. The
  rename of ``<base>.log.cleaned`` to ``<base>.log.swap`` is the commit point; index swaps
  are renamed into place before the log swap, so a ``.log.swap`` present at open means
  "finish the replacement", and an index ``.swap`` without one means "never committed".
- ``.tmp``: a checkpoint or index file being rewritten. Deleted at open.

After a clean close the checkpoint describes the active segment; if the file still matches,
nothing is scanned. Otherwise every segment from the one holding the recovery point on is
verified batch by batch (``LogSegment.recover``): the file is cut at the first torn or
CRC-bad batch, and segments after a cut are deleted, since their offsets would follow a hole.
"""

from __future__ import annotations

import logging
import os
import re
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from server_ref.storage.checkpoint import PartitionCheckpoint, fsync_directory
from server_ref.storage.segment import LOG_SUFFIX, LogSegment

__all__ = [
    "CLEANED_SUFFIX",
    "SWAP_SUFFIX",
    "RecoveryReport",
    "finish_interrupted_operations",
    "load_segments",
]

log = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
TMP_SUFFIX = ".tmp"
DELETED_SUFFIX = ".deleted"

_SEGMENT_FILE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex)$")


@dataclass
class RecoveryReport:
    """What opening the directory had to do (for logs and tests)."""

    clean: bool = False
    segments_recovered: int = 0
    bytes_truncated: int = 0
    segments_deleted: int = 0


def finish_interrupted_operations(directory: Path) -> None:
    """Complete committed segment swaps and drop uncommitted or temporary files."""
    names = sorted(p.name for p in directory.iterdir())
    committed = {n[: -len(LOG_SUFFIX + SWAP_SUFFIX)] for n in names if n.endswith(LOG_SUFFIX + SWAP_SUFFIX)}
    changed = False
    for name in names:
        path = directory / name
        if name.endswith((CLEANED_SUFFIX, TMP_SUFFIX, DELETED_SUFFIX)):
            path.unlink(missing_ok=True)
            changed = True
        elif name.endswith(SWAP_SUFFIX) and not name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            stem = name.split(".", 1)[0]
            if stem in committed:
                os.replace(path, directory / name[: -len(SWAP_SUFFIX)])
            else:
                path.unlink(missing_ok=True)
            changed = True
    for stem in sorted(committed):
        # Index swaps are already in place (above); the log goes last, as when writing.
        os.replace(directory / f"{stem}{LOG_SUFFIX}{SWAP_SUFFIX}", directory / f"{stem}{LOG_SUFFIX}")
        log.info("%s: completed an interrupted compaction swap of segment %s", directory, stem)
        changed = True
    if changed:
        fsync_directory(directory)


def _segment_bases(directory: Path) -> list[int]:
    """Base offsets of the ``.log`` files; index files without a log are removed."""
    logs: set[int] = set()
    indexes: list[tuple[int, Path]] = []
    for path in directory.iterdir():
        m = _SEGMENT_FILE.match(path.name)
        if not m:
            continue
        base = int(m.group(1))
        if m.group(2) == LOG_SUFFIX:
            logs.add(base)
        else:
            indexes.append((base, path))
    for base, path in indexes:
        if base not in logs:
            path.unlink(missing_ok=True)
    return sorted(logs)


def load_segments(
    directory: Path,
    checkpoint: PartitionCheckpoint,
    make_segment: Callable[[int], LogSegment],
) -> tuple[list[LogSegment], RecoveryReport]:
    """Open every segment of ``directory``, recovering those that may hold unflushed data."""
    report = RecoveryReport()
    bases = _segment_bases(directory)
    segments = [make_segment(base) for base in bases]
    clean = checkpoint.clean_shutdown
    if not segments:
        report.clean = True
        return segments, report
    if (
        clean is not None
        and segments[-1].base_offset == clean.active_base_offset
        and segments[-1].size == clean.active_size
    ):
        report.clean = True
        return segments, report
    first = max(0, bisect_right(bases, checkpoint.recovery_point) - 1)
    for i in range(first, len(segments)):
        segment = segments[i]
        cut = segment.recover()
        report.segments_recovered += 1
        report.bytes_truncated += cut
        if cut:
            log.warning(
                "%s: cut %d bytes of torn or corrupt data from %s at position %d",
                directory, cut, segment.log_path.name, segment.size,
            )
            for later in segments[i + 1 :]:
                later.close()
                later.delete_files()
                report.segments_deleted += 1
            if report.segments_deleted:
                log.warning(
                    "%s: deleted %d segments after the cut", directory, report.segments_deleted
                )
            del segments[i + 1 :]
            break
    return segments, report

