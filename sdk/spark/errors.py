"""Errors the Spark source and sink raise besides :class:`sdk.errors.ConfigError`.

They live in :mod:`sdk.errors` (every public exception does) and are re-exported here.
"""

from __future__ import annotations

from sdk.errors import DataLossError, DeliveryFailedError, OffsetNotFoundError

__all__ = ["DataLossError", "DeliveryFailedError", "OffsetNotFoundError"]
