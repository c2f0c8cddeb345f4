"""PySpark source and sink on the SDK (extra ``spark``: PySpark >= 4.0 with pyarrow).

::

    from sdk.spark import register, foreach_batch_sink
    register(spark)                                   # the "kafka_sdk" format
    df = (spark.read.format("kafka_sdk")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())      # Spark's Kafka schema
    query = (stream_df.writeStream
             .foreachBatch(foreach_batch_sink(bootstrap_servers="127.0.0.1:9092",
                                              topic="results"))
             .start())

The options, columns and behaviour follow Spark's built-in ``kafka`` format; see
the README's Spark section for the table and the differences.
"""

from __future__ import annotations

try:
    import pyarrow  # noqa: F401  (PySpark's Python data sources exchange Arrow batches)
    import pyspark  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"sdk.spark needs PySpark >= 4.0 and pyarrow ({exc.name} is missing): "
        "pip install 'kafka-sdk[spark]'"
    ) from exc

from sdk.spark.errors import DataLossError, DeliveryFailedError, OffsetNotFoundError
from sdk.spark.foreach import foreach_batch_sink, register
from sdk.spark.schema import source_schema
from sdk.spark.source import FORMAT_NAME, KafkaSdkDataSource

__all__ = [
    "FORMAT_NAME",
    "DataLossError",
    "DeliveryFailedError",
    "KafkaSdkDataSource",
    "OffsetNotFoundError",
    "foreach_batch_sink",
    "register",
    "source_schema",
]
