"""The topic registry: names, ids, partitions and per-topic config overrides.

Each partition owns one ``PartitionLog`` (the storage engine) and the futures of fetches
waiting for data on it. Topic metadata (id, partition count, overrides) is kept in
``<data-dir>/topics.json``, rewritten atomically on every change; the log directories
themselves are the storage engine's. A topic is written to the file after its logs are
created and removed from it before they are deleted, so a crash in between leaves at worst
an orphan directory, which is cleared before a partition of the same name is created again.
"""

from __future__ import annotations

import asyncio
import logging
import re
import shutil
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sdk.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from server_ref.config import (
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigSource,
    parse_config_value,
    read_json,
    write_json_atomically,
)
from server_ref.producer_state import PartitionProducers
from server_ref.storage import LogConfig, PartitionLog

log = logging.getLogger(__name__)

__all__ = ["Partition", "Topic", "TopicRegistry", "validate_topic_name"]

MAX_TOPIC_NAME = 249
MAX_PARTITIONS = 100_000  # a sanity cap: every partition is a directory with open files
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
TOPICS_FILE = "topics.json"


def validate_topic_name(name: str) -> None:
    """Kafka's rules for topic names; raises ``InvalidTopicError``."""
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError("Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_TOPIC_NAME:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME} characters, "
            f"topic name: {name}"
        )
    if not _LEGAL_NAME.fullmatch(name):
        raise InvalidTopicError(
            f"Topic name \"{name}\" is illegal, it contains a character other than ASCII "
            "alphanumerics, '.', '_' and '-'"
        )


@dataclass(eq=False)
class Partition:
    topic: Topic
    index: int
    log: PartitionLog
    waiters: list[asyncio.Future[None]] = field(default_factory=list)
    producers: PartitionProducers = field(default_factory=PartitionProducers)
    # Cluster mode: this broker's role for the partition (server_ref.replication.state
    # ReplicaState: leader or follower, ISR, high watermark). None on a single node.
    replica: Any = None

    @property
    def name(self) -> str:
        return f"{self.topic.name}-{self.index}"

    def notify_appended(self) -> None:
        """Wake the long-poll fetches waiting on this partition."""
        waiters, self.waiters = self.waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)


@dataclass(eq=False)
class Topic:
    name: str
    topic_id: uuid.UUID
    overrides: dict[str, Any]  # parsed values of the topic's own configs
    partitions: list[Partition] = field(default_factory=list)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    def config_value(self, key: str, broker: BrokerConfig) -> Any:
        if key in self.overrides:
            return self.overrides[key]
        return broker.topic_default(key)

    def config_source(self, key: str, broker: BrokerConfig) -> ConfigSource:
        if key in self.overrides:
            return ConfigSource.DYNAMIC_TOPIC_CONFIG
        broker_key = TOPIC_CONFIGS[key].broker_default
        if broker_key is None:
            return ConfigSource.DEFAULT_CONFIG
        source = broker.source_of(broker_key)
        if source is ConfigSource.DYNAMIC_BROKER_CONFIG:
            return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        return source

    def log_config(self, broker: BrokerConfig) -> LogConfig:
        def value(key: str) -> Any:
            return self.config_value(key, broker)

        return LogConfig(
            segment_bytes=value("segment.bytes"),
            segment_ms=value("segment.ms"),
            retention_ms=value("retention.ms"),
            retention_bytes=value("retention.bytes"),
            cleanup_policy=",".join(value("cleanup.policy")),
            delete_retention_ms=value("delete.retention.ms"),
            min_compaction_lag_ms=value("min.compaction.lag.ms"),
            index_interval_bytes=value("index.interval.bytes"),
            segment_index_bytes=value("segment.index.bytes"),
            flush_messages=value("flush.messages"),
            message_timestamp_type=value("message.timestamp.type"),
            max_message_bytes=value("max.message.bytes"),
        )

    def is_compacted(self, broker: BrokerConfig) -> bool:
        return "compact" in self.config_value("cleanup.policy", broker)


def _collision_key(name: str) -> str:
    """Kafka forbids topics whose names differ only by '.' versus '_' (metric names clash)."""
    return name.replace(".", "_")


def parse_topic_configs(configs: Mapping[str, str | None]) -> dict[str, Any]:
    """Parse CreateTopics/AlterConfigs values; unknown keys and bad values raise
    ``InvalidConfigError``."""
    parsed: dict[str, Any] = {}
    for key, text in configs.items():
        definition = TOPIC_CONFIGS.get(key)
        if definition is None:
            raise InvalidConfigError(f"Unknown topic config name: {key}")
        parsed[key] = parse_config_value(definition, text)
    return parsed


class TopicRegistry:
    """All topics of one broker. Every method runs on the broker's event loop."""

    def __init__(self, data_dir: Path, config: BrokerConfig,
                 now_ms: Callable[[], int]) -> None:
        self.data_dir = data_dir
        self.config = config
        self._now_ms = now_ms
        self._topics: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}

    # ------------------------------------------------------------------ lifecycle

    def load(self) -> None:
        """Reopen (and so recover) every partition log named in ``topics.json``."""
        saved = read_json(self.data_dir / TOPICS_FILE) or {}
        for name, entry in saved.items():
            overrides = parse_topic_configs(entry.get("configs", {}))
            topic = Topic(name, uuid.UUID(entry["id"]), overrides)
            for index in range(int(entry["partitions"])):
                topic.partitions.append(self._open_partition(topic, index, fresh=False))
            self._register(topic)

    def close(self) -> None:
        for topic in self._topics.values():
            for partition in topic.partitions:
                partition.log.close()

    def _save(self) -> None:
        data = {
            topic.name: {
                "id": str(topic.topic_id),
                "partitions": len(topic.partitions),
                "configs": {
                    key: TOPIC_CONFIGS[key].render(value) for key, value in topic.overrides.items()
                },
            }
            for topic in self._topics.values()
        }
        write_json_atomically(self.data_dir / TOPICS_FILE, data)

    def _register(self, topic: Topic) -> None:
        self._topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic

    def _open_partition(self, topic: Topic, index: int, *, fresh: bool) -> Partition:
        directory = self.data_dir / f"{topic.name}-{index}"
        if fresh and directory.exists():
            log.warning("removing orphan log directory %s before creating it anew", directory)
            shutil.rmtree(directory)
        plog = PartitionLog.open(directory, topic.log_config(self.config), now_ms=self._now_ms)
        partition = Partition(topic, index, plog)
        # each roll snapshots the producer state as of the sealed segment's end (uploaded
        # with the segment by tiered storage)
        plog.producer_snapshot = lambda: partition.producers.to_json()
        return partition

    # ------------------------------------------------------------------ lookups

    def __contains__(self, name: object) -> bool:
        return name in self._topics

    def __iter__(self) -> Iterator[Topic]:
        return iter(list(self._topics.values()))

    def __len__(self) -> int:
        return len(self._topics)

    def get(self, name: str) -> Topic | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def partition(self, name: str, index: int) -> Partition | None:
        topic = self._topics.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return None
        return topic.partitions[index]

    def require(self, name: str) -> Topic:
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"topic {name} does not exist")
        return topic

    # ------------------------------------------------------------------ changes

    def check_new_topic(self, name: str, num_partitions: int, replication_factor: int,
                        configs: Mapping[str, str | None], *, internal: bool = False
                        ) -> tuple[int, dict[str, Any]]:
        """Validate a CreateTopics entry; returns (partitions, parsed overrides). -1 means
        the broker default, as in CreateTopics v4+."""
        validate_topic_name(name)
        if name in self._topics:
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        if name in INTERNAL_TOPICS and not internal:
            raise InvalidTopicError(f"Topic {name} is internal; the broker creates it itself")
        collides = _collision_key(name)
        for existing in self._topics:
            if _collision_key(existing) == collides:
                raise InvalidTopicError(
                    f"Topic '{name}' collides with existing topic: {existing}")
        if num_partitions == -1:
            num_partitions = int(self.config.get("num.partitions"))
        if not 1 <= num_partitions <= MAX_PARTITIONS:
            raise InvalidPartitionsError(
                f"Number of partitions must be between 1 and {MAX_PARTITIONS}, "
                f"got {num_partitions}"
            )
        if replication_factor == -1:
            replication_factor = int(self.config.get("default.replication.factor"))
        if replication_factor < 1:
            raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
        if replication_factor > 1:
            raise InvalidReplicationFactorError(
                f"Unable to replicate the partition {replication_factor} time(s): The target "
                "replication factor of " f"{replication_factor} cannot be reached because only "
                "1 broker(s) are registered."
            )
        return num_partitions, parse_topic_configs(configs)

    def create(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
               configs: Mapping[str, str | None] | None = None, *,
               internal: bool = False) -> Topic:
        num_partitions, overrides = self.check_new_topic(
            name, num_partitions, replication_factor, configs or {}, internal=internal
        )
        topic = Topic(name, uuid.uuid4(), overrides)
        try:
            for index in range(num_partitions):
                topic.partitions.append(self._open_partition(topic, index, fresh=True))
            self._register(topic)
            self._save()
        except BaseException:
            self._forget(topic)
            for partition in topic.partitions:
                partition.log.delete()
            raise
        log.info("created topic %s with %d partition(s)", name, num_partitions)
        return topic

    def ensure(self, name: str, topic_id: uuid.UUID, partitions: int,
               configs: Mapping[str, str | None]) -> Topic:
        """Cluster mode: make the local topic what the metadata log says (its id, at
        least ``partitions`` partitions, its config overrides); a local topic of the same
        name with another id is an older, deleted incarnation and goes first."""
        topic = self._topics.get(name)
        if topic is not None and topic.topic_id != topic_id:
            self.delete(name)
            topic = None
        overrides = parse_topic_configs(configs)
        if topic is None:
            topic = Topic(name, topic_id, overrides)
            try:
                for index in range(partitions):
                    topic.partitions.append(self._open_partition(topic, index, fresh=True))
                self._register(topic)
                self._save()
            except BaseException:
                self._forget(topic)
                for partition in topic.partitions:
                    partition.log.delete()
                raise
            return topic
        if len(topic.partitions) < partitions:
            for index in range(len(topic.partitions), partitions):
                topic.partitions.append(self._open_partition(topic, index, fresh=True))
            self._save()
        if topic.overrides != overrides:
            self.replace_overrides(name, overrides)
        return topic

    def _forget(self, topic: Topic) -> None:
        self._topics.pop(topic.name, None)
        self._by_id.pop(topic.topic_id, None)

    def delete(self, name: str) -> Topic:
        topic = self.require(name)
        self._forget(topic)
        self._save()
        for partition in topic.partitions:
            partition.log.delete()
            partition.notify_appended()  # fetches waiting on it re-check and find it gone
        log.info("deleted topic %s", name)
        return topic

    def add_partitions(self, name: str, total: int, *, validate_only: bool = False) -> None:
        topic = self.require(name)
        current = len(topic.partitions)
        if total <= current:
            raise InvalidPartitionsError(
                f"Topic currently has {current} partitions, {total} is not greater than "
                f"{current}." if total < current else
                f"Topic already has {current} partitions."
            )
        if total > MAX_PARTITIONS:
            raise InvalidPartitionsError(f"at most {MAX_PARTITIONS} partitions are supported")
        if validate_only:
            return
        for index in range(current, total):
            topic.partitions.append(self._open_partition(topic, index, fresh=True))
        self._save()

    def replace_overrides(self, name: str, overrides: dict[str, Any]) -> None:
        """Install a topic's complete set of overrides (already parsed) and apply them."""
        topic = self.require(name)
        topic.overrides = dict(overrides)
        self._save()
        self.apply_configs(topic)

    def apply_configs(self, topic: Topic) -> None:
        config = topic.log_config(self.config)
        for partition in topic.partitions:
            partition.log.update_config(config)

    def apply_broker_defaults(self) -> None:
        """After a dynamic broker config change: topics without overrides follow it."""
        for topic in self._topics.values():
            self.apply_configs(topic)
