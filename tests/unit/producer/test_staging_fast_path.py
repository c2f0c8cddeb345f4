"""The compiled per-record send (``_fast.Stager``, sdk/records/_fast.c) against the pure one
(``Stage.stager``'s function), call for call.

Hypothesis runs the same sequence of calls through two stages, one per implementation:
plain records, keys appearing late, delivery callbacks, keywords, headers, partitions,
timestamps, confluent's ``callback=``, unknown keywords, values that are not bytes, topics
without metadata, records above the size limit, a full or closed stage, drains in between.
After every call both stages must hold the same runs (values, keys, callbacks, record
counts, bytes held) and the call must have had the same outcome (a future at the same
position, the general path called with the same arguments, or the same exception).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdk.producer import staging
from sdk.producer.staging import _RECORD_COST, Stage, StagedFuture, StagedRun
from sdk.records import fast_path

from .test_producer_staging import staged

STAGER = fast_path.load_compiled_stager()


@pytest.fixture(autouse=True)
def _compiled_module_built() -> None:
    if STAGER is None:
        pytest.fail("sdk.records._fast is not built or stale (pip install -e . with a C "
                    "compiler)", pytrace=False)


class General:
    """The ``otherwise`` of a stager: records what it was handed."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def __call__(self, *args: Any) -> str:
        self.calls.append(args)
        return "general"


def pair(cap: int, record_limit: int) -> tuple[tuple[Stage, Any, General], tuple[Stage, Any, General]]:
    """(compiled stage, its send, its general path), (pure stage, its send, its general)."""
    out = []
    for compiled in (True, False):
        stage, _, _ = staged(cap=cap, record_limit=record_limit)
        general = General()
        saved = staging._Stager
        staging._Stager = None  # the pure function, whatever is built
        try:
            pure = stage.stager(True, general, "Producer.send")
        finally:
            staging._Stager = saved
        assert STAGER is not None
        send = (STAGER(pure, stage, stage.runs, stage.lock.locked, StagedRun, StagedFuture,
                       stage._value_limit, _RECORD_COST) if compiled else pure)
        out.append((stage, send, general))
    return out[0], out[1]


def state(stage: Stage) -> dict[str, Any]:
    return {
        "held": stage.held,
        "cap": stage.cap,
        "runs": {topic: (run.values, run.keys, len(run.timestamps), run.drained,
                         [(f._pos, fn, d) for f, fn, d in run.callbacks],
                         run.deliveries, run.delivery_pos)
                 for topic, run in stage.runs.items()},
    }


def outcome(send: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    try:
        got = send(*args, **kwargs)
    except Exception as exc:  # compared by type and message
        return ("raised", type(exc).__name__, str(exc))
    if isinstance(got, StagedFuture):
        return ("future", got._pos, got._run.topic)
    return got


class Topic(str):
    """A str subclass: the compiled path leaves it to the pure one."""


def on_delivery(err: Any, meta: Any) -> None:
    raise AssertionError("not run: nothing completes here")


VALUES = st.one_of(
    st.binary(max_size=40),
    st.sampled_from([b"x" * 150, "text", bytearray(b"ba"), None, 7]),
)
KEYS = st.one_of(st.none(), st.binary(max_size=8), st.sampled_from(["str-key", b""]))
CALLS = st.fixed_dictionaries(
    {"topic": st.sampled_from(["t", "t", "t", "unknown", Topic("t"), ""]),
     "value": VALUES},
    optional={
        "key": KEYS,
        "headers": st.sampled_from([None, [("h", b"v")]]),
        "partition": st.sampled_from([None, 1]),
        "timestamp_ms": st.sampled_from([None, 1_700_000_000_000]),
        "on_delivery": st.sampled_from([None, on_delivery]),
        "callback": st.sampled_from([None, on_delivery]),
        "unknown": st.just(1),
    },
)
STEPS = st.lists(st.one_of(
    st.tuples(st.just("send"), CALLS, st.integers(min_value=0, max_value=7)),
    st.tuples(st.just("drain"), st.none(), st.none()),
    st.tuples(st.just("close"), st.none(), st.none()),
), max_size=60)
ORDER = ["topic", "value", "key", "headers", "partition", "timestamp_ms", "on_delivery"]


@settings(max_examples=300, deadline=None)
@given(steps=STEPS, cap=st.sampled_from([300, 2000, 1 << 20]),
       record_limit=st.sampled_from([150, 1 << 20]))
def test_compiled_send_stages_exactly_like_the_pure_one(
        steps: list[tuple[str, Any, Any]], cap: int, record_limit: int) -> None:
    (fast_stage, fast, fast_general), (pure_stage, pure, pure_general) = pair(cap, record_limit)
    before = time.time_ns()
    for kind, call, positional in steps:
        if kind == "drain":
            assert fast_stage.drain() == pure_stage.drain()
        elif kind == "close":
            fast_stage.close()
            pure_stage.close()
        else:
            # the first `positional` known arguments positionally, in order, the rest by name
            names = [n for n in ORDER if n in call]
            n = min(positional, len(names))
            if names[:n] != ORDER[:n]:
                n = 0
            args = tuple(call[name] for name in names[:n])
            kwargs = {k: v for k, v in call.items() if k not in names[:n]}
            assert outcome(fast, args, kwargs) == outcome(pure, args, kwargs)
        assert state(fast_stage) == state(pure_stage)
        assert fast_general.calls == pure_general.calls
    after = time.time_ns()
    for stage in (fast_stage, pure_stage):
        for run in stage.runs.values():
            stamps = run.timestamps
            assert all(before <= t <= after for t in stamps) and stamps == sorted(stamps)


def test_a_send_while_another_thread_holds_the_stage_waits_for_it() -> None:
    """The compiled path never stages while the stage's lock is held (a drain in progress):
    the call goes to the pure function, which waits for the lock."""
    (stage, send, _), _ = pair(1 << 20, 1 << 20)
    first = send("t", b"first")
    assert isinstance(first, StagedFuture)
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with stage.lock:
            taken.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    taken.wait(5)
    got: list[Any] = []
    sender = threading.Thread(target=lambda: got.append(send("t", b"second")))
    sender.start()
    sender.join(0.2)
    assert sender.is_alive() and not got  # waiting for the lock, not staging around it
    assert stage.runs["t"].values == [b"first"]
    release.set()
    holder.join(5)
    sender.join(5)
    assert isinstance(got[0], StagedFuture) and got[0]._pos == 1
    assert stage.runs["t"].values == [b"first", b"second"]


def test_the_compiled_send_is_what_the_stage_hands_out_when_built() -> None:
    stage, _, _ = staged()
    send = stage.stager(True, None, "Producer.send")
    if fast_path.compiled_stager is None:  # KAFKA_SDK_PURE_PYTHON=1
        assert send.__name__ == "stage_send" or send.__qualname__ == "Producer.send"
        assert not isinstance(send, STAGER)  # type: ignore[arg-type]
    else:
        assert isinstance(send, STAGER)  # type: ignore[arg-type]
    assert send.__qualname__ == "Producer.send" and send.__name__ == "send"
    with pytest.raises(TypeError, match="on_delivery"):
        send("t", b"v", callback=print)


def test_the_compiled_send_stages_plain_records_itself() -> None:
    """Only a run's first record (and other calls) reaches the pure function."""
    stage, _, _ = staged()
    assert STAGER is not None
    reached: list[tuple[Any, ...]] = []
    saved = staging._Stager
    staging._Stager = None
    try:
        pure = stage.stager(True, None)
    finally:
        staging._Stager = saved

    def counting(*args: Any, **kwargs: Any) -> Any:
        reached.append(args)
        return pure(*args, **kwargs)

    send = STAGER(counting, stage, stage.runs, stage.lock.locked, StagedRun, StagedFuture,
                  stage._value_limit, _RECORD_COST)
    futures = [send("t", b"v%d" % i) for i in range(5)]
    futures.append(send("t", value=b"kw", on_delivery=on_delivery))
    assert len(reached) == 1  # the first, which opens the run
    assert [f._pos for f in futures] == list(range(6))
    run = stage.runs["t"]
    assert run.values == [b"v0", b"v1", b"v2", b"v3", b"v4", b"kw"]
    assert run.deliveries == [on_delivery] and run.delivery_pos == [5]
    assert stage.held == sum(len(v) + _RECORD_COST for v in run.values)
    send("t", b"keyed", b"k")  # the run's first key: the pure function's add_key
    send("t", b"keyed2", b"k2")  # keys kept from then on: compiled again
    assert len(reached) == 2 and run.keys == [None] * 6 + [b"k", b"k2"]


MAKER = fast_path.load_compiled_slot_maker()
ATOMS = st.one_of(st.integers(min_value=-(2**70), max_value=2**70), st.text(max_size=5),
                  st.none(), st.binary(max_size=4))


@settings(max_examples=200, deadline=None)
@given(values=st.tuples(ATOMS, ATOMS, ATOMS, ATOMS, ATOMS, ATOMS),
       container=st.booleans())
def test_compiled_metadata_is_the_pure_one(values: tuple[Any, ...], container: bool) -> None:
    """RecordMetadata built by the compiled SlotMaker and by the pure slot writes: equal,
    same type, hash and repr; untracked by the GC only when every value is atomic."""
    import gc

    from sdk.producer import batch
    from sdk.types import RecordMetadata

    assert MAKER is not None
    make = MAKER(RecordMetadata, batch._FIELDS)
    if container:
        values = ([values[0]], *values[1:])
    compiled, pure = make(*values), batch._metadata_pure(*values)
    assert type(compiled) is RecordMetadata and compiled == pure
    assert repr(compiled) == repr(pure)
    if not container:
        assert hash(compiled) == hash(pure) == hash(RecordMetadata(*values))
    assert gc.is_tracked(compiled) is container
    with pytest.raises(AttributeError):  # still frozen
        compiled.offset = 1


def test_slot_maker_refuses_what_it_cannot_build() -> None:
    from sdk.producer import batch
    from sdk.types import RecordMetadata

    assert MAKER is not None
    make = MAKER(RecordMetadata, batch._FIELDS)
    with pytest.raises(TypeError, match="6 positional"):
        make("t", 1)
    with pytest.raises(TypeError, match="6 object slots, 1 named"):
        MAKER(RecordMetadata, ("topic",))
    with pytest.raises(TypeError, match="not an object slot"):
        MAKER(RecordMetadata, ("topic", "partition", "offset", "timestamp",
                               "serialized_key_size", "nope"))


def test_the_producer_builds_metadata_with_the_compiled_maker_when_built() -> None:
    from sdk.producer import batch

    if fast_path.compiled_slot_maker is None:  # KAFKA_SDK_PURE_PYTHON=1
        assert batch.new_metadata is batch._metadata_pure
    else:
        assert isinstance(batch.new_metadata, fast_path.compiled_slot_maker)
