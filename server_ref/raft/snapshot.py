"""Snapshots of the metadata state machine, as Kafka lays them out.

A snapshot is named by its id ``(end offset, epoch)``: it holds the state after every entry
below ``end offset`` (exclusive), and ``epoch`` is the epoch of the last entry it covers.
The file ``<end offset>-<epoch>.checkpoint`` is record batches: a SnapshotHeaderRecord
control batch, the payload cut into records of at most 512 KB, a SnapshotFooterRecord
control batch. Downloads (FetchSnapshot) go to ``.part`` and are renamed when complete.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from sdk.errors import MalformedDataError
from sdk.records.control import ControlType
from sdk.records.reader import RecordBatch, iter_batches
from server_ref.raft.records import (
    control_batch,
    control_type_of,
    data_batch,
    encode_snapshot_footer,
    encode_snapshot_header,
    entry_values,
)

_CHUNK = 512 * 1024
_NAME = re.compile(r"(\d{20})-(\d{10})\.checkpoint")


@dataclass(frozen=True, slots=True, order=True)
class SnapshotId:
    end_offset: int
    epoch: int

    @property
    def file_name(self) -> str:
        return f"{self.end_offset:020d}-{self.epoch:010d}.checkpoint"


class SnapshotStore:
    def __init__(self, directory: Path, *, fsync: bool = False) -> None:
        self.directory = directory
        self.fsync = fsync
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.part"):
            stale.unlink()

    def ids(self) -> list[SnapshotId]:
        out = []
        for path in self.directory.iterdir():
            m = _NAME.fullmatch(path.name)
            if m:
                out.append(SnapshotId(int(m.group(1)), int(m.group(2))))
        return sorted(out)

    def latest(self) -> SnapshotId | None:
        ids = self.ids()
        return ids[-1] if ids else None

    def path(self, sid: SnapshotId) -> Path:
        return self.directory / sid.file_name

    # ------------------------------------------------------------------ writing

    def write(self, sid: SnapshotId, payload: bytes, last_timestamp: int) -> None:
        """Write the snapshot ``sid`` and delete the older ones."""
        parts = [control_batch(0, sid.epoch, ControlType.SNAPSHOT_HEADER,
                               encode_snapshot_header(last_timestamp), last_timestamp)]
        offset = 1
        chunks = [payload[i:i + _CHUNK] for i in range(0, len(payload), _CHUNK)] or [b""]
        parts.append(data_batch(offset, sid.epoch, chunks, last_timestamp))
        offset += len(chunks)
        parts.append(control_batch(offset, sid.epoch, ControlType.SNAPSHOT_FOOTER,
                                   encode_snapshot_footer(), last_timestamp))
        self._install(sid, b"".join(parts))

    def _install(self, sid: SnapshotId, data: bytes) -> None:
        tmp = self.directory / (sid.file_name + ".part")
        with open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            if self.fsync:
                os.fsync(out.fileno())
        os.replace(tmp, self.path(sid))
        for old in self.ids():
            if old < sid:
                self.path(old).unlink(missing_ok=True)

    # ------------------------------------------------------------------ reading

    def size(self, sid: SnapshotId) -> int:
        return self.path(sid).stat().st_size

    def read_chunk(self, sid: SnapshotId, position: int, max_bytes: int) -> bytes:
        with open(self.path(sid), "rb") as f:
            return os.pread(f.fileno(), max_bytes, position)

    def payload(self, sid: SnapshotId) -> bytes:
        return decode_snapshot(self.path(sid).read_bytes())

    # ------------------------------------------------------------------ downloading

    def write_part(self, sid: SnapshotId, position: int, data: bytes) -> int:
        """Write a downloaded chunk at ``position``; returns the bytes now held."""
        part = self.directory / (sid.file_name + ".part")
        if position == 0:
            part.write_bytes(b"")
        with open(part, "r+b") as f:
            if position != f.seek(0, os.SEEK_END):
                raise MalformedDataError(f"snapshot chunk at {position} leaves a gap")
            f.write(data)
            return f.tell()

    def finish_part(self, sid: SnapshotId) -> bytes:
        """Check the downloaded file, install it and return its payload."""
        part = self.directory / (sid.file_name + ".part")
        data = part.read_bytes()
        payload = decode_snapshot(data)  # raises on a bad download
        self._install(sid, data)
        part.unlink(missing_ok=True)
        return payload


def decode_snapshot(data: bytes) -> bytes:
    """The payload of a snapshot file, after checking its header, CRCs and footer."""
    batches = list(iter_batches(data))
    if len(batches) < 2:
        raise MalformedDataError("a snapshot needs a header and a footer batch")
    payload = bytearray()
    for i, batch in enumerate(batches):
        if not isinstance(batch, RecordBatch):
            raise MalformedDataError("snapshot batches are record batch v2")
        batch.validate_crc()
        if i in (0, len(batches) - 1):
            want = ControlType.SNAPSHOT_HEADER if i == 0 else ControlType.SNAPSHOT_FOOTER
            if not batch.is_control or control_type_of(batch) != want:
                raise MalformedDataError(f"snapshot batch {i} is not a {want.name} record")
        else:
            for value in entry_values(batch):
                payload += value
    return bytes(payload)
