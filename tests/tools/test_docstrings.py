"""Every public method and property of the six faces has a docstring: the API reference
(docs/, built by tests/tools/test_docs_build.py) is made of them, and so is what an editor
shows on hover."""

from __future__ import annotations

import inspect

import pytest

import sdk

FACES = ["Producer", "AsyncProducer", "Consumer", "AsyncConsumer", "AdminClient",
         "AsyncAdminClient"]


def public_members(cls: type) -> dict[str, object]:
    """Public functions and properties of ``cls`` and its SDK base classes."""
    found: dict[str, object] = {}
    for klass in reversed(cls.__mro__):
        if not klass.__module__.startswith("sdk."):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_"):
                continue
            if isinstance(value, staticmethod | classmethod):
                value = value.__func__
            if isinstance(value, property):
                value = value.fget
            if inspect.isfunction(value):
                found[name] = value
    return found


@pytest.mark.parametrize("face", FACES)
def test_every_public_method_has_a_docstring(face: str) -> None:
    cls = getattr(sdk, face)
    assert (cls.__doc__ or "").strip(), f"{face} has no class docstring"
    members = public_members(cls)
    assert len(members) >= 7, sorted(members)  # the walk found the methods
    missing = sorted(name for name, fn in members.items()
                     if not (inspect.getdoc(fn) or "").strip())
    assert not missing, f"{face}: no docstring on {', '.join(missing)}"


def test_the_walk_sees_methods_properties_and_coroutines() -> None:
    members = public_members(sdk.AsyncConsumer)
    assert {"getmany", "commit", "subscribe", "assignment"} <= set(members)  # async and plain
    assert "closed" in public_members(sdk.Producer)  # a property
    assert not any(name.startswith("_") for name in members)
