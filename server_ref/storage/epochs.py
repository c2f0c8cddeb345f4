"""The leader epoch cache: which leader epoch started at which offset.

Replication needs it for OffsetForLeaderEpoch: a follower asks where the leader's log for an
epoch ends and truncates to that point. Kept in ``leader-epoch-checkpoint`` in Kafka's text
format: a version line (0), an entry count line, then one "epoch start_offset" line per entry.
The file is rewritten (fsynced) on every change; changes are rare (a new leader).
"""

from __future__ import annotations

import os
from bisect import bisect_right
from pathlib import Path

from sdk.errors import KafkaStorageError
from server_ref.storage.checkpoint import fsync_directory

__all__ = ["EPOCH_CHECKPOINT_NAME", "UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET", "LeaderEpochCache"]

EPOCH_CHECKPOINT_NAME = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    """Entries (epoch, start offset), both strictly increasing."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / EPOCH_CHECKPOINT_NAME
        self._epochs: list[int] = []
        self._starts: list[int] = []
        self._load()

    def _load(self) -> None:
        try:
            lines = self.path.read_text().split("\n")
        except FileNotFoundError:
            return
        try:
            if int(lines[0]) != 0:
                raise ValueError(f"version {lines[0]}")
            count = int(lines[1])
            for line in lines[2 : 2 + count]:
                epoch, start = (int(x) for x in line.split())
                self._epochs.append(epoch)
                self._starts.append(start)
        except (ValueError, IndexError) as exc:
            raise KafkaStorageError(f"{self.path}: malformed leader epoch checkpoint ({exc})") from exc

    def _write(self) -> None:
        body = "".join(f"{e} {s}\n" for e, s in zip(self._epochs, self._starts))
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as f:
            f.write(f"0\n{len(self._epochs)}\n{body}")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fsync_directory(self.path.parent)

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts))

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Note that ``epoch`` starts at ``start_offset`` (ignored unless it is a new epoch)."""
        if epoch < 0 or (self._epochs and epoch <= self._epochs[-1]):
            return
        # An entry starting at or after this offset was written by a leader whose data the
        # log no longer holds; the new epoch supersedes it.
        while self._starts and self._starts[-1] >= start_offset:
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        self._write()

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after ``end_offset`` (the log was cut there)."""
        keep = bisect_right(self._starts, end_offset - 1)
        if keep < len(self._starts):
            del self._epochs[keep:]
            del self._starts[keep:]
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: the epoch live there starts there."""
        live = bisect_right(self._starts, start_offset) - 1
        if live < 0 or (live == 0 and self._starts[0] == start_offset):
            return
        del self._epochs[:live]
        del self._starts[:live]
        self._starts[0] = start_offset
        self._write()

    def clear(self) -> None:
        if self._epochs:
            self._epochs.clear()
            self._starts.clear()
            self._write()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= ``epoch``, offset where it ends).

        The latest epoch ends at the log end; an older one where the next epoch starts. An
        epoch above the latest, or any epoch in an empty cache, gives (-1, -1); one below the
        earliest gives (``epoch``, start of the earliest), as in Kafka.
        """
        if epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch == self._epochs[-1]:
            return epoch, log_end_offset
        higher = bisect_right(self._epochs, epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return epoch, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]
