"""The producer when brokers go away: restarts mid-stream, and every broker down.

These tests start their own brokers (stopping the shared module broker would disturb the
other tests).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict

import pytest

from sdk import errors
from sdk.producer import AsyncProducer, Producer

from .conftest import TansuProcess, consume_all, new_topic, start_target, tansu_binary


@pytest.mark.timeout(240)
@pytest.mark.parametrize("paced", [True, False], ids=["mid-stream", "after-a-burst"])
def test_reference_broker_restarts_mid_stream_without_loss_duplicates_or_reordering(
        paced: bool) -> None:
    """Idempotence: two broker restarts while records flow (paced sends), or back to back
    right after a burst of staged sends; each record lands exactly once, in order per
    partition. (Reference broker only: tansu's memory storage forgets everything on
    restart, so there is nothing to compare with.)"""
    with start_target("ref") as target:
        topic = new_topic("restart")
        target.create_topic(topic, 3)
        count = 20_000
        futures = []
        stop_sending = threading.Event()

        with Producer(bootstrap_servers=target.bootstrap_servers, linger_ms=2,
                      batch_size=4096, request_timeout_ms=5000, retry_backoff_ms=20,
                      reconnect_backoff_ms=20) as p:
            def send_all() -> None:
                for i in range(count):
                    futures.append(p.send(topic, str(i).encode(), key=str(i % 30).encode()))
                    if paced and i % 200 == 0:  # so the restarts land while records flow
                        time.sleep(0.003)
                stop_sending.set()

            sender = threading.Thread(target=send_all)
            sender.start()
            for _ in range(2):
                while len(futures) < count // 3 * (_ + 1) and not stop_sending.is_set():
                    time.sleep(0.005)
                target.embedded.restart()
            sender.join(120)
            p.flush(timeout=120)
            failed = [f.exception(0) for f in futures if f.exception(0) is not None]
            assert not failed, f"{len(failed)} records failed, e.g. {failed[0]!r}"

        got = consume_all(target.bootstrap_servers, topic, count, timeout_s=60)
        values = [int(m.value()) for m in got]
        duplicates = len(values) - len(set(values))
        assert duplicates == 0, f"{duplicates} duplicated records"
        assert sorted(values) == list(range(count)), "records were lost"
        last_by_key: dict[bytes, int] = defaultdict(lambda: -1)
        for msg in got:
            n = int(msg.value())
            assert n > last_by_key[msg.key()], f"key {msg.key()!r}: {n} after {last_by_key[msg.key()]}"
            last_by_key[msg.key()] = n


def _stop(target_name: str, target: object) -> None:
    if target_name == "ref":
        target.embedded.stop()  # type: ignore[attr-defined]
    else:
        target.tansu.stop()  # type: ignore[attr-defined]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("target_name", ["ref", "tansu"])
def test_every_broker_down_fails_after_delivery_timeout_and_close_returns(
        target_name: str) -> None:
    if target_name == "tansu" and tansu_binary() is None:
        pytest.skip("tansu is not installed")
    with start_target(target_name) as target:
        topic = new_topic("down")
        target.create_topic(topic, 1)
        p = Producer(bootstrap_servers=target.bootstrap_servers, linger_ms=0,
                     request_timeout_ms=1000, delivery_timeout_ms=2500,
                     reconnect_backoff_ms=50, reconnect_backoff_max_ms=200)
        try:
            assert p.send(topic, b"before").result(timeout=30).offset >= 0
            _stop(target_name, target)
            futures = [p.send(topic, f"lost-{i}".encode()) for i in range(50)]
            for fut in futures:
                err = fut.exception(timeout=30)
                assert isinstance(err, errors.DeliveryTimeoutError), repr(err)
            # Nothing pending now: flush returns; new sends wait for the dead broker.
            p.flush(timeout=5)
            late = p.send(topic, b"late")
            with pytest.raises(errors.KafkaTimeoutError):
                p.flush(timeout=0.5)
            assert not late.done()
        finally:
            p.close(timeout=1)
        assert p.closed
        assert isinstance(late.exception(timeout=5), errors.KafkaError)


@pytest.mark.timeout(60)
def test_unreachable_bootstrap_send_times_out_and_close_is_prompt() -> None:
    """No broker ever answers: send blocks for max_block_ms waiting for metadata, then
    raises KafkaTimeoutError; close returns."""
    from .conftest import free_port

    port = free_port()  # nothing listens there
    p = Producer(bootstrap_servers=f"127.0.0.1:{port}", max_block_ms=500)
    try:
        with pytest.raises(errors.KafkaTimeoutError, match="metadata"):
            p.send("nowhere", b"v")
    finally:
        p.close(timeout=2)


@pytest.mark.timeout(60)
async def test_async_producer_closes_within_its_timeout_with_the_broker_gone() -> None:
    binary = tansu_binary()
    if binary is None:
        pytest.skip("tansu is not installed")
    proc = TansuProcess(binary).start()
    try:
        async with AsyncProducer(bootstrap_servers=proc.bootstrap_servers, linger_ms=0,
                                 request_timeout_ms=1000, delivery_timeout_ms=60_000) as ap:
            topic = new_topic("gone")
            await ap.send_and_wait(topic, b"first")
            proc.stop()
            pending = await ap.send(topic, b"pending")
            await ap.close(timeout=1)
            with pytest.raises(errors.ProducerClosedError):
                await pending
    finally:
        proc.stop()
