"""The consumer: AsyncConsumer (asyncio) and Consumer (blocking), plus what they take.

Layout: ``config.py`` (settings), ``subscription.py`` (pure state), ``heartbeat.py`` (pure
timing), ``assignors/`` (range, roundrobin, sticky, cooperative-sticky and the protocol
bytes), ``partition_records.py`` (decoding fetched data), ``fetcher.py``, ``offsets.py``,
``membership.py`` (generic group membership), ``coordinator.py`` (the consumer protocol),
``consumer.py`` (AsyncConsumer) and ``sync.py`` (Consumer).
"""

from typing import TYPE_CHECKING, Any

from sdk.consumer.assignors import (
    Assignor,
    CooperativeStickyAssignor,
    MemberAssignment,
    MemberSubscription,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    StickyAssignor,
)
from sdk.consumer.consumer import AsyncConsumer
from sdk.consumer.coordinator import ConsumerRebalanceListener
from sdk.consumer.errors import (
    CommitFailedError,
    NoOffsetForPartitionError,
    RecordDeserializationError,
)
from sdk.consumer.group_metadata import ConsumerGroupMetadata
from sdk.consumer.sync import Consumer

if TYPE_CHECKING:
    from sdk.consumer.config import ConsumerConfig

__all__ = [
    "Assignor",
    "AsyncConsumer",
    "CommitFailedError",
    "Consumer",
    "ConsumerConfig",
    "ConsumerGroupMetadata",
    "ConsumerRebalanceListener",
    "CooperativeStickyAssignor",
    "MemberAssignment",
    "MemberSubscription",
    "NoOffsetForPartitionError",
    "RangeAssignor",
    "RebalanceProtocol",
    "RecordDeserializationError",
    "RoundRobinAssignor",
    "StickyAssignor",
]


def __getattr__(name: str) -> Any:
    # The pydantic settings model loads on first use (a client's constructor builds it), so
    # importing the clients does not pay for pydantic.
    if name == "ConsumerConfig":
        from sdk.consumer.config import ConsumerConfig

        return ConsumerConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
