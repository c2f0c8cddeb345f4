"""Base classes of the generated message codecs.

Each generated class carries a tuple of per-version encoder and decoder functions
(``_ENCODERS``/``_DECODERS``, indexed by ``version - MIN_VERSION``); these bases only pick
the function and turn low-level decoding failures into one typed error.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from sdk.errors import MalformedDataError, UnsupportedVersionError

T = TypeVar("T", bound="Versioned")


# The default of a list or struct field in a generated ``__init__``: a fresh one per object.
_FRESH: Any = object()


class Struct:
    """A struct nested inside a message (no version table of its own).

    Generated classes list their fields in ``__slots__`` (in schema order, ``unknown_tags``
    last in flexible ones) and write their ``__init__`` out; equality and repr are the
    dataclass ones, built here from ``__slots__`` (repr leaves ``unknown_tags`` out).
    """

    __slots__ = ()

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The fields, in schema order."""
        names: tuple[str, ...] = cls.__slots__
        return names

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.field_names())

    __hash__ = None  # type: ignore[assignment]  # mutable, as a dataclass with eq

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.field_names()
                          if n != "unknown_tags")
        return f"{type(self).__qualname__}({shown})"


class Versioned(Struct):
    """A top-level versioned struct: a request, a response, a header or a data struct."""

    __slots__ = ()
    MIN_VERSION: ClassVar[int]
    MAX_VERSION: ClassVar[int]
    MAX_STABLE_VERSION: ClassVar[int]
    FIRST_FLEXIBLE_VERSION: ClassVar[int]
    _ENCODERS: ClassVar[tuple[Callable[[bytearray, Any], None], ...]]
    _DECODERS: ClassVar[tuple[Callable[[Any, int], tuple[Any, int]], ...]]

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        return 0 <= cls.FIRST_FLEXIBLE_VERSION <= version

    @classmethod
    def _check_version(cls, version: int) -> int:
        if not cls.MIN_VERSION <= version <= cls.MAX_VERSION:
            raise UnsupportedVersionError(
                f"{cls.__name__} has versions {cls.MIN_VERSION}-{cls.MAX_VERSION}, not {version}"
            )
        return version - cls.MIN_VERSION

    def encode_into(self, w: bytearray, version: int) -> None:
        self._ENCODERS[self._check_version(version)](w, self)

    def encode(self, version: int) -> bytes:
        w = bytearray()
        self._ENCODERS[self._check_version(version)](w, self)
        return bytes(w)

    @classmethod
    def decode_from(cls: type[T], buf: Any, pos: int, version: int) -> tuple[T, int]:
        """Decode at ``pos``; returns the message and the position after it."""
        decoder = cls._DECODERS[cls._check_version(version)]
        try:
            return decoder(buf, pos)
        except MalformedDataError as exc:
            raise MalformedDataError(f"{cls.__name__} v{version}: {exc}") from None
        except (struct.error, IndexError, UnicodeDecodeError, ValueError) as exc:
            raise MalformedDataError(
                f"{cls.__name__} v{version}: truncated or malformed ({exc})"
            ) from None

    @classmethod
    def decode(cls: type[T], buf: Any, version: int) -> T:
        return cls.decode_from(buf, 0, version)[0]


class Message(Versioned):
    """A request or response of one API key."""

    __slots__ = ()
    API_KEY: ClassVar[int]
