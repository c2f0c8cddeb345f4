"""Batch reads and writes with the kafka_sdk format, against an embedded reference broker.

    python examples/spark_batch_io.py

Writes a small DataFrame (key, value, headers) to a topic, reads it back with Spark's Kafka
schema, then reads only an offset range and only a time range.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT))
# Spark's Python workers must run this interpreter and find this project.
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYTHONPATH"] = os.pathsep.join(
    dict.fromkeys([str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]))

from sdk import AdminClient, NewTopic  # noqa: E402
from server_ref import EmbeddedBroker  # noqa: E402


def main() -> None:
    from pyspark.sql import SparkSession

    from sdk.spark import register

    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([NewTopic("orders", num_partitions=2)]).raise_if_failed()

        spark = (SparkSession.builder.master("local[2]").appName("kafka-sdk-batch-example")
                 .config("spark.ui.showConsoleProgress", "false").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        try:
            before = int(time.time() * 1000)
            orders = spark.createDataFrame(
                [(f"customer-{i % 3}", f'{{"order": {i}, "amount": {10 * i}}}',
                  [("source", b"example")]) for i in range(12)],
                "key string, value string, headers array<struct<key: string, value: binary>>")
            (orders.write.format("kafka_sdk").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", "orders").mode("append").save())

            def read(**options: str):  # type: ignore[no-untyped-def]
                return (spark.read.format("kafka_sdk")
                        .option("kafka.bootstrap.servers", bootstrap)
                        .option("subscribe", "orders").options(**options).load())

            print("everything, with headers:")
            (read(includeHeaders="true")
             .selectExpr("partition", "offset", "CAST(key AS STRING) AS key",
                         "CAST(value AS STRING) AS value", "headers[0].key AS header")
             .orderBy("partition", "offset").show(truncate=False))

            print("partition 0 from offset 1 up to (not including) 3; partition 1 from offset 2 on:")
            (read(startingOffsets='{"orders": {"0": 1, "1": 2}}',
                  endingOffsets='{"orders": {"0": 3, "1": -1}}')
             .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
             .orderBy("partition", "offset").show(truncate=False))

            print("records written since the start of this run, counted per key:")
            (read(startingTimestamp=str(before)).groupBy("key").count()
             .selectExpr("CAST(key AS STRING) AS key", "count").orderBy("key").show())
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
