"""Zig-zag varints specialised for the record hot path.

``sdk.protocol.primitives`` has the general encoders that append to a ``bytearray``. Records
are built and parsed millions of times per second, so here small values come from precomputed
byte strings (one list index instead of a loop) and the general forms return ``bytes`` so
callers can ``b"".join`` a whole record at once.
"""

from __future__ import annotations

from sdk.errors import MalformedDataError

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
_MASK64 = (1 << 64) - 1


def encode_varint(value: int) -> bytes:
    """Signed zig-zag varint/varlong of an int64."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"{value} does not fit a signed 64-bit varlong")
    z = ((value << 1) ^ (value >> 63)) & _MASK64
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def varint_size(value: int) -> int:
    """Bytes taken by the zig-zag varint of ``value``."""
    z = ((value << 1) ^ (value >> 63)) & _MASK64
    return (z.bit_length() + 6) // 7 or 1


def decode_varint(buf: bytes, pos: int, end: int | None = None) -> tuple[int, int]:
    """Read a signed zig-zag varint (up to 10 bytes) at ``pos``; return (value, next pos)."""
    if end is None:
        end = len(buf)
    z = 0
    shift = 0
    while True:
        if pos >= end:
            raise MalformedDataError(f"data ends inside a varint at offset {pos}")
        b = buf[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        if b < 0x80:
            return (z >> 1) ^ -(z & 1), pos
        shift += 7
        if shift >= 70:
            raise MalformedDataError(f"varint at offset {pos - 10} is longer than 10 bytes")


# Precomputed encodings of 0..SMALL-1: record lengths, key/value lengths and offset deltas of
# ordinary records all land here. Values past the table fall back to encode_varint.
SMALL = 4096
ZZ: list[bytes] = [encode_varint(i) for i in range(SMALL)]

# Attributes byte (always 0) followed by a small timestamp delta: records appended within a
# linger window mostly have deltas of a few milliseconds, so one lookup yields both fields.
TS_SMALL = 1024
ATTR_TS: list[bytes] = [b"\x00" + ZZ[i] for i in range(TS_SMALL)]

# Zig-zag decoding of a one-byte varint (values -64..63) as a table lookup.
DEC1: list[int] = [(b >> 1) ^ -(b & 1) for b in range(128)]

# First byte of a two-byte varint (high bit set) -> the low 6 bits of a non-negative value,
# or -1 when the value is negative (odd zig-zag), which the general decoder handles. The
# second byte then contributes ``c << 6``.
LOW2: list[int] = [-1] * 128 + [((b & 0x7F) >> 1) if not b & 1 else -1 for b in range(128, 256)]
