"""Streaming reads: checkpointed restarts, read limits, new partitions (local Spark)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sdk import AdminClient
from sdk.spark.offsets import offsets_to_json
from sdk.spark.options import parse_source_options
from sdk.spark.source import KafkaStreamReader, RangePartition
from sdk.types import TopicPartition

from .conftest import create_topic, produce

pytestmark = pytest.mark.integration


def _values(start: int, stop: int, partitions: int) -> list[dict[str, Any]]:
    return [{"value": f"v{i}".encode(), "partition": i % partitions} for i in range(start, stop)]


def _run_available_now(spark: Any, bootstrap: str, topic: str, out: Path, checkpoint: Path,
                       max_per_trigger: int) -> list[int]:
    """One run of the query until everything available is read; the rows per micro-batch."""
    df = (spark.readStream.format("kafka_sdk").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", str(max_per_trigger)).load())
    query = (df.selectExpr("CAST(value AS STRING) AS v", "partition", "offset")
             .writeStream.format("json").option("path", str(out))
             .option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(180), "the streaming query did not finish"
    assert query.exception() is None
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def test_restart_from_checkpoint_reads_everything_exactly_once(
        spark: Any, kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = "stream-restart"
    create_topic(kafka_bootstrap, topic, 3)
    produce(kafka_bootstrap, topic, _values(0, 120, 3))
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    first = _run_available_now(spark, kafka_bootstrap, topic, out, checkpoint, 50)
    assert first == [50, 50, 20]  # maxOffsetsPerTrigger honoured

    # More records, and a partition added while the query was down: the restarted query
    # resumes from its checkpoint and discovers the new partition (read from its start).
    produce(kafka_bootstrap, topic, _values(120, 180, 3))
    with AdminClient(bootstrap_servers=kafka_bootstrap) as admin:
        admin.create_partitions({topic: 4}).raise_if_failed()
    produce(kafka_bootstrap, topic, [{"value": f"v{i}".encode(), "partition": 3}
                                     for i in range(180, 200)])
    second = _run_available_now(spark, kafka_bootstrap, topic, out, checkpoint, 50)
    assert sum(second) == 80

    rows = [json.loads(line) for f in out.glob("*.json") for line in f.read_text().splitlines()]
    values = sorted(int(r["v"][1:]) for r in rows)
    assert values == list(range(200))  # the union of both runs: nothing lost, nothing twice
    assert {r["partition"] for r in rows} == {0, 1, 2, 3}


def test_stream_reader_planning_with_both_latest_offset_apis(kafka_bootstrap: str) -> None:
    """The planning calls Spark makes on the driver, made directly: the PySpark >= 4.2
    ``latestOffset(start, limit)`` and the older argument-less ``latestOffset()``."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    topic = "stream-plan"
    create_topic(kafka_bootstrap, topic, 2)
    produce(kafka_bootstrap, topic, _values(0, 100, 2))  # 50 per partition
    options = parse_source_options({"kafka.bootstrap.servers": kafka_bootstrap,
                                    "subscribe": topic, "startingOffsets": "earliest",
                                    "maxOffsetsPerTrigger": "30"}, streaming=True)
    t0, t1 = TopicPartition(topic, 0), TopicPartition(topic, 1)

    reader = KafkaStreamReader(options)
    try:
        start = reader.initialOffset()
        assert start == offsets_to_json({t0: 0, t1: 0})
        assert reader.getDefaultReadLimit() == ReadMaxRows(30)
        end = reader.latestOffset(start, ReadMaxRows(30))
        assert end == offsets_to_json({t0: 15, t1: 15})
        assert reader.latestOffset(start, ReadAllAvailable()) == offsets_to_json({t0: 50, t1: 50})
        tasks = reader.partitions(start, end)
        assert all(isinstance(t, RangePartition) for t in tasks)
        assert sorted((t.range.partition, t.range.start, t.range.end) for t in tasks) == [
            (0, 0, 15), (1, 0, 15)]
        rows = [row for t in tasks for batch in reader.read(t)
                for row in batch.to_pylist()]
        assert sorted(r["offset"] for r in rows) == sorted([*range(15), *range(15)])
        reader.commit(end)
    finally:
        reader.stop()

    old_api = KafkaStreamReader(options)  # as PySpark 4.0/4.1 drive it
    try:
        first = old_api.initialOffset()
        second = old_api.latestOffset()
        assert second == offsets_to_json({t0: 15, t1: 15})  # limited from the initial offset
        old_api.partitions(first, second)
        old_api.commit(second)
        assert old_api.latestOffset() == offsets_to_json({t0: 30, t1: 30})
    finally:
        old_api.stop()
