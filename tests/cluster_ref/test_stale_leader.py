"""A partition leader SIGSTOPped until the controller has fenced it and elected another,
then SIGCONTed and sent produce requests at once (acks=all and acks=1, over its own
connection, as a client with stale metadata would): it answers NOT_LEADER_OR_FOLLOWER to
both — its heartbeat lease ran out, so it does not act as leader before the controller
has answered it and its metadata has caught up — and neither record is ever readable."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from cluster.conftest import create_topic

from sdk import Consumer, TopicPartition
from sdk.errors import NotLeaderOrFollowerError
from sdk.net.client import LeaderOf, NetClient
from sdk.net.config import CommonConfig
from sdk.protocol.messages.produce import ProduceRequest
from sdk.records.builder import RecordBatchBuilder
from server_ref.cluster import EmbeddedCluster

PRODUCE_VERSION = 11  # topics by name


def _request(topic: str, value: bytes, acks: int) -> ProduceRequest:
    builder = RecordBatchBuilder()
    builder.append(None, int(time.time() * 1000), None, value)
    return ProduceRequest(acks=acks, timeout_ms=10_000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=builder.build())])])


def _code(response: Any) -> int:
    return int(response.responses[0].partition_responses[0].error_code)


def _wait_replaced(cluster: EmbeddedCluster, topic: str, old: int, others: list[int]) -> int:
    """Until every other broker's metadata names a leader other than ``old``."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        leaders = {cluster.partition_states(n, topic).get(0, (-1,))[0] for n in others}
        if len(leaders) == 1 and next(iter(leaders)) not in (old, -1):
            return next(iter(leaders))
        time.sleep(0.2)
    raise AssertionError(f"broker {old} was never replaced as leader of {topic}-0")


def test_resumed_stale_leader_refuses_produce(kafka_cluster: EmbeddedCluster) -> None:
    topic = create_topic(kafka_cluster, "stale-leader", 1)
    old = kafka_cluster.leader_of(topic, 0)
    others = [n.node_id for n in kafka_cluster.brokers if n.node_id != old]

    async def run() -> tuple[int, int, int]:
        client = NetClient(CommonConfig.build(bootstrap_servers=kafka_cluster.bootstrap_servers))
        try:
            await client.start()
            await client.wait_for_topic(topic, 20)
            first = await client.call(_request(topic, b"before", -1), LeaderOf(topic, 0),
                                      max_version=PRODUCE_VERSION, timeout_s=30)
            assert _code(first) == 0
            conn = await client.connection(old, timeout_s=10)
            kafka_cluster.pause(old)
            try:
                new = await asyncio.to_thread(_wait_replaced, kafka_cluster, topic, old,
                                              others)
            finally:
                kafka_cluster.resume(old)
            # At once, on the connection opened before the pause (pipelined, in order).
            answers = await asyncio.gather(
                conn.send(_request(topic, b"stale-acks-all", -1), PRODUCE_VERSION,
                          timeout_s=30),
                conn.send(_request(topic, b"stale-acks-1", 1), PRODUCE_VERSION,
                          timeout_s=30))
            return new, _code(answers[0]), _code(answers[1])
        finally:
            await client.close()

    new, acks_all, acks_one = asyncio.run(run())
    assert new != old
    assert (acks_all, acks_one) == (NotLeaderOrFollowerError.errno,
                                    NotLeaderOrFollowerError.errno)
    # Through the new leader: what was acknowledged, nothing the stale leader was sent.
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=kafka_cluster.bootstrap_servers,
                  auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        # (a new leader's high watermark reaches the acknowledged record once its
        # followers have fetched in the new epoch)
        while time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=300).values():
                values.extend(r.value for r in records)
            end = consumer.end_offsets([tp])[tp]
            if end >= 1 and consumer.position(tp) >= end:
                break
    assert values == [b"before"]
