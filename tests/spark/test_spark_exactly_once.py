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
