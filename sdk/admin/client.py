"""AsyncAdminClient: the admin API on one event loop, composing the family modules.

Every method takes ``timeout_ms`` (default: ``default_api_timeout_ms``, 60 s), the budget
for the whole call, retries included. Calls on several items return a
:class:`sdk.admin.results.ResultSet` with an error slot per item; see
:mod:`sdk.admin.results`. Errors that concern the call as a whole (bad arguments, no broker
reachable, the group's own error in single-group calls) are raised.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from sdk.admin.dispatch import Deadline, Dispatcher
from sdk.admin.share_groups import ShareGroupAdmin  # share-group methods (KIP-932)
from sdk.errors import IllegalStateError
from sdk.metrics.telemetry import ClientTelemetry, ObservedClient
from sdk.net import NetClient
from sdk.net.describe import describe_client
from sdk.net.fork import watch
from sdk.types import NewTopic, OffsetAndMetadata, TopicPartition

__all__ = ["AsyncAdminClient"]


class _Family:
    """Stands for a family module until its first attribute access, which imports it and
    rebinds the module global to it (so later calls go straight to the module)."""

    def __init__(self, global_name: str, module: str) -> None:
        self._global_name = global_name
        self._module = f"sdk.admin.{module}"

    def __getattr__(self, attr: str) -> Any:
        module = importlib.import_module(self._module)
        globals()[self._global_name] = module
        return getattr(module, attr)


if TYPE_CHECKING:
    from sdk.admin import acls, configs, groups, offsets, topics, transactions
    from sdk.admin import partitions as partition_ops  # the name `partitions` is an argument
    from sdk.admin.acl_types import (
        AclBinding,
        AclBindingFilter,
        AclResult,
        DeletedAcls,
        UserScramCredentialDeletion,
        UserScramCredentials,
        UserScramCredentialUpsertion,
        UserScramResult,
    )
    from sdk.admin.configs import ConfigChanges
    from sdk.admin.groups import ConsumerProtocolGroup
    from sdk.admin.log_dirs import LogDirDescription
    from sdk.admin.results import (
        ClusterDescription,
        CommittedOffset,
        ConfigResource,
        ConfigResourceResult,
        CreateTopicResult,
        DeletedRecords,
        ElectionResult,
        ElectionType,
        GroupDescription,
        GroupLag,
        GroupListing,
        GroupResult,
        ListedOffset,
        OffsetSpec,
        PartitionReassignment,
        ReassignmentResult,
        ResourceConfig,
        ResultSet,
        TopicDescription,
        TopicListing,
        TopicResult,
    )
    from sdk.admin.topics import NewPartitions
    from sdk.admin.transactions import (
        AbortTransactionResult,
        PartitionProducers,
        TransactionDescription,
        TransactionListing,
    )
else:
    # The family modules load at the first call that needs one: with them sdk.admin.results
    # (some 30 dataclasses, ~15 ms), which importing the clients need not pay for.
    acls = _Family("acls", "acls")
    configs = _Family("configs", "configs")
    groups = _Family("groups", "groups")
    transactions = _Family("transactions", "transactions")
    offsets = _Family("offsets", "offsets")
    topics = _Family("topics", "topics")
    partition_ops = _Family("partition_ops", "partitions")


class AsyncAdminClient(ShareGroupAdmin, ObservedClient):
    """Administer topics, configs, consumer groups and offsets of a Kafka cluster.

    ``AsyncAdminClient(bootstrap_servers="host:9092", request_timeout_ms=10000)`` or
    ``AsyncAdminClient(config={"bootstrap.servers": "host:9092"})``; see
    :class:`sdk.admin.config.AdminConfig` for the settings. Use as an async context manager
    or call :meth:`close`. The first call connects (NoBrokersAvailableError / KafkaTimeoutError
    when no bootstrap server answers within the call's timeout).
    """

    _labelled = ("start", "_ready", "close")  # the first call connects (sdk.metrics)

    def __init__(self, config: Mapping[str, Any] | None = None, /, **kwargs: Any) -> None:
        from sdk.admin.config import AdminConfig  # pydantic: loaded on first use

        self.config = AdminConfig.from_arguments((config,), kwargs)[0]
        self._telemetry = ClientTelemetry(self.config, "admin-client")  # sdk.metrics
        self._client = NetClient(self.config, observer=self._telemetry.network)
        self._dispatcher = Dispatcher(self._client, self.config)
        self._started = False
        self._closed = False
        watch(self)  # unusable in the child of a fork (sdk.net.fork)

    # ------------------------------------------------------------------ lifecycle

    async def start(self, timeout_ms: int | None = None) -> None:
        """Connect and read the cluster metadata (done by the first call if not before)."""
        await self._ready(timeout_ms)

    async def close(self) -> None:
        """Close every connection. Safe to call twice."""
        self._closed = True
        await self._client.close()
        await self._telemetry.close()

    def _telemetry_of(self) -> ClientTelemetry:
        return self._telemetry

    async def __aenter__(self) -> AsyncAdminClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    def _deadline(self, timeout_ms: int | None) -> Deadline:
        ms = self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms
        if isinstance(ms, bool) or not isinstance(ms, int | float) or ms <= 0:
            raise ValueError(f"timeout_ms must be a positive number, not {timeout_ms!r}")
        return Deadline(ms / 1000)

    async def _ready(self, timeout_ms: int | None) -> tuple[Dispatcher, Deadline]:
        deadline = self._deadline(timeout_ms)
        if self._closed:
            raise IllegalStateError("the admin client is closed")
        if not self._started:
            await self._client.bootstrap(timeout_s=max(0.001, deadline.remaining()))
            self._started = True
            self._telemetry.start()
        return self._dispatcher, deadline

    # ------------------------------------------------------------------ topics

    async def create_topics(self, new_topics: Sequence[NewTopic], *, validate_only: bool = False,
                            timeout_ms: int | None = None) -> ResultSet[str, CreateTopicResult]:
        """Create topics; ``validate_only`` asks the broker to check without creating."""
        d, deadline = await self._ready(timeout_ms)
        return await topics.create_topics(d, new_topics, validate_only=validate_only,
                                          deadline=deadline)

    async def delete_topics(self, names: Sequence[str], *,
                            timeout_ms: int | None = None) -> ResultSet[str, TopicResult]:
        """Delete topics and their records (sent to the controller); an unknown topic
        carries UnknownTopicOrPartitionError."""
        d, deadline = await self._ready(timeout_ms)
        return await topics.delete_topics(d, names, deadline=deadline)

    async def list_topics(self, *, include_internal: bool = False,
                          timeout_ms: int | None = None) -> dict[str, TopicListing]:
        """Every topic by name (sorted); internal ones such as __consumer_offsets on request."""
        d, deadline = await self._ready(timeout_ms)
        return await topics.list_topics(d, include_internal=include_internal, deadline=deadline)

    async def describe_topics(self, names: Sequence[str] | None = None, *,
                              timeout_ms: int | None = None
                              ) -> ResultSet[str, TopicDescription]:
        """Partitions with leader, replicas and ISR; ``None`` describes every topic."""
        d, deadline = await self._ready(timeout_ms)
        return await topics.describe_topics(d, names, deadline=deadline)

    async def create_partitions(self, new_partitions: Mapping[str, int | NewPartitions], *,
                                validate_only: bool = False, timeout_ms: int | None = None
                                ) -> ResultSet[str, TopicResult]:
        """Grow topics to a new total partition count: ``{"orders": 12}``."""
        d, deadline = await self._ready(timeout_ms)
        return await topics.create_partitions(d, new_partitions, validate_only=validate_only,
                                              deadline=deadline)

    async def describe_cluster(self, *, timeout_ms: int | None = None) -> ClusterDescription:
        """The cluster id, the controller's id and every broker (id, host, port, rack)."""
        d, deadline = await self._ready(timeout_ms)
        return await topics.describe_cluster(d, deadline=deadline)

    # ------------------------------------------------------------------ configs

    async def describe_configs(self, resources: Sequence[ConfigResource], *,
                               names: Sequence[str] | None = None,
                               include_synonyms: bool = False,
                               include_documentation: bool = False,
                               timeout_ms: int | None = None
                               ) -> ResultSet[ConfigResource, ResourceConfig]:
        """Configs of topics and brokers (``ConfigResource.topic("t")``,
        ``ConfigResource.broker(1)``); ``names`` limits the answer to those configs."""
        d, deadline = await self._ready(timeout_ms)
        return await configs.describe_configs(
            d, resources, names=names, include_synonyms=include_synonyms,
            include_documentation=include_documentation, deadline=deadline)

    async def alter_configs(self, changes: ConfigChanges, *, validate_only: bool = False,
                            timeout_ms: int | None = None
                            ) -> ResultSet[ConfigResource, ConfigResourceResult]:
        """Change configs incrementally (only the named ones change):
        ``{ConfigResource.topic("t"): {"retention.ms": "1000", "cleanup.policy": None}}``
        (None resets to the default) or lists of :class:`AlterConfigOp`."""
        d, deadline = await self._ready(timeout_ms)
        return await configs.alter_configs(d, changes, validate_only=validate_only,
                                           deadline=deadline)

    # ------------------------------------------------------------------ groups

    async def list_consumer_groups(self, *, states: Sequence[str] | None = None,
                                   types: Sequence[str] | None = None,
                                   timeout_ms: int | None = None) -> dict[str, GroupListing]:
        """Every group of every broker by id; ``states`` filters ("Stable", "Empty", ...)."""
        d, deadline = await self._ready(timeout_ms)
        return await groups.list_groups(d, states=states, types=types, deadline=deadline)

    async def describe_consumer_groups(self, group_ids: Sequence[str], *,
                                       timeout_ms: int | None = None
                                       ) -> ResultSet[str, GroupDescription]:
        """State, protocol, members and their assigned partitions."""
        d, deadline = await self._ready(timeout_ms)
        return await groups.describe_groups(d, group_ids, deadline=deadline)

    async def consumer_group_describe(self, group_ids: Sequence[str], *,
                                      timeout_ms: int | None = None
                                      ) -> ResultSet[str, ConsumerProtocolGroup]:
        """KIP-848 groups (group.protocol=consumer): epochs, assignor, each member's
        subscription, assignment and target assignment (ConsumerGroupDescribe)."""
        d, deadline = await self._ready(timeout_ms)
        return await groups.consumer_group_describe(d, group_ids, deadline=deadline)

    async def delete_consumer_groups(self, group_ids: Sequence[str], *,
                                     timeout_ms: int | None = None
                                     ) -> ResultSet[str, GroupResult]:
        """Delete groups (and their committed offsets); a group with members fails with
        NonEmptyGroupError."""
        d, deadline = await self._ready(timeout_ms)
        return await groups.delete_groups(d, group_ids, deadline=deadline)

    async def list_consumer_group_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition] | None = None, *,
        require_stable: bool = False, timeout_ms: int | None = None,
    ) -> ResultSet[TopicPartition, CommittedOffset]:
        """Committed offsets of ``partitions`` (or of every partition the group committed)."""
        d, deadline = await self._ready(timeout_ms)
        return await groups.list_group_offsets(d, group_id, partitions,
                                               require_stable=require_stable, deadline=deadline)

    async def alter_consumer_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata | int], *,
        timeout_ms: int | None = None,
    ) -> ResultSet[TopicPartition, CommittedOffset]:
        """Commit offsets for a group that has no active members."""
        d, deadline = await self._ready(timeout_ms)
        return await groups.alter_group_offsets(d, group_id, offsets, deadline=deadline)

    async def reset_consumer_group_offsets(
        self, group_id: str, to: OffsetSpec | int, *, topics: Sequence[str] | None = None,
        partitions: Sequence[TopicPartition] | None = None, dry_run: bool = False,
        timeout_ms: int | None = None,
    ) -> ResultSet[TopicPartition, CommittedOffset]:
        """Reset to ``OffsetSpec.EARLIEST``, ``OffsetSpec.LATEST`` or a timestamp (ms); the
        group must have no active members (else NonEmptyGroupError)."""
        d, deadline = await self._ready(timeout_ms)
        return await groups.reset_group_offsets(d, group_id, to, topics=topics,
                                                partitions=partitions, dry_run=dry_run,
                                                deadline=deadline)

    async def consumer_group_lag(self, group_id: str, *,
                                 isolation_level: str = "read_uncommitted",
                                 timeout_ms: int | None = None) -> GroupLag:
        """Committed vs end offset per partition, and the total."""
        d, deadline = await self._ready(timeout_ms)
        return await groups.group_lag(d, group_id, isolation_level=isolation_level,
                                      deadline=deadline)

    # ------------------------------------------------------------------ transactions

    async def list_transactions(self, *, states: Sequence[str] | None = None,
                                producer_ids: Sequence[int] | None = None,
                                min_duration_ms: int | None = None,
                                timeout_ms: int | None = None) -> dict[str, TransactionListing]:
        """Every transactional id of every broker, optionally only those in ``states``
        ("Ongoing", "PrepareCommit", ...), of ``producer_ids`` or open for at least
        ``min_duration_ms``."""
        d, deadline = await self._ready(timeout_ms)
        return await transactions.list_transactions(
            d, states=states, producer_ids=producer_ids, min_duration_ms=min_duration_ms,
            deadline=deadline)

    async def describe_transactions(self, transactional_ids: Sequence[str], *,
                                    timeout_ms: int | None = None
                                    ) -> ResultSet[str, TransactionDescription]:
        """State, producer id and epoch, timeout, start time and partitions, per id."""
        d, deadline = await self._ready(timeout_ms)
        return await transactions.describe_transactions(d, transactional_ids,
                                                        deadline=deadline)

    async def describe_producers(self, partitions: Sequence[TopicPartition], *,
                                 timeout_ms: int | None = None
                                 ) -> ResultSet[TopicPartition, PartitionProducers]:
        """The producers with state on each partition (from its leader), with the start
        offset of their open transaction there."""
        d, deadline = await self._ready(timeout_ms)
        return await transactions.describe_producers(d, partitions, deadline=deadline)

    async def abort_transaction(self, partition: TopicPartition, producer_id: int, *,
                                producer_epoch: int | None = None,
                                coordinator_epoch: int | None = None,
                                timeout_ms: int | None = None) -> AbortTransactionResult:
        """Abort a *hanging* transaction of ``producer_id`` on ``partition`` (abort marker
        written by the leader, as Java's admin does); the epochs default to what
        describe_producers reports."""
        d, deadline = await self._ready(timeout_ms)
        return await transactions.abort_transaction(
            d, partition, producer_id, producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch, deadline=deadline)

    # ------------------------------------------------------------------ partitions

    async def list_offsets(self, specs: Mapping[TopicPartition, OffsetSpec | int], *,
                           isolation_level: str = "read_uncommitted",
                           timeout_ms: int | None = None
                           ) -> ResultSet[TopicPartition, ListedOffset]:
        """Earliest / latest / max-timestamp offsets, or the first offset at a timestamp."""
        d, deadline = await self._ready(timeout_ms)
        return await offsets.list_offsets(d, specs, isolation_level=isolation_level,
                                          deadline=deadline)

    async def describe_log_dirs(self, broker_ids: Sequence[int] | None = None, *,
                                timeout_ms: int | None = None
                                ) -> dict[int, list[LogDirDescription]]:
        """Each broker's log directories (None: every broker's) with the size of every
        replica in them; the reference broker with tiered storage also lists its remote
        tier (``LogDirDescription.is_remote``) with each partition's bytes there."""
        from sdk.admin import log_dirs

        d, deadline = await self._ready(timeout_ms)
        return await log_dirs.describe_log_dirs(d, broker_ids, deadline=deadline)

    async def delete_records(self, before: Mapping[TopicPartition, int], *,
                             timeout_ms: int | None = None
                             ) -> ResultSet[TopicPartition, DeletedRecords]:
        """Delete every record below the given offset (-1: below the high watermark)."""
        d, deadline = await self._ready(timeout_ms)
        return await offsets.delete_records(d, before, deadline=deadline)

    # ------------------------------------------------------------------ leaders, replicas

    async def elect_leaders(self, election_type: ElectionType,
                            partitions: Sequence[TopicPartition] | None = None, *,
                            timeout_ms: int | None = None
                            ) -> ResultSet[TopicPartition, ElectionResult]:
        """Elect the preferred replica (``ElectionType.PREFERRED``) or, for a partition whose
        in-sync replicas are all down, any live replica (``ElectionType.UNCLEAN``: records
        may be lost) as leader. ``None`` asks for every partition; the answer then lists only
        the partitions that got a new leader or failed. A partition that already has the
        wanted leader carries ElectionNotNeededError."""
        d, deadline = await self._ready(timeout_ms)
        return await partition_ops.elect_leaders(d, election_type, partitions,
                                                 deadline=deadline)

    async def alter_partition_reassignments(
        self, reassignments: Mapping[TopicPartition, Sequence[int] | None], *,
        timeout_ms: int | None = None,
    ) -> ResultSet[TopicPartition, ReassignmentResult]:
        """Move partitions to new replicas: ``{TopicPartition("t", 0): [2, 3]}`` (the first
        is the preferred leader); ``None`` cancels a move in progress. Success means the
        controller started the move; :meth:`list_partition_reassignments` shows it until the
        new replicas have caught up."""
        d, deadline = await self._ready(timeout_ms)
        return await partition_ops.alter_partition_reassignments(d, reassignments,
                                                                 deadline=deadline)

    async def list_partition_reassignments(
        self, partitions: Sequence[TopicPartition] | None = None, *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, PartitionReassignment]:
        """The reassignments in progress (of ``partitions``, or of every partition), with
        the replicas being added and removed; partitions not being moved are left out."""
        d, deadline = await self._ready(timeout_ms)
        return await partition_ops.list_partition_reassignments(
            d, partitions, deadline=deadline)

    # ------------------------------------------------------------------ ACLs, SCRAM users

    async def create_acls(self, bindings: Sequence[AclBinding], *,
                          timeout_ms: int | None = None) -> ResultSet[AclBinding, AclResult]:
        """Create ACL bindings (a result per binding; creating an existing one succeeds).
        A broker without an authorizer raises SecurityDisabledError."""
        d, deadline = await self._ready(timeout_ms)
        return await acls.create_acls(d, bindings, deadline=deadline)

    async def describe_acls(self, acl_filter: AclBindingFilter | None = None, *,
                            timeout_ms: int | None = None) -> list[AclBinding]:
        """The ACL bindings matching ``acl_filter`` (default: all of them)."""
        from sdk.admin.acl_types import AclBindingFilter

        d, deadline = await self._ready(timeout_ms)
        return await acls.describe_acls(d, acl_filter or AclBindingFilter(), deadline=deadline)

    async def delete_acls(self, filters: AclBindingFilter | Sequence[AclBindingFilter], *,
                          timeout_ms: int | None = None
                          ) -> ResultSet[AclBindingFilter, DeletedAcls]:
        """Delete every binding matching each filter; per filter, the bindings deleted."""
        d, deadline = await self._ready(timeout_ms)
        return await acls.delete_acls(d, filters, deadline=deadline)

    async def describe_user_scram_credentials(
        self, users: Sequence[str] | None = None, *, timeout_ms: int | None = None,
    ) -> ResultSet[str, UserScramCredentials]:
        """SCRAM mechanisms and iteration counts per user (``None``: every user that has
        one); a user without credentials carries ResourceNotFoundError."""
        d, deadline = await self._ready(timeout_ms)
        return await acls.describe_user_scram_credentials(d, users, deadline=deadline)

    async def alter_user_scram_credentials(
        self, upsertions: Sequence[UserScramCredentialUpsertion] = (),
        deletions: Sequence[UserScramCredentialDeletion] = (), *,
        timeout_ms: int | None = None,
    ) -> ResultSet[str, UserScramResult]:
        """Set (salted here, only the salted password is sent) or delete users' SCRAM
        credentials; a result per user."""
        d, deadline = await self._ready(timeout_ms)
        return await acls.alter_user_scram_credentials(d, upsertions, deletions,
                                                       deadline=deadline)

    def __repr__(self) -> str:
        return describe_client(type(self).__name__, self.config, self._state())

    def _state(self) -> str:
        return "closed" if self._closed else "started" if self._started else "new"
