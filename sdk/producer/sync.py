"""Producer: the blocking face. It runs an AsyncProducer on a private event loop thread.

::

    with Producer(bootstrap_servers="127.0.0.1:9092", acks="all", linger_ms=5) as p:
        meta = p.send("orders", b"v", key=b"k").result(timeout=10)      # synchronous
        p.send("orders", b"v", on_delivery=lambda err, meta: ...)         # callback
        p.send("orders", b"v")                                            # fire and forget
        p.flush(timeout=30)

Safe to share between threads. ``send`` appends on the calling thread (through
``AsyncProducer.send_threadsafe``) and returns a light future with the interface of
``concurrent.futures.Future``; delivery callbacks run on the producer's loop thread and must
not block on the producer. No producer logic lives here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Generic, overload

from sdk.errors import TransactionAbortableError
from sdk.metrics import MetricName
from sdk.net.describe import describe_client
from sdk.net.fork import watch
from sdk.net.loop_thread import LoopThread
from sdk.producer.batch import BulkFuture, DeliveryCallback, RecordFuture
from sdk.producer.producer import KS, VS, AsyncProducer, Headers, RawBytes

if TYPE_CHECKING:
    from sdk.producer.config import ProducerConfig
    from sdk.producer.transactions import GroupMetadataLike
    from sdk.types import OffsetAndMetadata, TopicPartition

__all__ = ["Producer"]


class Producer(Generic[KS, VS]):
    """The blocking producer; settings as for :class:`AsyncProducer`, and typed as it is:
    ``Producer[KS, VS]`` sends keys of type ``KS`` and values of type ``VS``.

    Leaving ``with Producer(...) as p:`` normally delivers what is pending for at most
    ``request_timeout_ms`` (30 s by default), even with every broker down; call
    ``p.flush()`` inside the block to wait for every acknowledgement. Leaving on an
    exception or Ctrl-C closes at once. Either way the records not acknowledged then fail
    with ProducerClosedError saying why."""

    @overload
    def __init__(self, config: None = None, /, *,
                 key_serializer: Callable[[KS], RawBytes | None] | None = None,
                 value_serializer: Callable[[VS], RawBytes | None] | None = None,
                 **kwargs: Any) -> None: ...

    @overload
    def __init__(self: Producer[Any, Any], config: Mapping[str, Any] | None = None, /, *,
                 key_serializer: str | Callable[[Any], RawBytes | None] | None = None,
                 value_serializer: str | Callable[[Any], RawBytes | None] | None = None,
                 **kwargs: Any) -> None: ...

    def __init__(self, config: Mapping[str, Any] | None = None, /, **kwargs: Any) -> None:
        self._core: AsyncProducer[KS, VS] = AsyncProducer(config, **kwargs)  # validates first
        self._thread = LoopThread(name=f"{self._core.config.client_id}-loop",
                                  client_id=self._core.config.client_id)
        # The core's per-instance fast path (Stage.stager), bound directly: a plain send
        # is then a single Python call. The method below documents it (and a subclass
        # that overrides it keeps its own).
        if type(self).send is Producer.send:
            fast = self._core._fast_send("Producer.send")
            fast.__doc__ = Producer.send.__doc__
            self.send = fast  # type: ignore[method-assign]
        try:
            self._thread.run(self._core.start(), timeout=30)
        except BaseException:
            self._thread.stop(timeout=5)
            raise
        watch(self)  # unusable in the child of a fork (sdk.net.fork)

    @property
    def config(self) -> ProducerConfig:
        """The validated settings."""
        return self._core.config

    def send(
        self,
        topic: str,
        value: VS | None = None,
        key: KS | None = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> RecordFuture:
        """Enqueue a record; returns its future (``.result(timeout)`` -> RecordMetadata).

        ``on_delivery(error_or_None, metadata)`` runs on the producer's loop thread once
        the record is acknowledged or failed (confluent-kafka's ``callback=`` is refused
        with a TypeError naming it)."""
        return self._core.send_threadsafe(topic, value, key, headers, partition, timestamp_ms,
                                          on_delivery)

    def send_many(self, topic: str, records: Iterable[VS | tuple[KS | None, VS | None]], *,
                  partition: int | None = None,
                  timestamp_ms: int | None = None) -> BulkFuture:
        """Enqueue many values or ``(key, value)`` tuples; one future for all of them."""
        return self._core.send_many_threadsafe(topic, records, partition=partition,
                                               timestamp_ms=timestamp_ms)

    def flush(self, timeout: float | None = None) -> None:
        """Send everything now and wait for the acknowledgements (KafkaTimeoutError after
        ``timeout`` seconds)."""
        self._thread.run(self._core.flush(timeout))

    def partitions_for(self, topic: str, timeout: float | None = None) -> list[int]:
        """The partition ids of ``topic``, waiting for its metadata up to ``timeout``
        seconds (default ``max_block_ms``); KafkaTimeoutError after that."""
        return self._thread.run(self._core.partitions_for(topic, timeout))

    # ------------------------------------------------------------------ transactions
    # (AsyncProducer's calls, run on the loop thread; see sdk.producer.transactional)

    def init_transactions(self, timeout: float | None = None) -> None:
        """Register the transactional id (fences older producers of the same id)."""
        self._thread.run(self._core.init_transactions(timeout))

    def begin_transaction(self) -> None:
        """Start a transaction."""
        self._core.begin_transaction()

    def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        group_metadata: GroupMetadataLike | str, timeout: float | None = None,
    ) -> None:
        """Commit consumer offsets with the transaction (KIP-447 fencing by generation)."""
        self._thread.run(self._core.send_offsets_to_transaction(offsets, group_metadata,
                                                                timeout))

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush the transaction's records and commit it."""
        self._thread.run(self._core.commit_transaction(timeout))

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction; the producer is ready for the next one."""
        self._thread.run(self._core.abort_transaction(timeout))

    @contextlib.contextmanager
    def transaction(self, timeout: float | None = None) -> Iterator[None]:
        """``with producer.transaction():`` commits at the end of the block, or aborts
        when it raises (the exception goes on)."""
        self.begin_transaction()
        try:
            yield
        except BaseException:
            if not self._core._manager().fatal:
                self.abort_transaction(timeout)
            raise
        try:
            self.commit_transaction(timeout)
        except TransactionAbortableError:  # a send of the block failed: abort, then say so
            self.abort_transaction(timeout)
            raise

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is pending for up to ``timeout`` seconds, fail the rest, stop.

        Interrupted (Ctrl-C), it stops at once, failing what is not acknowledged yet."""
        self._run_close(self._core.close(timeout), "closing")

    def _run_close(self, closing: Coroutine[Any, Any, None], doing: str) -> None:
        """Run a close of the core, then stop the loop thread."""
        if not self._thread.running:
            closing.close()
            return
        try:
            self._thread.run(closing)
        except BaseException as exc:
            if not isinstance(exc, Exception):  # KeyboardInterrupt: do not wait any longer
                self._thread.run(self._core._close(0, f"{type(exc).__name__} while {doing}"),
                                 timeout=10)
            raise
        finally:
            self._thread.stop(timeout=5)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._core.closed

    def metrics(self) -> dict[MetricName, float]:
        """The client's metrics by :class:`sdk.metrics.MetricName` (see
        :meth:`sdk.metrics.telemetry.ObservedClient.metrics`); safe from any thread."""
        return self._core.metrics()

    def __repr__(self) -> str:
        return describe_client(type(self).__name__, self.config, self._core._state())

    def __enter__(self) -> Producer[KS, VS]:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        """Leaving normally waits up to ``request_timeout_ms`` (30 s) for the records still
        pending, then fails the rest (``flush()`` first to wait longer); leaving on an
        exception or Ctrl-C closes at once, failing what is not acknowledged yet with
        ProducerClosedError naming the exception."""
        self._run_close(self._core.exit_close(exc_type, "with"), "leaving the `with` block")
