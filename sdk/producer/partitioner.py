"""Choosing a partition for a record that has no explicit one.

Rules follow the Java producer, so keyed records land where Java clients put them:

* a key is hashed with Kafka's murmur2 variant: ``(murmur2(key) & 0x7fffffff) % num_partitions``
  (the mask, not ``abs()``); an empty key is hashed like any other;
* a record without a key (or with keys ignored) goes to a "uniform sticky" partition: one
  partition per topic until about ``batch_size`` bytes were sent to it, then another one picked
  at random among the available partitions (KIP-480 / KIP-794), so batches fill up.

Partitioners are called under the accumulator's lock (``sdk.producer.accumulator``), from
whichever thread appends: the producer's event loop, or the threads that call the blocking
``Producer.send``. The lock serializes the calls, so they keep plain state without locks of
their own; it is held while they run, so ``partition()`` (once per ``send()``) must be cheap.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

__all__ = [
    "CallablePartitioner",
    "DefaultPartitioner",
    "KeyHashPartitioner",
    "Partitioner",
    "PartitionerFn",
    "RoundRobinPartitioner",
    "UniformStickyPartitioner",
    "default_partition",
    "make_partitioner",
    "murmur2",
]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF
_WORDS = struct.Struct("<I")


def _murmur2_unsigned_py(data: bytes) -> int:
    """Kafka's murmur2 (MurmurHash2, seed 0x9747b28c) as an unsigned 32-bit int, pure Python."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    end = length & ~3
    for (k,) in _WORDS.iter_unpack(data[:end]):  # 4-byte little-endian words
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    rest = length & 3
    if rest:  # the tail cases fall through in Java's switch: 3 -> 2 -> 1
        if rest == 3:
            h ^= data[end + 2] << 16
        if rest >= 2:
            h ^= data[end + 1] << 8
        h ^= data[end]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    return h ^ (h >> 15)


try:  # the PyPI `murmurhash2` wheel computes the same function in native code (~10x faster)
    from murmurhash2 import murmurhash2 as _native_murmurhash2

    def _murmur2_unsigned(data: bytes) -> int:
        # It accepts `bytes` only; serializers may hand us a bytearray or memoryview.
        return _native_murmurhash2(data if type(data) is bytes else bytes(data), _SEED)

    HAVE_NATIVE_MURMUR2 = True
except ImportError:  # pragma: no cover - depends on the environment
    _murmur2_unsigned = _murmur2_unsigned_py
    HAVE_NATIVE_MURMUR2 = False


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash of ``data`` as a signed int32, like Java's ``Utils.murmur2``."""
    h = _murmur2_unsigned(data)
    return h - 0x100000000 if h & 0x80000000 else h


def default_partition(key_bytes: bytes, num_partitions: int) -> int:
    """The partition Java's default partitioner picks for a serialized key."""
    return (_murmur2_unsigned(key_bytes) & 0x7FFFFFFF) % num_partitions


PartitionerFn = Callable[[bytes | None, Sequence[int], Sequence[int]], int]
"""A custom partitioner in kafka-python's style: ``fn(key_bytes, all, available) -> partition``."""


@runtime_checkable
class Partitioner(Protocol):
    """Picks a partition for each record the producer sends without an explicit partition.

    Called under the accumulator's lock, on any thread that appends (see the module
    docstring): keep it quick, and do not call into the producer from it (the lock is not
    reentrant).

    ``partitions`` are all partition ids of the topic, ``available_partitions`` those that
    currently have a leader (may be empty). ``value_size`` estimates the bytes the value
    adds to its batch on the wire: the serialized value's length (0 for a null value)
    scaled by the topic's estimated compression ratio (compressed / uncompressed; 1.0
    without compression and until a compressed batch of the topic was built), so that a
    sticky partitioner's ``batch_size`` counts the same estimated wire bytes as the
    accumulator's.

    The bulk path (``send_many`` of keyless values) asks once per batch instead of once per
    record: it calls ``partition()`` for the first record of a run and, when the run ends
    with room left in the batch, once more with ``key_bytes=None`` and the summed
    ``value_size`` of the rest of the run, so byte counts still add up; and it calls
    ``on_new_batch(topic, prev_partition)`` when the batch of ``prev_partition`` filled
    up, which is when a sticky partitioner should move on. Only the built-in sticky
    partitioners (``DefaultPartitioner``, ``UniformStickyPartitioner``) get these calls;
    any other partitioner is asked once per record, and ``on_new_batch`` is not called on
    the per-record path.
    """

    def partition(
        self,
        topic: str,
        key_bytes: bytes | None,
        value_size: int,
        partitions: Sequence[int],
        available_partitions: Sequence[int],
    ) -> int: ...

    def on_new_batch(self, topic: str, prev_partition: int) -> None: ...


# Rough per-record framing cost in a v2 batch (length, attributes, deltas, header count), so
# that records with empty values still move the sticky partition along.
_RECORD_OVERHEAD = 8


class _Sticky:
    __slots__ = ("checked", "partition", "produced")

    def __init__(self) -> None:
        self.partition = -1
        self.produced = 0
        # The `available` sequence last seen to contain `partition`. Metadata hands out the
        # same object until it refreshes, so an identity check usually replaces a scan.
        self.checked: object = None


class UniformStickyPartitioner:
    """Ignores keys: sticks to one partition per topic until ``batch_size`` bytes went to it."""

    __slots__ = ("_batch_size", "_rng", "_topics")

    def __init__(self, batch_size: int = 16384, rng: random.Random | None = None) -> None:
        if batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, not {batch_size}")
        self._batch_size = batch_size
        self._rng = rng or random.Random()
        self._topics: dict[str, _Sticky] = {}

    def partition(
        self,
        topic: str,
        key_bytes: bytes | None,
        value_size: int,
        partitions: Sequence[int],
        available_partitions: Sequence[int],
    ) -> int:
        size = value_size + _RECORD_OVERHEAD + (len(key_bytes) if key_bytes is not None else 0)
        st = self._topics.get(topic)
        if st is None:
            st = self._topics[topic] = _Sticky()
        elif st.produced < self._batch_size and (
            available_partitions is st.checked or self._usable(st, partitions, available_partitions)
        ):
            st.produced += size
            return st.partition
        st.partition = self._pick(st.partition, partitions, available_partitions)
        st.produced = size
        st.checked = available_partitions
        return st.partition

    def on_new_batch(self, topic: str, prev_partition: int) -> None:
        """Move on from ``prev_partition`` if it is still the sticky one (KIP-480 behaviour)."""
        st = self._topics.get(topic)
        if st is not None and st.partition == prev_partition:
            st.produced = self._batch_size  # the next record switches

    def current(self, topic: str) -> int | None:
        """The partition ``topic`` currently sticks to, or None before its first record."""
        st = self._topics.get(topic)
        return st.partition if st is not None and st.partition >= 0 else None

    @staticmethod
    def _usable(st: _Sticky, partitions: Sequence[int], available: Sequence[int]) -> bool:
        if st.partition in (available or partitions):
            st.checked = available
            return True
        return False

    def _pick(self, previous: int, partitions: Sequence[int], available: Sequence[int]) -> int:
        # Like Java: choose among the available partitions, or among all if none is available.
        # Unlike Java, never re-pick the partition we are leaving when there is another choice.
        choices = available or partitions
        if not choices:
            raise ValueError("the topic has no partitions")
        if len(choices) == 1:
            return choices[0]
        n = len(choices)
        i = self._rng.randrange(n)
        if choices[i] == previous:  # re-draw uniformly among the other n - 1 indexes
            i = (i + 1 + self._rng.randrange(n - 1)) % n
        return choices[i]


class DefaultPartitioner:
    """Java's built-in behaviour: murmur2 for keyed records, uniform sticky otherwise.

    ``ignore_keys=True`` (Java's ``partitioner.ignore.keys``) sends keyed records through the
    sticky path too.
    """

    __slots__ = ("_ignore_keys", "_sticky")

    def __init__(
        self, batch_size: int = 16384, ignore_keys: bool = False, rng: random.Random | None = None
    ) -> None:
        self._sticky = UniformStickyPartitioner(batch_size, rng)
        self._ignore_keys = ignore_keys

    def partition(
        self,
        topic: str,
        key_bytes: bytes | None,
        value_size: int,
        partitions: Sequence[int],
        available_partitions: Sequence[int],
    ) -> int:
        if key_bytes is not None and not self._ignore_keys:
            # All partitions, not just available ones: a key must always map to the same place.
            return (_murmur2_unsigned(key_bytes) & 0x7FFFFFFF) % len(partitions)
        return self._sticky.partition(
            topic, key_bytes, value_size, partitions, available_partitions
        )

    def on_new_batch(self, topic: str, prev_partition: int) -> None:
        self._sticky.on_new_batch(topic, prev_partition)


KeyHashPartitioner = DefaultPartitioner


class RoundRobinPartitioner:
    """Ignores keys: cycles each topic through its available partitions (all, if none is).

    It deliberately ignores ``on_new_batch``; reacting to it made Java's version skip
    partitions (KAFKA-9965).
    """

    __slots__ = ("_counters",)

    def __init__(self) -> None:
        self._counters: dict[str, int] = {}

    def partition(
        self,
        topic: str,
        key_bytes: bytes | None,
        value_size: int,
        partitions: Sequence[int],
        available_partitions: Sequence[int],
    ) -> int:
        n = self._counters.get(topic, 0)
        self._counters[topic] = n + 1
        choices = available_partitions or partitions
        return choices[n % len(choices)]

    def on_new_batch(self, topic: str, prev_partition: int) -> None:
        pass  # deliberately ignored (see the class docstring)


class CallablePartitioner:
    """Adapts ``fn(key_bytes, all_partitions, available_partitions) -> int`` to Partitioner."""

    __slots__ = ("fn",)

    def __init__(self, fn: PartitionerFn) -> None:
        self.fn = fn

    def partition(
        self,
        topic: str,
        key_bytes: bytes | None,
        value_size: int,
        partitions: Sequence[int],
        available_partitions: Sequence[int],
    ) -> int:
        chosen = self.fn(key_bytes, partitions, available_partitions)
        if not isinstance(chosen, int) or not 0 <= chosen < len(partitions):
            raise ValueError(
                f"partitioner {self.fn!r} returned {chosen!r} for topic {topic!r} "
                f"with {len(partitions)} partitions"
            )
        return chosen

    def on_new_batch(self, topic: str, prev_partition: int) -> None:
        pass  # a kafka-python style function takes no batch hints


_BY_NAME: dict[str, Callable[[int, bool], Partitioner]] = {
    "default": lambda batch_size, ignore_keys: DefaultPartitioner(batch_size, ignore_keys),
    "murmur2": lambda batch_size, ignore_keys: DefaultPartitioner(batch_size, ignore_keys),
    "uniform_sticky": lambda batch_size, _: UniformStickyPartitioner(batch_size),
    "round_robin": lambda _, __: RoundRobinPartitioner(),
}


def make_partitioner(
    spec: str | Partitioner | PartitionerFn | None = None,
    *,
    batch_size: int = 16384,
    ignore_keys: bool = False,
) -> Partitioner:
    """Resolve the producer's ``partitioner`` setting.

    ``spec`` is None or a name (``"default"``/``"murmur2"``, ``"uniform_sticky"``,
    ``"round_robin"``), a Partitioner object (returned as is) or a plain callable with the
    kafka-python signature. Unknown names raise ValueError listing the known ones.
    """
    if spec is None:
        spec = "default"
    if isinstance(spec, str):
        factory = _BY_NAME.get(spec.lower().replace("-", "_"))
        if factory is None:
            raise ValueError(f"unknown partitioner {spec!r}; known: {', '.join(_BY_NAME)}")
        return factory(batch_size, ignore_keys)
    if isinstance(spec, Partitioner):
        return spec
    if callable(spec):
        return CallablePartitioner(spec)
    raise TypeError(f"partitioner must be a name, a Partitioner or a callable, not {spec!r}")
