"""The producer when brokers go away or lose its state: restarts mid-stream, every broker
down, and resets of the idempotent producer state (epoch bumps).

These tests start their own brokers (stopping the shared module broker would disturb the
other tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator

import pytest

from sdk import errors
from sdk.producer import AsyncProducer, Producer
from sdk.protocol.api import ApiKey

from .conftest import (
    TansuProcess,
    Target,
    consume_all,
    create_topic,
    free_port,
    new_topic,
    read_batches,
    require_tansu,
    start_target,
)
from .proxy import SwallowingProxy


def _restart(target: Target) -> None:
    """Our broker restarts in place; Apache Kafka's node is SIGKILLed (a crash, so it
    recovers its log) and started again on the same data and port."""
    if target.name == "ref":
        target.embedded.restart()
    else:
        target.cluster.kill(1)
        target.cluster.start(1)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("target_name", ["ref", "kafka"])
@pytest.mark.parametrize("paced", [True, False], ids=["mid-stream", "after-a-burst"])
def test_broker_restarts_mid_stream_without_loss_duplicates_or_reordering(
        paced: bool, target_name: str) -> None:
    """Idempotence: two broker restarts while records flow (paced sends), or back to back
    right after a burst of staged sends; each record lands exactly once, in order per
    partition. (Not tansu: its memory storage forgets everything on restart, so there is
    nothing to compare with.)"""
    with start_target(target_name) as target:
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
                _restart(target)
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


def _stop(target_name: str, target: Target) -> None:
    if target_name == "ref":
        target.embedded.stop()
    elif target_name == "kafka":
        target.cluster.kill(1)
    else:
        assert target.tansu is not None
        target.tansu.stop()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("target_name", ["ref", "tansu", "kafka"])
def test_every_broker_down_fails_after_delivery_timeout_and_close_returns(
        target_name: str) -> None:
    if target_name == "tansu":
        require_tansu()
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
    binary = require_tansu()
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


# ----------------------------------------------------------------------------- resets

Batch = tuple[int, int, int, list[bytes]]  # producer id, epoch, base sequence, values


def _stored(bootstrap: str, topic: str, partition: int) -> list[Batch]:
    return [(b.producer_id, b.producer_epoch, b.base_sequence,
             [r.value or b"" for r in b.records()])
            for b in read_batches(bootstrap, topic, partition)]


def _pairs_in_order(batches: list[Batch]) -> list[tuple[int, int]]:
    """The (producer id, epoch) pairs of a partition in log order; each pair's sequences
    must start at 0 and follow on without gaps."""
    pairs: list[tuple[int, int]] = []
    next_sequence: dict[tuple[int, int], int] = {}
    for pid, epoch, sequence, values in batches:
        pair = (pid, epoch)
        if not pairs or pairs[-1] != pair:
            assert pair not in pairs, f"{pair} came back after {pairs[-1]}"
            pairs.append(pair)
        assert sequence == next_sequence.get(pair, 0), f"{pair}: sequence {sequence}"
        next_sequence[pair] = sequence + len(values)
    return pairs


def _send_round(p: Producer, topic: str, name: str, partitions: int, count: int
                ) -> dict[int, list[bytes]]:
    """``count`` records spread over the partitions; all must be acknowledged."""
    sent: dict[int, list[bytes]] = defaultdict(list)
    futures = []
    for i in range(count):
        value = f"{name}-{i}".encode()
        sent[i % partitions].append(value)
        futures.append(p.send(topic, value, partition=i % partitions))
    p.flush(timeout=60)
    for fut in futures:
        assert fut.exception(0) is None, repr(fut.exception(0))
    return sent


@pytest.mark.timeout(120)
@pytest.mark.parametrize("code", [errors.UnknownProducerIdError.errno,
                                  errors.OutOfOrderSequenceNumberError.errno],
                         ids=["unknown-producer-id", "out-of-order"])
def test_lost_producer_state_bumps_the_epoch_under_the_same_producer_id(code: int) -> None:
    """The reference broker answers that it lost our sequences (the control surface answers
    for it; its own state still holds the old epoch): the producer keeps its id, bumps the
    epoch by one without InitProducerId, and every partition starts again at sequence 0,
    which the broker takes for a higher epoch. The refused records are written once, in
    order (rule 5 of sdk.producer.idempotence)."""
    partitions = 2
    with start_target("ref") as target:
        control = target.embedded.control
        topic = new_topic("bump")
        target.create_topic(topic, partitions)
        with Producer(bootstrap_servers=target.bootstrap_servers, linger_ms=5,
                      retry_backoff_ms=10) as p:
            rounds = [_send_round(p, topic, "before", partitions, 40)]
            inits = control.seen(ApiKey.INIT_PRODUCER_ID)
            control.fail_next(ApiKey.PRODUCE, code)
            rounds.append(_send_round(p, topic, "refused", partitions, 40))
            rounds.append(_send_round(p, topic, "after", partitions, 40))
            assert control.seen(ApiKey.INIT_PRODUCER_ID) == inits  # no new producer id
        for partition in range(partitions):
            batches = _stored(target.bootstrap_servers, topic, partition)
            assert [v for b in batches for v in b[3]] == [v for r in rounds for v in r[partition]]
            (pid, epoch), *rest = _pairs_in_order(batches)
            assert rest == [(pid, epoch + 1)]


@contextlib.contextmanager
def _swallowing_target(name: str) -> Iterator[tuple[str, Callable[[], None], Callable[[], None]]]:
    """(bootstrap servers, swallow, resume): while swallowing, Produce requests reach no
    broker and get no answer. The reference broker does it with its control surface;
    tansu and Apache Kafka, which have none, sit behind a SwallowingProxy (each advertises
    the proxy's port, so clients reach it only through the proxy)."""
    if name == "ref":
        with start_target("ref") as target:
            control = target.embedded.control
            yield (target.bootstrap_servers,
                   lambda: control.drop_next(ApiKey.PRODUCE, handle=False, times=1_000_000),
                   control.clear)
        return
    proxy_port = free_port()
    if name == "kafka":
        from apache_support import apache_cluster

        advertised = {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}"}
        with apache_cluster(brokers=1, config=advertised) as cluster:
            proxy = SwallowingProxy(cluster.nodes[1].port, proxy_port)
            try:
                yield f"127.0.0.1:{proxy_port}", proxy.swallow, proxy.resume
            finally:
                proxy.close()
        return
    binary = require_tansu()
    tansu = TansuProcess(binary, advertised_port=proxy_port).start()
    proxy = SwallowingProxy(tansu.port, proxy_port)
    try:
        yield f"127.0.0.1:{proxy_port}", proxy.swallow, proxy.resume
    finally:
        proxy.close()
        tansu.stop()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("target_name", ["ref", "tansu", "kafka"])
def test_unknown_outcome_resets_the_producer_state_and_the_rest_is_written_once(
        target_name: str) -> None:
    """Produce requests go unanswered until records fail by delivery timeout with an
    unknown outcome (rules 3 and 4): the producer resets its state, and what is sent after
    is written exactly once, in order, every partition starting again at sequence 0.

    Our broker and Apache Kafka take the locally bumped epoch: same producer id, epoch + 1. tansu
    refuses a bumped epoch (PRODUCER_FENCED): the producer then fetches a new producer id
    and carries on."""
    partitions = 2
    with _swallowing_target(target_name) as (bootstrap, swallow, resume):
        topic = new_topic("unknown")
        asyncio.run(create_topic(bootstrap, topic, partitions))
        with Producer(bootstrap_servers=bootstrap, linger_ms=5, request_timeout_ms=1000,
                      delivery_timeout_ms=2500, retry_backoff_ms=20,
                      reconnect_backoff_ms=20, reconnect_backoff_max_ms=200) as p:
            rounds = [_send_round(p, topic, "before", partitions, 40)]
            swallow()
            lost = [p.send(topic, f"lost-{i}".encode(), partition=0) for i in range(10)]
            for fut in lost:
                assert isinstance(fut.exception(timeout=30), errors.KafkaError)
            resume()
            rounds.append(_send_round(p, topic, "after", partitions, 40))
            rounds.append(_send_round(p, topic, "later", partitions, 40))
        for partition in range(partitions):
            batches = _stored(bootstrap, topic, partition)
            # Nothing failed came back; the rest is there once, in order.
            assert [v for b in batches for v in b[3]] == [v for r in rounds for v in r[partition]]
            (pid, epoch), *rest = _pairs_in_order(batches)
            assert rest, "the producer state was not reset"
            if target_name in ("ref", "kafka"):
                assert rest == [(pid, epoch + 1)]
            else:  # tansu refused the bump: a new producer id
                assert rest[-1][0] != pid
