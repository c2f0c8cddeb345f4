"""Exactly-once streaming writes (local Spark, reference broker).

A query killed after its sink wrote a micro-batch but before Spark recorded the batch as
done is replayed from the checkpoint on restart. Deleting the batch's entry in the
checkpoint's commit log reproduces exactly that state, without a process kill: the
restarted query runs the batch again. With ``exactlyOnce`` the replay writes nothing new
(read_committed readers see every record once); without it, the batch is written twice
(the at-least-once behaviour of Spark's own Kafka sink), which the test also shows.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from sdk.consumer import Consumer
from sdk.spark import foreach_batch_sink
from sdk.types import TopicPartition

from .conftest import create_topic, produce

pytestmark = pytest.mark.integration

RECORDS = 90
PER_TRIGGER = 40


def _read_committed(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    out: list[bytes] = []
    with Consumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                  auto_offset_reset="earliest") as c:
        c.assign(tps)
        ends = c.end_offsets(tps)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=200).values():
                out.extend(r.value for r in recs if r.value is not None)
            if all(c.position(tp) >= ends[tp] for tp in tps):
                break
    return out


def _run(spark: Any, bootstrap: str, source: str, sink: str, checkpoint: Path, how: str,
         exactly_once: bool) -> None:
    df = (spark.readStream.format("kafka_sdk").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", str(PER_TRIGGER)).load()
          .selectExpr("value"))
    writer = df.writeStream.option("checkpointLocation", str(checkpoint))
    if how == "format":
        writer = (writer.format("kafka_sdk").option("kafka.bootstrap.servers", bootstrap)
                  .option("topic", sink).option("exactlyOnce", str(exactly_once).lower()))
    else:
        writer = writer.foreachBatch(foreach_batch_sink(bootstrap, sink,
                                                        exactly_once=exactly_once))
    query = writer.trigger(availableNow=True).start()
    assert query.awaitTermination(180), "the streaming query did not finish"
    assert query.exception() is None


def _forget_last_commit(checkpoint: Path) -> int:
    """The state of a query killed after writing its last micro-batch and before Spark
    recorded it as done: the batch's commit-log entry is gone, so a restart replays it."""
    commits = sorted((p for p in (checkpoint / "commits").iterdir()
                      if p.name.isdigit()), key=lambda p: int(p.name))
    last = commits[-1]
    last.unlink()
    crc = last.with_name(f".{last.name}.crc")
    if crc.exists():
        crc.unlink()
    return int(last.name)


@pytest.mark.parametrize("how", ["format", "foreach"])
@pytest.mark.parametrize("exactly_once", [True, False])
def test_replayed_micro_batch_is_written_once(spark: Any, kafka_bootstrap: str,
                                             tmp_path: Path, how: str,
                                             exactly_once: bool) -> None:
    suffix = f"{how}-{'eos' if exactly_once else 'alo'}"
    source, sink = f"eos-src-{suffix}", f"eos-sink-{suffix}"
    create_topic(kafka_bootstrap, source, 2)
    create_topic(kafka_bootstrap, sink, 2)
    produce(kafka_bootstrap, source, [{"value": f"v{i}".encode(), "partition": i % 2}
                                      for i in range(RECORDS)])
    checkpoint = tmp_path / "checkpoint"
    _run(spark, kafka_bootstrap, source, sink, checkpoint, how, exactly_once)
    assert sorted(_read_committed(kafka_bootstrap, sink, 2)) == sorted(
        f"v{i}".encode() for i in range(RECORDS))

    replayed = _forget_last_commit(checkpoint)
    _run(spark, kafka_bootstrap, source, sink, checkpoint, how, exactly_once)
    seen = _read_committed(kafka_bootstrap, sink, 2)
    if exactly_once:
        assert sorted(seen) == sorted(f"v{i}".encode() for i in range(RECORDS)), replayed
    else:  # at-least-once: the replayed micro-batch (the last RECORDS % PER_TRIGGER) twice
        assert len(seen) == RECORDS + RECORDS % PER_TRIGGER
        assert set(seen) == {f"v{i}".encode() for i in range(RECORDS)}


_QUERY_SCRIPT = '''
import sys, time
from pyspark.sql import SparkSession
from pyspark.sql.functions import udf
from sdk.spark import register

bootstrap, source, sink, checkpoint, mode = sys.argv[1:6]
spark = (SparkSession.builder.master("local[2]").appName("eos-kill")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
register(spark)

@udf("binary")
def slow(value):  # a task takes a while, so a kill lands in the middle of a write
    time.sleep(0.02)
    return value

df = (spark.readStream.format("kafka_sdk").option("kafka.bootstrap.servers", bootstrap)
      .option("subscribe", source).option("startingOffsets", "earliest")
      .option("maxOffsetsPerTrigger", "60").load().select(slow("value").alias("value")))
writer = (df.writeStream.format("kafka_sdk").option("kafka.bootstrap.servers", bootstrap)
          .option("topic", sink).option("exactlyOnce", "true")
          .option("checkpointLocation", checkpoint))
writer = writer.trigger(availableNow=True) if mode == "drain" else writer
query = writer.start()
print("started", flush=True)
query.awaitTermination()
'''


def test_query_killed_mid_batch_restarts_without_duplicates(kafka_bootstrap: str,
                                                            tmp_path: Path) -> None:
    """SIGKILL of the whole Spark application (driver and executors) while it writes,
    then a restart from the checkpoint: read_committed readers see each record once."""
    import os
    import signal
    import subprocess
    import sys

    source, sink = "eos-kill-src", "eos-kill-sink"
    create_topic(kafka_bootstrap, source, 2)
    create_topic(kafka_bootstrap, sink, 2)
    total = 300
    produce(kafka_bootstrap, source, [{"value": f"v{i}".encode(), "partition": i % 2}
                                      for i in range(total)])
    script = tmp_path / "query.py"
    script.write_text(_QUERY_SCRIPT)
    checkpoint = tmp_path / "checkpoint"

    def start(mode: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, str(script), kafka_bootstrap, source, sink, str(checkpoint), mode],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    first = start("run")
    try:
        written = 0
        deadline = time.monotonic() + 120
        while written < 100 and time.monotonic() < deadline:  # mid-query, batches in flight
            time.sleep(0.2)
            with Consumer(bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest") as c:
                tps = [TopicPartition(sink, p) for p in range(2)]
                written = sum(c.end_offsets(tps).values())
        assert written >= 100, "the first run wrote nothing within 120 s"
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # driver, its JVM and the Python workers
        first.wait(timeout=30)
    second = start("drain")
    assert second.wait(timeout=300) == 0
    seen = _read_committed(kafka_bootstrap, sink, 2)
    assert sorted(seen) == sorted(f"v{i}".encode() for i in range(total))
