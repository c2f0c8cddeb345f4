"""Errors raised by the record batch code.

Every bad input raises ``MalformedDataError`` or one of its subclasses, with a message that
names what is wrong, so callers never see ``IndexError`` or ``struct.error`` from this package.
``CorruptRecordError`` (a checksum mismatch) lives in ``sdk.errors``; it is re-exported here.
"""

from __future__ import annotations

from sdk.errors import CorruptRecordError, MalformedDataError

__all__ = ["CorruptRecordError", "MalformedDataError", "UnsupportedCompressionError"]


class UnsupportedCompressionError(MalformedDataError):
    """A batch names a compression codec id this SDK does not know (not 0-4).

    Client-side, unlike the broker's UNSUPPORTED_COMPRESSION_TYPE (code 76) response error.
    """
