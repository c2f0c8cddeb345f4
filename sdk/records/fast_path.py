"""Which implementation of the per-record work is in use: compiled or pure Python.

The compiled module (``sdk.records._fast``, built from ``_fast.c`` by the package's build when
a C compiler is there) is used when it imports; ``KAFKA_SDK_PURE_PYTHON=1`` in the
environment forces the pure path. Both sit behind the same interface and are tested against
each other (tests/unit/records/test_records_fast_path.py)::

    >>> from sdk.records import fast_path
    >>> fast_path.IMPLEMENTATION          # "compiled" or "pure"

From a shell: ``python -c "from sdk.records import fast_path; print(fast_path.IMPLEMENTATION)"``.

``compiled_decode`` is the consumer's record loop (``consumer_records._decode_pure``'s
signature), ``compiled_encode_values`` the producer's bulk encoding
(``RecordBatchBuilder.append_values``'s loop), ``compiled_stager`` the type of the producer's
per-record ``send`` (``sdk.producer.staging.Stage.stager``: it stages a plain record and hands
every other call to the pure function it wraps), ``compiled_slot_maker`` the type that builds
a slotted instance without ``__init__`` (``RecordMetadata`` per delivered record,
``sdk.producer.batch.new_metadata``); None when not in use. All keep the GIL: they
build Python objects or read the caller's lists and resize its bytearray.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from sdk.errors import MalformedDataError
from sdk.types import ConsumerRecord

__all__ = ["FORCED_PURE", "IMPLEMENTATION", "compiled_decode", "compiled_encode_values",
           "compiled_slot_maker", "compiled_stager", "load_compiled", "load_compiled_encoder",
           "load_compiled_slot_maker", "load_compiled_stager"]

FORCED_PURE = os.environ.get("KAFKA_SDK_PURE_PYTHON", "") not in ("", "0")


def load_compiled() -> Callable[..., list[Any]] | None:
    """The compiled ``decode``, bound to ``ConsumerRecord``; None when it is not built."""
    try:
        from sdk.records import _fast
    except ImportError:
        return None
    _fast.init(ConsumerRecord, MalformedDataError)
    decode: Callable[..., list[Any]] = _fast.decode
    return decode


def load_compiled_encoder() -> Callable[..., Any] | None:
    """The compiled ``encode_values``; None when it is not built."""
    try:
        from sdk.records import _fast
    except ImportError:
        return None
    # getattr: a stale build from before encode_values existed leaves it to the pure loop
    encode: Callable[..., Any] | None = getattr(_fast, "encode_values", None)
    return encode


def load_compiled_stager() -> type | None:
    """The compiled ``Stager`` type; None when it is not built."""
    try:
        from sdk.records import _fast
    except ImportError:
        return None
    stager: type | None = getattr(_fast, "Stager", None)  # None from a stale build
    return stager


def load_compiled_slot_maker() -> type | None:
    """The compiled ``SlotMaker`` type; None when it is not built."""
    try:
        from sdk.records import _fast
    except ImportError:
        return None
    maker: type | None = getattr(_fast, "SlotMaker", None)  # None from a stale build
    return maker


compiled_decode = None if FORCED_PURE else load_compiled()
compiled_encode_values = None if FORCED_PURE else load_compiled_encoder()
compiled_stager = None if FORCED_PURE else load_compiled_stager()
compiled_slot_maker = None if FORCED_PURE else load_compiled_slot_maker()
IMPLEMENTATION = "pure" if compiled_decode is None else "compiled"
