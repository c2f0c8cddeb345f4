"""Wire primitives: varints against Kafka's own test vectors, compact lengths, bounds checks.

The varint rows come from ``shared/kafka-protocol/VECTORS.md`` §4 (values asserted in Kafka's
ByteUtilsTest) when that file is present, plus a hard-coded subset so the test never runs
empty.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdk.errors import MalformedDataError
from sdk.protocol import primitives as p
from sdk.protocol.messages.api_versions import ApiVersionsRequest
from sdk.protocol.messages.metadata import MetadataRequest, MetadataResponse

ROOT = Path(__file__).resolve().parents[3]
VECTORS = ROOT.parent / "shared" / "kafka-protocol" / "VECTORS.md"

# (value, bytes) — a subset of VECTORS.md §4, kept here so the test has rows without ../shared.
UNSIGNED_SUBSET = [
    (0, "00"), (1, "01"), (63, "3f"), (64, "40"), (8191, "ff 3f"), (8192, "80 40"),
    (1048575, "ff ff 3f"), (2147483647, "ff ff ff ff 07"), (-1, "ff ff ff ff 0f"),
    (-2147483648, "80 80 80 80 08"),
]
ZIGZAG_SUBSET = [
    (0, "00"), (-1, "01"), (1, "02"), (63, "7e"), (-64, "7f"), (64, "80 01"), (-65, "81 01"),
    (2147483647, "fe ff ff ff 0f"), (-2147483648, "ff ff ff ff 0f"),
    (17179869184, "80 80 80 80 80 01"),
    (9223372036854775807, "fe ff ff ff ff ff ff ff ff 01"),
    (-9223372036854775808, "ff ff ff ff ff ff ff ff ff 01"),
]


def _parse_section_4() -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """Rows of the two tables in §4: ``| value | bytes |``. The first table is unsigned."""
    if not VECTORS.is_file():
        return [], []
    text = VECTORS.read_text(encoding="utf-8")
    start = text.index("## 4.")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end > 0 else len(text)]
    tables: list[list[tuple[int, str]]] = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not line.lstrip().startswith("|"):
            continue
        if cells[0] == "value":
            tables.append([])
            continue
        match = re.fullmatch(r"(?:varlong |varint )?(-?\d+)(?: \(0x[0-9A-Fa-f]+\))?", cells[0])
        if match is None or not re.fullmatch(r"[0-9a-f]{2}( [0-9a-f]{2})*", cells[1]):
            continue  # the --- separator row
        tables[-1].append((int(match.group(1)), cells[1]))
    assert len(tables) == 2, f"VECTORS.md §4 should hold two tables, found {len(tables)}"
    return tables[0], tables[1]


UNSIGNED_DOC, ZIGZAG_DOC = _parse_section_4()


def test_vectors_file_parsed_when_present() -> None:
    if not VECTORS.is_file():
        pytest.skip(f"{VECTORS} is absent; the hard-coded subset still runs")
    assert len(UNSIGNED_DOC) >= 12 and len(ZIGZAG_DOC) >= 17
    assert set(UNSIGNED_SUBSET) <= set(UNSIGNED_DOC)
    assert set(ZIGZAG_SUBSET) <= set(ZIGZAG_DOC)


def _ids(rows: list[tuple[int, str]]) -> list[str]:
    return [str(v) for v, _ in rows]


UNSIGNED = sorted(set(UNSIGNED_SUBSET) | set(UNSIGNED_DOC))
ZIGZAG = sorted(set(ZIGZAG_SUBSET) | set(ZIGZAG_DOC))


@pytest.mark.parametrize(("value", "hexbytes"), UNSIGNED, ids=_ids(UNSIGNED))
def test_unsigned_varint(value: int, hexbytes: str) -> None:
    expected = bytes.fromhex(hexbytes)
    as_uint32 = value & 0xFFFFFFFF  # negative rows are Java ints read as unsigned 32-bit
    w = bytearray()
    p.write_uvarint(w, as_uint32)
    assert bytes(w) == expected
    assert p.read_uvarint(expected + b"\xaa", 0) == (as_uint32, len(expected))
    assert p.read_uvarint(b"\x55" + expected, 1) == (as_uint32, 1 + len(expected))


@pytest.mark.parametrize(("value", "hexbytes"), ZIGZAG, ids=_ids(ZIGZAG))
def test_zigzag_varint(value: int, hexbytes: str) -> None:
    expected = bytes.fromhex(hexbytes)
    w = bytearray()
    p.write_varint(w, value)
    assert bytes(w) == expected
    assert p.read_varint(expected, 0) == (value, len(expected))
    assert p.varint_size(value) == len(expected)
    assert p.unzigzag(p.zigzag(value)) == value


@settings(max_examples=300, deadline=None)
@given(st.integers(-(2**63), 2**63 - 1))
def test_zigzag_round_trip_any_int64(value: int) -> None:
    w = bytearray()
    p.write_varint(w, value)
    assert p.read_varint(bytes(w), 0) == (value, len(w))
    assert p.varint_size(value) == len(w)


def test_varint_errors() -> None:
    with pytest.raises(MalformedDataError, match="ends inside a varint"):
        p.read_uvarint(b"\x80\x80", 0)
    with pytest.raises(MalformedDataError, match="ends inside a varint"):
        p.read_uvarint(b"", 0)
    with pytest.raises(MalformedDataError, match="longer than 10 bytes"):
        p.read_uvarint(b"\xff" * 11, 0)
    with pytest.raises(MalformedDataError):
        p.read_varint(b"\xff\xff", 0)


# ----------------------------------------------------------------------------- compact lengths


def test_compact_length_examples() -> None:
    w = bytearray()
    p.write_compact_string(w, None)
    assert bytes(w) == b"\x00"
    w = bytearray()
    p.write_compact_string(w, "")
    assert bytes(w) == b"\x01"
    w = bytearray()
    p.write_compact_string(w, "abc")
    assert bytes(w) == bytes.fromhex("04 61 62 63")
    w = bytearray()
    p.write_compact_array_length(w, [0] * 127)
    assert bytes(w) == bytes.fromhex("80 01")
    w = bytearray()
    p.write_compact_array_length(w, None)
    assert bytes(w) == b"\x00"
    w = bytearray()
    p.write_compact_bytes(w, b"\x00\xff")
    assert bytes(w) == bytes.fromhex("03 00 ff")


def test_compact_reads() -> None:
    assert p.read_compact_nullable_string(b"\x00", 0) == (None, 1)
    assert p.read_compact_string(b"\x01", 0) == ("", 1)
    assert p.read_compact_string(bytes.fromhex("04616263"), 0) == ("abc", 4)
    assert p.read_compact_string("é✓".encode().join([b"\x06", b""]), 0) == ("é✓", 6)
    assert p.read_compact_nullable_bytes(b"\x00", 0) == (None, 1)
    assert p.read_compact_bytes(b"\x03\x00\xff", 0) == (b"\x00\xff", 3)
    assert p.read_compact_array_length(b"\x00", 0) == (-1, 1)
    assert p.read_compact_array_length(b"\x01", 0) == (0, 1)
    assert p.read_compact_array_length(b"\x80\x01" + b"\x00" * 127, 0) == (127, 2)


def test_non_compact_encodings() -> None:
    w = bytearray()
    p.write_string(w, "é")
    assert bytes(w) == b"\x00\x02\xc3\xa9"  # the length counts UTF-8 bytes
    w = bytearray()
    p.write_string(w, None)
    assert bytes(w) == b"\xff\xff"
    w = bytearray()
    p.write_bytes(w, None)
    assert bytes(w) == b"\xff\xff\xff\xff"
    w = bytearray()
    p.write_array_length(w, None)
    assert bytes(w) == b"\xff\xff\xff\xff"
    assert p.read_nullable_string(b"\xff\xff", 0) == (None, 2)
    assert p.read_nullable_bytes(b"\xff\xff\xff\xff", 0) == (None, 4)
    assert p.read_array_length(b"\xff\xff\xff\xff", 0) == (-1, 4)


# ----------------------------------------------------------------------------- bounds


@pytest.mark.parametrize(("reader", "data"), [
    (p.read_string, b"\x00\x05abc"),
    (p.read_nullable_string, b"\x00\x05abc"),
    (p.read_compact_string, b"\x06abc"),
    (p.read_compact_nullable_string, b"\x06abc"),
    (p.read_bytes, b"\x00\x00\x00\x05abc"),
    (p.read_nullable_bytes, b"\x00\x00\x00\x05abc"),
    (p.read_compact_bytes, b"\x06abc"),
    (p.read_compact_nullable_bytes, b"\x06abc"),
    (p.read_uuid, b"\x00" * 15),
], ids=lambda x: getattr(x, "__name__", None) or "data")
def test_length_past_end_of_buffer(reader: object, data: bytes) -> None:
    with pytest.raises(MalformedDataError, match="past the end"):
        reader(data, 0)  # type: ignore[operator]


@pytest.mark.parametrize(("reader", "data", "match"), [
    (p.read_string, b"\xff\xff", "non-nullable string"),
    (p.read_string, b"\x80\x00", "non-nullable string"),
    (p.read_compact_string, b"\x00", "non-nullable compact string"),
    (p.read_bytes, b"\xff\xff\xff\xff", "non-nullable bytes"),
    (p.read_compact_bytes, b"\x00", "non-nullable compact bytes"),
])
def test_null_where_not_nullable(reader: object, data: bytes, match: str) -> None:
    with pytest.raises(MalformedDataError, match=match):
        reader(data, 0)  # type: ignore[operator]


def test_array_count_beyond_remaining_bytes() -> None:
    with pytest.raises(MalformedDataError, match="claims 5 elements"):
        p.read_array_length(b"\x00\x00\x00\x05abcd", 0)
    with pytest.raises(MalformedDataError, match="claims 2147483647 elements"):
        p.read_array_length(b"\x7f\xff\xff\xff", 0)
    with pytest.raises(MalformedDataError, match="claims 5 elements"):
        p.read_compact_array_length(b"\x06abcd", 0)
    assert p.read_array_length(b"\x00\x00\x00\x02ab", 0) == (2, 4)


def test_tagged_field_bounds() -> None:
    out: list[tuple[int, bytes]] = []
    assert p.read_unknown_tag(b"\x02ab", 0, 9, out) == 3 and out == [(9, b"ab")]
    with pytest.raises(MalformedDataError, match="tagged field 9"):
        p.read_unknown_tag(b"\x05ab", 0, 9, [])
    with pytest.raises(MalformedDataError, match="longer than its declared size"):
        p.skip_to(b"", 5, 4, "tagged field X")
    w = bytearray()
    p.write_tagged_fields(w, [(5, b"x"), (1, b"yz")])
    assert bytes(w) == bytes.fromhex("02 01 02 79 7a 05 01 78")  # written in tag order


# ----------------------------------------------------------------------------- via messages


def test_truncated_length_prefix_in_a_message_is_malformed() -> None:
    data = MetadataResponse(cluster_id="c").encode(1)
    for cut in range(len(data)):
        with pytest.raises(MalformedDataError, match="MetadataResponse v1"):
            MetadataResponse.decode(data[:cut], 1)


def test_invalid_utf8_is_malformed() -> None:
    data = ApiVersionsRequest(client_software_name="ab", client_software_version="1").encode(3)
    bad = data.replace(b"ab", b"\xff\xfe")
    with pytest.raises(MalformedDataError, match="ApiVersionsRequest v3"):
        ApiVersionsRequest.decode(bad, 3)


def test_null_count_in_non_nullable_array_is_malformed() -> None:
    # MetadataResponse.brokers is never nullable; Kafka's reader rejects a -1 count.
    # v1 layout: brokers (count -1), controller_id, topics (count 0)
    data = bytes.fromhex("ffffffff" "00000001" "00000000")
    with pytest.raises(MalformedDataError):
        MetadataResponse.decode(data, 1)


def test_non_nullable_topics_array_v0() -> None:
    # MetadataRequest v0 topics is not nullable (null = all topics only from v1).
    with pytest.raises(MalformedDataError):
        MetadataRequest.decode(b"\xff\xff\xff\xff", 0)
    assert MetadataRequest.decode(b"\xff\xff\xff\xff", 1).topics is None
