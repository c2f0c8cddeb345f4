"""Registration of the format, and ``foreach_batch_sink`` for ``writeStream.foreachBatch``."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from sdk.errors import ConfigError
from sdk.spark.options import parse_sink_options
from sdk.spark.source import FORMAT_NAME, KafkaSdkDataSource

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_registered: weakref.WeakSet[Any] = weakref.WeakSet()
_registered_lock = threading.Lock()


def register(spark: SparkSession) -> None:
    """Register the ``kafka_sdk`` data source with ``spark``; later calls for the same
    session do nothing."""
    with _registered_lock:
        if spark in _registered:
            return
        spark.dataSource.register(KafkaSdkDataSource)
        _registered.add(spark)


def _producer_option(name: str, value: Any) -> tuple[str, str]:
    # Kafka's setting names have no underscores, so linger_ms can only mean linger.ms.
    key = name if "." in name else name.replace("_", ".")
    text = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return f"kafka.{key}", text


def sink_options(bootstrap_servers: str, topic: str | None,
                 config: Mapping[str, Any] | None, producer_config: Mapping[str, Any]
                 ) -> dict[str, str]:
    """The ``kafka_sdk`` write options for these settings, validated."""
    options: dict[str, str] = {"kafka.bootstrap.servers": bootstrap_servers}
    if topic is not None:
        options["topic"] = topic
    for name, value in {**(config or {}), **producer_config}.items():
        key, text = _producer_option(name, value)
        options[key] = text
    parse_sink_options(options)  # fail now on forbidden or malformed settings
    return options


def foreach_batch_sink(
    bootstrap_servers: str,
    topic: str | None = None,
    config: Mapping[str, Any] | None = None,
    *,
    exactly_once: bool = False,
    **producer_config: Any,
) -> Callable[[DataFrame, int], None]:
    """A function for ``writeStream.foreachBatch`` that writes each micro-batch to Kafka.

    The micro-batch needs the sink columns (``value``; optionally ``key``, ``topic`` unless
    ``topic`` is given here, ``partition``, ``headers``). Its rows are written from the
    executors by the ``kafka_sdk`` batch writer, one producer per task, and are never
    collected to the driver. ``producer_config`` takes producer settings with underscores
    (``linger_ms=5``), ``config`` the same with Kafka's dotted names. They are validated
    here, so a mistake fails before the query starts.

    ``exactly_once=True``: each task writes its rows in a transaction keyed by the query
    id, the batch id and the task partition, so a micro-batch replayed after a failure
    (between the write and Spark's commit of the batch) leaves no duplicate for
    ``read_committed`` readers. Costs a transaction per task and micro-batch; see
    :mod:`sdk.spark.exactly_once` for the guarantee and what it relies on.
    """
    options = sink_options(bootstrap_servers, topic, config, producer_config)
    if exactly_once:
        options["exactlyOnce"] = "true"

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        register(batch.sparkSession)
        batch_options = dict(options)
        if exactly_once:
            query_id = batch.sparkSession.sparkContext.getLocalProperty(
                "sql.streaming.queryId")
            if not query_id:
                raise ConfigError("exactly_once needs foreachBatch of a streaming query",
                                  key="exactly_once", value=True)
            batch_options["exactlyOnce.queryId"] = query_id
            batch_options["exactlyOnce.batchId"] = str(batch_id)
        batch.write.format(FORMAT_NAME).options(**batch_options).mode("append").save()

    write_batch.__name__ = f"kafka_sdk_sink_{topic or 'topic_column'}"
    return write_batch
