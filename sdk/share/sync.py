"""ShareConsumer: the blocking face of :class:`~sdk.share.consumer.AsyncShareConsumer`.

It runs the async core on a private event-loop thread and holds no logic of its own. The
acknowledgement-commit callback runs on that loop thread, inside ``poll``, the commits and
``close``: it must not block for long nor call this consumer.
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine, Iterator, Mapping
from typing import Any, Generic, TypeVar

from sdk.errors import ConsumerClosedError, KafkaError
from sdk.net import LoopThread
from sdk.net.describe import describe_client
from sdk.net.fork import watch
from sdk.share.acknowledgements import AcknowledgeType
from sdk.share.consumer import AcknowledgementCommitCallback, AsyncShareConsumer
from sdk.types import K, ShareConsumerRecord, TopicPartition, V

log = logging.getLogger(__name__)

T = TypeVar("T")
_MARGIN_S = 5.0  # a blocking wait's slack beyond the operation's own timeout

__all__ = ["ShareConsumer"]


class ShareConsumer(Generic[K, V]):
    """A share-group member, blocking. Same settings as :class:`AsyncShareConsumer`:
    ``ShareConsumer("jobs", bootstrap_servers=..., group_id="workers")``; a context manager.
    """

    def __init__(self, *topics: str | Mapping[str, Any], config: Mapping[str, Any] | None = None,
                 acknowledgement_commit_callback: AcknowledgementCommitCallback | None = None,
                 **settings: Any) -> None:
        self._core: AsyncShareConsumer[K, V] = AsyncShareConsumer(
            *topics, config=config,
            acknowledgement_commit_callback=acknowledgement_commit_callback, **settings)
        self._thread = LoopThread(name="kafka-sdk-share-consumer",
                                  client_id=self._core.config.client_id)
        self._closed = False
        try:
            self._run(self._core.start(), self._core.config.request_timeout_ms / 1000)
        except BaseException:
            self._thread.stop(timeout=5)
            raise
        self._buffer: list[ShareConsumerRecord[K, V]] = []
        watch(self)

    @property
    def config(self) -> Any:
        return self._core.config

    @property
    def acquisition_lock_timeout_ms(self) -> int | None:
        """How long the broker keeps records locked for us, as it last said."""
        return self._core.acquisition_lock_timeout_ms

    def _run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None) -> T:
        if self._closed:
            coro.close()
            raise ConsumerClosedError("the share consumer is closed")
        return self._thread.run(coro, timeout_s)

    async def _call(self, fn: Any, *args: Any) -> Any:
        return fn(*args)

    def _do(self, fn: Any, *args: Any) -> Any:
        return self._run(self._call(fn, *args), None)

    # ------------------------------------------------------------------ the API

    def subscribe(self, topics: list[str] | tuple[str, ...] | str) -> None:
        """Join the share group for these topics (replacing the subscription)."""
        self._do(self._core.subscribe, topics)

    def unsubscribe(self) -> None:
        """Drop the subscription and leave the group (implicit mode: what was handed out
        is accepted first); ``subscribe`` joins again. Returns once the member left."""
        self._run(self._unsubscribe(), self._core._timeout_s * 2 + _MARGIN_S)

    async def _unsubscribe(self) -> None:
        await self._core.unsubscribe()

    def subscription(self) -> set[str]:
        """The topics subscribed to."""
        return self._core.subscription()

    def assignment(self) -> set[TopicPartition]:
        """The partitions the group gave this member (others may share them)."""
        return self._core.assignment()

    def poll(self, timeout_ms: int = 1000) -> list[ShareConsumerRecord[K, V]]:
        """Records acquired for this member; empty after ``timeout_ms`` without any."""
        return self._run(self._core.poll(timeout_ms), timeout_ms / 1000 + 60 + _MARGIN_S)

    def __iter__(self) -> Iterator[ShareConsumerRecord[K, V]]:
        return self

    def __next__(self) -> ShareConsumerRecord[K, V]:
        try:
            while not self._buffer:
                if self._closed:
                    raise StopIteration
                self._buffer = list(reversed(self.poll(1000)))
            return self._buffer.pop()
        except KeyboardInterrupt:
            log.info("share consumer iteration interrupted (Ctrl-C)")
            raise StopIteration from None

    def wakeup(self) -> None:
        """Make the poll in progress (or the next one) raise WakeupError. Any thread."""
        if not self._closed:
            self._thread.call_soon(self._core.wakeup)

    def acknowledge(self, record: ShareConsumerRecord[K, V],
                    type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """Settle a record this consumer handed out (``share.acknowledgement.mode``
        explicit): ACCEPT (done), RELEASE (deliver it again), REJECT (never again). Sent
        with the next poll or commit."""
        self._do(self._core.acknowledge, record, type)

    def commit_sync(self, timeout_ms: int | None = None
                    ) -> dict[TopicPartition, KafkaError | None]:
        """Send every settled acknowledgement now (implicit mode: accept what was handed
        out) and wait for the brokers' answers, per partition."""
        limit = (self._core._timeout_s if timeout_ms is None else timeout_ms / 1000) + _MARGIN_S
        return self._run(self._core.commit_sync(timeout_ms), limit)

    def commit_async(self) -> None:
        """Like :meth:`commit_sync` without waiting; the acknowledgement-commit callback
        hears the outcome (at the next poll, commit or close)."""
        self._do(self._core.commit_async)

    def set_acknowledgement_commit_callback(
            self, callback: AcknowledgementCommitCallback | None) -> None:
        """``callback(offsets by partition, error or None)`` for every acknowledgement the
        brokers answered; it runs on the consumer's loop thread."""
        self._core.set_acknowledgement_commit_callback(callback)

    def close(self, timeout_ms: int | None = None) -> None:
        """Send what is settled, close the share sessions (the brokers release what this
        member still holds) and leave the group."""
        if self._closed:
            return
        limit = (self._core._timeout_s if timeout_ms is None else timeout_ms / 1000) + _MARGIN_S
        try:
            self._run(self._core.close(timeout_ms), limit)
        finally:
            self._closed = True
            self._thread.stop(timeout=5)

    def __enter__(self) -> ShareConsumer[K, V]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "started"
        return describe_client(type(self).__name__, self.config, state,
                               group_id=self.config.group_id)
