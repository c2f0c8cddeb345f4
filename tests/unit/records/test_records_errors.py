"""Bad input: every failure is a typed error naming the problem, never IndexError or a hang."""

from __future__ import annotations

import struct
import time
import zlib

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sdk.errors import MalformedDataError
from sdk.records import (
    Compression,
    CorruptRecordError,
    LegacyBatch,
    RecordBatch,
    RecordBatchBuilder,
    UnsupportedCompressionError,
    compress,
    iter_batches,
    read_batches,
)
from sdk.records._varint import encode_varint as vi
from sdk.records.header import BATCH_HEADER


def _sample(codec: int = 0) -> bytes:
    b = RecordBatchBuilder(codec)
    for i in range(20):
        b.append(None, 1000 + i, b"key%d" % i, b"value-%d" % i * 3, [("h", b"x")] if i % 4 else [])
    return b.build()


def _raw_batch(region: bytes, count: int, codec: int = 0, last_delta: int = 0) -> bytes:
    """A v2 batch around a hand-written records region, with a correct CRC."""
    if codec:
        region = compress(codec, region)
    header = bytearray(
        BATCH_HEADER.pack(0, 49 + len(region), -1, 2, 0, codec, last_delta, 0, 0, -1, -1, -1, count)
    )
    data = header + region
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


def _record(body: bytes) -> bytes:
    return vi(len(body)) + body


def _decode_all(data: bytes) -> None:
    for batch in iter_batches(data):
        batch.crc_matches()
        batch.records()
        if batch.is_control:
            try:
                batch.control_record()
            except MalformedDataError:
                pass


# --------------------------------------------------------------------------- truncation


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.name)
def test_truncated_batch_read_directly(codec: Compression) -> None:
    data = _sample(codec)
    for cut in range(len(data)):
        with pytest.raises(MalformedDataError):
            RecordBatch(data[:cut])


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.name)
def test_truncated_records_region_with_consistent_length(codec: Compression) -> None:
    """A batch whose length field was rewritten to match a cut: the records decoder must
    notice on its own (CRC checking is the caller's choice)."""
    data = _sample(codec)
    for cut in range(61, len(data)):
        short = bytearray(data[:cut])
        struct.pack_into(">i", short, 8, cut - 12)
        batch = RecordBatch(bytes(short))
        assert not batch.crc_matches()
        with pytest.raises(CorruptRecordError):
            batch.validate_crc()
        with pytest.raises(MalformedDataError):
            batch.records()


# --------------------------------------------------------------------------- fuzzing


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    codec=st.sampled_from(list(Compression)),
    edits=st.lists(
        st.tuples(st.integers(min_value=0), st.integers(0, 255)), min_size=1, max_size=4
    ),
)
def test_corrupted_bytes_raise_only_typed_errors(codec: Compression, edits: list) -> None:
    data = bytearray(_sample(codec))
    for pos, byte in edits:
        data[pos % len(data)] = byte
    try:
        _decode_all(bytes(data))
    except MalformedDataError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=0, max_size=300))
def test_arbitrary_bytes_raise_only_typed_errors(data: bytes) -> None:
    for magic in (0, 1, 2):
        buf = bytearray(data)
        if len(buf) > 16:
            buf[16] = magic
        try:
            _decode_all(bytes(buf))
        except MalformedDataError:
            pass


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=120), st.integers(min_value=-3, max_value=10**9))
def test_arbitrary_records_region(region: bytes, count: int) -> None:
    t0 = time.perf_counter()
    try:
        read_batches(_raw_batch(region, count))[0].records()
    except MalformedDataError:
        pass
    assert time.perf_counter() - t0 < 1.0  # a huge count must not loop


# --------------------------------------------------------------------------- specific faults


def test_crc_mismatch() -> None:
    data = bytearray(_sample())
    data[-1] ^= 0x01
    (batch,) = read_batches(bytes(data))
    assert not batch.crc_matches()
    with pytest.raises(CorruptRecordError, match="CRC"):
        batch.validate_crc()
    assert issubclass(CorruptRecordError, MalformedDataError)


def test_base_offset_and_leader_epoch_are_outside_the_crc() -> None:
    data = bytearray(_sample())
    data[0:8] = struct.pack(">q", 123)
    data[12:16] = struct.pack(">i", 9)
    (batch,) = read_batches(bytes(data))
    batch.validate_crc()


OK_BODY = b"\x00\x00\x00" + vi(1) + b"k" + vi(1) + b"v" + b"\x00"  # attrs, ts, offset, k, v, hc


@pytest.mark.parametrize(
    ("region", "count", "message"),
    [
        (_record(OK_BODY), 2, "claims 2 records"),
        (_record(OK_BODY) * 2, 1, "bytes follow the last"),
        (_record(OK_BODY), -1, "claims -1 records"),
        (vi(200) + OK_BODY, 1, "runs past the batch"),
        (vi(3) + b"\x00" * 10, 1, "too short"),
        (_record(b"\x00\x00\x00" + vi(-2) + vi(1) + b"v\x00"), 1, "key length -2"),
        (_record(b"\x00\x00\x00" + vi(-1) + vi(-5) + b"\x00"), 1, "value length -5"),
        (_record(b"\x00\x00\x00" + vi(-1) + vi(-1) + vi(1000)), 1, "1000 headers"),
        (
            _record(b"\x00\x00\x00" + vi(-1) + vi(-1) + vi(1) + vi(-1) + vi(-1)),
            1,
            "header key length",
        ),
        (
            _record(b"\x00\x00\x00" + vi(-1) + vi(-1) + vi(1) + vi(2) + b"\xff\xfe" + vi(-1)),
            1,
            "UTF-8",
        ),
        (
            _record(b"\x00\x00\x00" + vi(-1) + vi(-1) + vi(1) + vi(1) + b"a" + vi(-3)),
            1,
            "header value length",
        ),
        (
            _record(b"\x00\x00\x00" + vi(-1) + vi(-1) + vi(1) + vi(1) + b"a" + vi(9) + b"x"),
            1,
            "runs past",
        ),
        (vi(len(OK_BODY) + 1) + OK_BODY + b"\x00", 1, "length says"),
        (_record(b"\x00\x00\x00" + vi(5) + b"k" + vi(-1) + b"\x00"), 1, "inside a record"),
        (_record(b"\x00" + b"\xff" * 11), 1, "longer than 10"),
    ],
)
def test_malformed_records(region: bytes, count: int, message: str) -> None:
    (batch,) = read_batches(_raw_batch(region, count))
    batch.validate_crc()  # the bytes are faithfully wrong: only decoding can tell
    with pytest.raises(MalformedDataError, match=message):
        batch.records()


def test_hand_written_region_decodes() -> None:
    (batch,) = read_batches(_raw_batch(_record(OK_BODY) * 2, 2, codec=Compression.GZIP))
    assert [(r.offset, r.key, r.value) for r in batch.records()] == [(0, b"k", b"v")] * 2


def test_bad_batch_framing() -> None:
    data = bytearray(_sample())
    data[16] = 3
    with pytest.raises(MalformedDataError, match="unknown magic 3"):
        read_batches(bytes(data))
    data = bytearray(_sample())
    struct.pack_into(">i", data, 8, 10)
    with pytest.raises(MalformedDataError, match="below any format's minimum"):
        read_batches(bytes(data))
    data = bytearray(_sample())
    struct.pack_into(">i", data, 8, 30)  # legal for magic 0, too small for a v2 header
    with pytest.raises(MalformedDataError, match="declares 42 bytes"):
        read_batches(bytes(data))
    with pytest.raises(MalformedDataError, match="magic 1, not 2"):
        RecordBatch(_sample()[:16] + b"\x01" + _sample()[17:])


def test_unknown_codec() -> None:
    data = bytearray(_sample())
    data[22] = (data[22] & ~0x07) | 0x05
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    (batch,) = read_batches(bytes(data))
    batch.validate_crc()
    with pytest.raises(UnsupportedCompressionError, match="codec id 5"):
        batch.records()


def test_corrupt_compressed_region() -> None:
    data = bytearray(_sample(Compression.ZSTD))
    data[70:80] = b"\x00" * 10
    (batch,) = read_batches(bytes(data))
    with pytest.raises(MalformedDataError, match="zstd"):
        batch.records()


def test_control_record_errors() -> None:
    (batch,) = read_batches(_sample())
    with pytest.raises(MalformedDataError, match="not a control batch"):
        batch.control_record()


# --------------------------------------------------------------------------- legacy faults


def _legacy_message(
    magic: int,
    attributes: int,
    key: bytes | None,
    value: bytes | None,
    offset: int = 0,
    key_len: int | None = None,
) -> bytes:
    body = struct.pack(">bb", magic, attributes) + (struct.pack(">q", 7) if magic else b"")
    for field, n in ((key, key_len), (value, None)):
        if n is None:
            n = -1 if field is None else len(field)
        body += struct.pack(">i", n) + (field or b"")
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(msg)) + msg


def test_legacy_faults() -> None:
    good = _legacy_message(1, 0, b"k", b"v")
    (batch,) = read_batches(good)
    assert isinstance(batch, LegacyBatch) and batch.records()[0].value == b"v"
    for cut in range(len(good)):
        with pytest.raises(MalformedDataError):
            LegacyBatch(good[:cut])
    with pytest.raises(MalformedDataError, match="key length 99"):
        read_batches(_legacy_message(1, 0, b"k", b"v", key_len=99))
    with pytest.raises(MalformedDataError, match="key length -7"):
        read_batches(_legacy_message(0, 0, b"k", b"v", key_len=-7))
    with pytest.raises(MalformedDataError, match="bytes after its value"):
        bad = bytearray(good + b"\x00")
        struct.pack_into(">i", bad, 8, len(good) - 11)
        read_batches(bytes(bad))
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        read_batches(bytes(corrupt))[0].validate_crc()
    with pytest.raises(MalformedDataError, match="has no value"):
        read_batches(_legacy_message(1, 1, None, None))[0].records()
    nested = _legacy_message(1, 1, None, compress(1, _legacy_message(1, 1, None, b"x")))
    with pytest.raises(MalformedDataError, match="nests compression"):
        read_batches(nested)[0].records()
    empty = _legacy_message(1, 1, None, compress(1, b""))
    with pytest.raises(MalformedDataError, match="is empty"):
        read_batches(empty)[0].records()
    truncated_inner = _legacy_message(1, 2, None, compress(2, good[:-3]))
    with pytest.raises(MalformedDataError, match="runs 3 bytes past"):
        read_batches(truncated_inner)[0].records()
    with pytest.raises(MalformedDataError, match="no control records"):
        read_batches(good)[0].control_record()
