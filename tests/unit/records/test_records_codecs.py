"""Checksums, varints and compression codecs of the record layer."""

from __future__ import annotations

import gzip
import os
import struct

import cramjam
import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from sdk.errors import MalformedDataError
from sdk.records import Compression, UnsupportedCompressionError, compress, decompress
from sdk.records._varint import ZZ, decode_varint, encode_varint, varint_size
from sdk.records.compression import _xxh32_short, fix_legacy_lz4_header

# --------------------------------------------------------------------------- CRC-32C (VECTORS §3)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"123456789", 0xE3069283),
        (b"Some String", 0x2445290F),
        (b"", 0x00000000),
        (b"a", 0xC1D04330),
        (b"\x00" * 32, 0x8A9136AA),
        (b"\xff" * 32, 0x62A8AB43),
    ],
)
def test_crc32c_vectors(data: bytes, expected: int) -> None:
    assert crc32c(data) == expected


# --------------------------------------------------------------------------- varints (VECTORS §4)

SIGNED_VECTORS = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (-65, "8101"),
    (8191, "fe7f"),
    (-8192, "ff7f"),
    (8192, "808001"),
    (1048576, "80808001"),
    (134217728, "8080808001"),
    (2147483647, "feffffff0f"),
    (-2147483648, "ffffffff0f"),
    (17179869184, "808080808001"),
    (9223372036854775807, "feffffffffffffffff01"),
    (-9223372036854775808, "ffffffffffffffffff01"),
]


@pytest.mark.parametrize(("value", "hexbytes"), SIGNED_VECTORS)
def test_varint_vectors(value: int, hexbytes: str) -> None:
    raw = bytes.fromhex(hexbytes)
    assert encode_varint(value) == raw
    assert varint_size(value) == len(raw)
    assert decode_varint(raw + b"\xaa", 0) == (value, len(raw))
    if 0 <= value < len(ZZ):
        assert ZZ[value] == raw


@given(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1))
def test_varint_round_trip(value: int) -> None:
    raw = encode_varint(value)
    assert decode_varint(raw, 0) == (value, len(raw))
    assert varint_size(value) == len(raw)


def test_varint_errors() -> None:
    with pytest.raises(MalformedDataError, match="inside a varint"):
        decode_varint(b"\x80\x80", 0)
    with pytest.raises(MalformedDataError, match="longer than 10"):
        decode_varint(b"\xff" * 11, 0)
    with pytest.raises(ValueError):
        encode_varint(1 << 63)


# --------------------------------------------------------------------------- codecs

CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
SAMPLES = [b"", b"x", b"hello kafka " * 100, os.urandom(1000), os.urandom(70_000) + bytes(200_000)]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("data", SAMPLES, ids=lambda d: f"{len(d)}B")
def test_codec_round_trip(codec: Compression, data: bytes) -> None:
    packed = compress(codec, data)
    assert isinstance(packed, bytes)
    assert decompress(codec, packed) == data


@settings(max_examples=50)
@given(st.sampled_from(CODECS), st.binary(max_size=5000))
def test_codec_round_trip_property(codec: Compression, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


def test_compression_parse() -> None:
    assert Compression.parse("gzip") is Compression.GZIP
    assert Compression.parse(" LZ4 ") is Compression.LZ4
    assert Compression.parse(None) is Compression.NONE
    assert Compression.parse(4) is Compression.ZSTD
    with pytest.raises(ValueError, match="unknown compression type"):
        Compression.parse("brotli")
    with pytest.raises(UnsupportedCompressionError):
        Compression.parse(6)
    with pytest.raises(UnsupportedCompressionError):
        decompress(5, b"")


def test_gzip_is_standard_and_reads_concatenated_members() -> None:
    data = b"abc" * 1000
    assert gzip.decompress(compress(Compression.GZIP, data)) == data
    two = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(Compression.GZIP, two) == b"first second"


def test_snappy_writes_xerial_framing() -> None:
    data = os.urandom(40_000) + bytes(40_000)  # three 32 KB chunks
    packed = compress(Compression.SNAPPY, data)
    assert packed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, chunks, out = 16, 0, b""
    while pos < len(packed):
        (n,) = struct.unpack_from(">i", packed, pos)
        out += bytes(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + n]))
        pos += 4 + n
        chunks += 1
    assert chunks == 3 and out == data


def test_snappy_reads_plain_raw_snappy() -> None:
    data = b"raw snappy " * 50
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert decompress(Compression.SNAPPY, raw) == data


def test_lz4_frame_has_independent_64k_blocks() -> None:
    packed = compress(Compression.LZ4, os.urandom(100) * 2000)
    assert packed[:4] == b"\x04\x22\x4d\x18"  # frame magic 0x184D2204, little-endian
    flg, bd = packed[4], packed[5]
    assert flg >> 6 == 1  # version 01
    assert flg & 0x20  # block independence: Java decodes each block on its own
    assert not flg & 0x08  # no content size
    assert (bd >> 4) & 0x7 == 4  # 64 KB maximum block size


def test_lz4_interoperates_with_python_lz4() -> None:
    lz4_frame = pytest.importorskip("lz4.frame")
    data = os.urandom(50) * 3000
    assert lz4_frame.decompress(compress(Compression.LZ4, data)) == data
    # python-lz4 defaults (linked blocks, content size) as kafka-python writes them
    assert decompress(Compression.LZ4, lz4_frame.compress(data)) == data


def test_xxh32_matches_lz4_header_checksums() -> None:
    lz4_frame = pytest.importorskip("lz4.frame")
    for store_size in (False, True):
        frame = lz4_frame.compress(b"abc" * 100, store_size=store_size)
        end = 6 + (8 if store_size else 0)
        assert (_xxh32_short(frame[4:end]) >> 8) & 0xFF == frame[end]


def test_fix_legacy_lz4_header() -> None:
    data = b"legacy " * 100
    good = compress(Compression.LZ4, data)
    broken = bytearray(good)
    broken[6] = (_xxh32_short(good[0:6]) >> 8) & 0xFF  # Kafka 0.8's hash covered the magic too
    if broken[6] == good[6]:
        broken[6] ^= 0xFF
    with pytest.raises(MalformedDataError):
        decompress(Compression.LZ4, bytes(broken))
    assert decompress(Compression.LZ4, fix_legacy_lz4_header(bytes(broken))) == data
    with pytest.raises(MalformedDataError):
        fix_legacy_lz4_header(b"\x04\x22")


@pytest.mark.parametrize("codec", CODECS[1:], ids=lambda c: c.name)
@pytest.mark.parametrize(
    "garbage",
    [b"", b"\x00", b"garbage data here", b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x7f"],
)
def test_bad_compressed_data_raises_typed_error(codec: Compression, garbage: bytes) -> None:
    try:
        decompress(codec, garbage)
    except MalformedDataError:
        pass  # some inputs (an empty snappy block) are valid; anything else must be typed


@pytest.mark.parametrize("codec", CODECS[1:], ids=lambda c: c.name)
def test_truncated_compressed_data_raises(codec: Compression) -> None:
    packed = compress(codec, os.urandom(5000))
    with pytest.raises(MalformedDataError):
        decompress(codec, packed[: len(packed) // 2])


def test_lz4_defaults_to_the_fast_mode() -> None:
    """Without a level, lz4 compresses in its fast mode (as librdkafka does), not cramjam's
    default high-compression level 4, which is several times slower on real payloads."""
    data = b"".join(b'{"user": %d, "page": "/p/%d"}' % (i * 7919 % 10007, i % 97)
                    for i in range(20_000))
    default = compress(Compression.LZ4, data)
    assert default == compress(Compression.LZ4, data, 0)
    assert default != compress(Compression.LZ4, data, 4)
    assert decompress(Compression.LZ4, default) == data
