"""The producer: batching per partition, idempotent delivery, two faces.

* :class:`AsyncProducer` (``sdk.producer.producer``) - the asyncio core and face.
* :class:`Producer` (``sdk.producer.sync``) - the blocking face, safe to share between
  threads; it runs an AsyncProducer on a private event loop thread.

Inside: ``config`` (ProducerConfig), ``accumulator`` (per-partition batches, buffer memory),
``batch`` (batches and the light per-record futures), ``sender`` (per-broker Produce
requests, retries), ``idempotence`` (producer id, and when a batch may fail),
``partitioner`` (murmur2 / sticky / round-robin).
"""

from typing import TYPE_CHECKING, Any

from sdk.producer.batch import BulkFuture, RecordFuture
from sdk.producer.producer import AsyncProducer
from sdk.producer.sync import Producer

if TYPE_CHECKING:
    from sdk.producer.config import ProducerConfig

__all__ = ["AsyncProducer", "BulkFuture", "Producer", "ProducerConfig", "RecordFuture"]


def __getattr__(name: str) -> Any:
    # The pydantic settings model loads on first use (a client's constructor builds it), so
    # importing the clients does not pay for pydantic.
    if name == "ProducerConfig":
        from sdk.producer.config import ProducerConfig

        return ProducerConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
