"""Transactions: the transactional producer's state machine and its coordinator requests.

A producer with a ``transactional_id`` writes to many partitions, and may commit consumer
offsets, atomically: ``read_committed`` consumers see all of a transaction or none of it.

::

    READY ─begin─► IN_TRANSACTION ─commit─► COMMITTING ─► READY
                        │   └─abort──► ABORTING ─► READY
                        └─ a send or request of the transaction failed ─► ABORTABLE_ERROR
    ABORTABLE_ERROR ─abort─► ABORTING ─► READY         (commit raises TransactionAbortableError)
    any ─fenced (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, ...)─► FATAL_ERROR (close the producer)

The requests (Kafka's transaction protocol v1, KIP-98; the coordinator is found with
FindCoordinator key_type=1; what v2 changes follows):

* ``init_transactions``: InitProducerId with the transactional id. The coordinator aborts or
  completes what a previous producer with this id left open and bumps the epoch, which
  *fences* that producer: its next request is refused with PRODUCER_FENCED.
* Before the first batch of a partition is sent in a transaction, AddPartitionsToTxn (the
  sender holds the partition's batches until it is answered; the partitions that become
  sendable meanwhile go together in one request).
* ``send_offsets_to_transaction``: AddOffsetsToTxn to the transaction coordinator, then
  TxnOffsetCommit to the group coordinator with the group's generation, member id and
  instance id (KIP-447: a member fenced by a rebalance cannot commit).
* ``commit_transaction`` / ``abort_transaction``: EndTxn once the transaction's batches are
  acknowledged (commit) or failed (abort: batches not sent yet fail with
  TransactionAbortedError; those in flight are waited for).

Transactions v2 (KIP-890 part 2) are used when the transaction coordinator's ApiVersions
answer (asked at ``init_transactions``) has the finalized feature ``transaction.version`` >= 2
and serves EndTxn v5, Produce v12 and TxnOffsetCommit v5, as Java's client decides:

* no AddPartitionsToTxn: a partition joins the transaction with its first Produce (v12+),
  the partition leader adds it at the coordinator itself;
* no AddOffsetsToTxn: TxnOffsetCommit v5 adds the group to the transaction;
* every EndTxn (v5) bumps the epoch; its answer carries the producer id and epoch of the
  next transaction (a new id once the epoch is exhausted), and every partition's sequences
  restart at 0. A late request of the ended transaction then carries an old epoch and is
  refused, which v1 cannot guarantee (KIP-890's "hanging transactions").
* an abort needs no InitProducerId afterwards (v1's KIP-360 bump): EndTxn bumped already.

Otherwise (older brokers, ``transaction.version`` 0 or 1, tansu) transactions are v1 and the
versions stay below those that mean v2 to a broker (Produce <= v11, TxnOffsetCommit <= v4,
EndTxn <= v4), as Java's client does.

Errors, as Kafka's client classifies them: PRODUCER_FENCED, INVALID_PRODUCER_EPOCH,
TRANSACTION_COORDINATOR_FENCED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, INVALID_TXN_STATE and
UNSUPPORTED_VERSION are *fatal*: every later call raises the error again, and only closing
the producer helps. A failed send (any error) and an abortable request error (e.g.
TRANSACTION_ABORTABLE, a rebalance fencing ``send_offsets_to_transaction``) make the
transaction *abortable*: ``commit_transaction`` raises TransactionAbortableError with the
cause, ``abort_transaction`` succeeds and the producer is usable again. After an abort
whose batches may have left sequence gaps (a batch failed after it was sent), the epoch is
bumped with InitProducerId (KIP-360) once EndTxn has aborted the transaction.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from sdk.errors import (
    ConcurrentTransactionsError,
    IllegalStateError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionAbortedError,
    TransactionalIdAuthorizationFailedError,
    TransactionCoordinatorFencedError,
    UnsupportedVersionError,
    for_code,
)
from sdk.net.client import NetClient
from sdk.net.targets import Coordinator, CoordinatorType
from sdk.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from sdk.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
)
from sdk.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from sdk.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from sdk.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from sdk.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from sdk.types import OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
    from sdk.producer.idempotence import ProducerIdManager

__all__ = ["DOOMED", "GroupMetadataLike", "TransactionManager", "TxnState"]

log = logging.getLogger(__name__)

# Errors after which the producer cannot go on (Java's fatal classification).
_FATAL = (ProducerFencedError, InvalidProducerEpochError, TransactionCoordinatorFencedError,
          TransactionalIdAuthorizationFailedError, InvalidTxnStateError,
          UnsupportedVersionError)
_CLIENT_ADD_PARTITIONS_MAX = 3  # v4+ is the broker-to-broker (verify-only) form
_OPERATION_NOT_ATTEMPTED = 55  # AddPartitionsToTxn: another partition of the request failed
_QUICK_RETRY_S = 0.02  # CONCURRENT_TRANSACTIONS of AddPartitionsToTxn (Java: 20 ms)
_BUMPING_INIT_MIN = 3  # InitProducerId v3+ takes the current id and epoch (KIP-360)
# Transactions v1 (KIP-98) stop below the versions that mean v2 to a broker (KIP-890):
# Produce v12 (implicit AddPartitionsToTxn), TxnOffsetCommit v5, EndTxn v5 (epoch bump).
_V1_PRODUCE_MAX = 11
_V1_TXN_OFFSET_COMMIT_MAX = 4
_V1_END_TXN_MAX = 4
_TRANSACTION_VERSION = "transaction.version"  # the finalized feature naming the protocol
_V2_NEEDS = {0: 12, 26: 5, 28: 5}  # Produce, EndTxn, TxnOffsetCommit: the v2 versions


class TxnState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in transaction"
    COMMITTING = "committing"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "abortable error"
    FATAL_ERROR = "fatal error"


DOOMED = (TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR)  # the transaction cannot commit


class GroupMetadataLike(Protocol):
    """What ``send_offsets_to_transaction`` needs of a consumer's group (what
    ``Consumer.group_metadata()`` returns)."""

    @property
    def group_id(self) -> str: ...
    @property
    def generation_id(self) -> int: ...
    @property
    def member_id(self) -> str: ...
    @property
    def group_instance_id(self) -> str | None: ...


class TransactionManager:
    """The state of one transactional producer (see the module docstring). Lives on the
    producer's event loop; ``check_send`` may be called from any thread (reads only)."""

    def __init__(self, client: NetClient, ids: ProducerIdManager, *, transactional_id: str,
                 transaction_timeout_ms: int, wake_sender: Callable[[], None]) -> None:
        self._client = client
        self._ids = ids
        self.transactional_id = transactional_id
        self._timeout_ms = transaction_timeout_ms
        self._wake_sender = wake_sender
        self.state = TxnState.UNINITIALIZED
        self.partitions: set[tuple[str, int]] = set()  # added to the current transaction
        self._pending: set[tuple[str, int]] = set()  # waiting for AddPartitionsToTxn
        self._adding: asyncio.Task[None] | None = None
        self._offsets_added = False
        self.error: BaseException | None = None  # the abortable or fatal error
        self.bump_needed = False  # sequences may have gaps: bump the epoch at the abort
        self._target = Coordinator(transactional_id, CoordinatorType.TRANSACTION)
        self.produce_max_version: int | None = _V1_PRODUCE_MAX  # read by the sender
        self.protocol = 1  # transactions v1 or v2 (KIP-890), decided at init

    # ================================================================== checks

    @property
    def fatal(self) -> bool:
        return self.state is TxnState.FATAL_ERROR

    def check_send(self) -> None:
        """Refuse a send outside a transaction (called by every send of this producer)."""
        state = self.state
        if state is TxnState.IN_TRANSACTION:
            return
        if state is TxnState.ABORTABLE_ERROR:
            raise TransactionAbortableError(
                f"the transaction cannot commit ({self.error}); call abort_transaction() "
                "before sending again", cause=self.error)
        self._raise_if_fatal()
        raise IllegalStateError(
            f"a transactional producer sends only inside a transaction (state: {state.value}): "
            + ("call init_transactions() first" if state is TxnState.UNINITIALIZED
               else "call begin_transaction() first"))

    def _raise_if_fatal(self) -> None:
        if self.state is TxnState.FATAL_ERROR:
            err = self.error
            cls = type(err) if isinstance(err, KafkaError) else KafkaError
            raise cls(f"fatal: the producer cannot be used any more, close it ({err})",
                      cause=err)

    def _require(self, *states: TxnState, doing: str) -> None:
        self._raise_if_fatal()
        if self.state not in states:
            raise IllegalStateError(
                f"cannot {doing} in state {self.state.value!r} (needs "
                + " or ".join(repr(s.value) for s in states) + ")")

    # ================================================================== failures

    def fail(self, error: BaseException, *, sent: bool = False) -> None:
        """A send or request of the transaction failed with ``error``: fatal (fencing) or
        abortable. ``sent``: the batch had sequence numbers, so the partition's sequences
        may have a gap and the abort bumps the epoch."""
        if isinstance(error, _FATAL):
            if self.state is not TxnState.FATAL_ERROR:
                log.error("transactional producer %r: fatal error: %s", self.transactional_id,
                          error)
            self.state = TxnState.FATAL_ERROR
            self.error = error
            return
        if sent:
            self.bump_needed = True
        if self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING):
            log.info("transaction of %r must abort: %s", self.transactional_id, error)
            self.state = TxnState.ABORTABLE_ERROR
            self.error = error

    # ================================================================== partitions

    def partition_ready(self, topic: str, partition: int) -> bool:
        """Whether batches of ``topic``-``partition`` may be sent: the partition is part of
        the transaction. If not, it is queued for AddPartitionsToTxn (one request for all
        partitions queued before it goes out)."""
        key = (topic, partition)
        if key in self.partitions:
            return True
        if self.state is not TxnState.IN_TRANSACTION and self.state is not TxnState.COMMITTING:
            return False  # aborting or failed: nothing more joins
        if self.protocol == 2:  # the leader adds it when the Produce (v12+) arrives
            self.partitions.add(key)
            return True
        self._pending.add(key)
        if self._adding is None or self._adding.done():
            self._adding = asyncio.get_running_loop().create_task(self._add_partitions())
        return False

    async def _add_partitions(self) -> None:
        await asyncio.sleep(0)  # let the sender's pass queue every partition it has
        wanted = sorted(self._pending - self.partitions)
        self._pending.clear()
        if not wanted:
            return
        topics: dict[str, list[int]] = {}
        for topic, partition in wanted:
            topics.setdefault(topic, []).append(partition)
        request = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.transactional_id,
            v3_and_below_producer_id=self._ids.producer_id,
            v3_and_below_producer_epoch=self._ids.epoch,
            v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(
                name=t, partitions=ps) for t, ps in topics.items()])
        failed: dict[tuple[str, int], int] = {}

        def check(response: AddPartitionsToTxnResponse) -> None:
            if response.error_code:
                raise for_code(response.error_code)("AddPartitionsToTxn")
            failed.clear()
            for topic_result in response.results_by_topic_v3_and_below:
                for p in topic_result.results_by_partition:
                    if p.partition_error_code:
                        failed[(topic_result.name, p.partition_index)] = p.partition_error_code
            # Retriable per-partition errors (CONCURRENT_TRANSACTIONS right after a commit,
            # coordinator moves) retry the whole request, as Java does.
            for code in failed.values():
                if code != _OPERATION_NOT_ATTEMPTED and for_code(code).retriable:
                    raise for_code(code)("AddPartitionsToTxn")

        try:
            await self._call_soon_again(request, check)
        except KafkaError as exc:
            self.fail(exc)
        else:
            real = {tp: c for tp, c in failed.items() if c != _OPERATION_NOT_ATTEMPTED}
            if real:
                (topic, partition), code = next(iter(real.items()))
                self.fail(for_code(code)(f"AddPartitionsToTxn for {topic}-{partition}"))
            else:
                self.partitions.update(wanted)
        finally:
            self._wake_sender()

    async def _call_soon_again(self, request: AddPartitionsToTxnRequest,
                               check: Callable[[AddPartitionsToTxnResponse], None]) -> None:
        """AddPartitionsToTxn. Right after a commit the coordinator answers
        CONCURRENT_TRANSACTIONS until its markers are written (a few ms): that answer is
        retried every 20 ms, as Java's client does, rather than after retry_backoff_ms
        (100 ms and growing: it capped small transactions at a few per second)."""
        deadline = time.monotonic() + self._timeout_ms / 1000
        while time.monotonic() + _QUICK_RETRY_S < deadline:
            try:
                await self._client.call(request, self._target, check=check, max_attempts=1,
                                        timeout_s=deadline - time.monotonic(),
                                        max_version=_CLIENT_ADD_PARTITIONS_MAX)
                return
            except ConcurrentTransactionsError:
                await asyncio.sleep(_QUICK_RETRY_S)
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                break  # another retriable error: the ordinary retries below
        await self._client.call(request, self._target, check=check,
                                timeout_s=max(0.001, deadline - time.monotonic()),
                                max_version=_CLIENT_ADD_PARTITIONS_MAX)

    # ================================================================== the calls

    async def init(self, timeout_s: float) -> None:
        """InitProducerId with the transactional id: fences older producers of the id."""
        self._require(TxnState.UNINITIALIZED, doing="init_transactions")
        deadline = time.monotonic() + timeout_s
        await self._choose_protocol(timeout_s)
        await self._init_producer_id(max(0.0, deadline - time.monotonic()), bump=False)
        self.state = TxnState.READY

    async def _choose_protocol(self, timeout_s: float) -> None:
        """Transactions v2 when the coordinator's cluster finalized ``transaction.version``
        >= 2 and it serves the v2 versions (see the module docstring), else v1."""
        response: ApiVersionsResponse = await self._client.call(
            ApiVersionsRequest(client_software_name="kafka-sdk", client_software_version="0"),
            self._target, check=_check_code("ApiVersions"), timeout_s=timeout_s)
        level = max((f.max_version_level for f in response.finalized_features
                     if f.name == _TRANSACTION_VERSION), default=0)
        served = {k.api_key: k.max_version for k in response.api_keys}
        v2 = level >= 2 and all(served.get(key, -1) >= v for key, v in _V2_NEEDS.items())
        self.protocol = 2 if v2 else 1
        self.produce_max_version = None if v2 else _V1_PRODUCE_MAX
        log.info("transactional id %r: transactions v%d (transaction.version %d)",
                 self.transactional_id, self.protocol, level)

    async def _init_producer_id(self, timeout_s: float, *, bump: bool) -> None:
        ids = self._ids

        def build(version: int) -> InitProducerIdRequest:
            keep = bump and version >= _BUMPING_INIT_MIN and ids.producer_id >= 0
            return InitProducerIdRequest(
                transactional_id=self.transactional_id,
                transaction_timeout_ms=self._timeout_ms,
                producer_id=ids.producer_id if keep else -1,
                producer_epoch=ids.epoch if keep else -1)

        def check(response: InitProducerIdResponse) -> None:
            if response.error_code:
                raise for_code(response.error_code)(
                    f"InitProducerId for transactional id {self.transactional_id!r}")

        try:
            response = await self._client.call(build, self._target, check=check,
                                               timeout_s=timeout_s)
        except KafkaTimeoutError:
            raise
        except KafkaError as exc:
            if isinstance(exc, _FATAL):
                self.fail(exc)
                self._raise_if_fatal()
            raise
        ids.producer_id = response.producer_id
        ids.epoch = response.producer_epoch
        ids.last_error = None
        log.info("transactional id %r: producer id %s epoch %s", self.transactional_id,
                 ids.producer_id, ids.epoch)

    def begin(self) -> None:
        self._require(TxnState.READY, doing="begin_transaction")
        self.partitions.clear()
        self._pending.clear()
        self._offsets_added = False
        self.bump_needed = False
        self.error = None
        self.state = TxnState.IN_TRANSACTION

    async def send_offsets(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
                           group: GroupMetadataLike | str, timeout_s: float) -> None:
        """AddOffsetsToTxn, then TxnOffsetCommit to the group's coordinator (KIP-447)."""
        self._require(TxnState.IN_TRANSACTION, doing="send_offsets_to_transaction")
        if isinstance(group, str):
            group_id, generation, member, instance = group, -1, "", None
        else:
            group_id, generation = group.group_id, group.generation_id
            member, instance = group.member_id, group.group_instance_id
        if not group_id:
            raise ValueError("send_offsets_to_transaction needs a consumer group id")
        topics: dict[str, list[TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition]] = {}
        for tp, value in offsets.items():
            om = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
            if type(om.offset) is not int or om.offset < 0:
                raise ValueError(f"offset for {tp} must be an int >= 0, not {om.offset!r}")
            topics.setdefault(tp.topic, []).append(
                TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                    partition_index=tp.partition, committed_offset=om.offset,
                    committed_leader_epoch=-1 if om.leader_epoch is None else om.leader_epoch,
                    committed_metadata=om.metadata or ""))
        deadline = time.monotonic() + timeout_s
        ids = self._ids
        try:
            if not self._offsets_added and self.protocol == 1:
                await self._client.call(
                    AddOffsetsToTxnRequest(transactional_id=self.transactional_id,
                                           producer_id=ids.producer_id,
                                           producer_epoch=ids.epoch, group_id=group_id),
                    self._target, check=_check_code("AddOffsetsToTxn"), timeout_s=timeout_s)
            self._offsets_added = True  # (v2: TxnOffsetCommit v5 adds the group itself)
            request = TxnOffsetCommitRequest(
                transactional_id=self.transactional_id, group_id=group_id,
                producer_id=ids.producer_id, producer_epoch=ids.epoch,
                generation_id=generation, member_id=member, group_instance_id=instance,
                topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=t, partitions=ps)
                        for t, ps in topics.items()])

            def check(response: TxnOffsetCommitResponse) -> None:
                for t in response.topics:
                    for p in t.partitions:
                        if p.error_code:
                            raise for_code(p.error_code)(
                                f"TxnOffsetCommit of group {group_id!r} for "
                                f"{t.name}-{p.partition_index}")

            await self._client.call(request, Coordinator(group_id), check=check,
                                    timeout_s=max(0.0, deadline - time.monotonic()),
                                    max_version=self._txn_offset_commit_max())
        except KafkaTimeoutError:
            raise  # the transaction may go on: the call can be repeated
        except KafkaError as exc:
            self.fail(exc)
            self._raise_if_fatal()
            raise

    async def commit(self, flush: Callable[[float], Awaitable[None]], timeout_s: float) -> None:
        """Flush the transaction's records, then EndTxn(commit)."""
        if self.state is TxnState.ABORTABLE_ERROR:
            raise TransactionAbortableError(
                f"the transaction cannot commit ({self.error}); call abort_transaction()",
                cause=self.error)
        self._require(TxnState.IN_TRANSACTION, TxnState.COMMITTING,
                      doing="commit_transaction")
        deadline = time.monotonic() + timeout_s
        self.state = TxnState.COMMITTING  # sends are refused from here on
        await flush(timeout_s)
        if self.state is not TxnState.COMMITTING:  # a batch failed: abortable or fatal
            self._raise_if_fatal()
            raise TransactionAbortableError(
                f"the transaction cannot commit ({self.error}); call abort_transaction()",
                cause=self.error)
        await self._end(True, max(0.0, deadline - time.monotonic()))

    async def abort(self, fail_unsent: Callable[[BaseException], bool],
                    flush: Callable[[float], Awaitable[None]], timeout_s: float) -> None:
        """Fail what is not sent, wait for what is in flight, then EndTxn(abort) (or bump
        the epoch with InitProducerId when sequences may have gaps)."""
        self._require(TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR, TxnState.ABORTING,
                      TxnState.COMMITTING, doing="abort_transaction")
        deadline = time.monotonic() + timeout_s
        self.state = TxnState.ABORTING
        if fail_unsent(TransactionAbortedError(
                "the record was not written: its transaction was aborted")):
            self.bump_needed = True
        await flush(timeout_s)  # only batches in flight are left
        self._raise_if_fatal()
        await self._end(False, max(0.0, deadline - time.monotonic()), finish=False)
        if self.bump_needed and self.protocol == 1:
            # A new epoch: every partition's sequences start at 0 again (v2's EndTxn did it).
            await self._init_producer_id(max(0.0, deadline - time.monotonic()), bump=True)
        self._finish()

    async def _end(self, committed: bool, timeout_s: float, *, finish: bool = True) -> None:
        if not self.partitions and not self._offsets_added:
            if finish:
                self._finish()  # nothing reached the coordinator: nothing to end
            return
        ids = self._ids
        request = EndTxnRequest(transactional_id=self.transactional_id,
                                producer_id=ids.producer_id, producer_epoch=ids.epoch,
                                committed=committed)
        try:
            response: EndTxnResponse = await self._client.call(
                request, self._target, check=_check_code("EndTxn"), timeout_s=timeout_s,
                max_version=None if self.protocol == 2 else _V1_END_TXN_MAX)
        except KafkaTimeoutError:
            raise  # state kept (COMMITTING / ABORTING): the call may be repeated
        except KafkaError as exc:
            self.fail(exc)
            self._raise_if_fatal()
            raise
        if self.protocol == 2 and response.producer_id >= 0:
            # The coordinator bumped the epoch (v2): the next transaction uses the new pair.
            ids.producer_id = response.producer_id
            ids.epoch = response.producer_epoch
        if finish:
            self._finish()

    def _txn_offset_commit_max(self) -> int | None:
        return None if self.protocol == 2 else _V1_TXN_OFFSET_COMMIT_MAX

    def _finish(self) -> None:
        self.partitions.clear()
        self._pending.clear()
        self._offsets_added = False
        self.bump_needed = False
        self.error = None
        self.state = TxnState.READY

    def describe(self) -> dict[str, Any]:
        return {"transactional_id": self.transactional_id, "state": self.state.value,
                "producer_id": self._ids.producer_id, "epoch": self._ids.epoch,
                "protocol": self.protocol}


def _check_code(what: str) -> Callable[[Any], None]:
    def check(response: Any) -> None:
        if response.error_code:
            raise for_code(response.error_code)(what)
    return check
