"""AsyncProducer: the producer's async core and its asyncio face.

::

    async with AsyncProducer(bootstrap_servers="127.0.0.1:9092", linger_ms=5) as ap:
        meta = await ap.send_and_wait("orders", b"v", key=b"k")   # RecordMetadata
        fut = await ap.send("orders", b"v")      # enqueued; `await fut` for the metadata
        bulk = await ap.send_many("orders", [b"a", (b"key", b"b")])
        await ap.flush()

``send`` stages a plain record (bytes, no headers, partition or timestamp of its own) for
a bulk append (``sdk.producer.staging``); any other record is validated, serialized and
encoded into its partition's open batch (``sdk.producer.accumulator``) after the stage is
drained. It only awaits when the topic's metadata is not known yet, the stage is full or
``buffer_memory`` is exhausted, all bounded by ``max_block_ms`` (then KafkaTimeoutError).
The returned :class:`RecordFuture` completes when the broker acknowledges the record's
batch; errors arrive there (or in the ``on_delivery(err, metadata)`` callback), except bad
input and oversized records (MessageTooLargeError), which ``send`` raises at once.

A record the broker refuses by itself (KIP-467 ``record_errors``: a record without a key
on a compacted topic, a timestamp outside ``message.timestamp.before/after.max.ms``) fails
alone, with the broker's message for that record: ``InvalidRecordError``, or the
partition's error class (e.g. ``InvalidTimestampError``) when it was the only one named.
The other records of its batch are sent again at once, ahead of later batches, so they
are written in order; a record never fails because of its neighbours (Java and
librdkafka fail them with a generic "part of a batch with invalid records" error instead).
A broker that answers without ``record_errors`` fails the whole batch with its error.

:meth:`AsyncProducer.send_threadsafe` and :meth:`AsyncProducer.send_many_threadsafe` are
the same calls for other threads (the blocking ``Producer`` uses them): they stage or append
under a lock without a round trip to the event loop, and block the calling thread for
metadata or memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, overload

from sdk.errors import IllegalStateError, KafkaError, KafkaTimeoutError, ProducerClosedError
from sdk.metrics.producer import ProducerObserver
from sdk.metrics.telemetry import ClientTelemetry, ObservedClient
from sdk.net.client import NetClient
from sdk.net.describe import describe_client
from sdk.net.fork import watch
from sdk.producer.accumulator import (
    BATCH_OVERHEAD,
    RECORD_OVERHEAD_BOUND,
    BufferPool,
    NeedMemory,
    RecordAccumulator,
)
from sdk.producer.batch import BulkFuture, DeliveryCallback, RecordFuture
from sdk.producer.held import Chunk, HeldSends
from sdk.producer.idempotence import ProducerIdManager
from sdk.producer.partitioner import make_partitioner
from sdk.producer.sender import Sender
from sdk.producer.staging import Stage
from sdk.producer.transactional import TransactionalMethods
from sdk.producer.transactions import TransactionManager
from sdk.types import RecordMetadata

__all__ = ["AsyncProducer"]

log = logging.getLogger(__name__)

RawBytes = bytes | bytearray | memoryview
"""What ``send`` takes as a key or value without a serializer."""

if TYPE_CHECKING:
    # What send takes as key and value (the serializers' input types); PEP 696 defaults for
    # type checkers only, as in sdk.types.
    from typing_extensions import TypeVar

    KS = TypeVar("KS", default=RawBytes)
    VS = TypeVar("VS", default=RawBytes)
else:
    from typing import TypeVar

    KS = TypeVar("KS")
    VS = TypeVar("VS")

Headers = Sequence[tuple[str, "bytes | None"]]
_BULK_CHUNK = 1024  # records appended per lock hold in send_many
# Staged bytes (sdk.producer.staging) before a send drains them: about one batch, within
# these bounds. Uncompressed batches are batch_size (16 KB by default: a 1 MB stage made
# the sends bursty, 100 B records 25% slower); compressed ones grow to max_request_size,
# and there a 1 MB stage was 5-20% faster for every codec than 256 KB.
_STAGE_BYTES_MIN = 256 * 1024
_STAGE_BYTES_MAX = 1024 * 1024
_CATCH_UP_S = 0.02  # longest wait for the sender after a blocking bulk append
_BYTES_LIKE = (bytearray, memoryview)


class AsyncProducer(ObservedClient, TransactionalMethods, Generic[KS, VS]):
    """The asyncio producer. Settings as keyword arguments and/or a dotted-name mapping
    (see :class:`sdk.producer.config.ProducerConfig`); invalid ones raise ConfigError.

    Type checkers see ``AsyncProducer[KS, VS]``: ``send`` takes keys of type ``KS`` and
    values of type ``VS``, what ``key_serializer`` and ``value_serializer`` take (bytes,
    bytearray or memoryview without one; ``Any`` with a ``config`` mapping or a serializer
    given by name). None is always allowed: serializers are not called for it.

    Leaving ``async with`` normally delivers what is pending for at most
    ``request_timeout_ms`` (30 s by default; ``await flush()`` first to wait longer), and
    on an exception or a cancellation closes at once (see :meth:`exit_close`)."""

    _labelled = ("start", "close", "_close")  # log with the client id (sdk.metrics.logs)

    @overload
    def __init__(self, config: None = None, /, *,
                 key_serializer: Callable[[KS], RawBytes | None] | None = None,
                 value_serializer: Callable[[VS], RawBytes | None] | None = None,
                 **kwargs: Any) -> None: ...

    @overload
    def __init__(self: AsyncProducer[Any, Any], config: Mapping[str, Any] | None = None, /, *,
                 key_serializer: str | Callable[[Any], RawBytes | None] | None = None,
                 value_serializer: str | Callable[[Any], RawBytes | None] | None = None,
                 **kwargs: Any) -> None: ...

    def __init__(self, config: Mapping[str, Any] | None = None, /, **kwargs: Any) -> None:
        from sdk.producer.config import ProducerConfig  # pydantic: loaded on first use

        cfg = self.config = ProducerConfig.from_arguments((config,), kwargs)[0]
        self._telemetry = ClientTelemetry(cfg, "producer")  # metrics, hooks, tracing, logs
        self._partitioner = make_partitioner(cfg.partitioner, batch_size=max(cfg.batch_size, 1),
                                             ignore_keys=cfg.partitioner_ignore_keys)
        # buffer_memory covers staged records too: their share is kept out of the pool.
        largest_batch = (cfg.batch_size if cfg.compression_type == "none"
                         else max(cfg.batch_size, cfg.max_request_size))
        stage_cap = max(1, min(max(_STAGE_BYTES_MIN, largest_batch), _STAGE_BYTES_MAX,
                               cfg.buffer_memory // 4))
        self._pool = BufferPool(cfg.buffer_memory, held_back=stage_cap)
        self._raw = cfg.key_serializer is None and cfg.value_serializer is None
        self._acc = RecordAccumulator(
            batch_size=cfg.batch_size,
            linger_s=cfg.linger_ms / 1000,
            delivery_timeout_s=cfg.delivery_timeout_ms / 1000,
            compression=cfg.compression_type,
            pool=self._pool,
            partitioner=self._partitioner,
            wake_sender=self._wake_sender,
            record_limit=min(cfg.max_request_size, cfg.buffer_memory - stage_cap) - BATCH_OVERHEAD,
        )
        self._key_serializer = cfg.key_serializer
        self._value_serializer = cfg.value_serializer
        self._max_block_s = cfg.max_block_ms / 1000
        # send_many records waiting for their topic's metadata (sdk.producer.held).
        self._held = HeldSends(limit_bytes=cfg.buffer_memory,
                               wait_topic=self._wait_for_metadata,
                               append_chunk=self._append_chunk)
        self._stage = Stage(
            self._acc,
            cap=stage_cap,
            linger_s=cfg.linger_ms / 1000,
            delivery_timeout_s=cfg.delivery_timeout_ms / 1000,
            wake_sender=self._wake_sender,
            reserve_blocking=self._pool.reserve_blocking,
            reserve_async=self._pool.reserve_async,
            topic_blocking=self._wait_for_topic_blocking,
            topic_async=self._wait_for_topic,
            max_block_s=self._max_block_s,
            after_blocking_drain=self._let_sender_catch_up,
            held=self._held,
        )
        # The fast paths of send and send_threadsafe: a plain record is staged in one call
        # (see Stage.stager); send_threadsafe falls back to the class's general path.
        self._stage_send = self._stage.stager(self._raw, None, "AsyncProducer.send")
        self._txn: TransactionManager | None = None
        if cfg.transactional_id is not None:  # every send checks the transaction first
            self._stage_send = self._checked(self._stage_send)
        if type(self).send_threadsafe is AsyncProducer.send_threadsafe:  # not overridden
            self.send_threadsafe = self._fast_send(  # type: ignore[method-assign]
                "AsyncProducer.send_threadsafe")
        self._intercept = self._interceptor()
        if self._intercept is not None:  # on_send hooks or tracing: see sdk.metrics.tracing
            from sdk.metrics.tracing import intercept_async, intercept_sync

            self.send = intercept_async(  # type: ignore[method-assign,assignment]
                self.send, *self._intercept)
            self.send_threadsafe = intercept_sync(  # type: ignore[method-assign]
                self.send_threadsafe, *self._intercept)
        self._client: NetClient | None = None
        self._sender: Sender | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._close_task: asyncio.Task[None] | None = None
        self._closing_at_once = False
        # Leaving `with` normally waits this long for pending records (see exit_close).
        self.exit_timeout_s = cfg.request_timeout_ms / 1000
        watch(self)  # unusable in the child of a fork (sdk.net.fork)

    def _fast_send(self, name: str) -> Callable[..., RecordFuture]:
        """``send_threadsafe`` as one function named ``name`` (Stage.stager): it stages a
        plain record itself and calls the general path for any other."""
        fast = self._stage.stager(self._raw, AsyncProducer.send_threadsafe.__get__(self), name)
        fast = fast if self.config.transactional_id is None else self._checked(fast)
        intercept = getattr(self, "_intercept", None)
        if intercept is not None:
            from sdk.metrics.tracing import intercept_sync

            return intercept_sync(fast, *intercept)
        return fast

    def _interceptor(self) -> tuple[Any, Any] | None:
        """(on_send hooks, tracing) when either is set, else None (``send`` as is)."""
        telemetry = self._telemetry
        tracing = None
        if telemetry.tracing_enabled:
            from sdk.metrics.tracing import ProducerTracing

            tracing = ProducerTracing(self.config.client_id, telemetry.tracer_provider)
        on_send = telemetry.hooks.on_send
        return None if on_send is None and tracing is None else (on_send, tracing)

    def _telemetry_of(self) -> ClientTelemetry:
        return self._telemetry

    # ================================================================== lifecycle

    async def start(self) -> None:
        """Start the network client and the sender. Does not wait for a broker."""
        if self._client is not None:
            return
        if self._closed:
            raise ProducerClosedError("the producer is closed")
        cfg = self.config
        self._loop = asyncio.get_running_loop()
        self._pool.bind(self._loop)
        telemetry = self._telemetry
        client = self._client = NetClient(cfg, allow_auto_topic_creation=True,
                                          observer=telemetry.network)
        self._acc.metadata = client.metadata
        await client.start()
        ids = None
        if cfg.enable_idempotence:
            ids = ProducerIdManager(client, backoff_ms=cfg.retry_backoff_ms,
                                    backoff_max_ms=cfg.retry_backoff_max_ms,
                                    request_timeout_s=cfg.request_timeout_ms / 1000)
        if cfg.transactional_id is not None:
            assert ids is not None  # the config makes a transactional producer idempotent
            self._txn = TransactionManager(client, ids, transactional_id=cfg.transactional_id,
                                           transaction_timeout_ms=cfg.transaction_timeout_ms,
                                           wake_sender=self._wake_sender)
        observer = None
        if telemetry.registry is not None or telemetry.hooks.on_acknowledgement is not None:
            observer = ProducerObserver(telemetry.registry, telemetry.hooks,
                                        buffer_total=cfg.buffer_memory,
                                        buffer_available=lambda: self._pool.available,
                                        compression=cfg.compression_type != "none")
        self._sender = Sender(client=client, accumulator=self._acc, config=cfg,
                              producer_ids=ids, stage=self._stage, transactions=self._txn,
                              observer=observer)
        self._sender.start()
        telemetry.start()

    async def __aenter__(self) -> AsyncProducer[KS, VS]:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        await self.exit_close(exc_type, "async with")

    async def exit_close(self, exc_type: type[BaseException] | None, block: str) -> None:
        """Close on leaving a ``with`` block. Normally: deliver what is pending for up to
        ``request_timeout_ms`` (30 s), then fail the rest; call ``flush()`` first to wait
        longer. On an exception (Ctrl-C, a cancellation included): at once, failing what
        is not acknowledged yet with ProducerClosedError naming the exception."""
        if exc_type is not None:
            await self._close(0, f"left the `{block}` block on {exc_type.__name__}")
            return
        try:
            await self._close(self.exit_timeout_s,
                              f"leaving the `{block}` block waits up to request_timeout_ms "
                              f"({self.exit_timeout_s:g} s) for pending records; call "
                              "flush() before leaving to wait longer")
        except BaseException as exc:  # cancelled or interrupted while waiting: stop now
            await self._close(0, f"{type(exc).__name__} while leaving the `{block}` block")
            raise

    def _let_sender_catch_up(self) -> None:
        """After a bulk append from another thread: let the sender write it out (see
        ``Sender.catch_up``). Bounded, so a slow broker only slows the sender's writes."""
        sender = self._sender
        if sender is not None and self._acc.any_ready(time.monotonic()):
            sender.catch_up(_CATCH_UP_S)

    def _wake_sender(self) -> None:
        sender = self._sender
        if sender is not None:
            sender.wake()

    @property
    def client(self) -> NetClient:
        """The network client (metadata, connections); available after ``start``."""
        if self._client is None:
            raise IllegalStateError("the producer is not started (use `async with` or start())")
        return self._client

    # ================================================================== sending

    def _prepare(
        self, topic: str, value: Any, key: Any, headers: Headers | None, timestamp_ms: int | None
    ) -> tuple[bytes | None, bytes | None, Headers | None, int | None]:
        """Validate and serialize one record (the general path)."""
        if self._closed:
            raise ProducerClosedError("the producer is closed; no more records are accepted")
        if type(topic) is not str or not topic:
            raise TypeError(f"topic must be a non-empty str, not {topic!r}")
        if self._client is None:
            raise IllegalStateError("the producer is not started (use `async with` or start())")
        if self._txn is not None:
            self._txn.check_send()
        if self._key_serializer is not None and key is not None:
            key = self._key_serializer(key)
        if self._value_serializer is not None and value is not None:
            value = self._value_serializer(value)
        if key is not None and type(key) is not bytes:
            key = _to_bytes(key, "key")
        if value is not None and type(value) is not bytes:
            value = _to_bytes(value, "value")
        if headers:
            headers = _check_headers(headers)
        if timestamp_ms is not None and (type(timestamp_ms) is not int or timestamp_ms < 0):
            raise ValueError(f"timestamp_ms must be an int >= 0 (ms since the epoch), "
                             f"not {timestamp_ms!r}")
        return key, value, headers, timestamp_ms

    def _eligible(self, value: Any, key: Any, headers: Headers | None, partition: int | None,
                  timestamp_ms: int | None) -> bool:
        """Whether a (serialized) record can be staged (sdk.producer.staging)."""
        return (type(value) is bytes and not headers and partition is None
                and timestamp_ms is None and (key is None or type(key) is bytes))

    def _general_steps(
        self, topic: str, value: Any, key: Any, headers: Headers | None, partition: int | None,
        timestamp_ms: int | None, on_delivery: DeliveryCallback | None,
    ) -> Iterator[RecordFuture | tuple[NeedMemory | Literal["stage"] | None, float]]:
        """``send`` off the fast path, without its waits, shared by the asyncio and the
        blocking face (each waits its own way).

        Validates and serializes the record; stages it if it can be, else drains the stage
        (to keep the order) and appends it to its batch. Yields what it must wait for before
        the next try, with the seconds left of ``max_block_ms``: ``("stage", s)``, the stage
        drained (the waiting is up to the caller's drain); ``(None, s)``, the topic's
        metadata and the records held for it (sdk.producer.held); ``(NeedMemory, s)``, that many bytes of buffer memory, which the caller
        reserves for this record (the next try hands them to the batch). The last item is
        the record's future.
        """
        key, value, headers, ts = self._prepare(topic, value, key, headers, timestamp_ms)
        deadline = time.monotonic() + self._max_block_s
        stage = self._stage
        if self._eligible(value, key, headers, partition, ts):
            while True:
                fut = stage.put(topic, key, value, on_delivery)
                if fut is not None:
                    yield fut
                    return
                if self._closed or not self._acc.knows(topic) or topic in self._held:
                    break  # the general path raises, or waits for the topic's metadata
                yield "stage", max(0.0, deadline - time.monotonic())
        if stage.runs:
            yield "stage", max(0.0, deadline - time.monotonic())
        reserved = 0
        held = self._held
        while True:
            if topic in held:  # an earlier send_many's records wait for the topic: go after
                self._acc.give_back(reserved)
                reserved = 0
                yield None, max(0.0, deadline - time.monotonic())
                continue
            result = self._acc.append(topic, partition, key, value, headers, ts, on_delivery,
                                      reserved)
            if type(result) is RecordFuture:
                yield result
                return
            yield result, max(0.0, deadline - time.monotonic())  # type: ignore[misc]
            if result is None:
                reserved = 0
            else:  # reserved by the caller; stay on the partition the memory is for
                partition, reserved = result.partition, result.nbytes  # type: ignore[union-attr]

    async def send(
        self,
        topic: str,
        value: VS | None = None,
        key: KS | None = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        on_delivery: DeliveryCallback | None = None,
        callback: None = None,
    ) -> RecordFuture:
        """Enqueue a record; returns its future (``await fut`` gives RecordMetadata).

        ``on_delivery(error_or_None, metadata)`` runs once the record is acknowledged or
        failed (there is no ``callback`` argument: passing one raises TypeError)."""
        fut = self._stage_send(topic, value, key, headers, partition, timestamp_ms,
                               on_delivery, callback)
        if fut is not None:
            return fut
        steps = self._general_steps(topic, value, key, headers, partition, timestamp_ms,
                                    on_delivery)
        while True:
            step = next(steps)
            if isinstance(step, RecordFuture):
                return step
            need, remaining = step
            if need == "stage":
                await self._stage.drain_async(time.monotonic() + remaining)
                # A send loop that never waits would keep the sender from the batches
                # until flush: let it write what is ready now, once per drained stage.
                await asyncio.sleep(0)
            elif need is None:
                await self._wait_for_topic(topic, remaining)
            else:
                await self._pool.reserve_async(need.nbytes, remaining)

    async def send_and_wait(
        self,
        topic: str,
        value: VS | None = None,
        key: KS | None = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> RecordMetadata:
        """Send one record and wait for its acknowledgement."""
        fut = await self.send(topic, value, key, headers, partition, timestamp_ms)
        return await fut

    async def send_many(self, topic: str, records: Iterable[VS | tuple[KS | None, VS | None]],
                        *, partition: int | None = None,
                        timestamp_ms: int | None = None) -> BulkFuture:
        """Enqueue many records at once: each item is a value or a ``(key, value)`` tuple.

        Faster than a ``send`` per record (one lock hold per chunk, no per-record future).
        Returns a :class:`BulkFuture` (``await`` it for the list of RecordMetadata).

        It does not wait for the topic's metadata: records the topic's partitions are not
        known for yet are held and appended once they are (``sdk.producer.held``), so
        ``result(timeout=...)`` honours its timeout; they fail if the metadata does not
        arrive within ``max_block_ms``. It may wait for buffer memory (up to
        ``max_block_ms``), as ``send`` does.
        """
        deadline = time.monotonic() + self._max_block_s
        await self._stage.drain_async(deadline)  # staged sends go first
        parts: list[list[Any]] = []
        chunks: list[tuple[list[bytes | None], list[bytes | None] | None]] = []
        held: list[Chunk] = []
        start = 0
        for chunk in self._chunks(topic, records, timestamp_ms):
            _, keys, values, _ = chunk
            chunks.append((values, keys))  # the metadata's sizes, measured when asked for
            if not held:
                i = 0 if topic in self._held else await self._append_chunk(
                    topic, partition, chunk, 0, parts, deadline)
                if i == len(values):
                    await asyncio.sleep(0)  # let the sender drain between chunks
                    continue
                start = i  # the topic's partitions are not known: hold the rest
            self._check_holdable(chunk, start if not held else 0, partition)
            held.append(chunk)
        if held:
            await self._held.hold(topic, partition, held, start, parts, deadline)
        return BulkFuture(topic, parts, chunks)

    async def _append_chunk(self, topic: str, partition: int | None, chunk: Chunk, start: int,
                            parts: list[list[Any]], deadline: float) -> int:
        """Append ``chunk``'s records from ``start`` (extending ``parts``), waiting for
        buffer memory until ``deadline``. Returns where it stopped: ``len(values)`` once
        all are appended, less when the topic's partitions are not known."""
        ts, keys, values, plain = chunk
        i, reserved, first = start, 0, partition
        while i < len(values):
            j, need = self._acc.append_many(topic, first, keys, values, i, parts, ts,
                                            reserved, plain)
            reserved, first = 0, partition
            if j < 0:
                return i
            i = j
            if need is not None:
                await self._pool.reserve_async(need.nbytes,
                                               max(0.0, deadline - time.monotonic()))
                reserved, first = need.nbytes, need.partition
        return i

    def _check_holdable(self, chunk: Chunk, start: int, partition: int | None) -> None:
        """What an append would refuse at once, checked before records are held."""
        if partition is not None and (type(partition) is not int or partition < 0):
            raise (TypeError if type(partition) is not int else ValueError)(
                f"partition must be an int >= 0, not {partition!r}")
        _, keys, values, _ = chunk
        limit = self._acc.record_limit
        for i in range(start, len(values)):
            value, key = values[i], keys[i] if keys is not None else None
            size = (RECORD_OVERHEAD_BOUND + (len(value) if value is not None else 0)
                    + (len(key) if key else 0))
            if size > limit:
                raise self._acc.too_large(size, i)

    def _chunks(self, topic: str, records: Iterable[Any], timestamp_ms: int | None
                ) -> Iterator[tuple[int, list[bytes | None] | None, list[bytes | None], bool]]:
        """Serialized records in chunks: ``(timestamp, keys or None, values, no None values)``."""
        self._prepare(topic, None, None, None, timestamp_ms)  # validates topic and timestamp
        raw = self._raw
        if raw and type(records) is list:
            # A list: chunks are its slices, and a slice of bytes values is a chunk as it
            # is (type checks and copying in C; one Python step per record cost as much as
            # the rest of send_many). Any other slice goes through the loop below, which
            # yields it whole too, so the chunks are the same either way.
            for i in range(0, len(records), _BULK_CHUNK):
                piece = records[i:i + _BULK_CHUNK]
                if list(map(type, piece)).count(bytes) == len(piece):
                    yield self._now_or(timestamp_ms), None, piece, True
                else:
                    yield from self._chunks_of(topic, piece, timestamp_ms)
            return
        yield from self._chunks_of(topic, records, timestamp_ms)

    def _chunks_of(self, topic: str, records: Iterable[Any], timestamp_ms: int | None
                   ) -> Iterator[tuple[int, list[bytes | None] | None, list[bytes | None], bool]]:
        """:meth:`_chunks`, one record at a time."""
        raw = self._raw
        values: list[bytes | None] = []
        keys: list[bytes | None] | None = None
        plain = True
        for record in records:
            if raw and type(record) is bytes:
                values.append(record)
                if keys is not None:
                    keys.append(None)
            else:
                if type(record) is tuple:
                    if len(record) != 2:
                        raise ValueError(
                            f"send_many items are values or (key, value), not {record!r}")
                    key, value = record
                else:
                    key, value = None, record
                key, value, _, _ = self._prepare(topic, value, key, None, None)
                if key is not None and keys is None:
                    keys = [None] * len(values)
                if keys is not None:
                    keys.append(key)
                if value is None:
                    plain = False
                values.append(value)
            if len(values) >= _BULK_CHUNK:
                yield self._now_or(timestamp_ms), keys, values, plain
                values, keys, plain = [], None, True
        if values:
            yield self._now_or(timestamp_ms), keys, values, plain

    @staticmethod
    def _now_or(timestamp_ms: int | None) -> int:
        return timestamp_ms if timestamp_ms is not None else time.time_ns() // 1_000_000

    # ------------------------------------------------------------------ from other threads

    def send_threadsafe(
        self,
        topic: str,
        value: VS | None = None,
        key: KS | None = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> RecordFuture:
        """:meth:`send` for a thread other than the producer's event loop (may block up to
        ``max_block_ms`` for metadata or buffer memory).

        Each instance binds its own ``send_threadsafe`` (``Stage.stager``): it stages a plain
        record itself and calls this method for any other record."""
        steps = self._general_steps(topic, value, key, headers, partition, timestamp_ms,
                                    on_delivery)
        while True:
            step = next(steps)
            if isinstance(step, RecordFuture):
                return step
            self._check_not_loop_thread()
            need, remaining = step
            if need == "stage":
                self._stage.drain_blocking(time.monotonic() + remaining)
            elif need is None:
                self._wait_for_topic_blocking(topic, remaining)
            else:
                self._pool.reserve_blocking(need.nbytes, remaining)

    def send_many_threadsafe(self, topic: str,
                             records: Iterable[VS | tuple[KS | None, VS | None]], *,
                             partition: int | None = None,
                             timestamp_ms: int | None = None) -> BulkFuture:
        """:meth:`send_many` for a thread other than the producer's event loop.

        The records are appended on the loop thread while the caller waits: one thread
        does all the work, instead of two taking turns with the GIL. ``records`` is
        therefore iterated on the loop thread.
        """
        self._check_not_loop_thread()
        assert self._loop is not None
        fut = asyncio.run_coroutine_threadsafe(
            self.send_many(topic, records, partition=partition, timestamp_ms=timestamp_ms),
            self._loop)
        return fut.result()  # send_many bounds its own waits by max_block_ms

    async def _wait_for_topic(self, topic: str, remaining: float) -> None:
        """Wait until records can be appended to ``topic``: its metadata is known and no
        records of an earlier send_many wait for it (they go first)."""
        deadline = time.monotonic() + remaining
        await self._held.wait_clear(topic, remaining)
        await self.client.wait_for_topic(topic, max(0.0, deadline - time.monotonic()))

    async def _wait_for_metadata(self, topic: str, remaining: float) -> None:
        await self.client.wait_for_topic(topic, remaining)

    def _wait_for_topic_blocking(self, topic: str, remaining: float) -> None:
        assert self._loop is not None
        fut = asyncio.run_coroutine_threadsafe(self._wait_for_topic(topic, remaining),
                                               self._loop)
        try:
            fut.result(remaining + 5.0)  # wait_for_topic enforces `remaining` itself
        except TimeoutError:
            if fut.done():
                raise
            fut.cancel()
            raise KafkaTimeoutError(
                f"metadata for topic {topic!r} not available within max_block_ms") from None

    def _check_not_loop_thread(self) -> None:
        loop = self._loop
        if loop is None:
            raise IllegalStateError("the producer is not started")
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            return
        if running is loop:
            raise IllegalStateError("this call would block the producer's own event loop; "
                                    "use `await producer.send(...)` there")

    # ================================================================== flush, close

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything enqueued so far at once (ignoring linger) and wait until each of
        those records is acknowledged or failed (with acks=0: until the brokers have read
        them). KafkaTimeoutError after ``timeout`` s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        await self._flush_batches(timeout, deadline)
        if self.config.acks == 0 and self._sender is not None:
            await self._sender.settle(
                None if deadline is None else max(0.0, deadline - time.monotonic()))

    async def _flush_batches(self, timeout: float | None, deadline: float | None) -> None:
        try:
            await self._stage.drain_async(deadline)
        except KafkaTimeoutError:
            raise KafkaTimeoutError(f"flush did not finish within {timeout:g} s; records are "
                                    "still waiting for buffer memory or metadata") from None
        if not await self._held.settled(_left(deadline)):
            raise KafkaTimeoutError(f"flush did not finish within {timeout:g} s; send_many "
                                    "records still wait for their topic's metadata")
        batches = self._acc.snapshot_incomplete()
        if not batches:
            return
        with self._acc.lock:
            self._acc.flushing += 1
        self._wake_sender()
        try:
            for batch in batches:
                if batch.done:
                    continue
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    await asyncio.wait_for(asyncio.shield(batch.aio_wait()), remaining)
                except TimeoutError:
                    pending = sum(1 for b in batches if not b.done)
                    raise KafkaTimeoutError(
                        f"flush did not finish within {timeout:g} s; {pending} batch(es) "
                        "still unacknowledged") from None
        finally:
            with self._acc.lock:
                self._acc.flushing -= 1

    async def close(self, timeout: float | None = None) -> None:
        """Stop accepting records, deliver what is pending for up to ``timeout`` seconds
        (None: until each record is acknowledged or its delivery timeout passes), fail the
        rest with ProducerClosedError, and close the connections. Safe to call twice."""
        await self._close(timeout, None)

    async def _close(self, timeout: float | None, reason: str | None) -> None:
        """``close``; ``reason`` goes into the ProducerClosedError of records failed. With
        a reason and a timeout of 0 it also cuts a close in progress short (Ctrl-C while
        a close waits for the brokers)."""
        task = self._close_task
        if task is not None:
            if task.done() or reason is None or timeout != 0:
                return  # closed or closing already
            if self._closing_at_once:
                await asyncio.shield(task)
                return
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        self._closed = True
        self._closing_at_once = timeout == 0
        task = self._close_task = asyncio.get_running_loop().create_task(
            self._shut_down(timeout, reason), name="kafka-sdk-producer-close")
        await asyncio.shield(task)

    async def _shut_down(self, timeout: float | None, reason: str | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        self._stage.close()
        try:  # staged records go to batches first (the rest fail when the sender stops)
            await self._stage.drain_async(deadline)
        except KafkaError as exc:
            log.info("staged records not all appended before close: %s", exc)
        # Held send_many records may still get their topic's metadata within the timeout.
        await self._held.close(_left(deadline), reason)
        self._acc.close()
        if self._sender is not None:
            await self._sender.stop(_left(deadline), reason)
        if self._client is not None:
            await self._client.close()
        await self._telemetry.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called (no more records are accepted)."""
        return self._closed

    def _state(self) -> str:
        return "closed" if self._closed else "started" if self._client is not None else "new"

    def __repr__(self) -> str:
        return describe_client(type(self).__name__, self.config, self._state())

    async def partitions_for(self, topic: str, timeout: float | None = None) -> list[int]:
        """The partition ids of ``topic`` (waits for its metadata up to max_block_ms)."""
        info = await self.client.wait_for_topic(
            topic, self._max_block_s if timeout is None else timeout)
        return list(info.partition_ids)


def _left(deadline: float | None) -> float | None:
    """Seconds to ``deadline`` (None: no limit), at least 0."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _to_bytes(data: Any, what: str) -> bytes:
    if isinstance(data, _BYTES_LIKE):
        return bytes(data)
    if isinstance(data, bytes):
        return data
    raise TypeError(
        f"record {what} must be bytes (or bytearray/memoryview) or None, not "
        f"{type(data).__name__}; configure a {what}_serializer to send other types"
    )


def _check_headers(headers: Headers) -> list[tuple[str, bytes | None]]:
    out: list[tuple[str, bytes | None]] = []
    if isinstance(headers, Mapping):
        raise TypeError("headers are a list of (str, bytes | None) tuples (a key may repeat), "
                        "not a mapping; pass list(headers.items())")
    for item in headers:
        if type(item) is not tuple or len(item) != 2:
            raise TypeError(f"each header must be a (str, bytes | None) tuple, not {item!r}")
        hkey, hvalue = item
        if type(hkey) is not str:
            raise TypeError(f"header keys must be str, not {hkey!r}")
        if hvalue is not None and type(hvalue) is not bytes:
            if not isinstance(hvalue, _BYTES_LIKE):
                # No serializer applies to headers (as in Java): the caller encodes them.
                shown = repr(hvalue) if len(repr(hvalue)) <= 40 else "value"
                fix = (f"encode it: ({hkey!r}, {shown}.encode())" if isinstance(hvalue, str)
                       else "encode it to bytes first")
                raise TypeError(f"header {hkey!r}: values must be bytes (or bytearray/"
                                f"memoryview) or None, not {type(hvalue).__name__}; {fix}")
            hvalue = bytes(hvalue)
        out.append((hkey, hvalue))
    return out
