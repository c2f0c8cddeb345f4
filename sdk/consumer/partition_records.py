"""The records of one partition from one Fetch response, handed out in order. Pure, no IO.

:class:`PartitionRecords` walks the response's record batches lazily (v2 batches in every
codec and legacy magic 0/1 message sets, through :mod:`sdk.records`):

* records before the fetch offset are dropped (a compressed batch or a legacy wrapper may
  start before it);
* control batches (transaction markers) are never handed out;
* under read_committed, batches of transactions the response lists as aborted are dropped
  (Kafka's rule: a producer's transactional batches are skipped from the aborted
  transaction's first offset until its ABORT marker);
* ``next_offset`` is where the consumer stands after what it handed out: past a fully
  consumed batch it is the batch's end, so compaction gaps and markers are stepped over.

Errors are typed and keep the position on the bad spot, so a retry (or a seek past it)
behaves predictably: a failed CRC or undecodable batch raises CorruptRecordError /
MalformedDataError; a failing deserializer raises :class:`RecordDeserializationError`.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from sdk.consumer.errors import RecordDeserializationError
from sdk.errors import KafkaError
from sdk.records import ControlType, iter_batches
from sdk.records.consumer_records import decode_consumer_records
from sdk.records.legacy import LegacyBatch
from sdk.records.reader import RecordBatch
from sdk.types import ConsumerRecord, TimestampType, TopicPartition

log = logging.getLogger(__name__)

Deserializer = Callable[[bytes | None], Any]

_TIMESTAMP_TYPES = {t.value: t for t in TimestampType}


class PartitionRecords:
    """Fetched data of one partition; hand records out with :meth:`drain`."""

    def __init__(
        self,
        tp: TopicPartition,
        fetch_offset: int,
        data: bytes | bytearray | memoryview | None,
        *,
        epoch: int = 0,
        aborted_transactions: Iterable[tuple[int, int]] | None = None,
        read_committed: bool = False,
        check_crcs: bool = True,
        key_deserializer: Deserializer | None = None,
        value_deserializer: Deserializer | None = None,
    ) -> None:
        self.tp = tp
        self.epoch = epoch  # the subscription's partition epoch when the fetch was sent
        self.fetch_offset = fetch_offset
        self.next_offset = fetch_offset
        self.leader_epoch: int | None = None
        self.size = len(data) if data else 0
        self._batches: Iterator[RecordBatch | LegacyBatch] = iter(iter_batches(data or b""))
        self._check_crcs = check_crcs
        self._key_deserializer = key_deserializer
        self._value_deserializer = value_deserializer
        self._read_committed = read_committed
        # Aborted transactions not yet reached, as a heap by first offset; producers whose
        # aborted transaction has started and whose ABORT marker has not been seen yet.
        self._aborted: list[tuple[int, int]] = [
            (first, pid) for pid, first in aborted_transactions or ()
        ] if read_committed else []
        heapq.heapify(self._aborted)
        self._aborting: set[int] = set()
        # The current batch's records, built (raw keys and values) when the batch is reached.
        self._records: list[ConsumerRecord] = []
        self._index = 0
        self._batch_end = fetch_offset  # next offset after the batch in _records
        self._batch_leader_epoch: int | None = None
        self._error: KafkaError | None = None  # sticky: raised until the consumer seeks
        self._exhausted = False

    @property
    def exhausted(self) -> bool:
        """Nothing more will come out (all handed out, or the data ended)."""
        return self._error is None and self._exhausted and self._index >= len(self._records)

    @property
    def failed(self) -> bool:
        """A bad batch or record was reached; :meth:`drain` raises until a seek."""
        return self._error is not None

    # ---------------------------------------------------------------- batch walking

    def _load_next(self) -> bool:
        """Move to the next batch holding records to hand out; False when the data ends.

        Skipped batches (markers, aborted) move ``next_offset`` forward at once.
        """
        for batch in self._batches:
            if self._check_crcs:
                batch.validate_crc()
            end = batch.next_offset
            if end <= self.next_offset:
                continue  # wholly before the fetch offset
            if batch.is_control:
                self._on_control(batch)
                self.next_offset = end
                continue
            if self._aborted or self._aborting:
                if self._is_aborted(batch):
                    self.next_offset = end
                    continue
            position = self.next_offset
            if type(batch) is RecordBatch:
                records = decode_consumer_records(batch, self.tp.topic, self.tp.partition)
            else:
                records = self._legacy_records(batch)
            if records and records[0].offset < position:
                records = [r for r in records if r.offset >= position]
            epoch = batch.partition_leader_epoch
            self._batch_leader_epoch = epoch if epoch >= 0 else None
            self._records = records
            self._index = 0
            self._batch_end = end
            if records:
                return True
            self.next_offset = end  # all compacted away
        self._exhausted = True
        return False

    def _legacy_records(self, batch: RecordBatch | LegacyBatch) -> list[ConsumerRecord]:
        topic, partition = self.tp.topic, self.tp.partition
        ts_type = _TIMESTAMP_TYPES[int(batch.timestamp_type)]
        epoch = batch.partition_leader_epoch
        leader_epoch = epoch if epoch >= 0 else None
        return [
            ConsumerRecord(topic, partition, offset, key, value, headers, ts, ts_type,
                           -1 if key is None else len(key),
                           -1 if value is None else len(value), leader_epoch)
            for offset, ts, key, value, headers in batch.records()
        ]

    def _on_control(self, batch: RecordBatch | LegacyBatch) -> None:
        if not self._aborting or batch.producer_id not in self._aborting:
            return
        try:
            marker = batch.control_record()
        except KafkaError as exc:
            log.warning("%s: undecodable control batch at %d: %s", self.tp, batch.base_offset, exc)
            return
        if marker.type == ControlType.ABORT:
            self._aborting.discard(batch.producer_id)

    def _is_aborted(self, batch: RecordBatch | LegacyBatch) -> bool:
        aborted = self._aborted
        while aborted and aborted[0][0] <= batch.last_offset:
            self._aborting.add(heapq.heappop(aborted)[1])
        return batch.is_transactional and batch.producer_id in self._aborting

    # ---------------------------------------------------------------------- draining

    def drain(self, max_records: int) -> list[ConsumerRecord[Any, Any]]:
        """Up to ``max_records`` records, in offset order; ``next_offset`` moves past them.

        Once a bad batch or record is reached, the records before it are returned and every
        later call raises the error (the position stays on the bad spot until a seek).
        """
        if self._error is not None:
            raise self._error
        out: list[ConsumerRecord[Any, Any]] = []
        while len(out) < max_records:
            if self._index >= len(self._records):
                if self._records:
                    self.next_offset = self._batch_end
                    self._records = []
                if self._exhausted or not self._load_next_guarded():
                    break
            start = self._index
            records = self._records
            stop = min(len(records), start + max_records - len(out))
            chunk = records if start == 0 and stop == len(records) else records[start:stop]
            if self._key_deserializer is not None or self._value_deserializer is not None:
                chunk = self._deserialize(chunk)
            if out:
                out.extend(chunk)
            else:
                out = chunk
            self._index = start + len(chunk)
            if chunk:
                self.next_offset = chunk[-1].offset + 1
                self.leader_epoch = self._batch_leader_epoch
            if self._error is not None:
                break
        if self._error is not None and not out:
            raise self._error
        self._step_over_finished_batch()
        return out

    def _load_next_guarded(self) -> bool:
        try:
            return self._load_next()
        except KafkaError as exc:
            self._error = exc
            return False

    def _step_over_finished_batch(self) -> None:
        # After the last record of a batch, look ahead so markers and aborted batches that
        # follow are stepped over now (the committed position then passes them, and lag
        # reads 0). An error found while looking ahead is raised by the next drain.
        if self._error is not None or self._index < len(self._records):
            return
        if self._records:
            self.next_offset = self._batch_end
            self._records = []
        if not self._exhausted:
            self._load_next_guarded()

    def _deserialize(self, chunk: list[ConsumerRecord]) -> list[ConsumerRecord[Any, Any]]:
        """Apply the deserializers in place; at a failure, keep the records before it and
        set the error (the failing record is left untouched)."""
        kd, vd = self._key_deserializer, self._value_deserializer
        # The records come in as ConsumerRecord[bytes, bytes] and leave holding whatever the
        # deserializers return (Any here; the consumer's K and V type them for the user).
        for i, rec in enumerate(chunk):
            try:
                k = kd(rec.key) if kd is not None else rec.key
            except Exception as exc:
                self._error = RecordDeserializationError(self.tp, rec.offset, "key", exc)
                return chunk[:i]
            try:
                v = vd(rec.value) if vd is not None else rec.value
            except Exception as exc:
                self._error = RecordDeserializationError(self.tp, rec.offset, "value", exc)
                return chunk[:i]
            rec.key = k
            rec.value = v
        return chunk

    def __repr__(self) -> str:
        return (f"PartitionRecords({self.tp}, fetch_offset={self.fetch_offset}, "
                f"next_offset={self.next_offset}, size={self.size})")
