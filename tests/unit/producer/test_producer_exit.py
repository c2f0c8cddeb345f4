"""No surprise blocking in the producer: leaving ``with`` while every broker is down, on an
exception or on Ctrl-C, and sends to a topic the cluster says does not exist.

Every broker is down for real: the producer learns the topic from a broker of its own,
which is then closed. Delivery timeouts of 10 minutes make "returned" mean "did not wait for
the delivery timeout" without measuring time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sdk.errors import ProducerClosedError, UnknownTopicOrPartitionError
from sdk.producer import AsyncProducer, Producer
from sdk.producer.batch import RecordFuture
from server_ref import EmbeddedBroker
from tests.unit.net.missing_topic import give_up_once_blocking

TEN_MINUTES_MS = 600_000
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    b = EmbeddedBroker(data_dir=None, port=0).start()
    try:
        yield b
    finally:
        b.close()


def _in_thread(fn: Callable[[], Any]) -> list[BaseException | None]:
    """Run ``fn`` on a thread; [its exception or None] once it returned, [] if it did not
    return within two minutes (a tenth of the delivery timeout the tests set)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            fn()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(120)
    return outcome


def _pending_with_brokers_down(p: Producer[Any, Any], broker: EmbeddedBroker, topic: str
                               ) -> list[RecordFuture]:
    p.send(topic, b"first").result(30)  # metadata known, connection open
    broker.close()
    return [p.send(topic, b"v%d" % i) for i in range(5)]


def test_leaving_normally_waits_a_bounded_time_then_fails_the_rest(
        broker: EmbeddedBroker, topic: str) -> None:
    futures: list[RecordFuture] = []

    def body() -> None:
        with Producer(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=2000,
                      delivery_timeout_ms=TEN_MINUTES_MS) as p:
            futures.extend(_pending_with_brokers_down(p, broker, topic))

    assert _in_thread(body) == [None]
    for fut in futures:
        error = fut.exception(0)
        assert isinstance(error, ProducerClosedError)
        assert "request_timeout_ms (2 s)" in str(error) and "flush()" in str(error)


def test_leaving_on_an_exception_closes_at_once(broker: EmbeddedBroker, topic: str) -> None:
    futures: list[RecordFuture] = []

    def body() -> None:
        # Exit waits of up to 10 minutes, were it to wait: it must not.
        with Producer(bootstrap_servers=broker.bootstrap_servers,
                      request_timeout_ms=TEN_MINUTES_MS - 10_000,
                      delivery_timeout_ms=TEN_MINUTES_MS) as p:
            futures.extend(_pending_with_brokers_down(p, broker, topic))
            raise ValueError("the application failed")

    outcome = _in_thread(body)
    assert len(outcome) == 1 and isinstance(outcome[0], ValueError)
    for fut in futures:
        error = fut.exception(0)
        assert isinstance(error, ProducerClosedError)
        assert "left the `with` block on ValueError" in str(error)


async def test_leaving_async_with_on_an_exception_closes_at_once(
        broker: EmbeddedBroker, topic: str) -> None:
    futures: list[RecordFuture] = []
    with pytest.raises(ValueError):
        async with AsyncProducer(bootstrap_servers=broker.bootstrap_servers,
                                 request_timeout_ms=TEN_MINUTES_MS - 10_000,
                                 delivery_timeout_ms=TEN_MINUTES_MS) as p:
            await (await p.send(topic, b"first"))
            broker.close()
            futures.extend([await p.send(topic, b"v") for _ in range(3)])
            raise ValueError("the application failed")
    for fut in futures:
        with pytest.raises(ProducerClosedError, match="`async with` block on ValueError"):
            await fut


_CTRL_C_CHILD = textwrap.dedent("""
    import faulthandler
    import sys
    from sdk.producer import Producer
    from server_ref import EmbeddedBroker

    # A hang prints every thread's stack into the test's failure, then exits.
    faulthandler.dump_traceback_later(90, exit=True)
    broker = EmbeddedBroker(data_dir=None, port=0).start()
    futures = []
    try:
        with Producer(bootstrap_servers=broker.bootstrap_servers,
                      request_timeout_ms=590_000, delivery_timeout_ms=600_000) as p:
            p.send("t", b"first").result(30)
            broker.close()
            futures = [p.send("t", b"v") for _ in range(3)]
            faulthandler.dump_traceback_later(60, exit=True)  # the exit's own bound
            print("leaving", flush=True)
    except KeyboardInterrupt:
        print("interrupted:", futures[0].exception(0), flush=True)
""")


def test_ctrl_c_while_leaving_closes_at_once() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-c", _CTRL_C_CHILD], env=env, cwd=REPO,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "leaving"
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=120)  # the exit alone could wait 590 s
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert "interrupted: the producer was closed before the record was acknowledged" in out, err
    assert child.returncode == 0, err
    assert "KeyboardInterrupt" in out


def test_a_missing_topic_fails_fast_after_one_wait_and_says_how_to_fix_it(topic: str) -> None:
    with EmbeddedBroker(data_dir=None, port=0, auto_create_topics_enable=False) as broker, \
            Producer(bootstrap_servers=broker.bootstrap_servers,
                     max_block_ms=3_600_000, retry_backoff_ms=10) as p:
        first = give_up_once_blocking(p, topic)
        assert "auto.create.topics.enable" in str(first)
        for _ in range(3):
            # max_block_ms is an hour: only the remembered answer makes these return.
            with pytest.raises(UnknownTopicOrPartitionError) as again:
                p.send(topic, b"v")
            assert f"topic {topic!r} does not exist" in str(again.value)
            assert "kafka-sdk topics create" in str(again.value)
