"""A control surface for tests: script what happens to the next requests of an API.

Rules are queued per API key and each applies to the next ``times`` matching requests:

* ``answer_next(key, response)``: reply with ``response`` (a message, or a function of
  the context and request returning one) instead of handling the request;
* ``delay_next(key, seconds)``: handle it normally after a pause;
* ``drop_next(key, handle=True)``: send no response, keeping the connection open; with
  ``handle=True`` the request still takes effect (a lost response), otherwise it is ignored;
* ``close_next(key, handle=False)``: close the connection instead of answering;
* ``fail_next(key, error_code)``: answer with the API's response carrying ``error_code``
  everywhere (every partition, resource or top-level code).

Rules may be added from any thread (the embedded broker runs on its own). ``seen(key)``
counts the requests of an API received so far, for assertions.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sdk.protocol.message import Message
from server_ref.handlers import RequestContext
from server_ref.handlers.unsupported import can_build_error_response, error_response

__all__ = ["ControlSurface", "Rule"]

CLOSE = object()
Responder = Message | Callable[[RequestContext, Any], Any]
Matcher = Callable[[Any], bool]


@dataclass
class Rule:
    kind: str  # "answer", "delay", "drop", "close" or "fail"
    remaining: int
    response: Responder | None = None
    seconds: float = 0.0
    handle: bool = False
    error_code: int = 0
    match: Matcher | None = None

    CLOSE = CLOSE

    async def apply(self, ctx: RequestContext, request: Any,
                    call_handler: Callable[[], Any]) -> Message | object | None:
        if self.kind == "answer":
            response = self.response
            if callable(response) and not isinstance(response, Message):
                response = response(ctx, request)
            return await _resolve(response)
        if self.kind == "delay":
            await asyncio.sleep(self.seconds)
            return await _resolve(call_handler())
        if self.kind == "fail":
            return error_response(ctx.api_key, ctx.api_version, request, self.error_code)
        if self.handle:
            await _resolve(call_handler())
        return None if self.kind == "drop" else CLOSE


async def _resolve(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


class ControlSurface:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: dict[int, deque[Rule]] = {}
        self._seen: Counter[int] = Counter()

    def _add(self, api_key: int, rule: Rule) -> None:
        if rule.remaining < 1:
            raise ValueError("times must be at least 1")
        with self._lock:
            self._rules.setdefault(int(api_key), deque()).append(rule)

    def answer_next(self, api_key: int, response: Responder, *, times: int = 1,
                    match: Matcher | None = None) -> None:
        self._add(api_key, Rule("answer", times, response=response, match=match))

    def delay_next(self, api_key: int, seconds: float, *, times: int = 1,
                   match: Matcher | None = None) -> None:
        self._add(api_key, Rule("delay", times, seconds=seconds, match=match))

    def drop_next(self, api_key: int, *, handle: bool = True, times: int = 1,
                  match: Matcher | None = None) -> None:
        self._add(api_key, Rule("drop", times, handle=handle, match=match))

    def close_next(self, api_key: int, *, handle: bool = False, times: int = 1,
                   match: Matcher | None = None) -> None:
        self._add(api_key, Rule("close", times, handle=handle, match=match))

    def fail_next(self, api_key: int, error_code: int, *, times: int = 1,
                  match: Matcher | None = None) -> None:
        if not can_build_error_response(int(api_key)):
            raise ValueError(f"API {api_key}'s response has no error field to fail with")
        self._add(api_key, Rule("fail", times, error_code=int(error_code), match=match))

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def pending(self, api_key: int) -> int:
        with self._lock:
            return sum(rule.remaining for rule in self._rules.get(int(api_key), ()))

    def seen(self, api_key: int) -> int:
        with self._lock:
            return self._seen[int(api_key)]

    def take(self, api_key: int, version: int, request: Any) -> Rule | None:
        """Called by the server for every request: the rule to apply to it, if any."""
        with self._lock:
            self._seen[api_key] += 1
            rules = self._rules.get(api_key)
            if not rules or request is None:
                return None
            for rule in rules:
                if rule.match is None or rule.match(request):
                    rule.remaining -= 1
                    if rule.remaining == 0:
                        rules.remove(rule)
                    return rule
            return None
