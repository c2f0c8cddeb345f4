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

import sys

try:
    import pyarrow  # noqa: F401  (PySpark's Python data sources exchange Arrow batches)
    import pyspark  # noqa: F401
except ImportError as exc:
    # Seen most often in Spark's Python workers: they run PYSPARK_PYTHON (default: the
    # first `python3` on PATH), not the driver's interpreter, so name the one running.
    raise ImportError(
        f"sdk.spark needs PySpark >= 4.0 and pyarrow, and {exc.name} is missing in the "
        f"Python running here: {sys.executable} (Python {sys.version.split()[0]}). "
        "If this is a Spark Python worker, point Spark at an interpreter that has "
        "kafka-sdk[spark] installed (such as the driver's) with the PYSPARK_PYTHON "
        "environment variable or the spark.pyspark.python setting; otherwise "
        "pip install 'kafka-sdk[spark]' into this one.",
        name=exc.name,
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
