"""Exactly-once writes of micro-batches: each task's rows in one Kafka transaction.

Spark's own Kafka sink is at-least-once: a micro-batch that fails after some of its tasks
wrote (or a query killed between the write and Spark's commit of the batch) is run again
from the checkpoint, and the records the first run wrote are written a second time. With
``exactlyOnce`` this sink writes every task's rows in a transaction and commits, *in the
same transaction*, a marker saying "micro-batch B of partition P is written":

* the transactional id is ``kafka-sdk-spark-<query id>-<task partition>``: a task attempt
  calls ``init_transactions``, which aborts whatever an earlier attempt of the same
  partition left open (a zombie, a speculative copy, a killed executor) and fences it;
* the marker is a committed offset, ``B + 1``, of a consumer group named
  ``kafka-sdk-spark-<query id>-<task partition>`` on partition 0 of the first record's
  topic (``send_offsets_to_transaction``): it becomes visible exactly when the records do;
* before writing, the task reads the marker (a stable read, after ``init_transactions``):
  when it is already past B, this partition of this batch was committed by an earlier run,
  and the task writes nothing.

So a replayed micro-batch writes each partition's rows once, however often it is run, and
``read_committed`` readers never see a record twice or a record of an unfinished run.

What it relies on: a replayed micro-batch gives each task partition the same rows (true
for the ``kafka_sdk`` and Kafka sources, whose offset ranges come from the checkpoint, and
deterministic transformations; a shuffle with a non-deterministic order or a changed
partition count breaks it).

Its cost: per task and micro-batch, a transaction (InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit, EndTxn: ~6 round trips to the brokers, plus a commit
marker written to every partition the task wrote), one consumer group per task partition
holding one committed offset, and readers must use ``read_committed`` (their records
arrive once the task's transaction commits, not as they are written).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from sdk.errors import ConfigError

if TYPE_CHECKING:
    from sdk.spark.options import SinkOptions

__all__ = ["BATCH_ID_PROPERTY", "QUERY_ID_PROPERTY", "TaskIdentity", "task_identity",
           "write_exactly_once"]

log = logging.getLogger("sdk.spark")

# Spark's local properties for a streaming query's jobs (StreamExecution.QUERY_ID_KEY,
# MicroBatchExecution.BATCH_ID_KEY); tasks see them through TaskContext.
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
_TIMEOUT_S = 120.0


class TaskIdentity:
    """Which query, micro-batch and task partition a task writes for."""

    __slots__ = ("batch_id", "partition", "query_id")

    def __init__(self, query_id: str, batch_id: int, partition: int) -> None:
        self.query_id = query_id
        self.batch_id = batch_id
        self.partition = partition

    @property
    def transactional_id(self) -> str:
        return f"kafka-sdk-spark-{self.query_id}-{self.partition}"

    group_id = transactional_id  # the marker's group: one per query and task partition


def task_identity(options: SinkOptions) -> TaskIdentity:
    """The identity of the running task: the query and batch ids from the options (the
    foreachBatch path passes them) or from Spark's local properties (streaming writes)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        raise ConfigError("exactlyOnce writes run in Spark tasks only", key="exactlyOnce")
    query_id = options.query_id or context.getLocalProperty(QUERY_ID_PROPERTY)
    batch = options.batch_id
    if batch is None:
        text = context.getLocalProperty(BATCH_ID_PROPERTY)
        batch = int(text) if text is not None else None
    if not query_id or batch is None:
        raise ConfigError("exactlyOnce needs a streaming query (its query id and batch id "
                          "key the transactions); a batch write has neither",
                          key="exactlyOnce", value=True)
    return TaskIdentity(query_id, batch, context.partitionId())


def write_exactly_once(options: SinkOptions, who: TaskIdentity,
                       records: Iterable[tuple[str, bytes | None, bytes | None,
                                               list[tuple[str, bytes | None]] | None,
                                               int | None]]) -> int:
    """Write ``records`` (topic, key, value, headers, partition) in one transaction with
    the batch marker; returns how many were written (0 when this partition of this batch
    was committed before, or has no rows)."""
    from sdk.consumer import Consumer
    from sdk.producer import Producer
    from sdk.types import OffsetAndMetadata, TopicPartition

    it = iter(records)
    first = next(it, None)
    if first is None:
        return 0  # nothing to write: a replay of an empty partition is empty too
    marker = TopicPartition(first[0], 0)
    config = {**options.producer_config, "transactional.id": who.transactional_id}
    with Producer(config) as producer:
        producer.init_transactions(timeout=_TIMEOUT_S)  # fences an earlier attempt
        connection = {k: v for k, v in options.producer_config.items()
                      if k == "bootstrap.servers" or k.startswith(("security.", "ssl.", "sasl."))}
        with Consumer(config={**connection, "group.id": who.group_id,
                              "enable.auto.commit": "false"}) as reader:
            done = reader.committed(marker)
        if done is not None and done.offset > who.batch_id:
            log.info("micro-batch %s partition %s was written before (query %s): skipped",
                     who.batch_id, who.partition, who.query_id)
            return 0
        written = 0
        with producer.transaction(timeout=_TIMEOUT_S):
            for topic, key, value, headers, partition in itertools.chain([first], it):
                producer.send(topic, value, key=key, headers=headers, partition=partition)
                written += 1
            producer.send_offsets_to_transaction(
                {marker: OffsetAndMetadata(who.batch_id + 1, f"batch {who.batch_id}")},
                who.group_id, timeout=_TIMEOUT_S)
        return written


