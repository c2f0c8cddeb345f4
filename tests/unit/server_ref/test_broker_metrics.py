"""Broker metrics on a live broker: exact counts from hand-made requests, the cluster-mode
hooks, the request names and the latency histogram."""

from __future__ import annotations

import asyncio

import pytest
from broker_kit import Served, make_batch
from prometheus_client.parser import text_string_to_metric_families

from sdk.errors import ConfigError
from sdk.protocol.messages.fetch import FetchRequest
from sdk.protocol.messages.produce import ProduceRequest
from server_ref.metrics import BrokerMetrics, request_name, start_metrics
from server_ref.metrics.collect import collect
from server_ref.metrics.registry import LATENCY_BUCKETS_MS, LatencyHistogram


def produce_request(topic: str, batch: bytes, partition: int = 0) -> ProduceRequest:
    return ProduceRequest(acks=1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=partition, records=batch)])])


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(metrics: BrokerMetrics, served: Served) -> Samples:
    out: Samples = {}
    for family in collect(served.b, served.server, metrics):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


async def scrape_text(port: int) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    await writer.drain()
    data = await reader.read()
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK")
    return body.decode()


async def test_exact_counts_for_produce_and_fetch_by_topic_id(served: Served) -> None:
    metrics = await start_metrics(served.b, served.server, "127.0.0.1", 0)
    topic = served.b.topics.create("metered", 1)
    client = await served.client()
    batch = make_batch([(b"k", b"v" * 10)] * 7)  # 7 records in one batch
    for _ in range(3):
        response = await client.call(produce_request("metered", batch))
        assert response.responses[0].partition_responses[0].error_code == 0
    refused = await client.call(produce_request("metered", batch, partition=5))
    assert refused.responses[0].partition_responses[0].error_code != 0
    # v13+ names the topic by id only: the counters still carry its name.
    fetched = await client.call(FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                                             topics=[FetchRequest.FetchTopic(
                                                 topic_id=topic.topic_id, partitions=[
                                                     FetchRequest.FetchPartition(
                                                         partition=0, fetch_offset=0,
                                                         partition_max_bytes=1 << 20)])]),
                                13)
    assert fetched.responses[0].partitions[0].error_code == 0
    got = samples(metrics, served)
    assert sum(count for (name, labels), count in got.items()
               if name == "kafka_network_requestmetrics_requests_total"
               and dict(labels)["request"] == "Produce") == 4
    assert got[("kafka_server_brokertopicmetrics_totalproducerequests_total",
                (("topic", "metered"),))] == 4
    assert got[("kafka_server_brokertopicmetrics_failedproducerequests_total",
                (("topic", "metered"),))] == 1
    assert got[("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "metered"),))] == 21
    assert got[("kafka_server_brokertopicmetrics_bytesin_total",
                (("topic", "metered"),))] == 3 * len(batch)
    assert got[("kafka_server_brokertopicmetrics_bytesout_total",
                (("topic", "metered"),))] == 3 * len(batch)
    assert got[("kafka_server_brokertopicmetrics_totalfetchrequests_total",
                (("topic", "metered"),))] == 1
    assert got[("kafka_network_requestmetrics_totaltimems_count",
                (("request", "Fetch"),))] == 1
    assert got[("kafka_server_socket_server_metrics_connection_count",
                (("listener", "PLAINTEXT"),))] == 1
    # The same numbers over HTTP, in the text format prometheus_client parses.
    text = await scrape_text(metrics.endpoint.port)
    parsed = {(s.name, tuple(sorted(s.labels.items()))): s.value
              for f in text_string_to_metric_families(text) for s in f.samples}
    assert parsed[("kafka_server_brokertopicmetrics_messagesin_total",
                   (("topic", "metered"),))] == 21


async def test_cluster_mode_hooks_and_sources(served: Served) -> None:
    metrics = await start_metrics(served.b, served.server, "127.0.0.1", 0)
    served.b.topics.create("replicated", 4)
    metrics.record_isr_shrink()
    metrics.record_isr_shrink(2)
    metrics.record_isr_expand()
    metrics.under_replicated_source = lambda: 2
    metrics.active_controller_source = lambda: False
    metrics.leader_count_source = lambda: 3
    metrics.offline_partitions_source = lambda: 1
    got = samples(metrics, served)
    assert got[("kafka_server_replicamanager_isrshrinks_total", ())] == 3
    assert got[("kafka_server_replicamanager_isrexpands_total", ())] == 1
    assert got[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 2
    assert got[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 0
    assert got[("kafka_server_replicamanager_leadercount", ())] == 3
    assert got[("kafka_controller_kafkacontroller_offlinepartitionscount", ())] == 1
    assert got[("kafka_server_replicamanager_partitioncount", ())] >= 4


async def test_endpoint_closes_with_the_broker(served: Served) -> None:
    metrics = await start_metrics(served.b, served.server, "127.0.0.1", 0)
    port = metrics.endpoint.port
    await served.stop()
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)


async def test_bad_port_names_the_setting(served: Served) -> None:
    for port in (-1, 65536, True, "9404"):
        with pytest.raises(ConfigError, match=r"metrics\.port"):
            await start_metrics(served.b, served.server, "127.0.0.1", port)  # type: ignore[arg-type]
    assert served.b.metrics is None


def test_request_names_are_kafkas() -> None:
    assert request_name(0) == "Produce"
    assert request_name(2) == "ListOffsets"
    assert request_name(18) == "ApiVersions"
    assert request_name(23) == "OffsetForLeaderEpoch"
    assert request_name(32767) == "Unknown32767"


def test_latency_histogram_is_cumulative_with_inf() -> None:
    histogram = LatencyHistogram()
    for ms in (0.05, 0.1, 3.0, 99999.0):
        histogram.observe_ns(int(ms * 1_000_000))
    buckets = dict(histogram.cumulative())
    assert buckets["0.1"] == 2  # le is inclusive
    assert buckets["5.0"] == 3
    assert buckets[str(LATENCY_BUCKETS_MS[-1])] == 3
    assert buckets["+Inf"] == histogram.count == 4
    assert histogram.sum_ms == pytest.approx(0.05 + 0.1 + 3.0 + 99999.0)
