"""murmur2 and the partitioners, checked against VECTORS.md and kafka-python."""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sdk.producer.partitioner import (
    CallablePartitioner,
    DefaultPartitioner,
    KeyHashPartitioner,
    Partitioner,
    RoundRobinPartitioner,
    UniformStickyPartitioner,
    _murmur2_unsigned_py,
    default_partition,
    make_partitioner,
    murmur2,
)

VECTORS = Path(__file__).resolve().parents[4] / "shared" / "kafka-protocol" / "VECTORS.md"

# A hard-coded subset of VECTORS.md, so the rules are checked even without ../shared.
MURMUR2_KNOWN = [
    (b"21", -973932308),  # the first six are asserted by Kafka's UtilsTest
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
    (b"", 275646681),
    (b"\x00\x00\x00\x00", 850957120),
]
PARTITION_KNOWN = [  # key, num_partitions, partition
    (b"21", 100, 40),  # negative hash: the mask gives 40 where abs() would give 8
    (b"foobar", 16, 14),
    (b"a-little-bit-longer-string", 12, 11),
    (b"", 10, 1),
    (b"user-42", 100, 60),
]


# ------------------------------------------------------------------------ VECTORS.md parsing


def _section(text: str, number: int) -> list[list[str]]:
    """The table rows (as cell lists, header included) of section `## <number>.`."""
    match = re.search(rf"^## {number}\.(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"section {number} not found in {VECTORS}"
    rows = [line.strip() for line in match.group(1).splitlines() if line.startswith("|")]
    return [[c.strip() for c in row.strip("|").split("|")] for row in rows if "---" not in row]


def _input_bytes(cell: str) -> bytes:
    if cell.startswith("*(empty"):
        return b""
    quoted = re.search(r"`([^`]*)`", cell)
    assert quoted, cell
    if cell.startswith("bytes "):
        return bytes.fromhex(quoted.group(1))
    return quoted.group(1).encode("ascii")


def _load_vectors() -> tuple[list[tuple[bytes, int, int]], list[tuple[bytes, int, int, int]]]:
    if not VECTORS.exists():
        pytest.skip(f"{VECTORS} not present; the hard-coded subset still runs")
    text = VECTORS.read_text(encoding="utf-8")
    hashes = []
    for cells in _section(text, 1)[1:]:
        data = _input_bytes(cells[0])
        assert len(data) == int(cells[1]), cells
        hashes.append((data, int(cells[2]), int(cells[3], 16)))
    header, *rows = _section(text, 2)
    counts = [int(h.lstrip("%")) for h in header[2:] if h.startswith("%")]
    partitions = []
    for cells in rows:
        key, positive = _input_bytes(cells[0]), int(cells[1])
        for n, expected in zip(counts, cells[2 : 2 + len(counts)]):
            partitions.append((key, positive, n, int(expected)))
    return hashes, partitions


def test_vectors_section_1_murmur2() -> None:
    hashes, _ = _load_vectors()
    assert len(hashes) >= 13  # the parser found the table
    for data, signed, unsigned in hashes:
        assert murmur2(data) == signed, data
        assert murmur2(data) & 0xFFFFFFFF == unsigned, data
        assert _murmur2_unsigned_py(data) == unsigned, data


def test_vectors_section_2_default_partition() -> None:
    _, partitions = _load_vectors()
    assert len(partitions) >= 12 * 8
    keyed = DefaultPartitioner()
    for key, positive, n, expected in partitions:
        assert murmur2(key) & 0x7FFFFFFF == positive, key
        assert default_partition(key, n) == expected, (key, n)
        assert keyed.partition("t", key, 10, range(n), ()) == expected, (key, n)


# ---------------------------------------------------------------------------------- murmur2


@pytest.mark.parametrize(("data", "expected"), MURMUR2_KNOWN)
def test_murmur2_known_values(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected
    assert _murmur2_unsigned_py(data) == expected & 0xFFFFFFFF


@pytest.mark.parametrize(("key", "n", "expected"), PARTITION_KNOWN)
def test_default_partition_known_values(key: bytes, n: int, expected: int) -> None:
    assert default_partition(key, n) == expected


def test_murmur2_accepts_bytes_like() -> None:
    assert murmur2(bytearray(b"foobar")) == murmur2(memoryview(b"foobar")) == -790332482


@given(st.binary(max_size=300))
def test_murmur2_matches_kafka_python(data: bytes) -> None:
    kafka_default = pytest.importorskip("kafka.partitioner.default")
    h = murmur2(data)
    assert -(2**31) <= h < 2**31
    assert h & 0xFFFFFFFF == kafka_default.murmur2(data) & 0xFFFFFFFF
    assert _murmur2_unsigned_py(data) == h & 0xFFFFFFFF  # the fallback agrees with the fast path


@given(st.binary(max_size=64), st.integers(min_value=1, max_value=1000))
def test_default_partition_in_range(key: bytes, n: int) -> None:
    assert 0 <= default_partition(key, n) < n


# ------------------------------------------------------------------------- uniform sticky


ALL = tuple(range(6))


def _drive(p: Partitioner, records: int, size: int, available: Sequence[int] = ALL) -> list[int]:
    return [p.partition("t", None, size, ALL, available) for _ in range(records)]


def test_sticky_stays_until_batch_size_bytes() -> None:
    p = UniformStickyPartitioner(batch_size=1000, rng=random.Random(1))
    # 92 bytes of value + 8 of framing = 100 per record: ten records fill a batch.
    picks = _drive(p, 30, 92)
    assert picks[:10] == [picks[0]] * 10
    assert picks[10:20] == [picks[10]] * 10 and picks[10] != picks[0]
    assert picks[20:] == [picks[20]] * 10 and picks[20] != picks[10]
    assert p.current("t") == picks[-1]


def test_sticky_counts_key_bytes_and_empty_records() -> None:
    p = UniformStickyPartitioner(batch_size=80, rng=random.Random(2))
    picks = [p.partition("t", b"k" * 32, 0, ALL, ALL) for _ in range(6)]  # 40 bytes each
    assert picks[0] == picks[1] != picks[2] == picks[3]
    empty = UniformStickyPartitioner(batch_size=16, rng=random.Random(2))
    assert len(set(_drive(empty, 10, 0))) > 1  # zero-byte values still move along


def test_sticky_uses_only_available_partitions() -> None:
    p = UniformStickyPartitioner(batch_size=10, rng=random.Random(3))
    assert set(_drive(p, 200, 10, available=(1, 4))) == {1, 4}


def test_sticky_falls_back_to_all_partitions_when_none_available() -> None:
    p = UniformStickyPartitioner(batch_size=10, rng=random.Random(4))
    assert set(_drive(p, 300, 10, available=())) == set(ALL)


def test_sticky_leaves_a_partition_that_became_unavailable() -> None:
    p = UniformStickyPartitioner(batch_size=10_000, rng=random.Random(5))
    first = p.partition("t", None, 1, ALL, ALL)
    remaining = tuple(x for x in ALL if x != first)
    moved = p.partition("t", None, 1, ALL, remaining)
    assert moved != first and moved in remaining
    # A fresh but equal sequence (metadata refreshed) keeps the choice.
    assert p.partition("t", None, 1, ALL, list(remaining)) == moved


def test_sticky_on_new_batch() -> None:
    p = UniformStickyPartitioner(batch_size=10_000, rng=random.Random(6))
    first = p.partition("t", None, 1, ALL, ALL)
    p.on_new_batch("t", (first + 1) % 6)  # not the sticky partition: ignored
    assert p.partition("t", None, 1, ALL, ALL) == first
    p.on_new_batch("t", first)
    assert p.partition("t", None, 1, ALL, ALL) != first
    p.on_new_batch("unknown-topic", 0)  # harmless


def test_sticky_state_is_per_topic() -> None:
    p = UniformStickyPartitioner(batch_size=100, rng=random.Random(7))
    a = [p.partition("a", None, 50, ALL, ALL) for _ in range(2)]
    b = p.partition("b", None, 85, ALL, ALL)
    assert a[0] == a[1]
    assert p.partition("b", None, 1, ALL, ALL) == b  # 93 + 9 bytes: the next record switches
    assert p.partition("b", None, 1, ALL, ALL) != b


def test_sticky_spreads_evenly_over_time() -> None:
    p = UniformStickyPartitioner(batch_size=1000, rng=random.Random(8))
    counts = Counter(_drive(p, 60_000, 92))
    assert set(counts) == set(ALL)
    assert max(counts.values()) / min(counts.values()) < 1.2


def test_sticky_single_partition_and_errors() -> None:
    p = UniformStickyPartitioner(batch_size=1)
    assert {p.partition("t", None, 5, (0,), (0,)) for _ in range(5)} == {0}
    with pytest.raises(ValueError):
        UniformStickyPartitioner(batch_size=0)
    with pytest.raises(ValueError):
        p.partition("empty", None, 1, (), ())


# ------------------------------------------------------------------------ default + others


def test_default_hashes_keys_and_sticks_null_keys() -> None:
    p = DefaultPartitioner(batch_size=1000, rng=random.Random(9))
    assert KeyHashPartitioner is DefaultPartitioner
    # Keys ignore availability: the same key always maps to the same partition.
    assert p.partition("t", b"foobar", 5, range(16), (1, 2)) == 14
    assert p.partition("t", b"", 5, range(10), ()) == 1  # empty key is hashed, not sticky
    nulls = {p.partition("t", None, 5, ALL, ALL) for _ in range(10)}
    assert len(nulls) == 1


def test_default_ignore_keys() -> None:
    p = DefaultPartitioner(batch_size=1000, ignore_keys=True, rng=random.Random(10))
    picks = {p.partition("t", f"key-{i}".encode(), 5, ALL, ALL) for i in range(20)}
    assert len(picks) == 1


def test_round_robin() -> None:
    p = RoundRobinPartitioner()
    assert [p.partition("t", b"k", 1, ALL, ALL) for _ in range(8)] == [0, 1, 2, 3, 4, 5, 0, 1]
    assert [p.partition("u", None, 1, ALL, (2, 5)) for _ in range(4)] == [2, 5, 2, 5]
    assert [p.partition("v", None, 1, (0, 1, 2), ()) for _ in range(4)] == [0, 1, 2, 0]
    p.on_new_batch("t", 1)  # ignored on purpose (KAFKA-9965)
    assert p.partition("t", None, 1, ALL, ALL) == 2


def test_callable_partitioner_kafka_python_signature() -> None:
    seen: list[tuple[bytes | None, Sequence[int], Sequence[int]]] = []

    def last_available(key: bytes | None, all_parts: Sequence[int], avail: Sequence[int]) -> int:
        seen.append((key, all_parts, avail))
        return avail[-1]

    p = CallablePartitioner(last_available)
    assert p.partition("t", b"k", 3, ALL, (1, 3)) == 3
    assert seen == [(b"k", ALL, (1, 3))]
    bad = CallablePartitioner(lambda key, all_parts, avail: 99)
    with pytest.raises(ValueError, match="returned 99"):
        bad.partition("t", b"k", 3, ALL, ALL)


def test_callable_matches_kafka_python_default_for_keys() -> None:
    kafka_default = pytest.importorskip("kafka.partitioner.default")

    def theirs(key: bytes | None, all_parts: Sequence[int], avail: Sequence[int]) -> int:
        assert key is not None
        return all_parts[(kafka_default.murmur2(key) & 0x7FFFFFFF) % len(all_parts)]

    ours, wrapped = DefaultPartitioner(), CallablePartitioner(theirs)
    for i in range(500):
        key = f"user-{i}".encode()
        assert ours.partition("t", key, 1, range(7), ()) == wrapped.partition(
            "t", key, 1, range(7), ()
        )


def test_make_partitioner() -> None:
    assert isinstance(make_partitioner(), DefaultPartitioner)
    assert isinstance(make_partitioner("murmur2"), DefaultPartitioner)
    assert isinstance(make_partitioner("round-robin"), RoundRobinPartitioner)
    sticky = make_partitioner("uniform_sticky", batch_size=10)
    assert isinstance(sticky, UniformStickyPartitioner)
    rr = RoundRobinPartitioner()
    assert make_partitioner(rr) is rr
    custom = make_partitioner(lambda key, all_parts, avail: 0)
    assert isinstance(custom, CallablePartitioner)
    assert custom.partition("t", None, 0, ALL, ALL) == 0
    for p in (make_partitioner(), sticky, rr, custom):
        assert isinstance(p, Partitioner)
    with pytest.raises(ValueError, match="round_robin"):
        make_partitioner("consistent_random")
    with pytest.raises(TypeError):
        make_partitioner(42)  # type: ignore[arg-type]
