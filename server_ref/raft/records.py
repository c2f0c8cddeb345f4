"""The metadata log's batches: data batches of opaque entries and KRaft's control records.

Batches are Kafka's record-batch v2 with the leader epoch stamped in
``partitionLeaderEpoch``. Control records use the layouts of Kafka's data schemas
(LeaderChangeMessage, SnapshotHeaderRecord, SnapshotFooterRecord; flexible version 0:
an int16 version first, a tagged-field section last).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass

from sdk.errors import MalformedDataError
from sdk.protocol.primitives import read_uvarint
from sdk.records.builder import RecordBatchBuilder
from sdk.records.control import ControlType, encode_control_key
from sdk.records.reader import RecordBatch

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I16_I32 = struct.Struct(">hi")
_I16_I64 = struct.Struct(">hq")
_KEY = struct.Struct(">hh")


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _voter_array(ids: Sequence[int]) -> bytes:
    # Compact array of Voter {VoterId int32, tagged fields}.
    return _uvarint(len(ids) + 1) + b"".join(_I32.pack(i) + b"\0" for i in ids)


@dataclass(frozen=True, slots=True)
class LeaderChange:
    leader_id: int
    voters: list[int]
    granting_voters: list[int]


def encode_leader_change(change: LeaderChange) -> bytes:
    return (_I16_I32.pack(0, change.leader_id) + _voter_array(change.voters)
            + _voter_array(change.granting_voters) + b"\0")


def decode_leader_change(value: bytes) -> LeaderChange:
    try:
        _version, leader = _I16_I32.unpack_from(value, 0)
        pos = _I16_I32.size
        arrays: list[list[int]] = []
        for _ in range(2):
            n, pos = read_uvarint(value, pos)
            ids = []
            for _ in range(n - 1):
                ids.append(_I32.unpack_from(value, pos)[0])
                pos += _I32.size
                tags, pos = read_uvarint(value, pos)
                if tags:
                    raise MalformedDataError("LeaderChangeMessage voter with tagged fields")
            arrays.append(ids)
    except (struct.error, IndexError) as exc:
        raise MalformedDataError(f"LeaderChangeMessage does not decode: {exc}") from exc
    return LeaderChange(leader, arrays[0], arrays[1])


def encode_snapshot_header(last_contained_timestamp: int) -> bytes:
    return _I16_I64.pack(0, last_contained_timestamp) + b"\0"


def encode_snapshot_footer() -> bytes:
    return _I16.pack(0) + b"\0"


def data_batch(base_offset: int, epoch: int, values: Sequence[bytes],
               timestamp_ms: int | None = None) -> bytes:
    """One batch holding ``values`` as record values (no keys), stamped with ``epoch``."""
    if not values:
        raise ValueError("a metadata batch needs at least one entry")
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    builder = RecordBatchBuilder(base_offset=base_offset, partition_leader_epoch=epoch)
    for value in values:
        if not isinstance(value, (bytes, bytearray)):
            raise TypeError(f"metadata entries are bytes, not {type(value).__name__}")
        builder.append(None, ts, None, bytes(value))
    return builder.build()


def control_batch(base_offset: int, epoch: int, control_type: ControlType, value: bytes,
                  timestamp_ms: int | None = None) -> bytes:
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    builder = RecordBatchBuilder(base_offset=base_offset, partition_leader_epoch=epoch,
                                 is_control=True)
    builder.append(0, ts, encode_control_key(control_type), value)
    return builder.build()


def control_type_of(batch: RecordBatch) -> int:
    """The type of a control batch's (single) record."""
    record = batch.records()[0]
    if record.key is None or len(record.key) < _KEY.size:
        raise MalformedDataError(f"control batch at {batch.base_offset} has no control key")
    return int(_KEY.unpack_from(record.key)[1])


def entry_values(batch: RecordBatch) -> list[bytes]:
    """The entries a data batch carries (control batches carry none)."""
    if batch.is_control:
        return []
    return [r.value if r.value is not None else b"" for r in batch.records()]
