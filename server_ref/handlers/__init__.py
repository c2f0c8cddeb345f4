"""Request handlers: one module per API family, registered by API key and version range.

A handler receives the request context and the decoded request and returns the response
message (or awaits for it: JoinGroup and long-poll Fetch do). It runs on the broker's event
loop, which owns all state, so it must not await while an invariant is half-updated.
Returning ``None`` means "send no response" (Produce with acks=0).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sdk.protocol.message import Message

if TYPE_CHECKING:
    from server_ref.broker import Broker

HandlerResult = Message | None | Awaitable[Message | None]
Handler = Callable[["RequestContext", Any], HandlerResult]


@dataclass(slots=True)
class RequestContext:
    broker: Broker
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str  # "host:port" of the client, for logs
    # Who is asking (Kafka's principal form, "User:NAME"; "User:ANONYMOUS" before or
    # without authentication) and on which listener: what the authorizer checks.
    principal: str = "User:ANONYMOUS"
    listener: str = "PLAINTEXT"
    started_ns: int = 0  # perf_counter_ns at arrival, set only when metrics are on


@dataclass(frozen=True, slots=True)
class Registration:
    api_key: int
    min_version: int
    max_version: int
    handler: Handler


REGISTRY: dict[int, Registration] = {}


def handles(api_key: int, min_version: int, max_version: int) -> Callable[[Handler], Handler]:
    """Register ``handler`` for an API key; ApiVersions advertises exactly these ranges."""

    def register(handler: Handler) -> Handler:
        if api_key in REGISTRY:
            raise RuntimeError(f"API key {api_key} registered twice")
        REGISTRY[api_key] = Registration(api_key, min_version, max_version,
                                         _behind_authorizer(api_key, handler))
        return handler

    return register


def _behind_authorizer(api_key: int, handler: Handler) -> Handler:
    """``handler`` checked by the broker's authorizer (``server_ref.security.api_rules``);
    without one configured, the cost is one None check."""

    def run(ctx: RequestContext, request: Any) -> HandlerResult:
        if ctx.broker.authorizer is None:
            return handler(ctx, request)
        from server_ref.security.api_rules import authorized  # loaded once, on first use

        return authorized(api_key, handler, ctx, request)

    run.__wrapped__ = handler  # type: ignore[attr-defined]
    return run
