"""Interceptor hooks: the application's own instrumentation, called by the client.

Subclass :class:`ClientHooks`, override the methods you need and pass instances as
``hooks=[...]`` to any client. Hooks run on the client's event-loop thread (``on_send``
runs on the thread calling ``send``), in the order given; they must not block. An
exception in a hook is logged (``sdk.metrics.hooks``) and does not reach the client.

Cost: a client looks at its hooks once, when it is made (:class:`HookSet`); a method no
hook overrides is ``None`` there, and the client checks that once per request, batch or
poll. Only ``on_send`` is per record, and only when some hook overrides it (then ``send``
takes the general path instead of the staged one).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sdk.types import ConsumerRecord, OffsetAndMetadata, TopicPartition

__all__ = ["HOOK_METHODS", "ClientHooks", "HookSet"]

log = logging.getLogger(__name__)


class ClientHooks:
    """Base class of interceptor hooks; every method does nothing unless overridden."""

    # ------------------------------------------------------------------ producer
    def on_send(self, topic: str, partition: int | None, key: bytes | None,
                value: bytes | None, headers: Sequence[tuple[str, bytes | None]] | None
                ) -> None:
        """A record was handed to ``send`` (before partitioning; ``partition`` is the one
        the caller asked for, or None). Key and value are as given to ``send``."""

    def on_acknowledgement(self, topic: str, partition: int, base_offset: int,
                           record_count: int, error: BaseException | None) -> None:
        """A batch of ``record_count`` records completed: written at ``base_offset`` (-1
        when the broker does not say: acks=0, a duplicate) or failed with ``error``."""

    # ------------------------------------------------------------------ consumer
    def on_consume(self, records: Sequence[ConsumerRecord[Any, Any]]) -> None:
        """Records are about to be returned by ``poll`` / ``getmany`` / iteration."""

    def on_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                  error: BaseException | None) -> None:
        """An offset commit finished (``error`` None) or failed."""

    def on_rebalance(self, revoked: Sequence[TopicPartition],
                     assigned: Sequence[TopicPartition]) -> None:
        """The group gave this member ``assigned`` and took ``revoked`` away."""

    # ------------------------------------------------------------------ network
    def on_broker_connect(self, node_id: int, host: str, port: int) -> None:
        """A connection to a broker is open (handshake and authentication done)."""

    def on_broker_disconnect(self, node_id: int, host: str, port: int,
                             reason: BaseException | None) -> None:
        """A connection closed: ``reason`` None when the client closed it."""

    def on_request(self, node_id: int, api_key: int, api_version: int, correlation_id: int,
                   size: int) -> None:
        """A request of ``size`` bytes was written to ``node_id``."""

    def on_response(self, node_id: int, api_key: int, api_version: int,
                    correlation_id: int, latency_s: float) -> None:
        """The response to a request arrived ``latency_s`` seconds after it was written."""


HOOK_METHODS = tuple(n for n in vars(ClientHooks) if n.startswith("on_"))


def _guarded(name: str, methods: list[Callable[..., Any]]) -> Callable[..., None]:
    def call(*args: Any) -> None:
        for method in methods:
            try:
                method(*args)
            except Exception:
                log.exception("hook %s raised", getattr(method, "__qualname__", name))

    call.__name__ = name
    return call


class HookSet:
    """The hooks of one client, resolved once: ``hookset.on_send`` is None when no hook
    overrides ``on_send``, else one function calling each override in order."""

    on_send: Callable[..., None] | None
    on_acknowledgement: Callable[..., None] | None
    on_consume: Callable[..., None] | None
    on_commit: Callable[..., None] | None
    on_rebalance: Callable[..., None] | None
    on_broker_connect: Callable[..., None] | None
    on_broker_disconnect: Callable[..., None] | None
    on_request: Callable[..., None] | None
    on_response: Callable[..., None] | None

    def __init__(self, hooks: Sequence[object] = ()) -> None:
        self.hooks = list(hooks)
        for hook in self.hooks:
            if not any(callable(getattr(hook, n, None)) for n in HOOK_METHODS):
                raise TypeError(f"{hook!r} has none of the hook methods {', '.join(HOOK_METHODS)}"
                                " (subclass sdk.metrics.ClientHooks)")
        self.any = False
        for name in HOOK_METHODS:
            base = getattr(ClientHooks, name)
            methods = [getattr(h, name) for h in self.hooks
                       if callable(getattr(h, name, None))
                       and getattr(type(h), name, None) is not base]
            setattr(self, name, _guarded(name, methods) if methods else None)
            self.any = self.any or bool(methods)

    @property
    def network(self) -> bool:
        """True if a connection-level hook is overridden."""
        return any(getattr(self, n) is not None for n in
                   ("on_broker_connect", "on_broker_disconnect", "on_request", "on_response"))
