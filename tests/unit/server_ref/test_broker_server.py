"""The server: hostile input, unsupported APIs, the control surface, embedded and CLI use."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from broker_kit import Served, WireClient, make_batch

from sdk import errors
from sdk.protocol.api import ApiKey
from sdk.protocol.message import Struct
from sdk.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest
from sdk.protocol.messages.metadata import MetadataRequest, MetadataResponse
from sdk.protocol.messages.produce import ProduceRequest
from server_ref import EmbeddedBroker

ROOT = Path(__file__).resolve().parents[3]


async def still_serving(served: Served) -> None:
    client = await served.client()
    response = await client.call(MetadataRequest(topics=None))
    assert response.cluster_id == served.b.cluster_id


@pytest.mark.parametrize("garbage", [
    b"\xff\xff\xff\xff",  # negative length
    (200 << 20).to_bytes(4, "big"),  # beyond socket.request.max.bytes
    (6).to_bytes(4, "big") + b"\x00\x03\x00\x01\x00\x00",  # shorter than a header
    (12).to_bytes(4, "big") + b"\x00\x03\x00\x01\x00\x00\x00\x01\x7f\xff\x00\x00",  # bad id
    (10).to_bytes(4, "big") + b"\x00\x03\x00\x09\x00\x00\x00\x01\x00\x00",  # truncated body
    (10).to_bytes(4, "big") + b"\x27\x10\x00\x00\x00\x00\x00\x01\x00\x00",  # API key 10000
    (10).to_bytes(4, "big") + b"\x00\x03\x00\x63\x00\x00\x00\x01\x00\x00",  # Metadata v99
])
async def test_hostile_frames_close_only_their_connection(served: Served, garbage: bytes
                                                          ) -> None:
    bystander = await served.client()
    hostile = await served.client()
    await hostile.send_raw(garbage)
    assert await hostile.closed_by_peer()
    response = await bystander.call(MetadataRequest(topics=None))
    assert isinstance(response, MetadataResponse)
    await still_serving(served)


async def test_random_bytes_and_truncated_frames(served: Served) -> None:
    bystander = await served.client()
    rng = __import__("random").Random(7)
    for _ in range(20):
        hostile = await served.client()
        await hostile.send_raw(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300))))
        await hostile.close()  # truncated or not, the broker copes either way
    await bystander.call(MetadataRequest(topics=None))
    await still_serving(served)


async def test_request_size_limit(make_served: object) -> None:
    served = await make_served(socket_request_max_bytes=1000)  # type: ignore[operator]
    served.b.topics.create("t", 1)
    client = await served.client()
    await client.send(ProduceRequest(acks=1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[
            ProduceRequest.PartitionProduceData(index=0,
                                                records=make_batch([(b"k", b"v" * 5000)]))])]))
    assert await client.closed_by_peer()
    await still_serving(served)


async def test_unimplemented_apis_answer_unsupported_version(served: Served) -> None:
    client = await served.client()
    quotas = await client.call(DescribeClientQuotasRequest(), 0)
    assert quotas.error_code == errors.UnsupportedVersionError.errno
    old_produce = await client.call(ProduceRequest(acks=1, timeout_ms=100, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=None)])]), 2)
    assert old_produce.responses[0].partition_responses[0].error_code == \
        errors.UnsupportedVersionError.errno
    await still_serving(served)


async def test_many_connections_at_once(served: Served) -> None:
    clients = await asyncio.gather(*(WireClient.open("127.0.0.1", served.port)
                                     for _ in range(50)))
    try:
        responses = await asyncio.gather(*(c.call(MetadataRequest(topics=None))
                                           for c in clients))
        assert {r.cluster_id for r in responses} == {served.b.cluster_id}
    finally:
        for c in clients:
            await c.close()


# ---------------------------------------------------------------------------- control


async def test_control_fail_answer_delay_drop_close(served: Served) -> None:
    control = served.b.control
    client = await served.client()
    control.fail_next(ApiKey.METADATA, errors.NotControllerError.errno)
    failed = await client.call(MetadataRequest(topics=[
        MetadataRequest.MetadataRequestTopic(name="x")]))
    assert failed.topics[0].error_code == errors.NotControllerError.errno
    control.answer_next(ApiKey.METADATA, MetadataResponse(cluster_id="scripted"))
    assert (await client.call(MetadataRequest(topics=None))).cluster_id == "scripted"
    control.delay_next(ApiKey.METADATA, 1.0)
    delayed = asyncio.ensure_future(client.call(MetadataRequest(topics=None)))
    other = await served.client()
    await other.call(MetadataRequest(topics=None))  # answered while the first one waits
    assert not delayed.done()
    await delayed
    control.drop_next(ApiKey.METADATA)
    dropped = await client.send(MetadataRequest(topics=None))
    answered = await client.send(MetadataRequest(topics=None))
    got, _ = await client.receive()
    assert got == answered and got != dropped
    control.close_next(ApiKey.METADATA)
    await client.send(MetadataRequest(topics=None))
    assert await client.closed_by_peer()
    assert control.seen(ApiKey.METADATA) == 7
    assert control.pending(ApiKey.METADATA) == 0
    await still_serving(served)


async def test_control_drop_with_handling_still_applies_the_request(served: Served) -> None:
    served.b.topics.create("t", 1)
    served.b.control.drop_next(ApiKey.PRODUCE, handle=True)
    client = await served.client()
    await client.send(ProduceRequest(acks=1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=make_batch())])]))
    await client.call(MetadataRequest(topics=None))  # answered; the produce never is
    assert served.b.topics.get("t").partitions[0].log.log_end_offset == 1


# ---------------------------------------------------------------------------- embedded


def test_embedded_broker_restart_keeps_data_and_port(tmp_path: Path) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    with EmbeddedBroker(data_dir=tmp_path, group_initial_rebalance_delay_ms=0) as b:
        port = b.port
        producer = KafkaProducer(bootstrap_servers=b.bootstrap_servers)
        producer.send("t", b"before").get(10)
        producer.close()
        b.restart()
        assert b.port == port
        assert b.call(lambda: b.broker.topics.get("t").partitions[0].log.log_end_offset) == 1
        consumer = KafkaConsumer(bootstrap_servers=b.bootstrap_servers,
                                 auto_offset_reset="earliest", consumer_timeout_ms=10000)
        consumer.assign([TopicPartition("t", 0)])
        assert next(consumer).value == b"before"
        consumer.close()
    assert (tmp_path / "t-0").is_dir()


async def test_a_connection_set_up_after_stop_began_is_refused(tmp_path: Path) -> None:
    """A client that connects while the broker stops can have its socket accepted just
    before the listener closes and its protocol set up after stop() swept the
    connections; served then, it would answer from closed logs until it hung up (seen as
    CORRUPT_MESSAGE "partition log ... is closed" forever after quick restarts)."""
    from server_ref.broker import Broker
    from server_ref.config import BrokerConfig
    from server_ref.server import Connection, KafkaServer

    server = KafkaServer(Broker(BrokerConfig(), tmp_path))
    server.stopping = True  # what stop() sets before it closes the listener
    listener = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    loop = asyncio.get_running_loop()
    transport, conn = await loop.create_connection(lambda: Connection(server),
                                                   "127.0.0.1", port)
    assert conn.closed and transport.is_closing()
    assert not server.connections
    listener.close()
    await listener.wait_closed()


def test_embedded_broker_rejects_bad_settings() -> None:
    with pytest.raises(errors.ConfigError, match=r"num\.partitions"):
        EmbeddedBroker(num_partitions="many")
    with pytest.raises(errors.ConfigError, match=r"no\.such"):
        EmbeddedBroker(config={"no.such": 1})
    with pytest.raises(errors.ConfigError, match="brokers"):
        EmbeddedBroker(brokers=3)


def test_command_line_ready_line_and_clean_sigterm(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "server_ref", "--port", "0", "--data-dir", str(tmp_path),
         "--config", "num.partitions=2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.match(r"server_ref ready bootstrap_servers=(\S+):(\d+) data_dir=(\S+)", line)
        assert match, line
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=f"{match[1]}:{match[2]}")
        assert producer.partitions_for("auto") == {0, 1}
        producer.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        checkpoint = (tmp_path / "auto-0" / "partition.checkpoint")
        assert checkpoint.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_command_line_rejects_unknown_config(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-m", "server_ref", "--port", "0", "--data-dir", str(tmp_path),
         "--config", "num.partitionz=2"], capture_output=True, text=True, env=env, cwd=ROOT,
        timeout=60)
    assert done.returncode == 2
    assert "num.partitionz" in done.stderr


INTER_BROKER_SHARE_STATE = {83, 84, 85, 86, 87}  # unstable RPCs between brokers


def _error_codes(message: object) -> list[int]:
    """Every error_code / partition_error_code in a decoded response, at any depth."""
    found: list[int] = []
    stack = [message]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, Struct):
            for name in item.field_names():
                value = getattr(item, name)
                if name.endswith("error_code"):
                    found.append(value)
                elif isinstance(value, (list, Struct)):
                    stack.append(value)
    return found


async def test_every_unserved_api_gets_an_answer_not_a_hang_up(served: Served) -> None:
    from sdk.protocol.api import API_TABLE, request_class
    from server_ref.handlers import REGISTRY

    client = await served.client()
    for key, row in sorted(API_TABLE.items()):
        if key in REGISTRY or key in INTER_BROKER_SHARE_STATE:
            continue
        version = row[4]
        response = await client.call(request_class(key)(), version)
        codes = _error_codes(response)
        assert not codes or errors.UnsupportedVersionError.errno in codes, (key, codes)
    await still_serving(served)


def test_a_data_directory_serves_one_broker_at_a_time(tmp_path: Path) -> None:
    with EmbeddedBroker(data_dir=tmp_path):
        with pytest.raises(errors.IllegalStateError, match="in use"):
            EmbeddedBroker(data_dir=tmp_path).start()
    with EmbeddedBroker(data_dir=tmp_path) as again:  # released by the first one's close
        assert again.running
