"""The transactional calls of :class:`sdk.producer.producer.AsyncProducer` (a mixin, so
``producer.py`` keeps the send path only). The state machine and the requests are in
:mod:`sdk.producer.transactions`.

::

    async with AsyncProducer(bootstrap_servers=..., transactional_id="orders-1") as p:
        await p.init_transactions()
        async with p.transaction():          # commits; aborts on an exception
            await p.send("out", b"v")
            await p.send_offsets_to_transaction(offsets, consumer.group_metadata())

Each call takes a ``timeout`` in seconds (default ``max_block_ms``, as Java's); after it
KafkaTimeoutError, and the call may be repeated (the transaction is left as it was).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from sdk.errors import IllegalStateError, KafkaTimeoutError, TransactionAbortableError

if TYPE_CHECKING:
    from sdk.producer.config import ProducerConfig
    from sdk.producer.sender import Sender
    from sdk.producer.staging import Stage
    from sdk.producer.transactions import GroupMetadataLike, TransactionManager
    from sdk.types import OffsetAndMetadata, TopicPartition

__all__ = ["TransactionalMethods"]


class TransactionalMethods:
    """Transactions for AsyncProducer (needs ``transactional_id``)."""

    config: ProducerConfig
    _txn: TransactionManager | None
    _sender: Sender | None
    _stage: Stage

    flush: Callable[..., Awaitable[None]]  # AsyncProducer's

    def _checked(self, send: Callable[..., Any]) -> Callable[..., Any]:
        """``send`` preceded by the transaction's check (transactional producers only: the
        plain producer's fast path stays one call)."""
        def transactional_send(*args: Any, **kwargs: Any) -> Any:
            txn = self._txn
            if txn is not None:
                txn.check_send()
            return send(*args, **kwargs)

        transactional_send.__name__ = getattr(send, "__name__", "send")
        transactional_send.__doc__ = send.__doc__
        return transactional_send

    def _manager(self) -> TransactionManager:
        txn = self._txn
        if txn is None:
            if self.config.transactional_id is None:
                raise IllegalStateError("transactions need a transactional_id (set "
                                        "transactional_id=... when creating the producer)")
            raise IllegalStateError("the producer is not started (use `async with` or start())")
        return txn

    def _timeout(self, timeout: float | None) -> float:
        if timeout is None:
            return self.config.max_block_ms / 1000
        if timeout < 0:
            raise ValueError(f"timeout must be >= 0 seconds, not {timeout!r}")
        return float(timeout)

    async def init_transactions(self, timeout: float | None = None) -> None:
        """Register the transactional id with its coordinator (InitProducerId): finishes or
        aborts what an earlier producer with this id left open, and fences that producer
        (its next call raises ProducerFencedError). Call once, before the first
        transaction."""
        await self._manager().init(self._timeout(timeout))

    def begin_transaction(self) -> None:
        """Start a transaction: sends are allowed until commit or abort."""
        self._manager().begin()

    async def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        group_metadata: GroupMetadataLike | str, timeout: float | None = None,
    ) -> None:
        """Commit consumer ``offsets`` (the next record to read) as part of the transaction:
        they become the group's committed offsets only if it commits. ``group_metadata`` is
        the consumer's ``group_metadata()``: its generation and member id let the group
        coordinator refuse a member a rebalance has fenced (KIP-447; the transaction then
        must abort). A bare group id skips that check."""
        await self._manager().send_offsets(offsets, group_metadata, self._timeout(timeout))

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Send every record of the transaction, wait for the acknowledgements, then commit
        (EndTxn). TransactionAbortableError (cause attached) if a send or request of the
        transaction failed: call :meth:`abort_transaction`. ProducerFencedError and other
        fatal errors: close the producer."""
        txn = self._manager()
        before = (txn._ids.producer_id, txn._ids.epoch)
        await txn.commit(self._flush_for, self._timeout(timeout))
        self._restart_sequences_if_bumped(before)

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort: records not sent yet fail with TransactionAbortedError, those in flight
        are waited for, then the coordinator writes abort markers (read_committed readers
        skip the transaction). The producer is then ready for the next transaction."""
        txn = self._manager()
        sender = self._sender
        assert sender is not None
        timeout_s = self._timeout(timeout)
        deadline = time.monotonic() + timeout_s
        await self._stage.drain_async(deadline)  # staged records join the batches first
        before = (txn._ids.producer_id, txn._ids.epoch)
        await txn.abort(sender.fail_unsent, self._flush_for,
                        max(0.0, deadline - time.monotonic()))
        self._restart_sequences_if_bumped(before)

    def _restart_sequences_if_bumped(self, before: tuple[int, int]) -> None:
        """A new producer id or epoch (v1: the bump after an abort with sequence gaps; v2:
        every EndTxn) starts every partition's sequences at 0 again."""
        txn = self._manager()
        if (txn._ids.producer_id, txn._ids.epoch) != before and self._sender is not None:
            self._sender.restart_sequences()

    async def _flush_for(self, timeout_s: float) -> None:
        try:
            await self.flush(timeout_s)
        except KafkaTimeoutError as exc:
            raise KafkaTimeoutError(f"the transaction's records were not all acknowledged "
                                    f"within {timeout_s:g} s; call again to keep waiting") \
                from exc

    @contextlib.asynccontextmanager
    async def transaction(self, timeout: float | None = None) -> AsyncIterator[None]:
        """``async with producer.transaction():`` begins a transaction, commits it when the
        block ends normally, and aborts it when the block raises (the exception then goes
        on) or the commit finds the transaction abortable (TransactionAbortableError is
        raised after the abort)."""
        self.begin_transaction()
        try:
            yield
        except BaseException:
            if not self._manager().fatal:
                await self.abort_transaction(timeout)
            raise
        try:
            await self.commit_transaction(timeout)
        except TransactionAbortableError:  # a send of the block failed: abort, then say so
            await self.abort_transaction(timeout)
            raise
