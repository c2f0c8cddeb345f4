"""Batch writes, streaming writes and the foreachBatch sink, read back with third-party
clients (confluent-kafka, kafka-python) so our reader is not grading our writer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sdk.spark import foreach_batch_sink

from .conftest import create_topic, produce, read_with_confluent, read_with_kafka_python

pytestmark = pytest.mark.integration


def test_batch_write_all_columns_read_back_by_confluent(spark: Any,
                                                        kafka_bootstrap: str) -> None:
    create_topic(kafka_bootstrap, "write-a", 2)
    create_topic(kafka_bootstrap, "write-b", 2)
    rows = [(f"key-{i}" if i % 5 else None, f"value-{i}".encode(),
             "write-a" if i < 30 else "write-b", i % 2,
             [(f"h{i}", str(i).encode()), ("nil", None)] if i % 3 == 0 else [])
            for i in range(40)]
    df = spark.createDataFrame(
        rows, "key string, value binary, topic string, partition int, "
              "headers array<struct<key: string, value: binary>>").repartition(3)
    df.write.format("kafka_sdk").option("kafka.bootstrap.servers", kafka_bootstrap) \
        .option("kafka.linger.ms", "5").mode("append").save()

    for topic, members in (("write-a", rows[:30]), ("write-b", rows[30:])):
        got = read_with_confluent(kafka_bootstrap, topic, 2)
        assert sorted(((p, k, v, h) for p, _, k, v, h in got), key=repr) == sorted(
            ((p, k.encode() if k else None, v, list(h)) for k, v, _, p, h in members), key=repr)


def test_batch_write_with_topic_option_and_errors(spark: Any, kafka_bootstrap: str) -> None:
    create_topic(kafka_bootstrap, "write-option", 1)
    df = spark.createDataFrame([("a", "other-topic"), ("b", None)], "value string, topic string")
    # The topic option wins over the topic column, as in Spark's Kafka sink.
    df.write.format("kafka_sdk").option("kafka.bootstrap.servers", kafka_bootstrap) \
        .option("topic", "write-option").mode("append").save()
    assert sorted(v for _, _, _, v, _ in read_with_confluent(kafka_bootstrap, "write-option", 1)) \
        == [b"a", b"b"]

    def write(frame: Any, **options: str) -> None:
        (frame.write.format("kafka_sdk").option("kafka.bootstrap.servers", kafka_bootstrap)
         .options(**options).mode("append").save())

    with pytest.raises(Exception, match="required attribute 'value' not found"):
        write(spark.createDataFrame([("k",)], "key string"), topic="write-option")
    with pytest.raises(Exception, match="topic option required"):
        write(spark.createDataFrame([("v",)], "value string"))
    with pytest.raises(Exception, match="value attribute type must be"):
        write(spark.createDataFrame([(1,)], "value int"), topic="write-option")
    with pytest.raises(Exception, match="null topic present"):
        write(df)
    with pytest.raises(Exception, match=r"'value\.serializer' is not supported"):
        write(df, topic="write-option", **{"kafka.value.serializer": "x"})


def test_streaming_write_read_back_by_kafka_python(spark: Any, kafka_bootstrap: str,
                                                   tmp_path: Path) -> None:
    create_topic(kafka_bootstrap, "stream-in", 2)
    create_topic(kafka_bootstrap, "stream-out", 2)
    produce(kafka_bootstrap, "stream-in",
            [{"value": f"v{i}".encode(), "key": f"k{i % 4}".encode()} for i in range(60)])
    source = (spark.readStream.format("kafka_sdk")
              .option("kafka.bootstrap.servers", kafka_bootstrap)
              .option("subscribe", "stream-in").option("startingOffsets", "earliest").load())
    query = (source.selectExpr("key", "upper(CAST(value AS STRING)) AS value")
             .writeStream.format("kafka_sdk")
             .option("kafka.bootstrap.servers", kafka_bootstrap).option("topic", "stream-out")
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(180)
    assert query.exception() is None
    got = read_with_kafka_python(kafka_bootstrap, "stream-out")
    assert sorted((k, v) for _, _, k, v in got) == sorted(
        (f"k{i % 4}".encode(), f"V{i}".encode()) for i in range(60))


def test_foreach_batch_sink_writes_every_micro_batch(spark: Any, kafka_bootstrap: str,
                                                     tmp_path: Path) -> None:
    create_topic(kafka_bootstrap, "fb-in", 2)
    create_topic(kafka_bootstrap, "fb-out", 3)
    produce(kafka_bootstrap, "fb-in", [{"value": f"{i}".encode()} for i in range(75)])
    sink = foreach_batch_sink(bootstrap_servers=kafka_bootstrap, topic="fb-out", linger_ms=5,
                              acks="all")
    source = (spark.readStream.format("kafka_sdk")
              .option("kafka.bootstrap.servers", kafka_bootstrap).option("subscribe", "fb-in")
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "30").load())
    query = (source.selectExpr("CAST(CAST(value AS STRING) AS INT) * 2 AS n")
             .selectExpr("CAST(n AS STRING) AS key", "CAST(n AS STRING) AS value")
             .writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(180)
    assert query.exception() is None
    assert len([p for p in query.recentProgress if p["numInputRows"]]) == 3
    got = read_with_confluent(kafka_bootstrap, "fb-out", 3)
    assert sorted(int(v) for _, _, _, v, _ in got) == [2 * i for i in range(75)]
    assert all(k == v for _, _, k, v, _ in got)
    with pytest.raises(Exception, match=r"'group\.id' is not supported"):
        foreach_batch_sink(bootstrap_servers=kafka_bootstrap, topic="fb-out", group_id="g")
