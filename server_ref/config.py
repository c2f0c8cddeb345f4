"""Broker and topic configuration: Kafka's property names, types, defaults and validation.

Two tables drive everything: ``BROKER_CONFIGS`` (settable with ``--config key=value`` or
``BrokerConfig.from_properties``; the ones marked dynamic also through AlterConfigs on the
broker resource) and ``TOPIC_CONFIGS`` (per-topic overrides, each falling back to the broker
key named in ``broker_default``). A value arrives as text (from the wire or the command line)
and is parsed and checked here, so CreateTopics, AlterConfigs and the CLI reject the same
things with the same INVALID_CONFIG message.
"""

from __future__ import annotations

import enum
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sdk.errors import ConfigError, InvalidConfigError
from server_ref.security.listeners import is_security_config

__all__ = [
    "BROKER_CONFIGS",
    "TOPIC_CONFIGS",
    "BrokerConfig",
    "ConfigDef",
    "ConfigSource",
    "ConfigType",
    "parse_config_value",
    "write_json_atomically",
]

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1


class ConfigType(enum.IntEnum):
    """DescribeConfigs v3+ ``config_type`` numbers."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7


class ConfigSource(enum.IntEnum):
    """DescribeConfigs ``config_source`` numbers."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: Any
    doc: str
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] | None = None  # for STRING, and for each element of a LIST
    broker_default: str | None = None  # topic configs: the broker key that supplies the default
    dynamic: bool = False  # broker configs: alterable at run time

    def render(self, value: Any) -> str:
        """The value as Kafka prints it in DescribeConfigs."""
        if self.type is ConfigType.BOOLEAN:
            return "true" if value else "false"
        if self.type is ConfigType.LIST:
            return ",".join(value)
        return str(value)


def parse_config_value(definition: ConfigDef, text: str | None) -> Any:
    """Parse and check one value; raises ``InvalidConfigError`` naming the key and the rule."""
    name = definition.name
    if text is None:
        raise InvalidConfigError(f"Null value not supported for topic configs: {name}")
    text = text.strip()
    kind = definition.type
    if kind is ConfigType.BOOLEAN:
        lowered = text.lower()
        if lowered not in ("true", "false"):
            raise InvalidConfigError(
                f"Invalid value {text} for configuration {name}: Expected value to be either "
                "true or false"
            )
        return lowered == "true"
    if kind in (ConfigType.INT, ConfigType.LONG, ConfigType.SHORT):
        try:
            number = int(text)
        except ValueError:
            raise InvalidConfigError(
                f"Invalid value {text} for configuration {name}: Not a number of type "
                f"{kind.name}"
            ) from None
        limit = INT_MAX if kind is ConfigType.INT else LONG_MAX
        if not -limit - 1 <= number <= limit:
            raise InvalidConfigError(
                f"Invalid value {text} for configuration {name}: out of range for {kind.name}"
            )
        if definition.minimum is not None and number < definition.minimum:
            raise InvalidConfigError(
                f"Invalid value {number} for configuration {name}: Value must be at least "
                f"{definition.minimum}"
            )
        if definition.maximum is not None and number > definition.maximum:
            raise InvalidConfigError(
                f"Invalid value {number} for configuration {name}: Value must be no more than "
                f"{definition.maximum}"
            )
        return number
    if kind is ConfigType.LIST:
        items = tuple(part.strip() for part in text.split(",") if part.strip())
        if definition.choices is not None:
            for item in items:
                if item not in definition.choices:
                    raise InvalidConfigError(
                        f"Invalid value {text} for configuration {name}: String must be one "
                        f"of: {', '.join(definition.choices)}"
                    )
        if not items:
            raise InvalidConfigError(f"Invalid value for configuration {name}: empty list")
        return items
    if definition.choices is not None and text not in definition.choices:
        raise InvalidConfigError(
            f"Invalid value {text} for configuration {name}: String must be one of: "
            f"{', '.join(definition.choices)}"
        )
    return text


def _defs(*items: ConfigDef) -> dict[str, ConfigDef]:
    return {item.name: item for item in items}


_B, _I, _L, _S, _LIST = (ConfigType.BOOLEAN, ConfigType.INT, ConfigType.LONG,
                         ConfigType.STRING, ConfigType.LIST)
_WEEK_MS = 7 * 24 * 3600 * 1000
_DAY_MS = 24 * 3600 * 1000
HOUR_MS = 3600 * 1000  # Kafka 4's default message.timestamp.after.max.ms (KIP-1089)
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("delete", "compact")

# Broker configs. Those with a topic counterpart are the topic defaults and are dynamic, as
# in Kafka (cluster-wide defaults can change without a restart).
BROKER_CONFIGS: dict[str, ConfigDef] = _defs(
    ConfigDef("node.id", _I, 0, "This broker's id", minimum=0),
    ConfigDef("num.partitions", _I, 1, "Partitions of an auto-created topic", minimum=1),
    ConfigDef("default.replication.factor", _I, 1, "Replication factor of auto-created topics",
              minimum=1),
    ConfigDef("auto.create.topics.enable", _B, True,
              "Create a topic when a client asks for its metadata or produces to it"),
    ConfigDef("delete.topic.enable", _B, True, "Allow DeleteTopics"),
    ConfigDef("message.max.bytes", _I, 1048588, "Largest record batch accepted", minimum=0,
              dynamic=True),
    ConfigDef("socket.request.max.bytes", _I, 104857600, "Largest request frame accepted",
              minimum=1),
    ConfigDef("log.retention.ms", _L, _WEEK_MS, "Default retention.ms", minimum=-1,
              dynamic=True),
    ConfigDef("log.retention.bytes", _L, -1, "Default retention.bytes", dynamic=True),
    ConfigDef("log.segment.bytes", _I, 1 << 30, "Default segment.bytes", minimum=14,
              dynamic=True),
    ConfigDef("log.roll.ms", _L, _WEEK_MS, "Default segment.ms", minimum=1, dynamic=True),
    ConfigDef("log.cleanup.policy", _LIST, ("delete",), "Default cleanup.policy",
              choices=CLEANUP_POLICIES, dynamic=True),
    ConfigDef("log.cleaner.delete.retention.ms", _L, _DAY_MS, "Default delete.retention.ms",
              minimum=0, dynamic=True),
    ConfigDef("log.cleaner.min.compaction.lag.ms", _L, 0, "Default min.compaction.lag.ms",
              minimum=0, dynamic=True),
    ConfigDef("log.cleaner.max.compaction.lag.ms", _L, LONG_MAX,
              "Default max.compaction.lag.ms", minimum=1, dynamic=True),
    ConfigDef("log.cleaner.backoff.ms", _L, 15000, "Pause between compaction passes",
              minimum=0, dynamic=True),
    ConfigDef("log.index.size.max.bytes", _I, 10 * 1024 * 1024,
              "Default segment.index.bytes", minimum=8, dynamic=True),
    ConfigDef("log.index.interval.bytes", _I, 4096, "Default index.interval.bytes", minimum=0,
              dynamic=True),
    ConfigDef("log.flush.interval.messages", _L, LONG_MAX, "Default flush.messages",
              minimum=1, dynamic=True),
    ConfigDef("log.flush.interval.ms", _L, LONG_MAX, "Default flush.ms", minimum=0,
              dynamic=True),
    ConfigDef("log.message.timestamp.type", _S, "CreateTime",
              "Default message.timestamp.type", choices=TIMESTAMP_TYPES, dynamic=True),
    ConfigDef("log.message.timestamp.before.max.ms", _L, LONG_MAX,
              "Default message.timestamp.before.max.ms", minimum=0, dynamic=True),
    ConfigDef("log.message.timestamp.after.max.ms", _L, HOUR_MS,
              "Default message.timestamp.after.max.ms", minimum=0, dynamic=True),
    ConfigDef("log.retention.check.interval.ms", _L, 300000,
              "How often retention is applied", minimum=1),
    ConfigDef("compression.type", _S, "producer", "Default compression.type",
              choices=COMPRESSION_TYPES, dynamic=True),
    ConfigDef("min.insync.replicas", _I, 1, "Default min.insync.replicas", minimum=1,
              dynamic=True),
    ConfigDef("unclean.leader.election.enable", _B, False,
              "Default unclean.leader.election.enable", dynamic=True),
    # Cluster mode's controller (server_ref/controller/rebalance.py, controller.py).
    ConfigDef("auto.leader.rebalance.enable", _B, True,
              "Move leaderships back to preferred replicas in the ISR"),
    ConfigDef("leader.imbalance.check.interval.seconds", _L, 300,
              "How often the controller looks for imbalanced leaderships", minimum=1),
    ConfigDef("metadata.log.max.record.bytes.between.snapshots", _L, 20971520,
              "Metadata bytes appended before the controller snapshots", minimum=1),
    # Share groups (KIP-932, server_ref.share): Kafka's defaults and bounds; a group config
    # (share.record.lock.duration.ms, ...) must lie within the min/max pairs.
    ConfigDef("group.share.record.lock.duration.ms", _I, 30000,
              "How long a share consumer holds acquired records", minimum=1000, maximum=3600000),
    ConfigDef("group.share.min.record.lock.duration.ms", _I, 15000,
              "Smallest share.record.lock.duration.ms a group may set", minimum=1000,
              maximum=30000),
    ConfigDef("group.share.max.record.lock.duration.ms", _I, 60000,
              "Largest share.record.lock.duration.ms a group may set", minimum=30000,
              maximum=3600000),
    ConfigDef("group.share.delivery.count.limit", _I, 5,
              "Deliveries of a record before it is archived", minimum=2, maximum=10),
    ConfigDef("group.share.min.delivery.count.limit", _I, 2,
              "Smallest share.delivery.count.limit a group may set", minimum=2, maximum=5),
    ConfigDef("group.share.max.delivery.count.limit", _I, 10,
              "Largest share.delivery.count.limit a group may set", minimum=5, maximum=25),
    ConfigDef("group.share.partition.max.record.locks", _I, 2000,
              "In-flight records per share-partition", minimum=100, maximum=10000),
    ConfigDef("group.share.min.partition.max.record.locks", _I, 100,
              "Smallest share.partition.max.record.locks a group may set", minimum=100,
              maximum=2000),
    ConfigDef("group.share.max.partition.max.record.locks", _I, 4000,
              "Largest share.partition.max.record.locks a group may set", minimum=2000,
              maximum=10000),
    ConfigDef("group.share.session.timeout.ms", _I, 45000,
              "A share member without a heartbeat for this long leaves", minimum=1),
    ConfigDef("group.share.min.session.timeout.ms", _I, 45000,
              "Smallest share.session.timeout.ms a group may set", minimum=1),
    ConfigDef("group.share.max.session.timeout.ms", _I, 60000,
              "Largest share.session.timeout.ms a group may set", minimum=1),
    ConfigDef("group.share.heartbeat.interval.ms", _I, 5000,
              "Heartbeat interval of share members", minimum=1),
    ConfigDef("group.share.min.heartbeat.interval.ms", _I, 5000,
              "Smallest share.heartbeat.interval.ms a group may set", minimum=1),
    ConfigDef("group.share.max.heartbeat.interval.ms", _I, 15000,
              "Largest share.heartbeat.interval.ms a group may set", minimum=1),
    # The one dynamic group.share.* config (cluster-wide in Kafka): the share coordinator
    # reads it, or the group's share.assignment.interval.ms, at each heartbeat.
    ConfigDef("group.share.assignment.interval.ms", _I, 1000,
              "Least time between two target assignments of a share group (0: at each "
              "change)", minimum=0, dynamic=True),
    ConfigDef("group.share.min.assignment.interval.ms", _I, 0,
              "Smallest share.assignment.interval.ms a group may set", minimum=0),
    ConfigDef("group.share.max.assignment.interval.ms", _I, 15000,
              "Largest share.assignment.interval.ms a group may set", minimum=0),
    ConfigDef("group.share.max.size", _I, 200, "Members allowed in one share group",
              minimum=1, maximum=1000),
    ConfigDef("group.share.max.share.sessions", _I, 2000, "Share sessions kept at once",
              minimum=1),
    ConfigDef("share.coordinator.state.topic.num.partitions", _I, 50,
              "Partitions of __share_group_state", minimum=1),
    ConfigDef("share.coordinator.state.topic.segment.bytes", _I, 100 * 1024 * 1024,
              "segment.bytes of __share_group_state", minimum=14),
    # Cluster mode (server_ref/share/cluster_state.py); a single node keeps one replica.
    ConfigDef("share.coordinator.state.topic.replication.factor", ConfigType.SHORT, 3,
              "Replication factor of __share_group_state (capped by the live brokers)",
              minimum=1, maximum=(1 << 15) - 1),
    ConfigDef("share.coordinator.state.topic.min.isr", ConfigType.SHORT, 2,
              "min.insync.replicas of __share_group_state (acks=all needs at most its "
              "replica count)", minimum=1, maximum=(1 << 15) - 1),
    ConfigDef("offsets.topic.num.partitions", _I, 50, "Partitions of __consumer_offsets",
              minimum=1),
    # Cluster mode (server_ref.cluster, server_ref.replication); unused by a single node.
    ConfigDef("offsets.topic.replication.factor", _I, 3,
              "Replication factor of __consumer_offsets (capped by the live brokers)",
              minimum=1),
    ConfigDef("transaction.state.log.replication.factor", _I, 3,
              "Replication factor of __transaction_state (capped by the live brokers)",
              minimum=1),
    ConfigDef("transaction.state.log.min.isr", _I, 2, "min.insync.replicas of "
              "__transaction_state", minimum=1),
    ConfigDef("replica.lag.time.max.ms", _L, 30000,
              "A follower not caught up for this long leaves the ISR", minimum=1),
    ConfigDef("replica.fetch.wait.max.ms", _I, 500, "How long a follower's fetch waits "
              "at the leader for new data", minimum=0),
    ConfigDef("broker.session.timeout.ms", _I, 9000,
              "A broker without a heartbeat for this long is fenced", minimum=1),
    ConfigDef("broker.heartbeat.interval.ms", _I, 2000, "Between a broker's heartbeats",
              minimum=1),
    ConfigDef("offsets.topic.segment.bytes", _I, 100 * 1024 * 1024,
              "segment.bytes of __consumer_offsets", minimum=14),
    ConfigDef("offsets.commit.timeout.ms", _I, 5000, "Cluster mode: how long an offset "
              "commit waits for the ISR of its __consumer_offsets partition", minimum=1),
    ConfigDef("offsets.retention.minutes", _I, 10080, "How long committed offsets of an "
              "empty group are kept", minimum=1),
    ConfigDef("group.initial.rebalance.delay.ms", _I, 3000,
              "Wait for more members before the first rebalance of a group", minimum=0),
    ConfigDef("group.min.session.timeout.ms", _I, 6000, "Smallest session timeout allowed",
              minimum=0),
    ConfigDef("group.max.session.timeout.ms", _I, 1800000, "Largest session timeout allowed",
              minimum=0),
    ConfigDef("group.max.size", _I, INT_MAX, "Members allowed in one group", minimum=1),
    ConfigDef("group.consumer.session.timeout.ms", _I, 45000,
              "Session timeout of consumer-protocol (KIP-848) group members", minimum=1),
    ConfigDef("group.consumer.heartbeat.interval.ms", _I, 5000,
              "Heartbeat interval of consumer-protocol (KIP-848) group members", minimum=1),
    # The bounds of a group's own consumer.session.timeout.ms / consumer.heartbeat.interval.ms
    # (the GROUP config resource, server_ref.share.group_configs).
    ConfigDef("group.consumer.min.session.timeout.ms", _I, 45000,
              "Smallest consumer.session.timeout.ms a group may set", minimum=1),
    ConfigDef("group.consumer.max.session.timeout.ms", _I, 60000,
              "Largest consumer.session.timeout.ms a group may set", minimum=1),
    ConfigDef("group.consumer.min.heartbeat.interval.ms", _I, 5000,
              "Smallest consumer.heartbeat.interval.ms a group may set", minimum=1),
    ConfigDef("group.consumer.max.heartbeat.interval.ms", _I, 15000,
              "Largest consumer.heartbeat.interval.ms a group may set", minimum=1),
    ConfigDef("group.consumer.max.size", _I, INT_MAX,
              "Members allowed in one consumer-protocol group", minimum=1),
    ConfigDef("fetch.max.bytes", _I, 57671680, "Cap on a fetch response's records",
              minimum=0),
    ConfigDef("max.incremental.fetch.session.cache.slots", _I, 1000,
              "Fetch sessions (KIP-227) kept at once", minimum=0),
    ConfigDef("producer.id.expiration.ms", _I, 86400000,
              "Idle time after which a producer's de-duplication state is dropped", minimum=1,
              dynamic=True),
    # The transaction coordinator (server_ref.transactions), Kafka's names and defaults.
    ConfigDef("transaction.state.log.num.partitions", _I, 50,
              "Partitions of __transaction_state", minimum=1),
    ConfigDef("transaction.state.log.segment.bytes", _I, 100 * 1024 * 1024,
              "segment.bytes of __transaction_state", minimum=14),
    ConfigDef("transaction.max.timeout.ms", _I, 900000,
              "Largest transaction timeout a producer may ask for", minimum=1),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", _I, 10000,
              "How often open transactions past their timeout are aborted", minimum=1),
    ConfigDef("transactional.id.expiration.ms", _I, 604800000,
              "Idle time after which a transactional id without an open transaction is "
              "forgotten", minimum=1),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", _I, 3600000,
              "How often expired transactional ids are removed", minimum=1),
    # The authorizer (server_ref.security.authorizer): Kafka's StandardAuthorizer or none.
    ConfigDef("authorizer.class.name", _S, "", "Authorizer class: "
              "org.apache.kafka.metadata.authorizer.StandardAuthorizer, or empty for none"),
    ConfigDef("super.users", _S, "", "Principals allowed everything (User:a;User:b)"),
    ConfigDef("allow.everyone.if.no.acl.found", _B, False,
              "Allow a request on a resource no ACL names"),
    # Tiered storage (server_ref.tiered): Kafka's names, plus where the remote tier is.
    ConfigDef("remote.log.storage.system.enable", _B, False,
              "Tiered storage on this broker (topics opt in with remote.storage.enable)"),
    ConfigDef("remote.log.manager.task.interval.ms", _L, 30000,
              "How often closed segments are copied to the remote tier and remote "
              "retention applied", minimum=1),
    ConfigDef("log.local.retention.ms", _L, -2, "Default local.retention.ms", minimum=-2,
              dynamic=True),
    ConfigDef("log.local.retention.bytes", _L, -2, "Default local.retention.bytes",
              minimum=-2, dynamic=True),
    ConfigDef("remote.log.storage.uri", _S, "",
              "Where the remote tier is: file:///path or s3://bucket/prefix (empty: "
              "<data dir>/remote-storage)"),
    ConfigDef("remote.log.storage.s3.endpoint", _S, "",
              "S3 API endpoint URL (empty: AWS's for the region)"),
    ConfigDef("remote.log.storage.s3.region", _S, "us-east-1", "S3 region"),
    ConfigDef("remote.log.storage.s3.request.timeout.ms", _I, 10000,
              "Longest wait for an S3 answer (two attempts per call)", minimum=1),
    ConfigDef("remote.log.storage.cache.bytes", _L, 64 * 1024 * 1024,
              "Memory for remote segment data and indexes read back (LRU)", minimum=0),
)
# Credentials of the remote tier: kept as text beside the security settings (never in
# repr, described as sensitive, never logged); without them the library's own chain is used.
SECRET_CONFIGS = frozenset({"remote.log.storage.s3.access.key.id",
                            "remote.log.storage.s3.secret.access.key"})

# Topic configs: what CreateTopics and AlterConfigs accept for a topic.
TOPIC_CONFIGS: dict[str, ConfigDef] = _defs(
    ConfigDef("cleanup.policy", _LIST, ("delete",), "delete, compact or both",
              choices=CLEANUP_POLICIES, broker_default="log.cleanup.policy"),
    ConfigDef("compression.type", _S, "producer", "Codec batches are stored with",
              choices=COMPRESSION_TYPES, broker_default="compression.type"),
    ConfigDef("delete.retention.ms", _L, _DAY_MS, "How long tombstones survive compaction",
              minimum=0, broker_default="log.cleaner.delete.retention.ms"),
    ConfigDef("flush.messages", _L, LONG_MAX, "fsync after this many messages", minimum=1,
              broker_default="log.flush.interval.messages"),
    ConfigDef("flush.ms", _L, LONG_MAX, "fsync at least this often", minimum=0,
              broker_default="log.flush.interval.ms"),
    ConfigDef("index.interval.bytes", _I, 4096, "Bytes between offset index entries",
              minimum=0, broker_default="log.index.interval.bytes"),
    ConfigDef("max.compaction.lag.ms", _L, LONG_MAX,
              "Longest a record stays uncompacted", minimum=1,
              broker_default="log.cleaner.max.compaction.lag.ms"),
    ConfigDef("max.message.bytes", _I, 1048588, "Largest record batch accepted", minimum=0,
              broker_default="message.max.bytes"),
    ConfigDef("message.timestamp.type", _S, "CreateTime", "CreateTime or LogAppendTime",
              choices=TIMESTAMP_TYPES, broker_default="log.message.timestamp.type"),
    ConfigDef("message.timestamp.before.max.ms", _L, LONG_MAX,
              "How far in the past a CreateTime timestamp may be", minimum=0,
              broker_default="log.message.timestamp.before.max.ms"),
    ConfigDef("message.timestamp.after.max.ms", _L, HOUR_MS,
              "How far in the future a CreateTime timestamp may be", minimum=0,
              broker_default="log.message.timestamp.after.max.ms"),
    ConfigDef("min.compaction.lag.ms", _L, 0, "Shortest a record stays uncompacted",
              minimum=0, broker_default="log.cleaner.min.compaction.lag.ms"),
    ConfigDef("min.insync.replicas", _I, 1, "Replicas that must have an acks=all write",
              minimum=1, broker_default="min.insync.replicas"),
    ConfigDef("retention.bytes", _L, -1, "Size a partition is trimmed to (-1: no limit)",
              broker_default="log.retention.bytes"),
    ConfigDef("retention.ms", _L, _WEEK_MS, "Age at which segments are deleted (-1: never)",
              minimum=-1, broker_default="log.retention.ms"),
    ConfigDef("segment.bytes", _I, 1 << 30, "Size at which a segment is rolled", minimum=14,
              broker_default="log.segment.bytes"),
    ConfigDef("segment.index.bytes", _I, 10 * 1024 * 1024,
              "Size of a segment's offset index; a full index rolls the segment", minimum=8,
              broker_default="log.index.size.max.bytes"),
    ConfigDef("segment.ms", _L, _WEEK_MS, "Age at which a segment is rolled", minimum=1,
              broker_default="log.roll.ms"),
    ConfigDef("unclean.leader.election.enable", _B, False,
              "Allow an out-of-sync replica to lead (no effect with one replica)",
              broker_default="unclean.leader.election.enable"),
    ConfigDef("remote.storage.enable", _B, False,
              "Copy closed segments to the remote tier (needs remote.log.storage.system.enable)"),
    ConfigDef("local.retention.ms", _L, -2, "How long copied segments stay local (-2: "
              "retention.ms)", minimum=-2, broker_default="log.local.retention.ms"),
    ConfigDef("local.retention.bytes", _L, -2, "Local bytes kept of copied segments (-2: "
              "retention.bytes)", minimum=-2, broker_default="log.local.retention.bytes"),
    ConfigDef("remote.log.copy.disable", _B, False,
              "Stop copying to the remote tier; remote data stays readable"),
    ConfigDef("remote.log.delete.on.disable", _B, False,
              "Delete the remote data when remote.storage.enable turns false"),
)

# Kafka's rules between consumer-group and share-group broker configs (its
# GroupCoordinatorConfig and ShareGroupConfig, in their order): (a, rule, b) holds when
# a >= b ("ge"), a <= b ("le") or a < b ("lt"). Kafka does not start with one broken, and
# refuses a dynamic change that breaks one (INVALID_REQUEST); the message is Kafka's.
_GROUP_RULES = (
    ("group.consumer.max.heartbeat.interval.ms", "ge",
     "group.consumer.min.heartbeat.interval.ms"),
    ("group.consumer.heartbeat.interval.ms", "ge", "group.consumer.min.heartbeat.interval.ms"),
    ("group.consumer.heartbeat.interval.ms", "le", "group.consumer.max.heartbeat.interval.ms"),
    ("group.consumer.max.session.timeout.ms", "ge", "group.consumer.min.session.timeout.ms"),
    ("group.consumer.session.timeout.ms", "ge", "group.consumer.min.session.timeout.ms"),
    ("group.consumer.session.timeout.ms", "le", "group.consumer.max.session.timeout.ms"),
    ("group.consumer.heartbeat.interval.ms", "lt", "group.consumer.session.timeout.ms"),
    ("group.share.max.heartbeat.interval.ms", "ge", "group.share.min.heartbeat.interval.ms"),
    ("group.share.heartbeat.interval.ms", "ge", "group.share.min.heartbeat.interval.ms"),
    ("group.share.heartbeat.interval.ms", "le", "group.share.max.heartbeat.interval.ms"),
    ("group.share.max.session.timeout.ms", "ge", "group.share.min.session.timeout.ms"),
    ("group.share.session.timeout.ms", "ge", "group.share.min.session.timeout.ms"),
    ("group.share.session.timeout.ms", "le", "group.share.max.session.timeout.ms"),
    ("group.share.heartbeat.interval.ms", "lt", "group.share.session.timeout.ms"),
    ("group.share.max.assignment.interval.ms", "ge", "group.share.min.assignment.interval.ms"),
    ("group.share.assignment.interval.ms", "ge", "group.share.min.assignment.interval.ms"),
    ("group.share.assignment.interval.ms", "le", "group.share.max.assignment.interval.ms"),
    ("group.share.max.delivery.count.limit", "ge", "group.share.delivery.count.limit"),
    ("group.share.delivery.count.limit", "ge", "group.share.min.delivery.count.limit"),
    ("group.share.max.partition.max.record.locks", "ge",
     "group.share.partition.max.record.locks"),
    ("group.share.partition.max.record.locks", "ge",
     "group.share.min.partition.max.record.locks"),
    ("group.share.record.lock.duration.ms", "ge", "group.share.min.record.lock.duration.ms"),
    ("group.share.max.record.lock.duration.ms", "ge", "group.share.record.lock.duration.ms"),
    ("group.share.max.share.sessions", "ge", "group.share.max.size"),
)
_RULE_TEXT = {"ge": "greater than or equal to", "le": "less than or equal to", "lt": "less than"}


def group_config_problem(properties: Mapping[str, Any]) -> str | None:
    """The first of Kafka's consumer- and share-group config rules ``properties`` break, as
    Kafka words it; None when they hold."""
    for a, rule, b in _GROUP_RULES:
        x, y = int(properties[a]), int(properties[b])
        if not (x >= y if rule == "ge" else x <= y if rule == "le" else x < y):
            return f"{a} must be {_RULE_TEXT[rule]} {b}"
    return None


# Kafka's older spellings of the retention default, accepted on the command line.
_RETENTION_ALIASES = {"log.retention.hours": 3600 * 1000, "log.retention.minutes": 60 * 1000}


@dataclass
class BrokerConfig:
    """Everything a broker is started with.

    ``properties`` holds the effective Kafka-named settings parsed through
    ``BROKER_CONFIGS``; ``static_keys`` remembers which were given explicitly (DescribeConfigs
    reports them as STATIC_BROKER_CONFIG). Configs altered at run time are kept as text in
    two levels, as Kafka keeps them: ``dynamic_broker`` (this broker's resource) over
    ``dynamic_default`` (the cluster-wide default, resource ""), over the static value, over
    the default. Names this broker does not act on (``server_ref.broker_configs``) are kept
    and described too.
    """

    host: str = "127.0.0.1"
    port: int = 9092
    data_dir: Path | None = None
    advertised_host: str | None = None
    fsync: bool = False  # flush every append before acknowledging (log.flush.interval.messages=1)
    zero_copy: bool = True  # send large fetch responses with sendfile where the OS allows
    cluster_id: str | None = None  # None: generated once and kept in the data dir
    properties: dict[str, Any] = field(default_factory=dict)
    static_keys: set[str] = field(default_factory=set)
    dynamic_broker: dict[str, str] = field(default_factory=dict)
    dynamic_default: dict[str, str] = field(default_factory=dict)
    # Listener, TLS and SASL settings as given (text), read by server_ref.security at start;
    # kept out of repr: they hold passwords and keys.
    security: dict[str, str] = field(default_factory=dict, repr=False)
    _static: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        given = dict(self.properties)
        self.properties = {name: d.default for name, d in BROKER_CONFIGS.items()}
        for name, value in given.items():
            try:
                self._set(name, value, static=True)
            except InvalidConfigError as exc:
                raise ConfigError(exc.message or str(exc), key=name, value=value) from None
        if self.fsync and "log.flush.interval.messages" not in given:
            self._set("log.flush.interval.messages", "1", static=True)
        if (problem := group_config_problem(self.properties)) is not None:
            raise ConfigError(problem)

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any] | Iterable[str] = (),
                        **kwargs: Any) -> BrokerConfig:
        """Build from ``{"num.partitions": "3"}`` or ``["num.partitions=3", ...]``."""
        if isinstance(properties, Mapping):
            items = dict(properties)
        else:
            items = {}
            for entry in properties:
                key, sep, value = entry.partition("=")
                if not sep:
                    raise InvalidConfigError(f"expected key=value, got {entry!r}")
                items[key.strip()] = value
        return cls(properties=items, **kwargs)

    def _set(self, name: str, value: Any, *, static: bool) -> None:
        if name in _RETENTION_ALIASES:
            number = parse_config_value(BROKER_CONFIGS["log.retention.ms"], str(value))
            value, name = str(number * _RETENTION_ALIASES[name]), "log.retention.ms"
        definition = BROKER_CONFIGS.get(name)
        if definition is None and static and (is_security_config(name)
                                              or name in SECRET_CONFIGS):
            self.security[name] = (",".join(map(str, value))
                                   if isinstance(value, (list, tuple)) else str(value))
            return
        if definition is None:
            raise InvalidConfigError(
                f"unknown broker config {name!r}; known: {', '.join(sorted(BROKER_CONFIGS))}"
            )
        if not isinstance(value, str):
            value = definition.render(value) if not isinstance(value, (list, tuple)) \
                else ",".join(value)
        self.properties[name] = parse_config_value(definition, value)
        if static:
            self.static_keys.add(name)
            self._static[name] = self.properties[name]

    def get(self, name: str) -> Any:
        return self.properties[name]

    @property
    def dynamic_keys(self) -> set[str]:
        return set(self.dynamic_broker) | set(self.dynamic_default)

    def alter(self, name: str, value: str | None, *, cluster_default: bool = False) -> None:
        """Set (or with None, remove) a dynamic broker config at this broker's level or, with
        ``cluster_default``, the cluster-wide one. Kafka's update rules are checked by
        ``server_ref.broker_configs.validate_broker_update``; here only that the config is
        not static and that a value this broker acts on parses."""
        from server_ref.broker_configs import catalogue  # the Kafka table, read on first use

        known = catalogue().get(name)
        definition = BROKER_CONFIGS.get(name)
        if value is not None and ((known is not None and not known.dynamic) or (
                known is None and definition is not None and not definition.dynamic)):
            raise InvalidConfigError(f"Cannot update these configs dynamically: {{{name}}}")
        level = self.dynamic_default if cluster_default else self.dynamic_broker
        if value is None:
            level.pop(name, None)
        else:
            if definition is not None:
                parse_config_value(definition, value)
            level[name] = value
        if definition is not None:
            self._refresh(name)

    def _refresh(self, name: str) -> None:
        definition = BROKER_CONFIGS[name]
        for level in (self.dynamic_broker, self.dynamic_default):
            if name in level:
                self.properties[name] = parse_config_value(definition, level[name])
                return
        self.properties[name] = self._static.get(name, definition.default)

    def levels(self, name: str) -> list[tuple[Any, ConfigSource]]:
        """Each level holding a value of ``name``, the one in effect first, ending with the
        default: DescribeConfigs' synonyms, as Kafka lists them for a GROUP config."""
        definition = BROKER_CONFIGS[name]
        out: list[tuple[Any, ConfigSource]] = [
            (parse_config_value(definition, level[name]), source)
            for level, source in ((self.dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
                                  (self.dynamic_default,
                                   ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
            if name in level]
        if name in self._static:
            out.append((self._static[name], ConfigSource.STATIC_BROKER_CONFIG))
        return [*out, (definition.default, ConfigSource.DEFAULT_CONFIG)]

    def source_of(self, name: str) -> ConfigSource:
        if name in self.dynamic_broker:
            return ConfigSource.DYNAMIC_BROKER_CONFIG
        if name in self.dynamic_default:
            return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        if name in self.static_keys:
            return ConfigSource.STATIC_BROKER_CONFIG
        return ConfigSource.DEFAULT_CONFIG

    @property
    def node_id(self) -> int:
        return int(self.properties["node.id"])

    @property
    def advertised(self) -> str:
        return self.advertised_host or self.host

    def topic_default(self, topic_key: str) -> Any:
        """The broker-wide default of a topic config."""
        definition = TOPIC_CONFIGS[topic_key]
        if definition.broker_default is None:
            return definition.default
        return self.properties[definition.broker_default]


def read_json(path: Path) -> Any:
    """What :func:`write_json_atomically` left at ``path``; None when there is no file."""
    if not path.exists():
        return None
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def write_json_atomically(path: Path, data: Any) -> None:
    """Write, fsync and rename, so a crash leaves either the old file or the new one."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
