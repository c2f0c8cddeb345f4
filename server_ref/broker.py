"""The Broker: every piece of state one reference broker owns, on one event loop.

It holds the topic registry (and through it the partition logs and their producer state),
the producer id allocator, the fetch sessions, the group coordinator with its journal over
``__consumer_offsets``, the transaction coordinator over ``__transaction_state``, and the control surface for tests. A maintenance task applies
retention, compaction, ``flush.ms`` and producer-state expiry. ``KafkaServer`` (server.py)
serves it over TCP; ``run_broker`` and ``EmbeddedBroker`` put the two together.

Files in the data directory besides the partition logs: ``meta.properties`` (cluster and node
id), ``topics.json``, ``broker_configs.json`` (dynamic broker configs), ``producer_ids.json``
and ``producer_state.json`` (written at clean shutdown), ``acls.json`` (ACL bindings),
``scram_credentials.json`` (SCRAM users: salt, StoredKey, ServerKey, iterations; in place of
Kafka's metadata log, which a single node without KRaft does not have).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

try:
    import fcntl
except ImportError:  # not POSIX: no data directory lock
    fcntl = None  # type: ignore[assignment]

from sdk.errors import IllegalStateError, InvalidConfigError, UnknownTopicOrPartitionError
from server_ref.config import BrokerConfig, read_json, write_json_atomically
from server_ref.control import ControlSurface
from server_ref.groups import GroupConfig, GroupCoordinator
from server_ref.handlers.fetch_sessions import FetchSessionCache
from server_ref.metrics.registry import BrokerMetrics
from server_ref.offsets_journal import OFFSETS_TOPIC, OffsetsJournal
from server_ref.producer_state import (
    PartitionProducers,
    ProducerIdAllocator,
    load_snapshot,
    write_snapshot,
)
from server_ref.security.acls import AclStore
from server_ref.security.authorizer import Authorizer, make_authorizer
from server_ref.security.credentials import CredentialStore
from server_ref.tiered import RemoteLogManager
from server_ref.topics import INTERNAL_TOPICS, Partition, Topic, TopicRegistry
from server_ref.transactions import TransactionCoordinator

log = logging.getLogger(__name__)

__all__ = ["Broker"]

META_FILE = "meta.properties"
LOCK_FILE = ".lock"
BROKER_CONFIGS_FILE = "broker_configs.json"
MAX_TICK_S = 1.0


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Broker:
    def __init__(self, config: BrokerConfig, data_dir: Path) -> None:
        self.config = config
        self.data_dir = Path(data_dir)
        self.node_id = config.node_id
        self.host = config.advertised
        self.port = config.port
        self.cluster_id = config.cluster_id or ""
        self.topics = TopicRegistry(self.data_dir, config, now_ms)
        self.fetch_sessions = FetchSessionCache(
            int(config.get("max.incremental.fetch.session.cache.slots")))
        self.control = ControlSurface()
        self.producer_ids: ProducerIdAllocator | None = None
        self.offsets_journal = OffsetsJournal(self)
        self.groups: GroupCoordinator | None = None
        self.transactions: TransactionCoordinator | None = None  # over __transaction_state
        # Advertised (host, port) per listener name, set when the listeners are bound
        # (Metadata answers with the endpoints of the listener the client came in on).
        self.endpoints: dict[str, tuple[str, int]] = {}
        self.credentials = CredentialStore(self.data_dir)  # SCRAM users
        # ACL bindings (acls.json) and, with authorizer.class.name set, the authorizer every
        # request passes (None: everything allowed, at the cost of one None check).
        self.acls = AclStore(self.data_dir)
        # Cluster mode (server_ref.cluster.agent.ClusterAgent): metadata replay, registration,
        # replication. None on a single node, the default.
        self.cluster: Any = None
        self.authorizer: Authorizer | None = None
        # Tiered storage: remote segment metadata (__remote_log_metadata), copies, reads.
        self.remote = RemoteLogManager(self)
        # Counters for the metrics endpoint (server_ref.metrics); None without one, so the
        # request path pays one None check.
        self.metrics: BrokerMetrics | None = None
        self._maintenance: asyncio.Task[None] | None = None
        self._last_retention_ms = 0
        self._last_compaction_ms = 0
        self._last_flush_ms: dict[int, int] = {}
        self._compacted: dict[int, tuple[tuple[int, int, int], int]] = {}
        self._lock_handle: BinaryIO | None = None
        self.opened = False

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        """Load everything from the data directory (recovering logs). Runs on the loop."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock_data_dir()
        try:
            self._load()
        except BaseException:
            self.topics.close()
            self._unlock_data_dir()
            raise
        self.opened = True

    def _load(self) -> None:
        self._load_meta()
        self._load_dynamic_configs()
        self.credentials.load()
        self.acls, self.authorizer = make_authorizer(self.config, self.data_dir)
        self.topics.load()
        self.producer_ids = ProducerIdAllocator(self.data_dir)
        self._load_producer_state()
        self.remote.load()
        self.groups = self._make_group_coordinator()
        self.transactions = TransactionCoordinator(self)

    def _lock_data_dir(self) -> None:
        """One broker per data directory, as Kafka's ``.lock``: a second one fails fast."""
        if fcntl is None:
            return
        handle = open(self.data_dir / LOCK_FILE, "a+b")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise IllegalStateError(
                f"data directory {self.data_dir} is in use by another broker") from None
        self._lock_handle = handle

    def _unlock_data_dir(self) -> None:
        if self._lock_handle is not None:
            self._lock_handle.close()  # closing the file releases the lock
            self._lock_handle = None

    async def start(self) -> None:
        if not self.opened:
            self.open()
        if self.cluster is not None:  # learn the metadata before serving anything
            await self.cluster.start()
        if self.groups is not None:
            await self.groups.start()
        if self.transactions is not None:  # after the groups: recovery may decide offsets
            await self.transactions.start()
        self._maintenance = asyncio.get_running_loop().create_task(self._maintain())
        self.remote.start()

    async def stop(self) -> None:
        if self._maintenance is not None:
            self._maintenance.cancel()
            try:
                await self._maintenance
            except asyncio.CancelledError:
                pass  # the cancellation asked for just above
            self._maintenance = None
        from server_ref.share.coordinator import ShareCoordinator  # made on first use

        await ShareCoordinator.shutdown(self)
        if self.cluster is not None:
            await self.cluster.stop()
        await self.remote.stop()
        if self.transactions is not None:
            await self.transactions.stop()
        if self.groups is not None:
            await self.groups.stop()
        self.close()

    def close(self) -> None:
        """Flush and close every log, leaving a producer-state snapshot behind."""
        if not self.opened:
            return
        self.opened = False
        try:
            write_snapshot(self.data_dir, self._producer_states())
        except OSError as exc:
            log.warning("could not write the producer state snapshot: %s", exc)
        self.topics.close()
        self._unlock_data_dir()

    def _load_meta(self) -> None:
        path = self.data_dir / META_FILE
        props: dict[str, str] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                key, sep, value = line.partition("=")
                if sep and not line.startswith("#"):
                    props[key.strip()] = value.strip()
        stored = props.get("cluster.id")
        if stored and self.config.cluster_id and stored != self.config.cluster_id:
            raise ValueError(
                f"data directory {self.data_dir} belongs to cluster {stored}, "
                f"not {self.config.cluster_id}"
            )
        self.cluster_id = stored or self.config.cluster_id or _new_cluster_id()
        if not stored:
            text = f"version=1\ncluster.id={self.cluster_id}\nnode.id={self.node_id}\n"
            tmp = path.with_suffix(".tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(path)

    def _load_dynamic_configs(self) -> None:
        saved = read_json(self.data_dir / BROKER_CONFIGS_FILE) or {}
        if "broker" not in saved and "default" not in saved:
            saved = {"broker": saved}  # the first layout: one flat level
        for level, cluster_default in (("broker", False), ("default", True)):
            for name, value in (saved.get(level) or {}).items():
                try:
                    self.config.alter(name, value, cluster_default=cluster_default)
                except InvalidConfigError as exc:  # e.g. a config made static since
                    log.warning("ignoring stored broker config %s=%r: %s", name, value, exc)

    def save_dynamic_configs(self) -> None:
        data = {"broker": dict(sorted(self.config.dynamic_broker.items())),
                "default": dict(sorted(self.config.dynamic_default.items()))}
        write_json_atomically(self.data_dir / BROKER_CONFIGS_FILE, data)

    def _producer_states(self) -> Iterator[tuple[str, int, PartitionProducers]]:
        for topic in self.topics:
            for partition in topic.partitions:
                yield _state_key(topic, partition), partition.log.log_end_offset, \
                    partition.producers

    def _load_producer_state(self) -> None:
        snapshot = load_snapshot(self.data_dir)
        now = now_ms()
        for topic in self.topics:
            for partition in topic.partitions:
                plog = partition.log
                start = plog.log_start_offset
                saved = snapshot.get(_state_key(topic, partition))
                if saved is not None and saved[0] <= plog.log_end_offset:
                    partition.producers = PartitionProducers.from_json(saved[1])
                    start = max(start, saved[0])
                partition.producers.rebuild(plog, start, now)
        # The snapshot is only valid for the shutdown that wrote it; after a crash the logs
        # are scanned in full.
        (self.data_dir / "producer_state.json").unlink(missing_ok=True)

    def _make_group_coordinator(self) -> GroupCoordinator:
        group_config = GroupConfig.from_properties(self.config.properties)
        return GroupCoordinator(self.offsets_journal, group_config, now_ms=now_ms)

    # ------------------------------------------------------------------ queries

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def endpoint(self, listener: str) -> tuple[str, int]:
        """The (host, port) clients of ``listener`` are told to use."""
        return self.endpoints.get(listener) or (self.host, self.port)

    def now_ms(self) -> int:
        return now_ms()

    def partition_exists(self, topic: str, partition: int) -> bool:
        return self.topics.partition(topic, partition) is not None

    def partition_count(self, topic: str) -> int | None:
        found = self.topics.get(topic)
        return None if found is None else len(found.partitions)

    def auto_create(self, name: str) -> Topic:
        """Create a topic with the broker defaults (Metadata's auto creation); the offsets
        topic gets its own settings, other internal names are not created this way."""
        if name == OFFSETS_TOPIC:
            return self.offsets_journal.ensure_topic()
        if name in INTERNAL_TOPICS:
            raise UnknownTopicOrPartitionError(f"internal topic {name} is not in use")
        return self.topics.create(name)

    def delete_topic(self, name: str) -> None:
        self.topics.delete(name)
        self.fetch_sessions.forget_topic(name)

    # ------------------------------------------------------------------ maintenance

    def _tick_seconds(self) -> float:
        intervals = [
            int(self.config.get("log.retention.check.interval.ms")),
            int(self.config.get("log.cleaner.backoff.ms")) or 1000,
        ]
        return max(0.01, min(MAX_TICK_S, min(intervals) / 1000))

    async def _maintain(self) -> None:
        while True:
            await asyncio.sleep(self._tick_seconds())
            try:
                self.run_maintenance(now_ms())
            except Exception:
                log.exception("log maintenance failed")

    def run_maintenance(self, now: int, *, force: bool = False) -> None:
        """Retention, compaction, time-based flushes and producer expiry, when due."""
        retention_due = force or now - self._last_retention_ms >= int(
            self.config.get("log.retention.check.interval.ms"))
        compaction_due = force or now - self._last_compaction_ms >= int(
            self.config.get("log.cleaner.backoff.ms"))
        if retention_due:
            self._last_retention_ms = now
        if compaction_due:
            self._last_compaction_ms = now
        expiry = int(self.config.get("producer.id.expiration.ms"))
        for topic in self.topics:
            policy = topic.config_value("cleanup.policy", self.config)
            flush_ms = int(topic.config_value("flush.ms", self.config))
            tiered = retention_due and self.remote.manages(topic)
            for partition in topic.partitions:
                plog = partition.log
                if retention_due:
                    if tiered:  # only copied segments go; the remote tier's retention is its own
                        self.remote.apply_local_retention(partition, now)
                    elif "delete" in policy:
                        plog.apply_retention(now)
                    partition.producers.expire(now - expiry)
                if compaction_due and "compact" in policy and self._needs_compaction(
                        partition, now, int(topic.config_value("delete.retention.ms",
                                                               self.config))):
                    plog.compact(now)
                if flush_ms < (1 << 62):
                    key = id(partition)
                    if now - self._last_flush_ms.get(key, 0) >= flush_ms:
                        plog.flush()
                        self._last_flush_ms[key] = now


    def _needs_compaction(self, partition: Partition, now: int, delete_retention_ms: int
                          ) -> bool:
        """A pass only does something after a segment was sealed, or once tombstones of an
        earlier pass reach their delete horizon; skip idle partitions otherwise."""
        plog = partition.log
        shape = (plog.active_segment.base_offset, len(plog.segments), plog.log_start_offset)
        last = self._compacted.get(id(partition))
        if last is not None and last[0] == shape and now - last[1] < delete_retention_ms:
            return False
        self._compacted[id(partition)] = (shape, now)
        return True


def _state_key(topic: Topic, partition: Partition) -> str:
    return f"{topic.topic_id}:{partition.index}"


def _new_cluster_id() -> str:
    """Kafka's form: a random UUID in URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")

