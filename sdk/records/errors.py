"""Errors raised by the record batch code.

Every bad input raises ``MalformedDataError`` or one of its subclasses, with a message that
names what is wrong, so callers never see ``IndexError`` or ``struct.error`` from this package.
All three live in ``sdk.errors``; they are re-exported here.
"""

from __future__ import annotations

from sdk.errors import CorruptRecordError, MalformedDataError, UnsupportedCompressionError

__all__ = ["CorruptRecordError", "MalformedDataError", "UnsupportedCompressionError"]
