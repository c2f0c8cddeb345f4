"""Typed results of the admin client, with one error slot per item (partial success).

Every admin call that works on several items (topics, partitions, groups, config resources)
returns a :class:`ResultSet`: a read-only mapping from the item's key to its result object.
Each result object has an ``error`` attribute, ``None`` when that item succeeded, so one
failed item never hides the others (as franz-go's kadm reports ShardErrors)::

    results = await admin.create_topics([NewTopic("a", 3), NewTopic("b", 3)])
    for name, result in results.items():
        print(name, "ok" if result.error is None else result.error)
    results.raise_if_failed()          # ItemsFailedError naming every failed item

The enums mirror Kafka's numeric codes, so values read from the wire map one to one.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from sdk.errors import ItemsFailedError, KafkaError
from sdk.types import TopicPartition

__all__ = [
    "AlterConfigOp",
    "AlterConfigOpType",
    "BrokerNode",
    "ClusterDescription",
    "CommittedOffset",
    "ConfigEntry",
    "ConfigResource",
    "ConfigResourceResult",
    "ConfigResourceType",
    "ConfigSource",
    "ConfigSynonym",
    "ConfigType",
    "CreateTopicResult",
    "DeletedRecords",
    "ElectionResult",
    "ElectionType",
    "GroupDescription",
    "GroupLag",
    "GroupListing",
    "GroupResult",
    "ItemsFailedError",
    "ListedOffset",
    "MemberDescription",
    "OffsetSpec",
    "PartitionDescription",
    "PartitionLag",
    "PartitionReassignment",
    "ReassignmentResult",
    "ResourceConfig",
    "ResultSet",
    "TopicDescription",
    "TopicListing",
    "TopicResult",
]


class _HasError(Protocol):
    @property
    def error(self) -> KafkaError | None: ...


K = TypeVar("K")
R = TypeVar("R", bound=_HasError)


class ResultSet(Mapping[K, R], Generic[K, R]):
    """Results keyed by item (topic name, partition, group id, config resource), in the order
    the items were given. Each result has ``error``: None on success."""

    __slots__ = ("_items", "_what")

    def __init__(self, items: Mapping[K, R], what: str = "admin operation") -> None:
        self._items: dict[K, R] = dict(items)
        self._what = what

    def __getitem__(self, key: K) -> R:
        return self._items[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    @property
    def ok(self) -> bool:
        """True when every item succeeded."""
        return all(r.error is None for r in self._items.values())

    @property
    def errors(self) -> dict[K, KafkaError]:
        """The failed items and their errors."""
        return {k: r.error for k, r in self._items.items() if r.error is not None}

    @property
    def succeeded(self) -> dict[K, R]:
        """The results of the items that succeeded."""
        return {k: r for k, r in self._items.items() if r.error is None}

    def raise_if_failed(self) -> ResultSet[K, R]:
        """Raise :class:`ItemsFailedError` if any item failed; else return self (chainable)."""
        errors = self.errors
        if errors:
            raise ItemsFailedError(self._what, errors, len(self._items))
        return self

    def __repr__(self) -> str:
        return f"ResultSet({self._what}: {self._items!r})"


# ============================================================================ topics


@dataclass(frozen=True, slots=True)
class CreateTopicResult:
    """Outcome of creating one topic. Counts and configs are what the broker applied
    (CreateTopics v5+); -1 and empty when the broker did not say."""

    name: str
    error: KafkaError | None = None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopicResult:
    """Outcome of an operation on one topic (delete, create partitions)."""

    name: str
    error: KafkaError | None = None
    topic_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class TopicListing:
    name: str
    topic_id: uuid.UUID | None
    is_internal: bool
    partition_count: int


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    leader: int | None  # None while the partition has no leader
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    error: KafkaError | None = None
    topic_id: uuid.UUID | None = None
    is_internal: bool = False
    partitions: tuple[PartitionDescription, ...] = ()


# ============================================================================ configs


class ConfigResourceType(enum.IntEnum):
    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(enum.IntEnum):
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigType(enum.IntEnum):
    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class AlterConfigOpType(enum.IntEnum):
    SET = 0
    DELETE = 1  # back to the default
    APPEND = 2  # add to a list-valued config
    SUBTRACT = 3  # remove from a list-valued config


@dataclass(frozen=True, slots=True, order=True)
class ConfigResource:
    """A thing that has configs: a topic (by name), a broker (by id, as a string) or a
    group (by id)."""

    type: ConfigResourceType
    name: str

    @classmethod
    def topic(cls, name: str) -> ConfigResource:
        return cls(ConfigResourceType.TOPIC, name)

    @classmethod
    def broker(cls, broker_id: int | str = "") -> ConfigResource:
        """A broker's configs; the empty name means the cluster-wide default."""
        return cls(ConfigResourceType.BROKER, str(broker_id))

    @classmethod
    def group(cls, group_id: str) -> ConfigResource:
        """A group's configs (share.auto.offset.reset, share.record.lock.duration.ms, ...)."""
        return cls(ConfigResourceType.GROUP, group_id)

    def __str__(self) -> str:
        return f"{self.type.name.lower()}:{self.name}"


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None  # None for sensitive values and unset ones
    source: ConfigSource = ConfigSource.UNKNOWN
    is_default: bool = False
    read_only: bool = False
    is_sensitive: bool = False
    type: ConfigType = ConfigType.UNKNOWN
    documentation: str | None = None
    synonyms: tuple[ConfigSynonym, ...] = ()


@dataclass(frozen=True, slots=True)
class ResourceConfig:
    """The configs of one resource, keyed by config name."""

    resource: ConfigResource
    error: KafkaError | None = None
    entries: dict[str, ConfigEntry] = field(default_factory=dict)

    def value(self, name: str) -> str | None:
        entry = self.entries.get(name)
        return None if entry is None else entry.value


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    """One change of an incremental config update: set, delete (back to default), append to
    or subtract from a list."""

    name: str
    value: str | None = None
    op: AlterConfigOpType = AlterConfigOpType.SET

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("AlterConfigOp needs a config name")
        if self.op != AlterConfigOpType.DELETE and self.value is None:
            raise ValueError(f"{self.op.name} of {self.name!r} needs a value")


@dataclass(frozen=True, slots=True)
class ConfigResourceResult:
    resource: ConfigResource
    error: KafkaError | None = None


# ============================================================================ cluster


@dataclass(frozen=True, slots=True)
class BrokerNode:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int | None  # None when the cluster reports no controller
    brokers: tuple[BrokerNode, ...]


# ============================================================================ groups


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str  # "consumer" for consumer groups, "" for simple (commit-only) groups
    state: str = ""  # empty when the broker does not report it (ListGroups < v4)
    group_type: str = ""  # "classic" / "consumer" (ListGroups v5+), else empty
    coordinator: int = -1


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    error: KafkaError | None = None
    state: str = ""
    protocol_type: str = ""
    protocol: str = ""  # the chosen assignor for consumer groups
    members: tuple[MemberDescription, ...] = ()
    coordinator: BrokerNode | None = None


@dataclass(frozen=True, slots=True)
class GroupResult:
    group_id: str
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """A group's committed position on one partition; ``offset`` None when nothing is
    committed. Also the per-partition outcome of altering or resetting offsets."""

    topic_partition: TopicPartition
    offset: int | None
    metadata: str = ""
    leader_epoch: int | None = None
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True)
class PartitionLag:
    """How far a group is behind on one partition. ``lag`` is ``end_offset - committed``;
    None when either is unknown (nothing committed, or the end offset failed)."""

    topic_partition: TopicPartition
    committed: int | None
    end_offset: int | None
    lag: int | None
    member_id: str = ""  # the member the partition is assigned to, if any
    client_id: str = ""
    client_host: str = ""
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True)
class GroupLag:
    group_id: str
    state: str
    partitions: tuple[PartitionLag, ...]

    @property
    def total_lag(self) -> int:
        """The sum of the known per-partition lags."""
        return sum(p.lag for p in self.partitions if p.lag is not None)

    @property
    def errors(self) -> dict[TopicPartition, KafkaError]:
        return {p.topic_partition: p.error for p in self.partitions if p.error is not None}


# ============================================================================ offsets


class OffsetSpec(enum.IntEnum):
    """Which offset :meth:`list_offsets` looks up; a plain int >= 0 means "the first offset
    whose timestamp is at least this many ms since the epoch"."""

    LATEST = -1  # the high watermark: the offset the next record will get
    EARLIEST = -2  # the log start offset
    MAX_TIMESTAMP = -3  # the record with the largest timestamp (ListOffsets v7+)


@dataclass(frozen=True, slots=True)
class ListedOffset:
    """``offset`` is -1 when no record matches a timestamp search."""

    topic_partition: TopicPartition
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int | None = None
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True)
class DeletedRecords:
    topic_partition: TopicPartition
    low_watermark: int = -1  # the partition's new log start offset
    error: KafkaError | None = None


# ============================================================================ leaders, replicas


class ElectionType(enum.IntEnum):
    """Which leader :meth:`elect_leaders` asks the controller for (ElectLeaders' byte)."""

    PREFERRED = 0  # the first replica of the assignment, if it is alive and in the ISR
    UNCLEAN = 1  # any live replica, even out of the ISR, when the ISR has none alive


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """Outcome of a leader election for one partition. ``error`` is None when a new leader
    was elected; ElectionNotNeededError when the partition already had the wanted leader."""

    topic_partition: TopicPartition
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True)
class ReassignmentResult:
    """Outcome of starting (or cancelling) the reassignment of one partition. Success means
    the controller accepted it; the data moves afterwards (see list_partition_reassignments)."""

    topic_partition: TopicPartition
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """A reassignment in progress: ``replicas`` is the full current set (target and old
    replicas together), ``adding`` the replicas still catching up, ``removing`` those that
    leave once they have."""

    topic_partition: TopicPartition
    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
