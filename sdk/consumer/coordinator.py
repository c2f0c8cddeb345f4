"""The consumer protocol on top of group membership: assignors, listeners and commits.

:class:`ConsumerCoordinator` is the :class:`~sdk.consumer.membership.GroupProtocol` of a
consumer. It encodes the member's subscription (one entry per configured assignor), runs the
chosen assignor when this member leads, installs assignments into the
:class:`SubscriptionState`, calls the rebalance listener, and commits offsets.

Rebalance protocols (chosen from the assignors, as Java does):

* eager: before joining, commit (if auto-commit is on), call ``on_partitions_revoked`` with
  everything, drop the assignment; after syncing, install the new assignment and call
  ``on_partitions_assigned`` with all of it.
* cooperative: keep the partitions while rejoining; after syncing, revoke only those that
  are no longer ours (``on_partitions_revoked`` with just them), add the new ones
  (``on_partitions_assigned`` with just them), and if anything was revoked rejoin at once so
  the leader can give those partitions to their new owner. Offsets that unfinished
  ``commit()`` calls hold for revoked partitions are committed first (the member still owns
  them in this generation), so a commit that waited for the rebalance loses nothing.

When membership was lost (session expired, fenced generation) the partitions are already
someone else's: ``on_partitions_lost`` is called instead, and nothing is committed.

Commits carry what the application has been handed (positions), never what was only
prefetched, so auto-commit gives at-least-once delivery.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sdk.consumer.assignors import (
    Assignor,
    MemberAssignment,
    MemberSubscription,
    RebalanceProtocol,
    common_protocol,
)
from sdk.consumer.assignors.wire import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from sdk.consumer.errors import CommitFailedError
from sdk.consumer.fetcher import Fetcher
from sdk.consumer.membership import GroupMembership
from sdk.consumer.offsets import commit_offsets, fetch_committed
from sdk.consumer.subscription import SubscriptionMode, SubscriptionState
from sdk.errors import IllegalStateError, KafkaError, MalformedDataError
from sdk.net import NetClient
from sdk.protocol.messages.join_group import JoinGroupResponse
from sdk.types import OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
    from sdk.consumer.config import ConsumerConfig

log = logging.getLogger(__name__)

# A commit during a rebalance: REBALANCE_IN_PROGRESS (Kafka, between join and sync) or
# ILLEGAL_GENERATION (brokers that move the generation on as soon as a rebalance starts).
_REBALANCING_COMMIT_ERRORS = (22, 27)

CommitCallback = Callable[[dict[TopicPartition, OffsetAndMetadata], BaseException | None], Any]


class ConsumerRebalanceListener:
    """Override what you need; each method may be a plain function or a coroutine.

    Pass an instance to ``subscribe(..., listener=...)``. Committing offsets inside
    ``on_partitions_revoked`` works: the member still belongs to its old generation then.
    """

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> Any:
        """Partitions taken away (eager: all of them, before every rebalance)."""

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> Any:
        """Partitions given (eager: the whole new assignment; cooperative: the new ones)."""

    def on_partitions_lost(self, lost: set[TopicPartition]) -> Any:
        """Partitions already owned by others (membership lost); by default the same as
        revoked. Do not commit here: the commit would fail."""
        return self.on_partitions_revoked(lost)


async def call_listener(fn: Callable[[set[TopicPartition]], Any],
                        partitions: set[TopicPartition]) -> None:
    result = fn(set(partitions))
    if inspect.isawaitable(result):
        await result


class ConsumerCoordinator:
    """The consumer side of the group protocol; see the module docstring."""

    protocol_type = "consumer"

    def __init__(
        self,
        group_client: NetClient,
        client: NetClient,
        subscriptions: SubscriptionState,
        fetcher: Fetcher,
        config: ConsumerConfig,
    ) -> None:
        assert config.group_id is not None
        self.group_id = config.group_id
        self._group_client = group_client
        self._client = client
        self._subs = subscriptions
        self._fetcher = fetcher
        self._config = config
        self._assignors: list[Assignor] = config.assignors()
        self.rebalance_protocol = common_protocol(self._assignors)
        self.listener: ConsumerRebalanceListener | None = None
        # What counts as consumed (the face leaves out records it has not handed out yet),
        # and what to tell the face when partitions go away.
        self.offsets_provider: Callable[[], dict[TopicPartition, OffsetAndMetadata]] = (
            subscriptions.consumed_offsets)
        self.on_dropped: Callable[[set[TopicPartition]], object] | None = None  # result unused
        self._listener_error: BaseException | None = None
        self._loop = asyncio.get_running_loop()
        self._auto_commit_s = config.auto_commit_interval_ms / 1000
        self._next_auto_commit = self._loop.time() + self._auto_commit_s
        self._commit_tasks: set[asyncio.Task[Any]] = set()
        self._open_commits: list[_OpenCommit] = []  # commit() calls not finished yet
        self._assigned_counts: dict[str, int] = {}  # partition counts the assignment used
        self._default_timeout_s = config.default_api_timeout_ms / 1000
        self._joined = False  # a join completed once (tells "not yet" from "not any more")
        self._observer = fetcher.observer  # metrics and hooks (sdk.metrics.consumer)
        group_client.observer = fetcher.telemetry.network
        self.membership = GroupMembership(
            group_client, self,
            group_id=config.group_id,
            group_instance_id=config.group_instance_id,
            session_timeout_ms=config.session_timeout_ms,
            heartbeat_interval_ms=config.heartbeat_interval_ms,
            max_poll_interval_ms=config.max_poll_interval_ms,
            retry_backoff_ms=config.retry_backoff_ms,
            retry_backoff_max_ms=config.retry_backoff_max_ms,
            request_timeout_ms=config.request_timeout_ms,
        )

    # ============================================================ GroupProtocol

    def join_protocols(self) -> list[tuple[str, bytes]]:
        topics = sorted(self._subs.subscription)
        owned = sorted(self._subs.assigned_partitions())
        generation = self.membership.generation
        protocols = []
        for assignor in self._assignors:
            sub = MemberSubscription(
                topics=topics,
                user_data=assignor.subscription_user_data(topics, owned, generation),
                owned_partitions=owned,
                generation_id=generation,
                rack_id=self._config.client_rack or None,
            )
            protocols.append((assignor.name, encode_subscription(sub)))
        return protocols

    async def on_join_prepare(self, generation: int, member_id: str) -> None:
        assigned = self._subs.assigned_partitions()
        self._observer.rebalance_started(assigned)
        if generation < 0:
            if assigned:
                log.warning("group %s: partitions lost: %s", self.group_id, _names(assigned))
                await self._invoke("on_partitions_lost", assigned)
                self._drop(assigned)
            return
        if self._config.enable_auto_commit:
            await self._commit_quietly(self.consumed_offsets(), "before rebalancing")
        if self.rebalance_protocol is RebalanceProtocol.EAGER:
            if assigned:
                await self._invoke("on_partitions_revoked", assigned)
            self._drop(assigned)
        else:
            # Cooperative: keep partitions, except those of topics we unsubscribed from.
            gone = {tp for tp in assigned if tp.topic not in self._subs.subscription}
            if gone:
                await self._invoke("on_partitions_revoked", gone)
                self._drop(gone)

    async def perform_assignment(
        self, protocol_name: str, members: Sequence[JoinGroupResponse.JoinGroupResponseMember]
    ) -> dict[str, bytes]:
        assignor = next((a for a in self._assignors if a.name == protocol_name), None)
        if assignor is None:
            raise IllegalStateError(
                f"the group chose assignor {protocol_name!r}, which this member does not have")
        subscriptions: dict[str, MemberSubscription] = {}
        for member in members:
            try:
                subscriptions[member.member_id] = decode_subscription(
                    member.metadata, member.group_instance_id)
            except MalformedDataError as exc:
                log.warning("group %s: member %s sent an undecodable subscription (%s); it "
                            "gets no partitions", self.group_id, member.member_id, exc)
                subscriptions[member.member_id] = MemberSubscription(
                    [], group_instance_id=member.group_instance_id)
        topics = {t for s in subscriptions.values() for t in s.topics}
        self._subs.set_group_topics(topics)
        counts = await self._partition_counts(topics)
        self._assigned_counts = counts
        result = assignor.assign(counts, subscriptions)
        log.info("group %s: assigned %d partitions of %d topics to %d members with %s",
                 self.group_id, sum(counts.values()), len(counts), len(subscriptions),
                 protocol_name)
        return {m: encode_assignment(result.get(m, MemberAssignment())) for m in subscriptions}

    async def _partition_counts(self, topics: set[str]) -> dict[str, int]:
        self._client.add_topics(topics)
        try:
            await self._client.refresh_metadata()
        except KafkaError as exc:
            log.info("group %s: metadata refresh before assigning failed: %s", self.group_id, exc)
        counts = {}
        for topic in topics:
            ids = self._client.metadata.partitions_for(topic)
            if ids:
                counts[topic] = len(ids)
        return counts

    async def on_join_complete(
        self, generation: int, member_id: str, protocol_name: str, assignment: bytes
    ) -> None:
        self._joined = True
        try:
            decoded = decode_assignment(assignment)
        except MalformedDataError as exc:
            log.warning("group %s: undecodable assignment (%s); rejoining", self.group_id, exc)
            self.membership.request_rejoin("undecodable assignment")
            return
        assignor = next((a for a in self._assignors if a.name == protocol_name), None)
        if assignor is not None:
            assignor.on_assignment(decoded, generation)
        assigned = set(decoded.partitions)
        if self._subs.mode is SubscriptionMode.TOPICS:
            strangers = {tp for tp in assigned if tp.topic not in self._subs.subscription}
            if strangers:
                log.warning("group %s: assigned partitions of topics we are not subscribed to "
                            "(%s); rejoining", self.group_id, _names(strangers))
                assigned -= strangers
                self.membership.request_rejoin("assignment does not match the subscription")
        owned = self._subs.assigned_partitions()
        self._client.add_topics({tp.topic for tp in assigned})
        if self.rebalance_protocol is RebalanceProtocol.EAGER:
            self._subs.assign_from_group(assigned)
            await self._invoke("on_partitions_assigned", assigned)
        else:
            revoked, added = owned - assigned, assigned - owned
            if revoked:
                await self._hand_over_open_commits(revoked)
                if self._config.enable_auto_commit:
                    # The application may have consumed more of them during the rebalance.
                    consumed = self.consumed_offsets()
                    await self._commit_quietly(
                        {tp: consumed[tp] for tp in revoked if tp in consumed},
                        "of revoked partitions")
                await self._invoke("on_partitions_revoked", revoked)
                self._drop(revoked)
            self._subs.add_assigned(added)
            await self._invoke("on_partitions_assigned", added)
            if revoked:
                self.membership.request_rejoin("partitions were revoked")
        self._remember_counts()
        self._next_auto_commit = self._loop.time() + self._auto_commit_s
        self._observer.rebalanced(self._subs.assigned_partitions())
        self._fetcher.wake()

    def consumes_while_rebalancing(self) -> bool:
        """Cooperative members still own their partitions during a rebalance (unless the
        membership was lost), so they may go on consuming them."""
        return (self.rebalance_protocol is RebalanceProtocol.COOPERATIVE
                and self.membership.generation >= 0
                and bool(self._subs.assigned_partitions()))

    def _drop(self, partitions: set[TopicPartition]) -> None:
        if not partitions:
            return
        if self.rebalance_protocol is RebalanceProtocol.EAGER and partitions == self._subs.assigned_partitions():
            self._subs.assign_from_group([])
        else:
            self._subs.remove_assigned(partitions)
        self._fetcher.discard(partitions)
        if self.on_dropped is not None:
            self.on_dropped(partitions)

    async def _invoke(self, method: str, partitions: set[TopicPartition]) -> None:
        listener = self.listener
        if listener is None:
            return
        try:
            await call_listener(getattr(listener, method), partitions)
        except Exception as exc:  # keep rebalancing; the application sees it from poll
            log.exception("group %s: rebalance listener %s failed", self.group_id, method)
            self._listener_error = exc

    def take_listener_error(self) -> BaseException | None:
        error, self._listener_error = self._listener_error, None
        return error

    # ============================================================ metadata changes

    def _remember_counts(self) -> None:
        topics = self._subs.subscription | {tp.topic for tp in self._subs.assigned_partitions()}
        counts = {}
        for topic in topics:
            ids = self._client.metadata.partitions_for(topic)
            counts[topic] = len(ids) if ids else 0
        self._assigned_counts.update(counts)

    def on_metadata(self) -> None:
        """After each metadata update: rejoin when partition counts of our topics changed
        (the leader watches every topic of the group)."""
        if self.membership.rejoin_needed or not self._assigned_counts:
            return
        watched = set(self._subs.subscription)
        if self.membership.leader_id == self.membership.member_id:
            watched |= set(self._assigned_counts)
        for topic in watched:
            ids = self._client.metadata.partitions_for(topic)
            count = len(ids) if ids else 0
            if count and count != self._assigned_counts.get(topic, 0):
                self.membership.request_rejoin(f"topic {topic} now has {count} partitions")
                return

    # ============================================================ commits

    def consumed_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return self.offsets_provider()

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata] | None,
                     timeout_s: float | None = None) -> None:
        """Commit ``offsets`` (default: every position handed to the application).

        A cooperative member that keeps consuming while its group rebalances may hit
        REBALANCE_IN_PROGRESS (or ILLEGAL_GENERATION): then the commit waits for the
        rebalance to settle and commits again what this member kept all along. The offsets
        of partitions the rebalance revokes are committed when they are revoked, before
        their new owner can read the committed offsets; should that fail, the commit raises
        CommitFailedError naming them (after committing the rest): returning normally would
        say they are committed while their new owner reads them again.

        A group member never sends offsets of partitions it does not own now (taken by a
        rebalance while the application held their records, or never assigned): the
        coordinator would accept them, since it checks only the generation, and they
        would overwrite the owner's. They raise CommitFailedError naming them, after the
        owned ones are committed. (Java sends them with the current generation.)
        """
        wanted = dict(self.consumed_offsets() if offsets is None else offsets)
        if not wanted:
            return
        # A group member commits only what it owns now. Offsets of partitions a rebalance
        # took away (while the application was slow with their records) would overwrite
        # what their new owner commits: the coordinator checks the generation, not who
        # owns a partition, so it takes them. They are refused here, by name.
        not_owned = ({tp: om for tp, om in wanted.items() if not self._subs.is_assigned(tp)}
                     if self._subs.uses_group else {})
        if not_owned:
            if self.membership.generation < 0:
                raise self._not_a_member()
            wanted = {tp: om for tp, om in wanted.items() if tp not in not_owned}
            if not wanted:
                raise self._not_owned_error(not_owned, {})
        timeout = self._default_timeout_s if timeout_s is None else timeout_s
        deadline = self._loop.time() + timeout
        # A partition's state object survives a cooperative rebalance that keeps it; a new
        # one means it was lost and given back, and our offsets for it are stale.
        states = {tp: self._subs.state(tp) for tp in wanted if self._subs.is_assigned(tp)}
        given_away: dict[TopicPartition, OffsetAndMetadata] = {}  # revoked, not committed
        cause: BaseException | None = None
        # While it runs, a rebalance that revokes some of its partitions commits their
        # offsets before giving them away (see _hand_over_open_commits).
        pending = _OpenCommit(wanted)
        self._open_commits.append(pending)
        try:
            while True:
                if self._subs.uses_group and self.membership.generation < 0:
                    raise self._not_a_member()
                try:
                    await self._commit_once(wanted, max(deadline - self._loop.time(), 0.001))
                    break
                except CommitFailedError as exc:
                    if not self._may_wait_for_rebalance(exc) or self._loop.time() >= deadline:
                        raise
                    log.info("group %s: commit met a rebalance; committing again once it "
                             "settles", self.group_id)
                    await self.membership.ensure_active_group(
                        max(deadline - self._loop.time(), 0.0))
                    kept = {
                        tp: om for tp, om in wanted.items()
                        if self._subs.is_assigned(tp) and self._subs.state(tp) is states.get(tp)
                    }
                    given_away.update((tp, om) for tp, om in wanted.items()
                                      if tp not in kept and tp not in pending.handed_over)
                    cause, wanted = exc.__cause__, kept
                    if not wanted:
                        break
        finally:
            self._open_commits.remove(pending)
        if given_away:
            raise CommitFailedError(
                f"commit for group {self.group_id!r}: {_offsets(given_away)} not committed: "
                "the group rebalanced while the commit waited and took "
                f"{'it' if len(given_away) == 1 else 'them'} from this member without "
                "committing (see the warning logged then), so the new owner reads from the "
                "offset committed before"
                + (f"; {_offsets(not_owned)} not committed either: not assigned to this "
                   "member" if not_owned else "")
                + (f"; committed: {_offsets(wanted)}" if wanted else ""), cause=cause)
        if not_owned:
            raise self._not_owned_error(not_owned, wanted)

    async def _hand_over_open_commits(self, revoked: set[TopicPartition]) -> None:
        """Cooperative revocation: commit what unfinished commit() calls hold for the revoked
        partitions. The member still owns them in this generation, and their new owner gets
        them only in the next one, so it reads these offsets; a commit() waiting for the
        rebalance could not commit them any more once they are gone."""
        holding = [c for c in self._open_commits if not revoked.isdisjoint(c.offsets)]
        offsets = {tp: om for c in holding for tp, om in c.offsets.items() if tp in revoked}
        if not offsets:
            return
        try:
            await self._commit_once(offsets, self._config.request_timeout_ms / 1000)
        except KafkaError as exc:  # the waiting commit() reports them as not committed
            log.warning("group %s: committing %s before revoking them failed: %s",
                        self.group_id, _offsets(offsets), exc)
            return
        for c in holding:  # a later call's offset supersedes an earlier one's
            c.handed_over.update(tp for tp in c.offsets if tp in offsets)

    def _not_owned_error(self, not_owned: Mapping[TopicPartition, OffsetAndMetadata],
                         committed: Mapping[TopicPartition, OffsetAndMetadata]
                         ) -> CommitFailedError:
        return CommitFailedError(
            f"commit for group {self.group_id!r}: {_offsets(not_owned)} not committed: "
            f"{'it is' if len(not_owned) == 1 else 'they are'} not assigned to this member "
            "now (a rebalance gave them to another member, whose commits they would "
            "overwrite; its consumption carries on from its own position)"
            + (f"; committed: {_offsets(committed)}" if committed else ""))

    def _not_a_member(self) -> CommitFailedError:
        """A group member commits with its generation; without one the broker would refuse
        it with a misleading ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID (Java refuses it too)."""
        if not self._joined:
            return CommitFailedError(
                f"commit for group {self.group_id!r}: this consumer has not joined the group "
                "yet (it joins, and gets its partitions, in poll() or iteration); poll first, "
                "then commit the offsets of the records it returned")
        return CommitFailedError(
            f"commit for group {self.group_id!r}: this consumer is not an active member of "
            "the group now (its membership was lost and it is rejoining); its partitions may "
            "be another member's, so nothing was committed. poll() to rejoin, then commit")

    async def _commit_once(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                           timeout_s: float) -> None:
        m = self.membership
        started, error = self._observer.commit_started(), None
        try:
            await commit_offsets(
                self._group_client, self.group_id, offsets,
                generation_id=m.generation, member_id=m.member_id,
                group_instance_id=m.group_instance_id, timeout_s=timeout_s,
            )
        except BaseException as exc:
            error = exc
            raise
        finally:
            self._observer.committed(offsets, started, error)

    def _may_wait_for_rebalance(self, exc: CommitFailedError) -> bool:
        cause = exc.__cause__
        return (
            getattr(cause, "errno", None) in _REBALANCING_COMMIT_ERRORS
            and self.rebalance_protocol is RebalanceProtocol.COOPERATIVE
            and self._subs.uses_group
        )
        # No deadlock with a listener that commits: a listener runs either before JoinGroup
        # or after SyncGroup, and brokers answer REBALANCE_IN_PROGRESS only in between.

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata] | None,
                     callback: CommitCallback | None = None) -> asyncio.Task[None]:
        wanted = dict(self.consumed_offsets() if offsets is None else offsets)

        async def run() -> None:
            error: BaseException | None = None
            try:
                await self.commit(wanted)
            except KafkaError as exc:
                error = exc
                if callback is None:
                    log.warning("group %s: async commit failed: %s", self.group_id, exc)
            if callback is not None:
                try:
                    result = callback(wanted, error)
                    if inspect.isawaitable(result):
                        await result
                except Exception:
                    log.exception("group %s: commit callback failed", self.group_id)

        task = self._loop.create_task(run(), name="kafka-sdk-commit")
        self._commit_tasks.add(task)
        task.add_done_callback(self._commit_tasks.discard)
        return task

    async def _commit_quietly(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                              when: str) -> None:
        try:
            await self.commit(offsets)
        except (CommitFailedError, KafkaError) as exc:
            log.warning("group %s: commit %s failed: %s", self.group_id, when, exc)

    def maybe_auto_commit(self) -> None:
        """From the poll path: commit what the application was handed, every interval."""
        if not self._config.enable_auto_commit or not self._can_commit():
            return
        now = self._loop.time()
        if now < self._next_auto_commit:
            return
        self._next_auto_commit = now + self._auto_commit_s
        offsets = self.consumed_offsets()
        if offsets:
            self.commit_async(offsets, self._auto_commit_done)

    def _auto_commit_done(self, offsets: dict[TopicPartition, OffsetAndMetadata],
                          error: BaseException | None) -> None:
        if isinstance(error, CommitFailedError):
            # A rebalance: partitions revoked meanwhile were committed when they were
            # revoked, the rest are committed again at the next interval.
            log.info("group %s: auto-commit: %s", self.group_id, error)
        elif error is not None:
            log.warning("group %s: auto-commit failed: %s", self.group_id, error)

    def _can_commit(self) -> bool:
        # A group member commits only while stable; a manually assigned consumer always can.
        return not self._subs.uses_group or not self.membership.rejoin_needed

    async def committed(self, partitions: set[TopicPartition],
                        timeout_s: float | None = None) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return await fetch_committed(
            self._group_client, self.group_id, partitions,
            timeout_s=self._default_timeout_s if timeout_s is None else timeout_s)

    async def wait_for_commits(self) -> None:
        if self._commit_tasks:
            await asyncio.gather(*list(self._commit_tasks), return_exceptions=True)

    # ============================================================ lifecycle

    async def leave(self, assigned: set[TopicPartition],
                    offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """For unsubscribe(): commit (auto-commit), tell the listener, leave the group.
        The assignment is still in place, so the listener may commit."""
        m = self.membership
        if self._config.enable_auto_commit and offsets and m.generation >= 0:
            await self._commit_quietly(offsets, "on unsubscribe")
        if assigned and m.generation >= 0:
            await self._invoke("on_partitions_revoked", assigned)
        await m.leave_group("the consumer unsubscribed")

    async def close(self, timeout_s: float) -> None:
        """Commit (auto-commit only), tell the listener, leave the group."""
        await self.wait_for_commits()
        m = self.membership
        if self._config.enable_auto_commit and self._can_commit():
            try:
                await asyncio.wait_for(self.commit(None, timeout_s), timeout_s)
            except (KafkaError, TimeoutError) as exc:
                log.warning("group %s: commit on close failed: %s", self.group_id, exc)
        assigned = self._subs.assigned_partitions()
        if assigned and m.generation >= 0:
            await self._invoke("on_partitions_revoked", assigned)
        try:
            await asyncio.wait_for(m.close(leave=True), timeout_s)
        except TimeoutError:
            log.warning("group %s: leaving the group timed out", self.group_id)


def _names(partitions: set[TopicPartition]) -> str:
    return ", ".join(str(tp) for tp in sorted(partitions))


@dataclass(eq=False)
class _OpenCommit:
    """The offsets of one unfinished commit() call, and those a revocation committed."""

    offsets: dict[TopicPartition, OffsetAndMetadata]
    handed_over: set[TopicPartition] = field(default_factory=set)


def _offsets(offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> str:
    return ", ".join(f"{tp} at {offsets[tp].offset}" for tp in sorted(offsets))


__all__ = ["CommitCallback", "ConsumerCoordinator", "ConsumerRebalanceListener", "call_listener"]
