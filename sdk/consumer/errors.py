"""Errors only the consumer raises, re-exported from :mod:`sdk.errors` (where every public
exception lives)."""

from __future__ import annotations

from sdk.errors import CommitFailedError, NoOffsetForPartitionError, RecordDeserializationError

__all__ = ["CommitFailedError", "NoOffsetForPartitionError", "RecordDeserializationError"]
