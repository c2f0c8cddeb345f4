"""The compiled record loop (sdk/records/_fast.c) against the pure one, object for object.

Hypothesis builds batches (every codec, headers, null keys and values, far timestamps and
offset gaps, LogAppendTime, no leader epoch) and corrupts or truncates record bytes: both
loops must return equal records or raise MalformedDataError with the same message, and the
compiled one must never crash the interpreter. Codec decompression stays in Python: the
compiled loop only sees the decompressed record bytes.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sdk.consumer.partition_records import PartitionRecords
from sdk.records import (
    ControlType,
    MalformedDataError,
    RecordBatch,
    RecordBatchBuilder,
    build_control_batch,
    consumer_records,
    fast_path,
    patch_batch,
)
from sdk.records import builder as builder_module
from sdk.records._varint import encode_varint
from sdk.types import ConsumerRecord, ShareConsumerRecord, TimestampType, TopicPartition

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
BASE_TS = 1_700_000_000_000
PURE = consumer_records._decode_pure
_loaded = fast_path.load_compiled()


def _missing(*_: Any) -> list[Any]:
    raise AssertionError("unreachable: the fixture below fails the test first")


COMPILED: Callable[..., list[Any]] = _loaded or _missing


@pytest.fixture(autouse=True)
def _compiled_module_built() -> None:
    """Every test here needs the compiled module; without it each fails (not skips), saying
    what is missing, and the rest of the suite still runs."""
    if _loaded is None or fast_path.load_compiled_encoder() is None:
        pytest.fail("sdk.records._fast is not built or stale (pip install -e . with a C "
                    "compiler)", pytrace=False)

HYP = settings(max_examples=int(os.environ.get("FAST_PATH_EXAMPLES", "150")), deadline=None, suppress_health_check=[HealthCheck.too_slow])

header = st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=80))
record = st.tuples(
    st.integers(0, 5000),                                   # offset gap
    st.integers(-(10**10), 10**10),                         # timestamp delta
    st.none() | st.binary(max_size=200),                    # key
    st.none() | st.binary(max_size=9000),                   # value
    st.lists(header, max_size=3),
)


def _batch(codec: str, records: list[tuple[Any, ...]], base_offset: int, epoch: int,
           log_append_time: int | None) -> RecordBatch:
    b = RecordBatchBuilder(codec)
    delta = -1
    for gap, td, key, value, headers in records:
        delta += 1 + gap
        b.append(delta, BASE_TS + td, key, value, headers)
    data = bytearray(b.build())
    patch_batch(data, base_offset=base_offset, partition_leader_epoch=epoch,
                log_append_time_ms=log_append_time)
    return RecordBatch(bytes(data))


def _both(loop_args: tuple[Any, ...]) -> tuple[Any, Any]:
    """Each loop's result, or its exception as (type, message)."""
    out = []
    for loop in (PURE, COMPILED):
        try:
            out.append(loop(*loop_args))
        except MalformedDataError as exc:
            out.append((type(exc), str(exc)))
    return out[0], out[1]


def _decode_with(loop: Callable[..., list[Any]] | None, batch: RecordBatch,
                 cls: type[ConsumerRecord] = ConsumerRecord) -> list[ConsumerRecord]:
    saved = consumer_records._compiled
    consumer_records._compiled = loop
    try:
        return consumer_records.decode_consumer_records(batch, "orders", 7, cls)
    finally:
        consumer_records._compiled = saved


def _same(pure: list[ConsumerRecord], compiled: list[ConsumerRecord]) -> None:
    assert compiled == pure
    for p, c in zip(pure, compiled, strict=True):
        assert type(c) is type(p)
        assert type(c.key) is type(p.key) and type(c.value) is type(p.value)
        assert c.timestamp_type is p.timestamp_type
        assert all(type(h) is tuple and type(h[0]) is str for h in c.headers)
    assert len({id(r.headers) for r in compiled}) == len(compiled)


@HYP
@given(codec=st.sampled_from(CODECS), records=st.lists(record, max_size=40),
       base_offset=st.integers(0, 2**62), epoch=st.integers(-1, 2**31 - 1),
       log_append=st.booleans())
def test_every_codec_same_records(codec: str, records: list[tuple[Any, ...]], base_offset: int,
                                  epoch: int, log_append: bool) -> None:
    batch = _batch(codec, records, base_offset, epoch, BASE_TS + 5 if log_append else None)
    _same(_decode_with(None, batch), _decode_with(COMPILED, batch))


def test_compiled_records_stay_out_of_the_cyclic_collector() -> None:
    """Records and headers hold atomic values only: the compiled loop untracks them (every
    collection while records were buffered traversed them all), and reference counting
    alone frees them."""
    import gc
    import weakref

    batch = _batch("none", [(0, 1, b"k", b"v", [("h", b"x")]), (0, 2, None, None, [])], 0, 0,
                   None)
    records = _decode_with(COMPILED, batch)
    assert not any(gc.is_tracked(r) or gc.is_tracked(r.headers) for r in records)
    assert records == _decode_with(None, batch)

    class Value:  # a deserializer's object: weakly referenceable, tracked as usual
        pass

    value = Value()
    records[0].value = value
    gone = weakref.ref(value)
    del value, records
    assert gone() is None  # freed with the list, no collection needed


def test_share_records_are_built_as_the_subclass() -> None:
    batch = _batch("lz4", [(0, 1, b"k", b"v", [("h", None)])] * 3, 10, 2, None)
    pure = _decode_with(None, batch, ShareConsumerRecord)
    compiled = _decode_with(COMPILED, batch, ShareConsumerRecord)
    assert all(type(r) is ShareConsumerRecord for r in compiled)
    # the subclass's own slot is the caller's to set, on both paths
    for rec in (*pure, *compiled):
        assert isinstance(rec, ShareConsumerRecord)
        rec.delivery_count = 2
    _same(pure, compiled)


def test_ten_byte_varints_and_int64_edges() -> None:
    """A timestamp delta that needs ten bytes, and offsets at the int64 edge: the compiled
    loop rebuilds values past int64 as Python ints, as the pure one computes them."""
    rec = (b"\x00" + encode_varint(-(2**63)) + encode_varint(2**62) + b"\x01" + b"\x01" + b"\x00")
    data = encode_varint(len(rec)) + rec
    for base in (0, 2**63 - 1, -(2**63)):
        args = (data, 0, len(data), 1, base, 2**63 - 1, "t", 0, TimestampType.CREATE_TIME,
                None, ConsumerRecord)
        pure, compiled = _both(args)
        assert pure == compiled
        assert pure[0].timestamp == 2**63 - 1 - 2**63 and pure[0].offset == base + 2**62


def test_control_batches_decode_alike() -> None:
    for kind in (ControlType.COMMIT, ControlType.ABORT):
        batch = RecordBatch(build_control_batch(kind, 9, 1, 3, timestamp_ms=BASE_TS,
                                                base_offset=40, partition_leader_epoch=5))
        assert batch.is_control
        _same(_decode_with(None, batch), _decode_with(COMPILED, batch))


def _legacy_message(offset: int, value: bytes, magic: int) -> bytes:
    body = bytes([magic, 0]) + (struct.pack(">q", BASE_TS) if magic else b"")
    body += struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(msg)) + msg


def test_legacy_message_sets_take_the_pure_path() -> None:
    """Magic 0/1 message sets never reach either loop; a fetch mixing them with v2 batches
    gives the same records whichever loop decodes the v2 part."""
    v2 = bytearray(_batch("gzip", [(0, 3, b"k", b"new", [])] * 2, 0, 1, None).to_bytes())
    patch_batch(v2, base_offset=2)
    data = _legacy_message(0, b"old", 0) + _legacy_message(1, b"older", 1) + bytes(v2)
    got = []
    for loop in (None, COMPILED):
        saved = consumer_records._compiled
        consumer_records._compiled = loop
        try:
            part = PartitionRecords(TopicPartition("t", 0), 0, data)
            got.append(part.drain(100))
        finally:
            consumer_records._compiled = saved
    assert [r.value for r in got[0]] == [b"old", b"older", b"new", b"new"]
    assert got[0] == got[1]


@HYP
@given(records=st.lists(record, min_size=1, max_size=8), data=st.data())
def test_corrupt_and_truncated_records_fail_alike(records: list[tuple[Any, ...]],
                                                  data: st.DataObject) -> None:
    batch = _batch("none", records, 100, 3, None)
    raw, start, end = batch.record_bytes()
    body = bytearray(raw[start:end])
    for _ in range(data.draw(st.integers(0, 4))):  # overwrite a few bytes
        i = data.draw(st.integers(0, len(body) - 1))
        body[i] = data.draw(st.integers(0, 255))
    body = body[: data.draw(st.integers(0, len(body)))]  # and cut it somewhere
    pad = data.draw(st.sampled_from([b"", b"\x00" * 3, b"\xff" * 12]))  # bytes past `end`
    buf = b"\x07" * 5 + bytes(body) + pad
    count = len(records) + data.draw(st.integers(-1, 2))
    args = (buf, 5, 5 + len(body), max(count, 0), 100, BASE_TS, "t", 0,
            TimestampType.CREATE_TIME, 3, ConsumerRecord)
    pure, compiled = _both(args)
    assert pure == compiled


@HYP
@given(body=st.binary(max_size=300), count=st.integers(0, 40))
def test_random_bytes_fail_alike(body: bytes, count: int) -> None:
    args = (body, 0, len(body), count, 0, 0, "t", 0, TimestampType.CREATE_TIME, None,
            ConsumerRecord)
    pure, compiled = _both(args)
    assert pure == compiled


def test_header_key_not_utf8_same_message() -> None:
    rec = b"\x00\x00\x00" + b"\x01" + b"\x01" + b"\x02" + b"\x02\xff" + b"\x01"
    data = encode_varint(len(rec)) + rec
    args = (data, 0, len(data), 1, 0, 0, "t", 0, TimestampType.CREATE_TIME, None,
            ConsumerRecord)
    pure, compiled = _both(args)
    assert pure == compiled
    assert pure[0] is MalformedDataError and "not UTF-8" in pure[1]


def test_bad_arguments_are_type_errors() -> None:
    with pytest.raises(TypeError, match="reads bytes"):
        COMPILED(bytearray(b"\x00"), 0, 1, 0, 0, 0, "t", 0, TimestampType.CREATE_TIME,
                 None, ConsumerRecord)
    with pytest.raises(TypeError, match="subclass"):
        COMPILED(b"", 0, 0, 0, 0, 0, "t", 0, TimestampType.CREATE_TIME, None, dict)
    with pytest.raises(ValueError, match="outside"):
        COMPILED(b"", 0, 5, 0, 0, 0, "t", 0, TimestampType.CREATE_TIME, None,
                 ConsumerRecord)


@pytest.mark.parametrize(("env", "want"), [("1", "pure"), ("", "compiled")])
def test_environment_variable_forces_the_pure_path(env: str, want: str) -> None:
    code = ("from sdk.records import fast_path, consumer_records as c, builder as b; "
            "print(fast_path.IMPLEMENTATION, c._compiled is None, b._fast_encode is None)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "KAFKA_SDK_PURE_PYTHON": env}, check=True,
                         cwd=Path(consumer_records.__file__).parents[2])
    assert out.stdout.split() == [want, str(want == "pure"), str(want == "pure")]


# ---------------------------------------------------------------- producer: bulk encoding

_ENCODER = fast_path.load_compiled_encoder()
values_strategy = st.one_of(
    st.integers(0, 5000).flatmap(lambda n: st.lists(st.just(b"v" * n), min_size=1,
                                                    max_size=300)),  # uniform sizes
    st.lists(st.binary(max_size=9000), min_size=1, max_size=60),
)


def _append_with(encoder: Callable[..., Any] | None, calls: list[tuple[list[bytes], list[int]]],
                 max_bytes: int, codec: str, buffer: bytearray | None) -> tuple[Any, ...]:
    saved = builder_module._fast_encode
    builder_module._fast_encode = encoder
    try:
        b = RecordBatchBuilder(codec, buffer=None if buffer is None else bytearray(buffer))
        reached = [b.append_values(values, stamps, 0, len(values), max_bytes)
                   for values, stamps in calls]
        state = (b.record_count, b.base_timestamp, b.max_timestamp, b.last_offset_delta)
        return reached, state, b.build() if b.record_count else None
    finally:
        builder_module._fast_encode = saved


@HYP
@given(calls=st.lists(values_strategy, min_size=1, max_size=3), data=st.data(),
       max_bytes=st.sampled_from([100, 4000, 16384, 1 << 20]),
       codec=st.sampled_from(CODECS), recycled=st.booleans())
def test_append_values_same_bytes(calls: list[list[bytes]], data: st.DataObject,
                                  max_bytes: int, codec: str, recycled: bool) -> None:
    """append_values through the compiled loop writes the same batch as the pure loop:
    same records taken, same state, byte-for-byte the same built batch (also over a
    recycled buffer holding garbage, and over several calls)."""
    assert _ENCODER is not None
    with_stamps = []
    for values in calls:
        kind = data.draw(st.sampled_from(["same", "sorted", "any"]))
        if kind == "same":
            stamps = [BASE_TS] * len(values)
        else:
            stamps = [BASE_TS + data.draw(st.integers(-(10**6), 10**12)) for _ in values]
            if kind == "sorted":
                stamps.sort()
        with_stamps.append((values, stamps))
    buffer = bytearray(b"\xee" * 70_000) if recycled else None
    pure = _append_with(None, with_stamps, max_bytes, codec, buffer)
    compiled = _append_with(_ENCODER, with_stamps, max_bytes, codec, buffer)
    assert compiled == pure


def test_append_values_falls_back_on_inputs_it_leaves_to_the_pure_loop() -> None:
    """A value that is not bytes, a timestamp past int64: the pure loop decides (the same
    batch, or the same error), whichever loop is installed."""
    assert _ENCODER is not None
    buf = bytearray(61)
    assert _ENCODER(buf, 61, [bytearray(b"x")], [0], 0, 1, 1000, 0, 0, 0) is None
    assert _ENCODER(buf, 61, [b"x"], [2**63], 0, 1, 1000, 0, 0, 0) is None
    mixed = ([b"a", bytearray(b"b"), b"c"], [BASE_TS] * 3)
    assert (_append_with(_ENCODER, [mixed], 1 << 20, "none", None)
            == _append_with(None, [mixed], 1 << 20, "none", None))
    for encoder in (None, _ENCODER):
        with pytest.raises(ValueError, match="64-bit"):
            _append_with(encoder, [([b"a", b"b"], [0, 2**64])], 1 << 20, "none", None)
    with pytest.raises(TypeError):
        _ENCODER(bytes(61), 61, [b"x"], [0], 0, 1, 1000, 0, 0, 0)
    with pytest.raises(ValueError, match="out of range"):
        _ENCODER(buf, 61, [b"x"], [0], 0, 5, 1000, 0, 0, 0)
