"""Control records: the single record of a batch whose isControl attribute bit is set.

Key: ``version int16 (0), type int16``. For transaction markers (ABORT, COMMIT) the value is
``version int16 (0), coordinator_epoch int32``. Types 2-6 are KRaft-internal; their values
are other schemas that clients never read, so they are left undecoded.
"""

from __future__ import annotations

import enum
import struct
from typing import NamedTuple

from sdk.records.errors import MalformedDataError

__all__ = [
    "ControlRecord",
    "ControlType",
    "decode_control_record",
    "encode_control_key",
    "encode_marker_value",
]

_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


class ControlRecord(NamedTuple):
    """A decoded control record. ``type`` stays a plain int when it is not a known type."""

    offset: int
    timestamp: int
    version: int
    type: int
    coordinator_epoch: int | None  # transaction markers only

    @property
    def is_abort(self) -> bool:
        return self.type == ControlType.ABORT

    @property
    def is_commit(self) -> bool:
        return self.type == ControlType.COMMIT


def encode_control_key(control_type: int, version: int = 0) -> bytes:
    return _KEY.pack(version, control_type)


def encode_marker_value(coordinator_epoch: int, version: int = 0) -> bytes:
    return _MARKER_VALUE.pack(version, coordinator_epoch)


def decode_control_record(
    offset: int, timestamp: int, key: bytes | None, value: bytes | None
) -> ControlRecord:
    if key is None or len(key) < _KEY.size:
        raise MalformedDataError(
            f"control record at offset {offset} has a key shorter than 4 bytes"
        )
    version, ctype = _KEY.unpack_from(key)
    if version < 0:
        raise MalformedDataError(f"control record at offset {offset} has key version {version}")
    try:
        ctype = ControlType(ctype)
    except ValueError:
        pass  # a type this client does not know (a newer broker's) stays a plain int
    epoch: int | None = None
    if ctype in (ControlType.ABORT, ControlType.COMMIT):
        if value is None or len(value) < _MARKER_VALUE.size:
            raise MalformedDataError(
                f"transaction marker at offset {offset} has a value shorter than 6 bytes"
            )
        _, epoch = _MARKER_VALUE.unpack_from(value)
    return ControlRecord(offset, timestamp, version, ctype, epoch)
