"""The flagship pipeline: events in Kafka -> Spark Structured Streaming -> results in Kafka.

    python examples/demo_pipeline.py [--records N]      (``make demo`` runs this)

1. starts the reference broker in this process (``server_ref.EmbeddedBroker``, temp dir);
2. a producer application writes page-view events (JSON, keyed by user) with the SDK, in
   bursts, while
3. a Spark Structured Streaming job (local mode) reads them with the ``kafka_sdk`` source,
   counts views per page per one-minute event-time window, and writes each micro-batch's
   updated counts to an output topic with ``foreach_batch_sink``;
4. a consumer reads the output topic back, keeps the latest count per (window, page) and
   prints the result table;
5. prints a summary and exits 0 -- or 1 if the table does not account for every event
   exactly once. Everything it started (Spark, broker, threads, temp dirs) is stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT))

from sdk import AdminClient, Consumer, NewTopic, Producer, TopicPartition  # noqa: E402
from server_ref import EmbeddedBroker  # noqa: E402

EVENTS_TOPIC = "page_views"
RESULTS_TOPIC = "page_view_counts"
PAGES = ["/", "/search", "/cart", "/checkout", "/product/1", "/product/2", "/product/3",
         "/help", "/account", "/orders", "/deals", "/blog"]
SIMULATED_MINUTES = 5  # the events' timestamps span this many minutes of event time


@dataclass
class ProducerStats:
    sent: int = 0
    seconds: float = 0.0
    error: BaseException | None = None


def check_environment() -> None:
    """Spark needs a JVM and pyarrow; say so plainly rather than with a gateway trace."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        sys.exit("demo: Spark needs Java 17+ (no `java` on PATH and JAVA_HOME unset)")
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as exc:
        sys.exit(f"demo: {exc.name} is missing: pip install 'pyspark>=4.0' pyarrow "
                 "(the project's 'spark' extra)")
    # Spark's Python workers must run this interpreter and find this project.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))


def produce_events(bootstrap: str, count: int, stats: ProducerStats, seed: int = 7) -> None:
    """The producer application: page views keyed by user, written in bursts."""
    rng = random.Random(seed)
    weights = [1.0 / (rank + 1) for rank in range(len(PAGES))]  # a few pages are popular
    users = [f"user-{n:04d}" for n in range(max(10, min(5000, count // 20)))]
    start_ms = (int(time.time()) // 60 - SIMULATED_MINUTES) * 60_000
    span_ms = SIMULATED_MINUTES * 60_000
    bursts = 10
    began = time.perf_counter()
    try:
        with Producer(bootstrap_servers=bootstrap, linger_ms=5, acks="all") as producer:
            for burst in range(bursts):
                for i in range(burst * count // bursts, (burst + 1) * count // bursts):
                    event_ms = start_ms + i * span_ms // count
                    event = {"user": rng.choice(users),
                             "page": rng.choices(PAGES, weights)[0], "ts": event_ms}
                    producer.send(EVENTS_TOPIC, json.dumps(event).encode(),
                                  key=event["user"].encode(), timestamp_ms=event_ms)
                    stats.sent += 1
                producer.flush(timeout=60)
                time.sleep(0.2)  # a stream, not one bulk load: Spark sees several batches
    except BaseException as exc:  # reported by the main thread
        stats.error = exc
    stats.seconds = time.perf_counter() - began


def start_streaming_job(spark, bootstrap: str, checkpoint: str, records: int):  # type: ignore[no-untyped-def]
    """Views per page per one-minute window, written to RESULTS_TOPIC as they update."""
    from pyspark.sql.functions import window

    from sdk.spark import foreach_batch_sink

    events = (spark.readStream.format("kafka_sdk")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", EVENTS_TOPIC)
              .option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "50000")
              .load())
    counts = (events
              .selectExpr("from_json(CAST(value AS STRING), "
                          "'user STRING, page STRING, ts LONG') AS e")
              .selectExpr("e.page AS page", "timestamp_millis(e.ts) AS event_time")
              .groupBy("page", window("event_time", "1 minute"))
              .count()
              .selectExpr(
                  "concat(date_format(window.start, 'HH:mm'), ' ', page) AS key",
                  "to_json(named_struct('window_start', date_format(window.start, 'HH:mm'), "
                  "'page', page, 'views', count)) AS value"))
    sink = foreach_batch_sink(bootstrap_servers=bootstrap, topic=RESULTS_TOPIC, linger_ms=5)
    return (counts.writeStream.outputMode("update")
            .foreachBatch(sink)
            .option("checkpointLocation", checkpoint)
            .queryName("page_views_per_minute")
            .start())


def read_results(bootstrap: str) -> tuple[dict[str, dict[str, object]], int]:
    """The output topic read back: the latest count per key, and how many records it held."""
    latest: dict[str, dict[str, object]] = {}
    read = 0
    with Consumer(bootstrap_servers=bootstrap) as consumer:
        partitions = [TopicPartition(RESULTS_TOPIC, p)
                      for p in sorted(consumer.partitions_for_topic(RESULTS_TOPIC))]
        ends = consumer.end_offsets(partitions)
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        deadline = time.monotonic() + 60
        while any(consumer.position(tp) < ends[tp] for tp in partitions):
            if time.monotonic() > deadline:
                raise TimeoutError("the results topic could not be read back in 60 s")
            for records in consumer.poll(timeout_ms=500).values():
                for record in records:
                    read += 1
                    # Within a partition a key's updates are in order: the last one wins.
                    latest[record.key.decode()] = json.loads(record.value)  # type: ignore[union-attr]
    return latest, read


def steady_rate(progress: list[dict[str, Any]]) -> str:
    """The Spark job's rate once warm: the first micro-batch also starts Spark's Python
    workers and compiles the query, which takes seconds whatever its size."""
    warm = progress[1:]
    if not warm:
        return "Spark job: a single micro-batch (includes the warm-up)"
    rows = sum(p["numInputRows"] for p in warm)
    seconds = sum(p["durationMs"].get("triggerExecution", 0) for p in warm) / 1000
    return (f"Spark job {rows / max(seconds, 1e-9):,.0f} records/s over the micro-batches "
            f"after the first ({rows} records in {seconds:.1f} s; the first took "
            f"{progress[0]['durationMs'].get('triggerExecution', 0) / 1000:.1f} s)")


def print_table(rows: list[dict[str, object]], limit: int = 72) -> None:
    print(f"\n{'window':<8} {'page':<12} {'views':>7}")
    print(f"{'-' * 8} {'-' * 12} {'-' * 7}")
    for row in rows[:limit]:
        print(f"{row['window_start']!s:<8} {row['page']!s:<12} {row['views']:>7}")
    if len(rows) > limit:
        print(f"... {len(rows) - limit} more rows")


def run(records: int) -> int:
    check_environment()
    from pyspark.sql import SparkSession

    from sdk.spark import register

    work = Path(tempfile.mkdtemp(prefix="kafka-sdk-demo-"))
    spark = None
    broker = EmbeddedBroker(data_dir=work / "broker").start()
    try:
        bootstrap = broker.bootstrap_servers
        print(f"demo: reference broker on {bootstrap}; {records} page views to process")
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([NewTopic(EVENTS_TOPIC, num_partitions=6, replication_factor=1),
                                 NewTopic(RESULTS_TOPIC, num_partitions=3,
                                          replication_factor=1)]).raise_if_failed()

        spark = (SparkSession.builder.master("local[2]").appName("kafka-sdk-demo")
                 .config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.shuffle.partitions", "2")
                 .config("spark.sql.session.timeZone", "UTC")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)

        stats = ProducerStats()
        producer = threading.Thread(target=produce_events, args=(bootstrap, records, stats),
                                    name="demo-producer")
        began = time.perf_counter()
        query = start_streaming_job(spark, bootstrap, str(work / "checkpoint"), records)
        producer.start()
        producer.join()
        if stats.error is not None:
            raise stats.error
        query.processAllAvailable()  # everything produced has been counted and written
        stream_seconds = time.perf_counter() - began
        progress = [p for p in query.recentProgress if p["numInputRows"]]
        query.stop()

        latest, records_out = read_results(bootstrap)
        rows = sorted(latest.values(), key=lambda r: (str(r["window_start"]), str(r["page"])))
        print_table(rows)
        counted = sum(int(r["views"]) for r in rows)  # type: ignore[call-overload]
        print(f"\nsummary: records in {stats.sent}, records out {records_out} "
              f"({len(rows)} window/page counts), views counted {counted}")
        print(f"throughput: producer {stats.sent / max(stats.seconds, 1e-9):,.0f} records/s; "
              f"end to end {stats.sent / stream_seconds:,.0f} records/s "
              f"({stream_seconds:.1f} s, {len(progress)} micro-batches)")
        print(f"            {steady_rate(progress)}")
        if counted != stats.sent:
            print(f"demo: FAILED: the table counts {counted} views for {stats.sent} events")
            return 1
        print("demo: OK (every event counted exactly once)")
        return 0
    finally:
        if spark is not None:
            spark.stop()
        broker.close()
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000,
                        help="page views to produce (default 200000)")
    args = parser.parse_args(argv)
    if args.records < 1:
        parser.error("--records must be >= 1")
    return run(args.records)


if __name__ == "__main__":
    sys.exit(main())
