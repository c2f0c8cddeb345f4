"""Clients across fork(), against the embedded broker: a client created before a fork
refuses every call in the child with an error naming the fix (a producer's plain send used
to stage the record and return a future nothing would ever deliver), closes quietly there,
and keeps working in the parent; a client created in the child after the fork works."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import signal
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from sdk import (
    AdminClient,
    AsyncAdminClient,
    AsyncConsumer,
    AsyncProducer,
    Consumer,
    NewTopic,
    Producer,
    TopicPartition,
)
from sdk.errors import IllegalStateError

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork only")

FIX = "Create clients after the fork"


def _topic(servers: str, partitions: int = 1) -> str:
    name = f"fork-{uuid.uuid4().hex[:8]}"
    with AdminClient(bootstrap_servers=servers) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])
    return name


def _limit_child() -> None:
    """A child that hangs (a regression) dies instead of outliving the test."""
    signal.signal(signal.SIGALRM, signal.SIG_DFL)  # not pytest-timeout's handler
    signal.alarm(60)


def _outcome(fn: Callable[[], Any]) -> str:
    """What a call did, as text that crosses a process boundary."""
    try:
        result = fn()
    except IllegalStateError as exc:
        return f"IllegalStateError: {exc}"
    except Exception as exc:  # reported, so the parent's assertion shows it
        return f"{type(exc).__name__}: {exc}"
    return f"returned {result!r}"


def _run_at_once(coro: Any) -> Any:
    """The result of a coroutine that finishes without waiting (no event loop needed)."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise AssertionError("the coroutine waited for something")


def _read_all(servers: str, topic: str, count: int) -> list[bytes]:
    values: list[bytes] = []
    with Consumer(topic, bootstrap_servers=servers, auto_offset_reset="earliest") as consumer:
        for record in consumer:
            assert record.value is not None
            values.append(record.value)
            if len(values) == count:
                break
    return values


def _parent_clients_in_child(producer: Producer[Any, Any], consumer: Consumer[Any, Any],
                             admin: AdminClient, topic: str) -> dict[str, str]:
    """Each entry point of clients inherited from the parent, called in the child."""
    tp = TopicPartition(topic, 0)
    return {
        "send": _outcome(lambda: producer.send(topic, b"lost")),  # the staged fast path
        "send with key": _outcome(lambda: producer.send(topic, b"lost", key=b"k")),
        "send with headers": _outcome(lambda: producer.send(topic, b"lost",
                                                            headers=[("h", b"1")])),
        "send_many": _outcome(lambda: producer.send_many(topic, [b"lost"])),
        "flush": _outcome(lambda: producer.flush(5)),
        "partitions_for": _outcome(lambda: producer.partitions_for(topic)),
        "poll": _outcome(lambda: consumer.poll(timeout_ms=100)),
        "iterate": _outcome(lambda: next(iter(consumer))),
        "assign": _outcome(lambda: consumer.assign([tp])),
        "commit": _outcome(lambda: consumer.commit({tp: 0})),
        "list_topics": _outcome(admin.list_topics),
        "repr": repr(producer),
        "close": _outcome(lambda: (producer.close(), consumer.close(), admin.close())),
        "leave with": _outcome(lambda: (producer.__exit__(None, None, None),
                                        consumer.__exit__(None, None, None),
                                        admin.__exit__(None, None, None))),
        "send after close": _outcome(lambda: producer.send(topic, b"lost")),
    }


def _check_refusals(outcomes: dict[str, str], parent_pid: int) -> None:
    assert outcomes.pop("repr").endswith(" forked>")
    assert outcomes.pop("close") == "returned (None, None, None)"  # quiet, no I/O
    assert outcomes.pop("leave with") == "returned (None, None, None)"
    for call, outcome in outcomes.items():
        assert outcome.startswith("IllegalStateError: "), (call, outcome)
        assert f"created in process {parent_pid} before os.fork()" in outcome, (call, outcome)
        assert FIX in outcome, (call, outcome)


def _child_producer(servers: str, topic: str, value: bytes) -> str:
    """A client made in the child, after the fork: works."""
    with Producer(bootstrap_servers=servers) as producer:
        return repr(producer.send(topic, value).result(30).offset)


def _mp_worker(producer: Producer[Any, Any], consumer: Consumer[Any, Any], admin: AdminClient,
               servers: str, topic: str, results: Any) -> None:
    _limit_child()
    outcomes = _parent_clients_in_child(producer, consumer, admin, topic)
    outcomes["own producer"] = _outcome(lambda: _child_producer(servers, topic, b"from-mp"))
    results.put(json.dumps(outcomes))


def test_multiprocessing_fork_child(embedded_broker: Any) -> None:
    servers = embedded_broker.bootstrap_servers
    topic = _topic(servers)
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    with Producer(bootstrap_servers=servers) as producer, \
            Consumer(topic, bootstrap_servers=servers) as consumer, \
            AdminClient(bootstrap_servers=servers) as admin:
        producer.send(topic, b"before").result(30)
        child = ctx.Process(target=_mp_worker,
                            args=(producer, consumer, admin, servers, topic, results))
        child.start()
        outcomes = json.loads(results.get(timeout=90))
        child.join(60)
        assert child.exitcode == 0
        assert outcomes.pop("own producer").startswith("returned ")
        _check_refusals(outcomes, os.getpid())
        # The parent's clients are untouched by the child.
        producer.send(topic, b"after").result(30)
        assert topic in admin.list_topics()
    assert sorted(_read_all(servers, topic, 3)) == [b"after", b"before", b"from-mp"]


def test_prefork_workers(embedded_broker: Any) -> None:
    """gunicorn's pattern: the master makes clients (e.g. at import of the app), forks
    workers; each worker gets the error from the master's clients and works with its own."""
    servers = embedded_broker.bootstrap_servers
    topic = _topic(servers)
    workers: list[tuple[int, int]] = []
    with Producer(bootstrap_servers=servers) as producer, \
            Consumer(topic, bootstrap_servers=servers) as consumer, \
            AdminClient(bootstrap_servers=servers) as admin:
        producer.send(topic, b"master").result(30)
        for n in range(2):
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:  # the worker: never return into pytest
                try:
                    _limit_child()
                    os.close(read_end)
                    outcomes = _parent_clients_in_child(producer, consumer, admin, topic)
                    outcomes["own producer"] = _outcome(
                        lambda n=n: _child_producer(servers, topic, b"worker-%d" % n))
                    os.write(write_end, json.dumps(outcomes).encode())
                finally:
                    os._exit(0)
            os.close(write_end)
            workers.append((pid, read_end))
        for pid, read_end in workers:
            with os.fdopen(read_end, "rb") as reader:
                outcomes = json.loads(reader.read())
            assert os.waitpid(pid, 0)[1] == 0, "the worker died (hung: killed by its alarm)"
            assert outcomes.pop("own producer").startswith("returned ")
            _check_refusals(outcomes, os.getpid())
        producer.send(topic, b"master again").result(30)
    assert sorted(_read_all(servers, topic, 4)) == [b"master", b"master again",
                                                    b"worker-0", b"worker-1"]


async def test_async_faces_in_a_forked_child(embedded_broker: Any) -> None:
    servers = embedded_broker.bootstrap_servers
    topic = _topic(servers)
    async with AsyncProducer(bootstrap_servers=servers) as producer, \
            AsyncConsumer(topic, bootstrap_servers=servers) as consumer, \
            AsyncAdminClient(bootstrap_servers=servers) as admin:
        await (await producer.send(topic, b"before"))
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: calls raise before anything is awaited; never run the loop
            try:
                _limit_child()
                outcomes = {
                    "send": _outcome(lambda: producer.send(topic, b"lost")),
                    "send_threadsafe": _outcome(lambda: producer.send_threadsafe(topic, b"x")),
                    "flush": _outcome(lambda: producer.flush()),
                    "getmany": _outcome(lambda: consumer.getmany(timeout_ms=10)),
                    "aiter": _outcome(lambda: consumer.__aiter__()),
                    "list_topics": _outcome(lambda: admin.list_topics()),
                    "repr": repr(consumer),
                    "aexit": _outcome(lambda: _run_at_once(producer.__aexit__(None, None,
                                                                              None))),
                }
                os.write(write_end, json.dumps(outcomes).encode())
            finally:
                os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as reader:
            outcomes = json.loads(await asyncio.to_thread(reader.read))
        assert os.waitpid(pid, 0)[1] == 0
        assert outcomes.pop("repr").endswith(" forked>")
        assert outcomes.pop("aexit") == "returned None"  # leaving `async with`: quiet
        for call, outcome in outcomes.items():
            assert outcome.startswith("IllegalStateError: "), (call, outcome)
            assert FIX in outcome, (call, outcome)
        assert (await (await producer.send(topic, b"after"))).offset == 1
        assert topic in await admin.list_topics()
