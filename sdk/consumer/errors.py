"""Errors only the consumer raises (the shared tree lives in :mod:`sdk.errors`)."""

from __future__ import annotations

from sdk.errors import KafkaError
from sdk.types import TopicPartition


class RecordDeserializationError(KafkaError):
    """A key or value deserializer failed. The consumer's position stays on the record:
    ``seek(tp, offset + 1)`` skips it."""

    def __init__(self, tp: TopicPartition, offset: int, part: str, cause: BaseException) -> None:
        super().__init__(
            f"cannot deserialize the {part} of the record at {tp} offset {offset}: {cause!r}",
            cause=cause,
        )
        self.topic_partition = tp
        self.offset = offset


class NoOffsetForPartitionError(KafkaError):
    """A partition has no committed offset and ``auto_offset_reset`` is "none"."""

    def __init__(self, partitions: list[TopicPartition]) -> None:
        names = ", ".join(str(tp) for tp in sorted(partitions))
        super().__init__(
            f"no committed offset for {names} and auto_offset_reset is 'none'; seek() to a "
            "position or set auto_offset_reset to 'earliest' or 'latest'"
        )
        self.partitions = sorted(partitions)


class CommitFailedError(KafkaError):
    """The group rebalanced (or dropped this member) before the commit: the partitions may
    now belong to another member, so these offsets were not committed."""
