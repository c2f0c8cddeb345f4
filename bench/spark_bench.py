"""Spark through the kafka_sdk format against the plain SDK clients (the ceiling).

Same data, same broker, same run, interleaved rounds (this machine's CPU speed drifts):

* write: N rows of 100-byte values -- ``df.write.format("kafka_sdk")`` with local[2] against
  one SDK ``Producer`` (``send`` per record, and ``send_many``);
* read: the N records back -- ``spark.read.format("kafka_sdk")`` (summing the value lengths,
  so every row is materialised) against one SDK ``Consumer`` polling every partition.

The broker is the reference broker in its own process. Rates are rows/s, medians over the
rounds; the goal is Spark >= 0.5x the plain SDK.

    .venv/bin/python bench/spark_bench.py [--records 1000000] [--rounds 3] [--partitions 4]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ["PYTHONPATH"] = os.pathsep.join(
    dict.fromkeys([str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from sdk import AdminClient, Consumer, NewTopic, Producer, TopicPartition  # noqa: E402

VALUE_SIZE = 100


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_broker(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "server_ref", "--host", "127.0.0.1",
                             "--port", str(port), "--data-dir", str(data_dir)], cwd=ROOT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the reference broker did not start")


def value_of(i: int) -> bytes:
    return f"{i:010d}".encode() + b"x" * (VALUE_SIZE - 10)


def sdk_send(bootstrap: str, topic: str, n: int) -> None:
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        for i in range(n):
            producer.send(topic, value_of(i))
        producer.flush(timeout=300)


def sdk_send_many(bootstrap: str, topic: str, n: int) -> None:
    chunk = 10_000
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        for lo in range(0, n, chunk):
            producer.send_many(topic, [value_of(i) for i in range(lo, min(n, lo + chunk))])
        producer.flush(timeout=300)


def sdk_read(bootstrap: str, topic: str, partitions: int, n: int) -> None:
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    seen = size = 0
    with Consumer(bootstrap_servers=bootstrap, max_poll_records=10_000) as consumer:
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        while seen < n:
            for records in consumer.poll(timeout_ms=1000).values():
                seen += len(records)
                size += sum(len(r.value) for r in records)  # type: ignore[arg-type]
    assert seen == n and size == n * VALUE_SIZE


def spark_write(spark, bootstrap: str, topic: str, n: int) -> None:  # type: ignore[no-untyped-def]
    df = spark.range(0, n, 1, numPartitions=2).selectExpr(
        f"CAST(concat(lpad(CAST(id AS STRING), 10, '0'), repeat('x', {VALUE_SIZE - 10})) "
        "AS BINARY) AS value")
    (df.write.format("kafka_sdk").option("kafka.bootstrap.servers", bootstrap)
     .option("kafka.linger.ms", "5").option("topic", topic).mode("append").save())


def spark_read(spark, bootstrap: str, topic: str, n: int) -> None:  # type: ignore[no-untyped-def]
    row = (spark.read.format("kafka_sdk").option("kafka.bootstrap.servers", bootstrap)
           .option("subscribe", topic).load()
           .selectExpr("count(*) AS n", "sum(length(value)) AS size").collect()[0])
    assert row.n == n and (row.size or 0) == n * VALUE_SIZE, row


def timed(fn: Callable[[], None]) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()
    n, parts = args.records, args.partitions

    from pyspark.sql import SparkSession

    from sdk.spark import register

    work = Path(tempfile.mkdtemp(prefix="spark-bench-"))
    broker, bootstrap = start_broker(work / "broker")
    spark = None
    try:
        spark = (SparkSession.builder.master("local[2]").appName("kafka-sdk-spark-bench")
                 .config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.driver.memory", "2g").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        rates: dict[str, list[float]] = {k: [] for k in
                                         ("sdk send", "sdk send_many", "spark write",
                                          "sdk read", "spark read")}
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([NewTopic(f"bench-{r}-{w}", num_partitions=parts,
                                          replication_factor=1)
                                 for r in range(args.rounds)
                                 for w in ("send", "many", "spark")]
                                + [NewTopic("bench-warmup", num_partitions=parts,
                                            replication_factor=1)]).raise_if_failed()
        # Warm up: the first job of each kind starts Spark's Python workers (seconds).
        spark_read(spark, bootstrap, "bench-0-send", 0)
        spark_write(spark, bootstrap, "bench-warmup", 1000)
        for r in range(args.rounds):
            writes = [("sdk send", lambda r=r: sdk_send(bootstrap, f"bench-{r}-send", n)),
                      ("spark write", lambda r=r: spark_write(spark, bootstrap,
                                                              f"bench-{r}-spark", n)),
                      ("sdk send_many", lambda r=r: sdk_send_many(bootstrap,
                                                                  f"bench-{r}-many", n))]
            reads = [("sdk read", lambda r=r: sdk_read(bootstrap, f"bench-{r}-send", parts, n)),
                     ("spark read", lambda r=r: spark_read(spark, bootstrap,
                                                           f"bench-{r}-send", n))]
            if r % 2:  # alternate who goes first
                writes.reverse()
                reads.reverse()
            for name, fn in writes + reads:
                seconds = timed(fn)
                rates[name].append(n / seconds)
                print(f"round {r + 1}: {name:<14} {n / seconds:>10,.0f} rows/s "
                      f"({seconds:.1f} s)", flush=True)
        med = {k: statistics.median(v) for k, v in rates.items()}
        best_write = max(med["sdk send"], med["sdk send_many"])
        print(f"\n{n:,} records of {VALUE_SIZE} B, {parts} partitions, local[2], "
              f"medians of {args.rounds} rounds (rows/s)")
        print(f"| {'path':<14} | {'rows/s':>10} | vs plain SDK |")
        print(f"| {'-' * 14} | {'-' * 10} | {'-' * 12} |")
        for name, ceiling in (("sdk send", None), ("sdk send_many", None),
                              ("spark write", best_write), ("sdk read", None),
                              ("spark read", med["sdk read"])):
            ratio = f"{med[name] / ceiling:.2f}x" if ceiling else ""
            print(f"| {name:<14} | {med[name]:>10,.0f} | {ratio:>12} |")
        return 0
    finally:
        if spark is not None:
            spark.stop()
        broker.terminate()
        try:
            broker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            broker.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
