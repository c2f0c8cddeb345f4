"""Compression codecs for record batches, in the byte formats Kafka writes and reads.

The codec id is bits 0-2 of a batch's attributes. gzip uses the standard library; snappy, lz4
and zstd use ``cramjam``. What is Kafka-specific is the framing around the raw codecs:

- snappy: Java writes the xerial ``snappy-java`` stream (a 16-byte header, then chunks of
  ``int32 length`` + raw snappy block); some clients write plain raw snappy. We write xerial
  and read both.
- lz4: the LZ4 *frame* format with independent blocks. Java's reader decompresses each block
  on its own, so a frame with linked blocks is unreadable there once it spans two blocks.
- magic 0 message sets from Kafka 0.8/0.9 carry an lz4 frame whose header checksum was
  computed over the wrong bytes; ``fix_legacy_lz4_header`` repairs it before decoding.
"""

from __future__ import annotations

import enum
import importlib
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sdk.records.errors import MalformedDataError, UnsupportedCompressionError


class _OnFirstUse:
    """A module imported at its first attribute access, which then rebinds this module's
    global to it: a client that never meets a compressed batch never loads the codecs."""

    def __init__(self, global_name: str, module: str) -> None:
        self._global_name = global_name
        self._module = module

    def __getattr__(self, attr: str) -> Any:
        module = importlib.import_module(self._module)
        globals()[self._global_name] = module
        return getattr(module, attr)


if TYPE_CHECKING:
    import cramjam
    import lz4.frame as _lz4_frame
else:
    cramjam = _OnFirstUse("cramjam", "cramjam")
    _lz4_frame = _OnFirstUse("_lz4_frame", "lz4.frame")

# What a compressor reads (collections.abc.Buffer from Python 3.12 on).
Buffer = bytes | bytearray | memoryview

__all__ = [
    "Codec",
    "Compression",
    "compress",
    "decompress",
    "fix_legacy_lz4_header",
    "get_codec",
    "register_codec",
]


class Compression(enum.IntEnum):
    """Codec ids as stored in a batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def parse(cls, value: int | str | Compression | None) -> Compression:
        """Accept an id, a member or a Kafka config name (``"gzip"``, ``"none"``, ...)."""
        if value is None:
            return cls.NONE
        if isinstance(value, str):
            try:
                return cls[value.strip().upper()]
            except KeyError:
                names = ", ".join(m.name.lower() for m in cls)
                raise ValueError(
                    f"unknown compression type {value!r}; use one of {names}"
                ) from None
        try:
            return cls(value)
        except ValueError:
            raise UnsupportedCompressionError(f"unknown compression codec id {value}") from None


@dataclass(frozen=True)
class Codec:
    """A codec: ``compress(data, level)`` and ``decompress(data)``, both returning bytes.

    ``compress`` gets any bytes-like object: the batch builder hands it a memoryview of its
    buffer (a copy of a ~1 MB batch cost more than compressing it with lz4).

    ``quick``: compresses a batch in a fraction of a millisecond with the GIL released, so a
    producer's sending thread may go on while the sender compresses (``Sender.catch_up``).
    """

    name: str
    compress: Callable[[Buffer, int | None], bytes]
    decompress: Callable[[bytes], bytes]
    quick: bool = False


# ----------------------------------------------------------------------------- gzip

_GZIP_MAGIC = b"\x1f\x8b"


def _gzip_compress(data: Buffer, level: int | None) -> bytes:
    # wbits=31 writes a gzip header and trailer, as java.util.zip.GZIPOutputStream does.
    c = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION if level is None else level, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def _gzip_decompress(data: bytes) -> bytes:
    # Java's GZIPInputStream reads concatenated members, so we do too.
    parts: list[bytes] = []
    rest = data
    while True:
        d = zlib.decompressobj(31)
        parts.append(d.decompress(rest))
        if not d.eof:
            raise MalformedDataError("gzip stream is truncated")
        rest = d.unused_data
        if not rest.startswith(_GZIP_MAGIC):
            break
    return b"".join(parts)


# ----------------------------------------------------------------------------- snappy

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, min compatible 1
_XERIAL_CHUNK = 32 * 1024  # snappy-java's default block size
_INT32 = struct.Struct(">i")


def _snappy_compress(data: Buffer, level: int | None) -> bytes:
    parts = [_XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(data), _XERIAL_CHUNK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_CHUNK]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    if len(data) < len(_XERIAL_HEADER):
        raise MalformedDataError("xerial snappy header is truncated")
    parts: list[bytes] = []
    pos = len(_XERIAL_HEADER)
    end = len(data)
    while pos < end:
        if pos + 4 > end:
            raise MalformedDataError(f"xerial snappy chunk length at offset {pos} is truncated")
        (n,) = _INT32.unpack_from(data, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise MalformedDataError(f"xerial snappy chunk of {n} bytes runs past the data")
        parts.append(bytes(cramjam.snappy.decompress_raw(data[pos : pos + n])))
        pos += n
    return b"".join(parts)


# ----------------------------------------------------------------------------- lz4


# lz4's own default, the fast mode (librdkafka's default too). cramjam's default is 4, the
# high-compression mode: 4x slower on JSON-like records, 35x on incompressible ones.
# Levels 3 and up are the high-compression mode in both libraries.
_LZ4_DEFAULT_LEVEL = 0


def _lz4_compress(data: Buffer, level: int | None) -> bytes:
    # python-lz4 rather than cramjam here: it lets go of the GIL while it compresses (the
    # producer's calling thread goes on meanwhile) and is ~20% faster at the fast level.
    return _lz4_frame.compress(
        data, compression_level=_LZ4_DEFAULT_LEVEL if level is None else level,
        block_size=_lz4_frame.BLOCKSIZE_MAX64KB, block_linked=False,  # Java needs both
        content_checksum=False, store_size=False)


def _lz4_decompress(data: bytes) -> bytes:
    return bytes(cramjam.lz4.decompress(data))


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _xxh32_short(data: bytes) -> int:
    """XXH32 with seed 0 of fewer than 16 bytes: all an lz4 frame descriptor needs."""
    h = (_P5 + len(data)) & _M32
    pos = 0
    while pos + 4 <= len(data):
        (word,) = struct.unpack_from("<I", data, pos)
        h = (h + word * _P3) & _M32
        h = (((h << 17) | (h >> 15)) & _M32) * _P4 & _M32
        pos += 4
    for b in data[pos:]:
        h = (h + b * _P5) & _M32
        h = (((h << 11) | (h >> 21)) & _M32) * _P1 & _M32
    h ^= h >> 15
    h = h * _P2 & _M32
    h ^= h >> 13
    h = h * _P3 & _M32
    return h ^ (h >> 16)


def fix_legacy_lz4_header(data: bytes) -> bytes:
    """Rewrite the frame descriptor checksum of an lz4 frame from a magic 0 message.

    Kafka 0.8/0.9 hashed the 4 magic bytes too; the frame spec (and cramjam) hashes only the
    descriptor (FLG, BD and the optional content size).
    """
    if len(data) < 7:
        raise MalformedDataError("lz4 frame header is truncated")
    end = 6 + (8 if data[4] & 0x08 else 0)  # the descriptor, plus the content size if present
    if len(data) <= end:
        raise MalformedDataError("lz4 frame header is truncated")
    hc = (_xxh32_short(data[4:end]) >> 8) & 0xFF
    return data[:end] + bytes((hc,)) + data[end + 1 :]


# ----------------------------------------------------------------------------- zstd


def _zstd_compress(data: Buffer, level: int | None) -> bytes:
    return bytes(cramjam.zstd.compress(data, level=level))


def _zstd_decompress(data: bytes) -> bytes:
    return bytes(cramjam.zstd.decompress(data))


# ----------------------------------------------------------------------------- registry


def _identity_compress(data: Buffer, level: int | None) -> bytes:
    return bytes(data)


def _identity_decompress(data: bytes) -> bytes:
    return bytes(data)


_CODECS: dict[int, Codec] = {
    Compression.NONE: Codec("none", _identity_compress, _identity_decompress),
    Compression.GZIP: Codec("gzip", _gzip_compress, _gzip_decompress),
    Compression.SNAPPY: Codec("snappy", _snappy_compress, _snappy_decompress, quick=True),
    Compression.LZ4: Codec("lz4", _lz4_compress, _lz4_decompress, quick=True),
    Compression.ZSTD: Codec("zstd", _zstd_compress, _zstd_decompress),
}


def register_codec(codec_id: int, codec: Codec) -> None:
    """Replace the implementation of a codec id (0-7), e.g. with a faster library."""
    if not 0 <= codec_id <= 7:
        raise ValueError(f"codec id {codec_id} does not fit the 3 attribute bits")
    _CODECS[codec_id] = codec


def get_codec(codec_id: int) -> Codec:
    try:
        return _CODECS[codec_id]
    except KeyError:
        raise UnsupportedCompressionError(f"unknown compression codec id {codec_id}") from None


def compress(codec_id: int, data: Buffer, level: int | None = None) -> bytes:
    return get_codec(codec_id).compress(data, level)


def decompress(codec_id: int, data: bytes) -> bytes:
    """Decompress a records region; any codec failure becomes ``MalformedDataError``."""
    codec = get_codec(codec_id)
    try:
        return codec.decompress(data)
    except MalformedDataError:
        raise
    except Exception as exc:  # cramjam.DecompressionError, zlib.error, ...
        raise MalformedDataError(f"{codec.name} data does not decompress: {exc}") from exc
