"""Batch reads with the kafka_sdk format against the reference broker, in local Spark."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

import pytest

from sdk.types import RecordMetadata

from .conftest import create_topic, produce

pytestmark = pytest.mark.integration

TOPIC = "batch-events"
PARTITIONS = 3
COUNT = 90
# Record timestamps are BASE_TS + 1000 * i; recent, or the broker's time retention (7 days by
# default, as Kafka's) would delete them at once.
BASE_TS = (int(time.time()) - 3600) * 1000


def _record(i: int) -> dict[str, Any]:
    return {
        "value": f"value-{i}".encode(),
        "key": None if i % 10 == 0 else f"key-{i % 7}".encode(),
        "partition": i % PARTITIONS,
        "timestamp_ms": BASE_TS + 1000 * i,
        "headers": [("n", str(i).encode()), ("empty", None)] if i % 2 else [],
    }


@pytest.fixture(scope="module")
def produced(kafka_bootstrap: str) -> list[tuple[dict[str, Any], RecordMetadata]]:
    create_topic(kafka_bootstrap, TOPIC, PARTITIONS)
    records = [_record(i) for i in range(COUNT)]
    return list(zip(records, produce(kafka_bootstrap, TOPIC, records)))


def _reader(spark: Any, bootstrap: str, **options: str) -> Any:
    return (spark.read.format("kafka_sdk").option("kafka.bootstrap.servers", bootstrap)
            .options(**options))


def _as_rows(produced: list[tuple[dict[str, Any], RecordMetadata]]) -> list[tuple[Any, ...]]:
    return sorted(
        (meta.partition, meta.offset, rec["key"], rec["value"], TOPIC,
         datetime.fromtimestamp(rec["timestamp_ms"] / 1000, tz=timezone.utc).replace(tzinfo=None),
         0, [(k, v) for k, v in rec["headers"]])
        for rec, meta in produced)


def test_batch_read_returns_exactly_what_was_produced(spark: Any, kafka_bootstrap: str,
                                                      produced: list[Any]) -> None:
    df = _reader(spark, kafka_bootstrap, subscribe=TOPIC, includeHeaders="true").load()
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>")
    rows = sorted(
        (r.partition, r.offset, r.key, r.value, r.topic, r.timestamp, r.timestampType,
         [(h.key, h.value) for h in r.headers])
        for r in df.collect())
    # session time zone is UTC, so Spark hands back naive UTC datetimes
    assert rows == _as_rows(produced)
    without_headers = _reader(spark, kafka_bootstrap, subscribe=TOPIC).load()
    assert "headers" not in without_headers.columns


def test_offset_ranges_and_task_splitting(spark: Any, kafka_bootstrap: str,
                                          produced: list[Any]) -> None:
    df = _reader(spark, kafka_bootstrap,
                 assign=f'{{"{TOPIC}": [0, 2]}}',
                 startingOffsets=f'{{"{TOPIC}": {{"0": 5, "2": -2}}}}',
                 endingOffsets=f'{{"{TOPIC}": {{"0": 25, "2": -1}}}}',
                 maxRecordsPerPartition="7").load()
    assert df.rdd.getNumPartitions() == 3 + 5  # 20 records -> 3 tasks, 30 -> 5
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(5, 25)] + [(2, o) for o in range(30)]

    split = _reader(spark, kafka_bootstrap, subscribe=TOPIC, minPartitions="8").load()
    assert split.rdd.getNumPartitions() == 8
    assert split.count() == COUNT


def test_timestamps_select_offsets(spark: Any, kafka_bootstrap: str,
                                   produced: list[Any]) -> None:
    # Records i=30..59 have timestamps BASE_TS + 30 s .. + 59 s.
    df = _reader(spark, kafka_bootstrap, subscribe=TOPIC,
                 startingTimestamp=str(BASE_TS + 30_000),
                 endingTimestamp=str(BASE_TS + 60_000)).load()
    values = sorted(int(r.value.decode().split("-")[1]) for r in df.select("value").collect())
    assert values == list(range(30, 60))

    per_partition = _reader(
        spark, kafka_bootstrap, subscribe=TOPIC,
        startingOffsetsByTimestamp=(f'{{"{TOPIC}": {{"0": {BASE_TS + 81_000}, '
                                    f'"1": {BASE_TS}, "2": {BASE_TS + 999_000}}}}}'),
        startingOffsetsByTimestampStrategy="latest").load()
    got = sorted(int(r.value.decode().split("-")[1])
                 for r in per_partition.select("value").collect())
    assert got == sorted([81, 84, 87, *range(1, COUNT, 3)])

    with pytest.raises(Exception, match="OffsetNotFoundError"):
        _reader(spark, kafka_bootstrap, subscribe=TOPIC,
                startingTimestamp=str(BASE_TS + 999_000)).load().collect()


def test_subscribe_pattern_and_empty_read(spark: Any, kafka_bootstrap: str,
                                          produced: list[Any]) -> None:
    assert _reader(spark, kafka_bootstrap, subscribePattern="batch-.*").load().count() == COUNT
    assert _reader(spark, kafka_bootstrap, subscribe="no-such-topic").load().count() == 0
    empty = _reader(spark, kafka_bootstrap, subscribe=TOPIC,
                    startingOffsets="earliest",
                    endingOffsets=f'{{"{TOPIC}": {{"0": 0, "1": 0, "2": 0}}}}').load()
    assert empty.count() == 0


def test_forbidden_and_invalid_options_reach_the_user(spark: Any, kafka_bootstrap: str,
                                                      produced: list[Any]) -> None:
    with pytest.raises(Exception, match=r"Kafka option 'group\.id' is not supported"):
        _reader(spark, kafka_bootstrap, subscribe=TOPIC, **{"kafka.group.id": "g"}).load()
    with pytest.raises(Exception, match="can't be 'latest' for batch queries"):
        _reader(spark, kafka_bootstrap, subscribe=TOPIC, startingOffsets="latest").load().count()
    with pytest.raises(Exception, match="fixed schema"):
        (spark.read.format("kafka_sdk").schema("value string")
         .option("kafka.bootstrap.servers", kafka_bootstrap).option("subscribe", TOPIC)
         .load().collect())


def test_fail_on_data_loss(spark: Any, kafka_bootstrap: str) -> None:
    """Records deleted (DeleteRecords moves the log start) before a query reads them."""
    from sdk import AdminClient
    from sdk.spark.options import parse_source_options
    from sdk.spark.planning import OffsetRange
    from sdk.spark.source import KafkaStreamReader, RangePartition
    from sdk.types import TopicPartition

    topic = "batch-loss"
    create_topic(kafka_bootstrap, topic, 1)
    produce(kafka_bootstrap, topic, [{"value": f"{i}".encode()} for i in range(30)])
    with AdminClient(bootstrap_servers=kafka_bootstrap) as admin:
        admin.delete_records({TopicPartition(topic, 0): 10}).raise_if_failed()
    start_at_zero = f'{{"{topic}": {{"0": 0}}}}'

    with pytest.raises(Exception, match="DataLossError"):
        _reader(spark, kafka_bootstrap, subscribe=topic,
                startingOffsets=start_at_zero).load().collect()
    tolerant = _reader(spark, kafka_bootstrap, subscribe=topic, startingOffsets=start_at_zero,
                       failOnDataLoss="false").load()
    assert sorted(r.offset for r in tolerant.select("offset").collect()) == list(range(10, 30))

    # A task planned before the deletion (a checkpointed micro-batch) finds the gap itself.
    task = RangePartition(OffsetRange(topic, 0, 5, 30))
    for fail, expected in (("true", None), ("false", list(range(10, 30)))):
        reader = KafkaStreamReader(parse_source_options(
            {"kafka.bootstrap.servers": kafka_bootstrap, "subscribe": topic,
             "failOnDataLoss": fail}, streaming=True))
        if expected is None:
            with pytest.raises(Exception, match="offsets 5 to 10 were deleted"):
                list(reader.read(task))
        else:
            assert [o for b in reader.read(task) for o in b.column("offset").to_pylist()] \
                == expected
