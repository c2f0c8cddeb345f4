"""AdminClient: the blocking face. It holds no logic: each method runs the same method of an
:class:`sdk.admin.client.AsyncAdminClient` on a private event loop thread and waits for it.

A call blocks at most its ``timeout_ms`` (the core enforces it; the wait here allows a
little more as a safety net). :meth:`AdminClient.wakeup` interrupts calls in progress from
another thread; they raise :class:`sdk.errors.WakeupError`.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from sdk.admin.client import AsyncAdminClient
from sdk.admin.share_groups import ShareGroupAdminSync  # share-group methods (KIP-932)
from sdk.metrics import MetricName
from sdk.net import LoopThread
from sdk.net.describe import describe_client
from sdk.net.fork import watch
from sdk.types import NewTopic, OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
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

__all__ = ["AdminClient"]

T = TypeVar("T")
_GRACE_S = 5.0  # extra wait beyond a call's own timeout before the blocking face gives up


class AdminClient(ShareGroupAdminSync):
    """Blocking admin client; same settings and methods as :class:`AsyncAdminClient`.

    ``with AdminClient(bootstrap_servers="host:9092") as admin: admin.list_topics()``
    """

    def __init__(self, config: Mapping[str, Any] | None = None, /, **kwargs: Any) -> None:
        self._thread = LoopThread(name="kafka-sdk-admin")
        try:
            self._core: AsyncAdminClient = self._thread.run(self._make(config, kwargs),
                                                            timeout=30)
        except BaseException:
            self._thread.stop(timeout=5)
            raise
        self.config = self._core.config
        self._thread.client_id = self.config.client_id  # known once the core is made
        watch(self)  # unusable in the child of a fork (sdk.net.fork)

    @staticmethod
    async def _make(config: Mapping[str, Any] | None, kwargs: dict[str, Any]) -> AsyncAdminClient:
        return AsyncAdminClient(config, **kwargs)  # built on the loop that will run it

    def _run(self, coro: Coroutine[Any, Any, T], timeout_ms: int | None) -> T:
        ms = self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms
        limit = ms / 1000 + _GRACE_S if isinstance(ms, int | float) and ms > 0 else None
        return self._thread.run(coro, timeout=limit)

    def wakeup(self) -> None:
        """Interrupt blocking calls in progress (they raise WakeupError). Any thread."""
        self._thread.interrupt()

    def close(self, timeout_s: float = 10.0) -> None:
        """Close the connections and stop the loop thread. Safe to call twice."""
        if self._thread.running:
            try:
                self._thread.run(self._core.close(), timeout=timeout_s)
            finally:
                self._thread.stop(timeout=timeout_s)

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def start(self, timeout_ms: int | None = None) -> None:
        """Connect and read the cluster metadata now (the first call does it otherwise)."""
        self._run(self._core.start(timeout_ms), timeout_ms)

    # ------------------------------------------------------------------ topics

    def create_topics(self, new_topics: Sequence[NewTopic], *, validate_only: bool = False,
                      timeout_ms: int | None = None) -> ResultSet[str, CreateTopicResult]:
        """Create topics (a result per name); ``validate_only`` asks the broker to check
        without creating. See :meth:`AsyncAdminClient.create_topics`."""
        return self._run(self._core.create_topics(new_topics, validate_only=validate_only,
                                                  timeout_ms=timeout_ms), timeout_ms)

    def delete_topics(self, names: Sequence[str], *,
                      timeout_ms: int | None = None) -> ResultSet[str, TopicResult]:
        """Delete topics and their records; an unknown topic carries
        UnknownTopicOrPartitionError."""
        return self._run(self._core.delete_topics(names, timeout_ms=timeout_ms), timeout_ms)

    def list_topics(self, *, include_internal: bool = False,
                    timeout_ms: int | None = None) -> dict[str, TopicListing]:
        """Every topic by name (sorted); internal ones such as __consumer_offsets on
        request."""
        return self._run(self._core.list_topics(include_internal=include_internal,
                                                timeout_ms=timeout_ms), timeout_ms)

    def describe_topics(self, names: Sequence[str] | None = None, *,
                        timeout_ms: int | None = None) -> ResultSet[str, TopicDescription]:
        """Partitions with leader, replicas and ISR; ``None`` describes every topic."""
        return self._run(self._core.describe_topics(names, timeout_ms=timeout_ms), timeout_ms)

    def create_partitions(self, new_partitions: Mapping[str, int | NewPartitions], *,
                          validate_only: bool = False,
                          timeout_ms: int | None = None) -> ResultSet[str, TopicResult]:
        """Grow topics to a new total partition count: ``{"orders": 12}``."""
        return self._run(self._core.create_partitions(new_partitions,
                                                      validate_only=validate_only,
                                                      timeout_ms=timeout_ms), timeout_ms)

    def describe_cluster(self, *, timeout_ms: int | None = None) -> ClusterDescription:
        """The cluster id, the controller's id and every broker (id, host, port, rack)."""
        return self._run(self._core.describe_cluster(timeout_ms=timeout_ms), timeout_ms)

    # ------------------------------------------------------------------ configs

    def describe_configs(self, resources: Sequence[ConfigResource], *,
                         names: Sequence[str] | None = None, include_synonyms: bool = False,
                         include_documentation: bool = False, timeout_ms: int | None = None
                         ) -> ResultSet[ConfigResource, ResourceConfig]:
        """Configs of topics and brokers (``ConfigResource.topic("t")``,
        ``ConfigResource.broker(1)``); ``names`` limits the answer to those configs."""
        return self._run(self._core.describe_configs(
            resources, names=names, include_synonyms=include_synonyms,
            include_documentation=include_documentation, timeout_ms=timeout_ms), timeout_ms)

    def alter_configs(self, changes: ConfigChanges, *, validate_only: bool = False,
                      timeout_ms: int | None = None
                      ) -> ResultSet[ConfigResource, ConfigResourceResult]:
        """Change configs incrementally (only the named ones change):
        ``{ConfigResource.topic("t"): {"retention.ms": "1000", "cleanup.policy": None}}``
        (None resets to the default) or lists of :class:`AlterConfigOp`."""
        return self._run(self._core.alter_configs(changes, validate_only=validate_only,
                                                  timeout_ms=timeout_ms), timeout_ms)

    # ------------------------------------------------------------------ groups

    def list_consumer_groups(self, *, states: Sequence[str] | None = None,
                             types: Sequence[str] | None = None,
                             timeout_ms: int | None = None) -> dict[str, GroupListing]:
        """Every group of every broker by id; ``states`` filters ("Stable", "Empty", ...)."""
        return self._run(self._core.list_consumer_groups(states=states, types=types,
                                                         timeout_ms=timeout_ms), timeout_ms)

    def describe_consumer_groups(self, group_ids: Sequence[str], *,
                                 timeout_ms: int | None = None
                                 ) -> ResultSet[str, GroupDescription]:
        """State, protocol, members and their assigned partitions, per group."""
        return self._run(self._core.describe_consumer_groups(group_ids, timeout_ms=timeout_ms),
                         timeout_ms)

    def consumer_group_describe(self, group_ids: Sequence[str], *,
                                timeout_ms: int | None = None
                                ) -> ResultSet[str, ConsumerProtocolGroup]:
        """KIP-848 groups (group.protocol=consumer): epochs, assignor and members."""
        return self._run(self._core.consumer_group_describe(group_ids, timeout_ms=timeout_ms),
                         timeout_ms)

    def delete_consumer_groups(self, group_ids: Sequence[str], *,
                               timeout_ms: int | None = None) -> ResultSet[str, GroupResult]:
        """Delete groups (and their committed offsets); a group with members fails with
        NonEmptyGroupError."""
        return self._run(self._core.delete_consumer_groups(group_ids, timeout_ms=timeout_ms),
                         timeout_ms)

    def list_consumer_group_offsets(self, group_id: str,
                                    partitions: Sequence[TopicPartition] | None = None, *,
                                    require_stable: bool = False,
                                    timeout_ms: int | None = None
                                    ) -> ResultSet[TopicPartition, CommittedOffset]:
        """Committed offsets of ``partitions`` (or of every partition the group
        committed)."""
        return self._run(self._core.list_consumer_group_offsets(
            group_id, partitions, require_stable=require_stable, timeout_ms=timeout_ms),
            timeout_ms)

    def alter_consumer_group_offsets(self, group_id: str,
                                     offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
                                     *, timeout_ms: int | None = None
                                     ) -> ResultSet[TopicPartition, CommittedOffset]:
        """Commit offsets for a group that has no active members."""
        return self._run(self._core.alter_consumer_group_offsets(group_id, offsets,
                                                                 timeout_ms=timeout_ms),
                         timeout_ms)

    def reset_consumer_group_offsets(self, group_id: str, to: OffsetSpec | int, *,
                                     topics: Sequence[str] | None = None,
                                     partitions: Sequence[TopicPartition] | None = None,
                                     dry_run: bool = False, timeout_ms: int | None = None
                                     ) -> ResultSet[TopicPartition, CommittedOffset]:
        """Reset to ``OffsetSpec.EARLIEST``, ``OffsetSpec.LATEST`` or a timestamp (ms); the
        group must have no active members (else NonEmptyGroupError). ``dry_run`` only
        computes the offsets."""
        return self._run(self._core.reset_consumer_group_offsets(
            group_id, to, topics=topics, partitions=partitions, dry_run=dry_run,
            timeout_ms=timeout_ms), timeout_ms)

    def consumer_group_lag(self, group_id: str, *, isolation_level: str = "read_uncommitted",
                           timeout_ms: int | None = None) -> GroupLag:
        """End offset minus committed offset per partition, and the total."""
        return self._run(self._core.consumer_group_lag(group_id, isolation_level=isolation_level,
                                                       timeout_ms=timeout_ms), timeout_ms)

    # ------------------------------------------------------------------ transactions

    def list_transactions(self, *, states: Sequence[str] | None = None,
                          producer_ids: Sequence[int] | None = None,
                          min_duration_ms: int | None = None,
                          timeout_ms: int | None = None) -> dict[str, TransactionListing]:
        """Every transactional id of every broker (filters as AsyncAdminClient's)."""
        return self._run(self._core.list_transactions(
            states=states, producer_ids=producer_ids, min_duration_ms=min_duration_ms,
            timeout_ms=timeout_ms), timeout_ms)

    def describe_transactions(self, transactional_ids: Sequence[str], *,
                              timeout_ms: int | None = None
                              ) -> ResultSet[str, TransactionDescription]:
        """State, producer, timeout, start time and partitions, per transactional id."""
        return self._run(self._core.describe_transactions(transactional_ids,
                                                          timeout_ms=timeout_ms), timeout_ms)

    def describe_producers(self, partitions: Sequence[TopicPartition], *,
                           timeout_ms: int | None = None
                           ) -> ResultSet[TopicPartition, PartitionProducers]:
        """The producers with state on each partition, per partition."""
        return self._run(self._core.describe_producers(partitions, timeout_ms=timeout_ms),
                         timeout_ms)

    def abort_transaction(self, partition: TopicPartition, producer_id: int, *,
                          producer_epoch: int | None = None,
                          coordinator_epoch: int | None = None,
                          timeout_ms: int | None = None) -> AbortTransactionResult:
        """Abort a hanging transaction of ``producer_id`` on ``partition``."""
        return self._run(self._core.abort_transaction(
            partition, producer_id, producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch, timeout_ms=timeout_ms), timeout_ms)

    # ------------------------------------------------------------------ partitions

    def list_offsets(self, specs: Mapping[TopicPartition, OffsetSpec | int], *,
                     isolation_level: str = "read_uncommitted",
                     timeout_ms: int | None = None) -> ResultSet[TopicPartition, ListedOffset]:
        """Earliest / latest / max-timestamp offsets, or the first offset at a timestamp
        (ms), per partition."""
        return self._run(self._core.list_offsets(specs, isolation_level=isolation_level,
                                                 timeout_ms=timeout_ms), timeout_ms)

    def describe_log_dirs(self, broker_ids: Sequence[int] | None = None, *,
                          timeout_ms: int | None = None) -> dict[int, list[LogDirDescription]]:
        """Each broker's log directories (None: every broker's) with the size of every
        replica in them; the reference broker with tiered storage also lists its remote
        tier (``LogDirDescription.is_remote``) with each partition's bytes there."""
        return self._run(self._core.describe_log_dirs(broker_ids, timeout_ms=timeout_ms),
                         timeout_ms)

    def delete_records(self, before: Mapping[TopicPartition, int], *,
                       timeout_ms: int | None = None
                       ) -> ResultSet[TopicPartition, DeletedRecords]:
        """Delete every record below the given offset (-1: below the high watermark)."""
        return self._run(self._core.delete_records(before, timeout_ms=timeout_ms), timeout_ms)

    # ------------------------------------------------------------------ leaders, replicas

    def elect_leaders(self, election_type: ElectionType,
                      partitions: Sequence[TopicPartition] | None = None, *,
                      timeout_ms: int | None = None
                      ) -> ResultSet[TopicPartition, ElectionResult]:
        """Elect the preferred replica (``ElectionType.PREFERRED``) or any live replica
        (``ElectionType.UNCLEAN``) as leader; ``None`` means every partition. See
        :meth:`AsyncAdminClient.elect_leaders`."""
        return self._run(self._core.elect_leaders(election_type, partitions,
                                                  timeout_ms=timeout_ms), timeout_ms)

    def alter_partition_reassignments(
        self, reassignments: Mapping[TopicPartition, Sequence[int] | None], *,
        timeout_ms: int | None = None,
    ) -> ResultSet[TopicPartition, ReassignmentResult]:
        """Move partitions to new replicas (``{TopicPartition("t", 0): [2, 3]}``, the first
        is the preferred leader); ``None`` cancels a move in progress."""
        return self._run(self._core.alter_partition_reassignments(reassignments,
                                                                  timeout_ms=timeout_ms),
                         timeout_ms)

    def list_partition_reassignments(
        self, partitions: Sequence[TopicPartition] | None = None, *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, PartitionReassignment]:
        """The reassignments in progress, with the replicas being added and removed."""
        return self._run(self._core.list_partition_reassignments(partitions,
                                                                 timeout_ms=timeout_ms),
                         timeout_ms)

    # ------------------------------------------------------------------ ACLs, SCRAM users

    def create_acls(self, bindings: Sequence[AclBinding], *,
                    timeout_ms: int | None = None) -> ResultSet[AclBinding, AclResult]:
        """Create ACL bindings (a result per binding). A broker without an authorizer
        raises SecurityDisabledError."""
        return self._run(self._core.create_acls(bindings, timeout_ms=timeout_ms), timeout_ms)

    def describe_acls(self, acl_filter: AclBindingFilter | None = None, *,
                      timeout_ms: int | None = None) -> list[AclBinding]:
        """The ACL bindings matching ``acl_filter`` (default: all of them)."""
        return self._run(self._core.describe_acls(acl_filter, timeout_ms=timeout_ms),
                         timeout_ms)

    def delete_acls(self, filters: AclBindingFilter | Sequence[AclBindingFilter], *,
                    timeout_ms: int | None = None) -> ResultSet[AclBindingFilter, DeletedAcls]:
        """Delete every binding matching each filter; per filter, the bindings deleted."""
        return self._run(self._core.delete_acls(filters, timeout_ms=timeout_ms), timeout_ms)

    def describe_user_scram_credentials(self, users: Sequence[str] | None = None, *,
                                        timeout_ms: int | None = None
                                        ) -> ResultSet[str, UserScramCredentials]:
        """SCRAM mechanisms and iteration counts per user (``None``: every user that has
        one); a user without credentials carries ResourceNotFoundError."""
        return self._run(self._core.describe_user_scram_credentials(users,
                                                                    timeout_ms=timeout_ms),
                         timeout_ms)

    def alter_user_scram_credentials(self,
                                     upsertions: Sequence[UserScramCredentialUpsertion] = (),
                                     deletions: Sequence[UserScramCredentialDeletion] = (), *,
                                     timeout_ms: int | None = None
                                     ) -> ResultSet[str, UserScramResult]:
        """Set (salted on the client) or delete users' SCRAM credentials; a result per
        user."""
        return self._run(self._core.alter_user_scram_credentials(
            upsertions, deletions, timeout_ms=timeout_ms), timeout_ms)

    def metrics(self) -> dict[MetricName, float]:
        """The client's metrics by :class:`sdk.metrics.MetricName` (see
        :meth:`sdk.metrics.telemetry.ObservedClient.metrics`); safe from any thread."""
        return self._core.metrics()

    def __repr__(self) -> str:
        return describe_client(type(self).__name__, self._core.config, self._core._state())
