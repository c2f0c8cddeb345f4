"""Errors the Spark source raises besides :class:`sdk.errors.ConfigError`."""

from __future__ import annotations

from sdk.errors import IllegalStateError, KafkaError


class DataLossError(IllegalStateError):
    """Records the query was due to read are no longer in Kafka (deleted by retention, a
    partition or topic deleted, or a topic recreated). Raised only with
    ``failOnDataLoss=true`` (the default); with ``false`` the source skips what is gone."""

    @classmethod
    def about(cls, what: str) -> DataLossError:
        """The error for ``what`` happened, with the usual advice appended. (A classmethod
        rather than ``__init__``, so pickling, which calls ``cls(message)``, round-trips.)"""
        return cls(
            f"{what}. Some data may have been lost because it is no longer available in "
            "Kafka. If you want the query to go on (skipping the lost data) rather than fail, "
            "set the source option 'failOnDataLoss' to 'false'."
        )


class OffsetNotFoundError(KafkaError):
    """No record has a timestamp at or after the requested starting timestamp, and
    ``startingOffsetsByTimestampStrategy`` is ``error`` (the default)."""


class DeliveryFailedError(KafkaError):
    """A write task could not deliver some of its records (the cause is the first error);
    Spark retries the task."""
