"""Clients across ``os.fork()``: a client created before a fork is unusable in the child.

A client's event loop (the blocking faces' loop thread) and its connections live in the
process that created it. The child of a ``fork()`` holds a copy of the client without its
loop thread and with the parent's sockets, so what it asked that copy to do would never be
sent: a staged record would simply wait.

Every client registers itself with :func:`watch`. Right after a fork, in the child (an
``os.register_at_fork`` hook), each live client is switched to a subclass of its own class
whose public methods raise :class:`IllegalStateError` naming the fix: create clients after
the fork, in the process that uses them. ``close()`` (and leaving a ``with`` block) does
nothing there, as the sockets and the loop are the parent's. Instance attributes that
shadow a method (the producer's per-instance ``send`` fast path) are dropped, so no hot
path pays for the check: the parent's clients never change class.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import weakref
from collections.abc import Callable
from typing import Any

from sdk.errors import IllegalStateError

__all__ = ["forked_error", "watch"]

# Live clients -> the id of the process that created them (an object registers once).
_live: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_forked_classes: dict[type, type] = {}
# Dunder entry points that use the client, and those that end it (quiet in the child).
_ENTRY_DUNDERS = ("__iter__", "__next__", "__aiter__", "__anext__", "__enter__", "__aenter__")
_QUIET = ("close", "__exit__", "__aexit__")


def watch(client: Any) -> None:
    """Make ``client`` refuse to work in the child of a later ``fork()``."""
    _live[client] = os.getpid()


def forked_error(client: Any, method: str) -> IllegalStateError:
    name = type(client).__name__
    parent = client.__dict__.get("_forked_from", "another process")
    return IllegalStateError(
        f"{name}.{method}() in process {os.getpid()}: this {name} was created in process "
        f"{parent} before os.fork(), and a client does not survive a fork (its event loop "
        "and connections stay in the parent, so nothing would be sent). Create clients "
        "after the fork, in the process that uses them: in the multiprocessing worker "
        "function, or in a pre-fork server's post-fork hook (e.g. gunicorn's post_fork)")


def _after_fork_in_child() -> None:
    for client, pid in list(_live.items()):
        with contextlib.suppress(Exception):  # a fork must never fail because of a client
            _disable(client, pid)


def _disable(client: Any, pid: int) -> None:
    cls = type(client)
    if "_forked_from" in cls.__dict__:
        return  # already disabled (a fork of a fork)
    forked = _forked_classes.get(cls)
    if forked is None:
        forked = _forked_classes[cls] = _forked_class(cls)
    state = client.__dict__
    for name in forked.__dict__:
        state.pop(name, None)  # e.g. the bound fast path of Producer.send
    state["_forked_from"] = pid
    client.__class__ = forked


def _forked_class(cls: type) -> type:
    """``cls`` with every public method (and the dunders that use the client) raising;
    ``close`` and leaving a ``with`` block do nothing."""
    namespace: dict[str, Any] = {"__slots__": (), "__module__": cls.__module__,
                                 "__qualname__": cls.__qualname__, "_forked_from": True}
    for name in dir(cls):
        if name.startswith("_") and name not in _ENTRY_DUNDERS and name not in _QUIET:
            continue
        attr = inspect.getattr_static(cls, name)
        if isinstance(attr, staticmethod | classmethod) or not callable(attr):
            continue  # properties (config, closed) and constants keep working
        if name in _QUIET:
            namespace[name] = _quiet_close(attr)
        else:
            namespace[name] = _refusal(name)
    if hasattr(cls, "_state"):
        namespace["_state"] = lambda self: "forked"  # shown by repr()
    return type(cls.__name__, (cls,), namespace)


def _refusal(name: str) -> Callable[..., Any]:
    def refuse(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise forked_error(self, name)

    refuse.__name__ = refuse.__qualname__ = name
    return refuse


def _quiet_close(original: Any) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(original):
        async def close_async(self: Any, *args: Any, **kwargs: Any) -> None:
            return None

        fn: Callable[..., Any] = close_async
    else:
        def close(self: Any, *args: Any, **kwargs: Any) -> None:
            return None

        fn = close
    fn.__name__ = fn.__qualname__ = original.__name__
    return fn


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)
