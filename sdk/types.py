"""Plain value types shared by the producer, consumer, admin client and reference broker."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic

if TYPE_CHECKING:
    # PEP 696 defaults (a bare ``ConsumerRecord`` means ``ConsumerRecord[bytes, bytes]``) for
    # type checkers only: typing_extensions costs ~10 ms to import, and at run time a TypeVar
    # is just a marker.
    from typing_extensions import TypeVar

    K = TypeVar("K", default=bytes)
    V = TypeVar("V", default=bytes)
else:
    from typing import TypeVar

    K = TypeVar("K")
    V = TypeVar("V")

Header = tuple[str, bytes | None]
"""A record header: a string key and an optional byte value. Keys may repeat."""


class TimestampType(enum.IntEnum):
    """What a record's timestamp means (the batch attribute bit, or -1 for old formats)."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0  # set by the producer
    LOG_APPEND_TIME = 1  # overwritten by the broker when it appended the batch


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    """A partition of a topic; hashable and ordered by (topic, partition)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where the broker stored a produced record.

    ``timestamp`` is the producer's create time, or the broker's append time when the topic
    uses LogAppendTime; -1 when unknown (acks=0). Sizes are -1 when unknown.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int = -1
    serialized_value_size: int = -1

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


# Not frozen on purpose: the consumer builds one per record, and a frozen dataclass __init__
# (object.__setattr__ per field) costs about 5x a plain slots __init__ (~850 ns vs ~150 ns on
# CPython 3.11). Treat instances as read-only. Generic costs nothing per instance: Generic
# has empty __slots__ and no __new__, so building one is the same object.__new__ plus stores.
@dataclass(slots=True)
class ConsumerRecord(Generic[K, V]):
    """One record as the consumer returns it.

    ``K`` and ``V`` are what the consumer's key and value deserializers return (``bytes``
    without one: ``ConsumerRecord[bytes, bytes]``). ``key`` and ``value`` may be None
    whatever the types: a record without a key, a tombstone (a null value, which deletes
    the key on a compacted topic), or a deserializer that returned None.
    """

    topic: str
    partition: int
    offset: int
    key: K | None
    value: V | None
    headers: list[Header]
    timestamp: int
    timestamp_type: TimestampType  # pass the enum members, not TimestampType(n): it is slow
    serialized_key_size: int = -1
    serialized_value_size: int = -1
    leader_epoch: int | None = None

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


# A subclass, not a field of ConsumerRecord: the classic decoder stores every slot itself
# (object.__new__ + one store per slot), so a new slot there would cost every record.
@dataclass(slots=True)
class ShareConsumerRecord(ConsumerRecord[K, V]):
    """A record a share consumer acquired: ``delivery_count`` says how many times the
    share group has handed it out (1 the first time; more after a release, a lock that
    timed out or a consumer that died holding it)."""

    delivery_count: int = 1


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed position: the offset of the *next* record to read, plus free-form metadata."""

    offset: int
    metadata: str = ""
    leader_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class OffsetAndTimestamp:
    """The earliest offset whose timestamp is >= a searched time, with that record's timestamp."""

    offset: int
    timestamp: int
    leader_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class NewTopic:
    """A topic to create. -1 counts mean "the broker's default"; an explicit
    ``replica_assignment`` (partition -> broker ids) replaces both counts, as in Kafka."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] | None = None
    replica_assignment: dict[int, list[int]] | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("NewTopic needs a non-empty name")
        if self.num_partitions == 0 or self.num_partitions < -1:
            raise ValueError(f"num_partitions must be >= 1 or -1, not {self.num_partitions}")
        if self.replication_factor == 0 or self.replication_factor < -1:
            raise ValueError(
                f"replication_factor must be >= 1 or -1, not {self.replication_factor}"
            )
        if self.replica_assignment and (self.num_partitions != -1 or self.replication_factor != -1):
            # CreateTopics rejects counts alongside a manual assignment (INVALID_REQUEST).
            raise ValueError("give either replica_assignment or the partition/replica counts")
