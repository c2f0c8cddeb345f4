"""Kafka's built-in (de)serializers, by the names a Java properties file gives them.

``key.serializer=org.apache.kafka.common.serialization.StringSerializer`` in a producer's
properties (``...StringDeserializer`` in a consumer's) picks the function here that writes
(reads) exactly the bytes Java's class does, so Java and Python clients share topics:

=========  =====================================  ==========================================
short      Java class (``...Serializer`` /         bytes
name       ``...Deserializer``)
=========  =====================================  ==========================================
string     String                                 UTF-8
bytes      ByteArray, Bytes, ByteBuffer           as given (the producer's raw fast path)
short      Short                                  2 bytes, big-endian, signed
integer    Integer                                4 bytes, big-endian, signed
long       Long                                   8 bytes, big-endian, signed
float      Float                                  IEEE 754 single, big-endian
double     Double                                 IEEE 754 double, big-endian
boolean    Boolean                                one byte, 0x01 or 0x00
uuid       UUID                                   the UUID's string form (36 chars) in UTF-8
void       Void                                   always null
=========  =====================================  ==========================================

A serializer is called for values that are not None (a None key or value is sent as null
without it); a deserializer is called with the record's bytes or None. ``bytes`` resolves to
None, which both roles read as "no (de)serializer". Only UTF-8 is supported for strings and
UUIDs (Java's ``key.serializer.encoding`` may say ``UTF8``, nothing else).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

__all__ = ["Deserializer", "Serializer", "deserializer_named", "serializer_named"]

Serializer = Callable[[Any], "bytes | None"]
Deserializer = Callable[["bytes | None"], Any]

_JAVA_PACKAGE = "org.apache.kafka.common.serialization."


def _encode_string(data: Any) -> bytes:
    if not isinstance(data, str):
        raise TypeError(f"StringSerializer takes str, not {type(data).__name__}")
    return data.encode("utf-8")


def _decode_string(data: bytes | None) -> str | None:
    return None if data is None else bytes(data).decode("utf-8")


def _fixed(java: str, fmt: str, kind: type) -> tuple[Serializer, Deserializer]:
    """Serializer and deserializer of one fixed-width big-endian number (Java's byte order)."""
    packer = struct.Struct(fmt)

    def encode(data: Any) -> bytes:
        if isinstance(data, bool) or not isinstance(data, (int, float) if kind is float else int):
            raise TypeError(f"{java}Serializer takes {kind.__name__}, not {type(data).__name__}")
        try:
            return packer.pack(data)
        except (struct.error, OverflowError):
            raise ValueError(
                f"{data!r} does not fit {java}Serializer's {packer.size} bytes") from None

    def decode(data: bytes | None) -> Any:
        if data is None:
            return None
        if len(data) != packer.size:
            raise ValueError(
                f"size of data received by {java}Deserializer is not {packer.size}: {len(data)}")
        return packer.unpack(data)[0]

    return encode, decode


def _encode_boolean(data: Any) -> bytes:
    if not isinstance(data, bool):
        raise TypeError(f"BooleanSerializer takes bool, not {type(data).__name__}")
    return b"\x01" if data else b"\x00"


def _decode_boolean(data: bytes | None) -> bool | None:
    if data is None:
        return None
    if len(data) != 1:
        raise ValueError(f"size of data received by BooleanDeserializer is not 1: {len(data)}")
    if data[0] not in (0, 1):
        raise ValueError(f"unexpected byte received by BooleanDeserializer: {data[0]}")
    return data[0] == 1


def _encode_uuid(data: Any) -> bytes:
    if isinstance(data, str):
        data = uuid.UUID(data)  # as Java's UUID.fromString: the text is checked, then re-written
    if not isinstance(data, uuid.UUID):
        raise TypeError(f"UUIDSerializer takes uuid.UUID (or its text), not {type(data).__name__}")
    return str(data).encode("utf-8")  # Java's UUID.toString(): lower-case, 8-4-4-4-12


def _decode_uuid(data: bytes | None) -> uuid.UUID | None:
    return None if data is None else uuid.UUID(bytes(data).decode("utf-8"))


def _encode_void(data: Any) -> bytes | None:
    raise TypeError(f"VoidSerializer sends only null (None), not {type(data).__name__}")


def _decode_void(data: bytes | None) -> None:
    if data is not None:
        raise ValueError("data should be null for a VoidDeserializer")


_short = _fixed("Short", ">h", int)
_integer = _fixed("Integer", ">i", int)
_long = _fixed("Long", ">q", int)
_float = _fixed("Float", ">f", float)
_double = _fixed("Double", ">d", float)

# short name -> (Java class names without the Serializer/Deserializer suffix, ser, de)
_BUILT_IN: dict[str, tuple[tuple[str, ...], Serializer | None, Deserializer | None]] = {
    "string": (("String",), _encode_string, _decode_string),
    "bytes": (("ByteArray", "Bytes", "ByteBuffer"), None, None),
    "short": (("Short",), *_short),
    "integer": (("Integer",), *_integer),
    "long": (("Long",), *_long),
    "float": (("Float",), *_float),
    "double": (("Double",), *_double),
    "boolean": (("Boolean",), _encode_boolean, _decode_boolean),
    "uuid": (("UUID",), _encode_uuid, _decode_uuid),
    "void": (("Void",), _encode_void, _decode_void),
}


def _table(suffix: str, slot: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for short, entry in _BUILT_IN.items():
        out[short] = entry[slot]
        for java in entry[0]:
            out[f"{_JAVA_PACKAGE}{java}{suffix}"] = entry[slot]
    return out


SERIALIZERS: dict[str, Serializer | None] = _table("Serializer", 1)
DESERIALIZERS: dict[str, Deserializer | None] = _table("Deserializer", 2)


def _named(name: str, table: dict[str, Any], kind: str, other: str) -> Any:
    key = name.strip()
    if key in table:
        return table[key]
    if key.lower() in _BUILT_IN:
        return table[key.lower()]
    hint = ""
    if key.endswith(other) and key.removesuffix(other) + kind in table:  # the other role's class
        hint = f"; that is a {other.lower()}, the {kind.lower()} is {key.removesuffix(other)}{kind}"
    elif key.startswith(_JAVA_PACKAGE + "List"):
        hint = "; ListSerializer/ListDeserializer are not built in: pass a callable"
    raise ValueError(f"unknown {kind.lower()} {name!r}{hint}; pass a callable, or one of the "
                     "built-in names " + ", ".join(_BUILT_IN)
                     + f" or Kafka's {_JAVA_PACKAGE}<Type>{kind} classes")


def serializer_named(name: str) -> Serializer | None:
    """The built-in serializer called ``name`` (short or Java class name); None for bytes."""
    return _named(name, SERIALIZERS, "Serializer", "Deserializer")


def deserializer_named(name: str) -> Deserializer | None:
    """The built-in deserializer called ``name`` (short or Java class name); None for bytes."""
    return _named(name, DESERIALIZERS, "Deserializer", "Serializer")
