"""Tiered storage (KIP-405) on our broker and on Apache Kafka 4.3.1's own tiering: the same
steps, the same outcomes.

Apache Kafka runs with ``LocalTieredStorage``, the RemoteStorageManager that writes to a
directory (it ships in Kafka's ``kafka-storage`` test jar, which ``tools/apache_kafka.py
fetch`` resolves), and its default topic-based RemoteLogMetadataManager; our broker with its
directory tier. One partition, 1 MiB segments, ``local.retention.bytes=1``:

1. 12,000 records (varied keys, values of 1-600 B, headers on some) are produced; once the
   closed segments are copied and deleted locally, EARLIEST is 0, EARLIEST_LOCAL is one past
   LATEST_TIERED (only the active segment is local), LATEST is 12,000;
2. our consumer and confluent-kafka read every record from offset 0, byte for byte;
3. a timestamp lookup of a record in the remote tier answers the first offset at or after
   it, as the records' own timestamps say;
4. DeleteRecords at an offset inside the remote tier: its low watermark, EARLIEST at the
   cut, a Fetch at 0 OFFSET_OUT_OF_RANGE, a reset consumer starting at the cut, the local
   log start unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from apache_support import apache_cluster

from sdk import AdminClient, Consumer, NewTopic
from sdk.errors import OffsetOutOfRangeError
from sdk.types import TopicPartition
from tests.integration.tiered_kit import (
    EARLIEST,
    EARLIEST_LOCAL,
    LATEST_TIERED,
    fetch_once,
    list_offset,
    make_records,
    produce,
    read_confluent,
    read_sdk,
    tiered_broker,
    wait_until,
)

TOPIC = "tiered-both"
COUNT = 12_000
LATEST = -1
TOPIC_CONFIGS = {"remote.storage.enable": "true", "segment.bytes": str(1 << 20),
                 "local.retention.bytes": "1"}
APACHE_TIERING = {
    "remote.log.storage.system.enable": "true",
    "remote.log.storage.manager.class.name":
        "org.apache.kafka.server.log.remote.storage.LocalTieredStorage",
    "remote.log.storage.manager.impl.prefix": "rsm.config.",
    "remote.log.metadata.manager.impl.prefix": "rlmm.config.",
    "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
    "remote.log.metadata.manager.listener.name": "PLAINTEXT",
    "remote.log.manager.task.interval.ms": "500",
    "log.retention.check.interval.ms": "500",
    "log.initial.task.delay.ms": "0",  # local deletions start at once (default 30 s)
}


@contextmanager
def ours(directory: Path) -> Iterator[str]:
    broker = tiered_broker(directory / "data")
    try:
        yield broker.bootstrap_servers
    finally:
        broker.close()


@contextmanager
def apache(directory: Path) -> Iterator[str]:
    config = {**APACHE_TIERING, "rsm.config.dir": str(directory / "remote")}
    with apache_cluster(brokers=1, config=config) as cluster:
        yield cluster.bootstrap_servers


def _timestamps(bootstrap: str, count: int) -> list[int]:
    """Each record's timestamp, by offset."""
    tp = TopicPartition(TOPIC, 0)
    out: list[int] = []
    with Consumer(bootstrap_servers=bootstrap, enable_auto_commit=False) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + 60
        while len(out) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                out.extend(r.timestamp for r in records)
    return out


def _first_offset_after_reset(bootstrap: str) -> int:
    tp = TopicPartition(TOPIC, 0)
    with Consumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                  auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                if records:
                    return int(records[0].offset)
    raise AssertionError("no record read after a reset")


def scenario(bootstrap: str) -> dict[str, Any]:
    tp = TopicPartition(TOPIC, 0)
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, 1, TOPIC_CONFIGS)]).raise_if_failed()
    records = make_records(COUNT, seed="both")
    produce(bootstrap, TOPIC, records)

    # Settled: every closed segment copied and deleted locally. Segments go one task run
    # after another, and each step already shows EARLIEST_LOCAL = LATEST_TIERED + 1, so the
    # pair must also stay the same for 3 s (6 of Kafka's task runs here, 30 of ours).
    seen: list[tuple[tuple[int, int], float]] = []

    def settled() -> bool:
        pair = (list_offset(bootstrap, TOPIC, EARLIEST_LOCAL)[1],
                list_offset(bootstrap, TOPIC, LATEST_TIERED)[1])
        if not seen or seen[-1][0] != pair:
            seen.append((pair, time.monotonic()))
        (local_start, tiered), since = seen[-1]
        return local_start > 0 and local_start == tiered + 1 \
            and time.monotonic() - since >= 3.0

    wait_until(settled, "closed segments copied and deleted locally", timeout_s=120)
    outcome: dict[str, Any] = {}
    local_start = list_offset(bootstrap, TOPIC, EARLIEST_LOCAL)[1]
    tiered = list_offset(bootstrap, TOPIC, LATEST_TIERED)[1]
    outcome["EARLIEST"] = list_offset(bootstrap, TOPIC, EARLIEST)
    outcome["LATEST"] = list_offset(bootstrap, TOPIC, LATEST)
    outcome["EARLIEST_LOCAL is LATEST_TIERED + 1"] = local_start == tiered + 1
    outcome["ours from 0"] = read_sdk(bootstrap, TOPIC, COUNT) == records
    outcome["confluent-kafka from 0"] = read_confluent(bootstrap, TOPIC, COUNT) == records

    stamps = _timestamps(bootstrap, COUNT)
    probe = local_start // 3  # a record only in the remote tier
    code, found = list_offset(bootstrap, TOPIC, stamps[probe])
    outcome["time lookup in the remote tier"] = (
        code, found == next(i for i, t in enumerate(stamps) if t >= stamps[probe]))

    cut = local_start // 2
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        outcome["DeleteRecords low watermark is the cut"] = \
            admin.delete_records({tp: cut})[tp].low_watermark == cut
    outcome["EARLIEST is the cut"] = list_offset(bootstrap, TOPIC, EARLIEST) == (0, cut)
    outcome["Fetch at 0"] = fetch_once(bootstrap, TOPIC, 0)[0]
    outcome["reset consumer starts at the cut"] = _first_offset_after_reset(bootstrap) == cut
    outcome["ours from the cut"] = read_sdk(bootstrap, TOPIC, COUNT - cut, cut) == records[cut:]
    outcome["EARLIEST_LOCAL unchanged"] = \
        list_offset(bootstrap, TOPIC, EARLIEST_LOCAL) == (0, local_start)
    return outcome


EXPECTED = {
    "EARLIEST": (0, 0),
    "LATEST": (0, COUNT),
    "EARLIEST_LOCAL is LATEST_TIERED + 1": True,
    "ours from 0": True,
    "confluent-kafka from 0": True,
    "time lookup in the remote tier": (0, True),
    "DeleteRecords low watermark is the cut": True,
    "EARLIEST is the cut": True,
    "Fetch at 0": OffsetOutOfRangeError.errno,
    "reset consumer starts at the cut": True,
    "ours from the cut": True,
    "EARLIEST_LOCAL unchanged": True,
}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("target", [ours, apache], ids=["ref", "kafka"])
def test_tiered_storage_outcomes_match_apache_kafka(target: Any, tmp_path: Path) -> None:
    with target(tmp_path) as bootstrap:
        assert scenario(bootstrap) == EXPECTED
