"""Wire primitives shared by the generated message codecs and the record batch code.

Decoders work on a buffer (``bytes`` or ``memoryview``) and a position and return
``(value, new_position)``; encoders append to a ``bytearray``. Fixed-width fields are
packed by precompiled ``struct.Struct`` objects in the generated modules, so this file
only holds the variable-length encodings and their bounds checks.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from sdk.errors import MalformedDataError, UnsupportedVersionError

Buffer = Any  # bytes | bytearray | memoryview; kept loose so memoryview slices pass mypy

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")
BOOL = struct.Struct(">?")

ZERO_UUID = uuid.UUID(int=0)

# ----------------------------------------------------------------------------- varints


def write_uvarint(w: bytearray, value: int) -> None:
    """Append an unsigned varint (7 bits per byte, least significant group first)."""
    value &= 0xFFFFFFFFFFFFFFFF
    while value > 0x7F:
        w.append((value & 0x7F) | 0x80)
        value >>= 7
    w.append(value)


def read_uvarint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Read an unsigned varint of at most 10 bytes."""
    result = 0
    shift = 0
    try:
        while True:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result, pos
            shift += 7
            if shift > 63:
                raise MalformedDataError("varint is longer than 10 bytes")
    except IndexError:
        raise MalformedDataError("buffer ends inside a varint") from None


def zigzag(value: int) -> int:
    """Map a signed int64 onto the unsigned zig-zag space."""
    return ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF


def unzigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def write_varint(w: bytearray, value: int) -> None:
    """Append a signed zig-zag varint/varlong (used inside records)."""
    write_uvarint(w, zigzag(value))


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    raw, pos = read_uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def varint_size(value: int) -> int:
    """Bytes a signed zig-zag varint of ``value`` takes."""
    v = zigzag(value)
    size = 1
    while v > 0x7F:
        v >>= 7
        size += 1
    return size


# ----------------------------------------------------------------------------- checks


def _need(buf: Buffer, pos: int, n: int, what: str) -> int:
    end = pos + n
    if n < 0 or end > len(buf):
        raise MalformedDataError(
            f"{what} of {n} bytes at offset {pos} runs past the end of the {len(buf)}-byte buffer"
        )
    return end


# ----------------------------------------------------------------------------- strings


def read_string(buf: Buffer, pos: int) -> tuple[str, int]:
    (n,) = INT16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        raise MalformedDataError(f"non-nullable string has length {n}")
    end = _need(buf, pos, n, "string")
    return str(buf[pos:end], "utf-8"), end


def read_nullable_string(buf: Buffer, pos: int) -> tuple[str | None, int]:
    (n,) = INT16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        return None, pos
    end = _need(buf, pos, n, "string")
    return str(buf[pos:end], "utf-8"), end


def read_compact_string(buf: Buffer, pos: int) -> tuple[str, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        raise MalformedDataError("non-nullable compact string is null")
    end = _need(buf, pos, n - 1, "compact string")
    return str(buf[pos:end], "utf-8"), end


def read_compact_nullable_string(buf: Buffer, pos: int) -> tuple[str | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = _need(buf, pos, n - 1, "compact string")
    return str(buf[pos:end], "utf-8"), end


def write_string(w: bytearray, value: str | None) -> None:
    if value is None:
        w += b"\xff\xff"
        return
    data = value.encode()
    w += INT16.pack(len(data))
    w += data


def write_compact_string(w: bytearray, value: str | None) -> None:
    if value is None:
        w.append(0)
        return
    data = value.encode()
    write_uvarint(w, len(data) + 1)
    w += data


# ----------------------------------------------------------------------------- bytes


def read_bytes(buf: Buffer, pos: int) -> tuple[bytes, int]:
    (n,) = INT32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        raise MalformedDataError(f"non-nullable bytes field has length {n}")
    end = _need(buf, pos, n, "bytes field")
    return bytes(buf[pos:end]), end


def read_nullable_bytes(buf: Buffer, pos: int) -> tuple[bytes | None, int]:
    (n,) = INT32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    end = _need(buf, pos, n, "bytes field")
    return bytes(buf[pos:end]), end


def read_compact_bytes(buf: Buffer, pos: int) -> tuple[bytes, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        raise MalformedDataError("non-nullable compact bytes field is null")
    end = _need(buf, pos, n - 1, "compact bytes field")
    return bytes(buf[pos:end]), end


def read_compact_nullable_bytes(buf: Buffer, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = _need(buf, pos, n - 1, "compact bytes field")
    return bytes(buf[pos:end]), end


def write_bytes(w: bytearray, value: Buffer | None) -> None:
    if value is None:
        w += b"\xff\xff\xff\xff"
        return
    w += INT32.pack(len(value))
    w += value


def write_compact_bytes(w: bytearray, value: Buffer | None) -> None:
    if value is None:
        w.append(0)
        return
    write_uvarint(w, len(value) + 1)
    w += value


# ----------------------------------------------------------------------------- arrays


def read_array_length(buf: Buffer, pos: int) -> tuple[int, int]:
    """int32 element count; -1 is null. Guards against counts the buffer cannot hold."""
    (n,) = INT32.unpack_from(buf, pos)
    pos += 4
    if n > len(buf) - pos:
        raise MalformedDataError(f"array claims {n} elements but only {len(buf) - pos} bytes remain")
    return n, pos


def read_compact_array_length(buf: Buffer, pos: int) -> tuple[int, int]:
    """Unsigned varint of count + 1; returns -1 for null."""
    n, pos = read_uvarint(buf, pos)
    n -= 1
    if n > len(buf) - pos:
        raise MalformedDataError(f"array claims {n} elements but only {len(buf) - pos} bytes remain")
    return n, pos


def write_array_length(w: bytearray, value: list[Any] | None) -> None:
    w += INT32.pack(-1 if value is None else len(value))


def write_compact_array_length(w: bytearray, value: list[Any] | None) -> None:
    write_uvarint(w, 0 if value is None else len(value) + 1)


# ----------------------------------------------------------------------------- uuid


def read_uuid(buf: Buffer, pos: int) -> tuple[uuid.UUID, int]:
    end = _need(buf, pos, 16, "uuid")
    return uuid.UUID(bytes=bytes(buf[pos:end])), end


def write_uuid(w: bytearray, value: uuid.UUID) -> None:
    w += value.bytes


# ----------------------------------------------------------------------------- tagged fields


def read_unknown_tag(buf: Buffer, pos: int, tag: int, out: list[tuple[int, bytes]]) -> int:
    """Keep the raw bytes of a tag this version does not know, for re-encoding."""
    size, pos = read_uvarint(buf, pos)
    end = _need(buf, pos, size, f"tagged field {tag}")
    out.append((tag, bytes(buf[pos:end])))
    return end


def write_tagged_fields(w: bytearray, tags: list[tuple[int, bytes]]) -> None:
    """Write a tagged-field section; ``tags`` holds (tag, encoded value) pairs."""
    if not tags:
        w.append(0)
        return
    tags.sort(key=lambda t: t[0])
    write_uvarint(w, len(tags))
    for tag, data in tags:
        write_uvarint(w, tag)
        write_uvarint(w, len(data))
        w += data


def skip_to(buf: Buffer, pos: int, end: int, what: str) -> int:
    """After decoding a known tagged field, continue exactly at the end its size gave."""
    if pos > end:
        raise MalformedDataError(f"{what} is longer than its declared size")
    return end


# ----------------------------------------------------------------------------- strict variants
# Generated encoders use these for fields that are not nullable at the version being written,
# so a None is refused at the sender instead of producing bytes the peer rejects. They take
# ``X | None`` because a field nullable in some versions is typed so on its class.


def _null_refused(what: str) -> MalformedDataError:
    return MalformedDataError(f"None given for a non-nullable {what}")


def write_required_string(w: bytearray, value: str | None) -> None:
    if value is None:
        raise _null_refused("string")
    write_string(w, value)


def write_required_compact_string(w: bytearray, value: str | None) -> None:
    if value is None:
        raise _null_refused("string")
    write_compact_string(w, value)


def write_required_bytes(w: bytearray, value: Buffer | None) -> None:
    if value is None:
        raise _null_refused("bytes field")
    write_bytes(w, value)


def write_required_compact_bytes(w: bytearray, value: Buffer | None) -> None:
    if value is None:
        raise _null_refused("bytes field")
    write_compact_bytes(w, value)


def write_required_array_length(w: bytearray, value: list[Any] | None) -> None:
    if value is None:
        raise _null_refused("array")
    w += INT32.pack(len(value))


def write_required_compact_array_length(w: bytearray, value: list[Any] | None) -> None:
    if value is None:
        raise _null_refused("array")
    write_uvarint(w, len(value) + 1)


def read_required_array_length(buf: Buffer, pos: int) -> tuple[int, int]:
    n, pos = read_array_length(buf, pos)
    if n < 0:
        raise MalformedDataError("non-nullable array is null")
    return n, pos


def read_required_compact_array_length(buf: Buffer, pos: int) -> tuple[int, int]:
    n, pos = read_compact_array_length(buf, pos)
    if n < 0:
        raise MalformedDataError("non-nullable array is null")
    return n, pos


def refuse_absent_field(message: str, field: str, version: int) -> None:
    """A non-ignorable field set to a non-default value cannot be sent at this version."""
    raise UnsupportedVersionError(
        f"{message}.{field} is set but does not exist in version {version}; "
        "use a version that has it or leave it at its default"
    )
