"""The reference broker's Prometheus endpoint, scraped over HTTP after known workloads.

Only our broker has this endpoint (Apache Kafka exposes JMX, tansu its own metrics), so
these tests run the embedded broker and ``python -m server_ref`` directly rather than the
parametrized ``broker`` fixture.
"""

from __future__ import annotations

import http.client
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sdk import AdminClient, Consumer, NewTopic, Producer
from sdk.errors import ConfigError, MessageTooLargeError
from server_ref.embedded import EmbeddedBroker

REPO = Path(__file__).resolve().parents[2]
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> Samples:
    """Every sample of the endpoint by (name, sorted labels)."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/plain")
        text = answer.read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def requests(samples: Samples, api: str) -> float:
    """Requests of one API, whatever versions the clients chose."""
    return sum(count for (name, labels), count in samples.items()
               if name == "kafka_network_requestmetrics_requests_total"
               and dict(labels)["request"] == api)


def wait_until(check: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(metrics_port=0, group_initial_rebalance_delay_ms=0) as embedded:
        yield embedded


def test_produce_requests_bytes_and_messages_counted_per_topic(broker: EmbeddedBroker) -> None:
    topic = f"m-{uuid.uuid4().hex[:8]}"
    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)]).raise_if_failed()
    before = scrape(broker.metrics_url)
    sends, size = 25, 200
    with Producer(bootstrap_servers=broker.bootstrap_servers, linger_ms=0) as producer:
        for i in range(sends):
            producer.send(topic, bytes([i]) * size)
            producer.flush()  # one record, one Produce request
    after = scrape(broker.metrics_url)
    assert requests(after, "Produce") - requests(before, "Produce") == sends
    assert value(after, "kafka_network_requestmetrics_totaltimems_count",
                 request="Produce") >= sends
    assert value(after, "kafka_server_brokertopicmetrics_totalproducerequests_total",
                 topic=topic) == sends
    assert value(after, "kafka_server_brokertopicmetrics_messagesin_total",
                 topic=topic) == sends
    bytes_in = value(after, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic)
    assert bytes_in >= sends * size  # payloads plus batch and record framing
    # Every appended byte is in the log, and the log holds nothing else.
    assert value(after, "kafka_log_log_size", topic=topic, partition="0") == bytes_in
    assert value(after, "kafka_log_log_logendoffset", topic=topic, partition="0") == sends
    assert value(after, "kafka_server_brokertopicmetrics_failedproducerequests_total",
                 topic=topic) == 0


def test_refused_batches_count_as_failed_produce_requests(broker: EmbeddedBroker) -> None:
    topic = f"m-{uuid.uuid4().hex[:8]}"
    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, configs={"max.message.bytes": "1000"})]
                            ).raise_if_failed()
    with Producer(bootstrap_servers=broker.bootstrap_servers, linger_ms=0) as producer:
        future = producer.send(topic, b"x" * 5000)
        with pytest.raises(MessageTooLargeError):
            future.result(timeout=30)
    samples = scrape(broker.metrics_url)
    assert value(samples, "kafka_server_brokertopicmetrics_failedproducerequests_total",
                 topic=topic) >= 1
    assert value(samples, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic) == 0


def test_group_states_fetch_bytes_and_connections(broker: EmbeddedBroker) -> None:
    topic, group = f"m-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)]).raise_if_failed()
    with Producer(bootstrap_servers=broker.bootstrap_servers) as producer:
        for i in range(100):
            producer.send(topic, b"v" * 50, partition=i % 2)
    before = scrape(broker.metrics_url)
    stable_before = value(before, "kafka_server_group_coordinator_metrics_classic_group_count",
                          state="Stable")
    with Consumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                  auto_offset_reset="earliest") as consumer:
        seen = 0
        deadline = time.monotonic() + 30
        while seen < 100 and time.monotonic() < deadline:
            seen += sum(len(v) for v in consumer.poll(timeout_ms=500).values())
        assert seen == 100
        consumer.commit()
        during = scrape(broker.metrics_url)
        assert value(during, "kafka_server_group_coordinator_metrics_classic_group_count",
                     state="Stable") == stable_before + 1
        assert value(during, "kafka_server_socket_server_metrics_connection_count",
                     listener="PLAINTEXT") >= 1
        bytes_in = value(during, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic)
        bytes_out = value(during, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic)
        assert bytes_out >= bytes_in > 100 * 50  # every stored batch was sent at least once
        assert value(during, "kafka_server_brokertopicmetrics_totalfetchrequests_total",
                     topic=topic) >= 2
        assert requests(during, "JoinGroup") >= 1
    # The member left: the group is Empty (its offsets are kept).
    after = scrape(broker.metrics_url)
    assert value(after, "kafka_server_group_coordinator_metrics_classic_group_count",
                 state="Empty") >= 1
    assert value(after, "kafka_server_group_coordinator_metrics_classic_group_count",
                 state="Stable") == stable_before
    groups = value(after, "kafka_server_group_coordinator_metrics_group_count",
                   protocol="classic")
    assert groups == sum(value(after, "kafka_server_group_coordinator_metrics_classic_group_count",
                               state=state)
                         for state in ("PreparingRebalance", "CompletingRebalance", "Stable",
                                       "Empty"))


def test_single_broker_replica_and_controller_gauges(broker: EmbeddedBroker) -> None:
    samples = scrape(broker.metrics_url)
    assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(samples, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    partitions = value(samples, "kafka_server_replicamanager_partitioncount")
    assert partitions >= 1
    assert value(samples, "kafka_server_replicamanager_leadercount") == partitions
    assert value(samples, "kafka_controller_kafkacontroller_globalpartitioncount") == partitions


def test_endpoint_answers_only_get_and_head_on_metrics(broker: EmbeddedBroker) -> None:
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(broker.metrics_url.replace("/metrics", "/nothing"), timeout=10)
    assert missing.value.code == 404
    connection = http.client.HTTPConnection("127.0.0.1", broker.metrics_port, timeout=10)
    try:
        connection.request("POST", "/metrics", body=b"x")
        answer = connection.getresponse()
        assert answer.status == 405
        assert answer.getheader("Allow") == "GET, HEAD"
    finally:
        connection.close()
    connection = http.client.HTTPConnection("127.0.0.1", broker.metrics_port, timeout=10)
    try:
        connection.request("HEAD", "/metrics")
        answer = connection.getresponse()
        assert answer.status == 200 and int(answer.getheader("Content-Length") or 0) > 0
        assert answer.read() == b""
    finally:
        connection.close()
    # OpenMetrics for scrapers that ask for it.
    request = urllib.request.Request(broker.metrics_url, headers={
        "Accept": "application/openmetrics-text; version=1.0.0"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.headers["Content-Type"].startswith("application/openmetrics-text")
        assert answer.read().decode().rstrip().endswith("# EOF")


def test_restart_keeps_the_metrics_port_and_starts_counting_afresh() -> None:
    with EmbeddedBroker(metrics_port=0) as embedded:
        port = embedded.metrics_port
        with AdminClient(bootstrap_servers=embedded.bootstrap_servers) as admin:
            admin.list_topics()
        assert requests(scrape(embedded.metrics_url), "Metadata") >= 1
        embedded.restart()
        assert embedded.metrics_port == port
        assert requests(scrape(embedded.metrics_url), "Metadata") == 0


def test_bad_metrics_port_is_refused_with_the_setting_named() -> None:
    with pytest.raises(ConfigError, match=r"metrics\.port"):
        EmbeddedBroker(metrics_port=70000).start()


def test_python_m_server_ref_prints_and_serves_the_metrics_url(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "server_ref", "--port", "0", "--metrics-port", "0",
         "--data-dir", str(tmp_path)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]
        assert lines[0].startswith("server_ref ready bootstrap_servers=")
        bootstrap = lines[0].split("bootstrap_servers=")[1].split()[0]
        metrics_line = next(line for line in lines if line.startswith("metrics url="))
        url = metrics_line.split("=", 1)[1].strip()
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.describe_cluster()
        samples = scrape(url)
        assert requests(samples, "DescribeCluster") >= 1
    finally:
        proc.terminate()
        proc.wait(30)
    assert proc.returncode == 0


def test_consumer_protocol_groups_counted_apart(broker: EmbeddedBroker) -> None:
    topic, group = f"m-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)]).raise_if_failed()
    with Producer(bootstrap_servers=broker.bootstrap_servers) as producer:
        producer.send(topic, b"one")
    before = scrape(broker.metrics_url)
    with Consumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                  group_protocol="consumer", auto_offset_reset="earliest") as consumer:
        seen = 0
        deadline = time.monotonic() + 30
        while not seen and time.monotonic() < deadline:
            seen += sum(len(v) for v in consumer.poll(timeout_ms=500).values())
        assert seen == 1
        during = scrape(broker.metrics_url)
        assert value(during, "kafka_server_group_coordinator_metrics_consumer_group_count",
                     state="Stable") == value(
            before, "kafka_server_group_coordinator_metrics_consumer_group_count",
            state="Stable") + 1
        assert value(during, "kafka_server_group_coordinator_metrics_group_count",
                     protocol="consumer") == value(
            before, "kafka_server_group_coordinator_metrics_group_count",
            protocol="consumer") + 1
        assert requests(during, "ConsumerGroupHeartbeat") >= 1
