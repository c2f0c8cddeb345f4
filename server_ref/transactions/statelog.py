"""``__transaction_state``: the transaction coordinator's log, in Kafka's record layout.

Each transactional id's records go to partition ``abs(hashCode(id)) % partitions``
(``transaction.state.log.num.partitions``, default 50), compacted, so the last record per
id is its state. Layouts as Kafka's TransactionLog (documented in its
``TransactionLogKey``/``TransactionLogValue`` schemas, not among the client message schemas):

* key: version int16 (0), transactional id (int16-length string);
* value, version 0: producer id int64, producer epoch int16, transaction timeout int32,
  state int8, partitions (int32 count, null as -1; each topic string + int32 array of
  partition ids), last update time int64, start time int64.
* value, version 1: the same fields in the flexible encoding (compact strings and arrays,
  tagged-field sections), with tagged fields at the end: 0 PreviousProducerId int64,
  1 NextProducerId int64, 2 ClientTransactionVersion int16, 3 NextProducerEpoch int16
  (defaults -1, -1, 0, -1: a field at its default is not written).
A null value (tombstone) forgets the id.

We write version 1 and read both. PreviousProducerId carries what a KIP-360 retry needs
across a restart: after InitProducerId bumped the epoch of a producer that asked for it (its
id and epoch in the request), the value names that same producer id as the previous one,
and the epoch it replaced is the current one minus 1. A retry of that InitProducerId (the
answer was lost, the broker restarted meanwhile) then gets the bumped pair back instead of
PRODUCER_FENCED. Every other transition (a new instance, a fence, a new producer id) writes
no previous id, so an old instance stays fenced. (Kafka 4.3 reads its last epoch as
unknown after a coordinator move, and fences such a retry.) EndTxn v5 (transactions v2)
opens the same window for a retry of itself. When a v2 EndTxn used up the epochs, the value
names the id it handed out as NextProducerId until Complete*, then that id is current and
the old one is PreviousProducerId (Kafka's meanings). ClientTransactionVersion is the
transaction protocol the producer speaks (0 for v1 clients, 2 for v2), as Kafka records it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from sdk.errors import CoordinatorNotAvailableError, MalformedDataError
from sdk.protocol.primitives import write_uvarint
from sdk.records.builder import RecordBatchBuilder
from sdk.records.reader import RecordBatch
from server_ref.offsets_journal import append_as_leader, partition_for_group, replay_batches
from server_ref.topics import Partition, Topic
from server_ref.transactions.state import TxnMetadata, TxnState

if TYPE_CHECKING:
    from server_ref.broker import Broker

__all__ = ["STATE_TOPIC", "TransactionStateLog", "decode_key", "decode_value", "encode_key",
           "encode_value"]

STATE_TOPIC = "__transaction_state"
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">hqhib")  # version, producer id, epoch, timeout, state
_TIMES = struct.Struct(">qq")
_I64 = struct.Struct(">q")
VALUE_VERSION = 1
_TAG_PREVIOUS_PRODUCER_ID = 0
_TAG_NEXT_PRODUCER_ID = 1
_TAG_CLIENT_TRANSACTION_VERSION = 2


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _I16.pack(len(raw)) + raw


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(0) + _string(transactional_id)


def _compact_string(text: str) -> bytes:
    raw = text.encode("utf-8")
    out = bytearray()
    write_uvarint(out, len(raw) + 1)
    return bytes(out) + raw


def encode_value(meta: TxnMetadata, version: int = VALUE_VERSION) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, index in meta.sorted_partitions():
        by_topic.setdefault(topic, []).append(index)
    out = bytearray(_HEAD.pack(version, meta.producer_id, meta.producer_epoch,
                               meta.timeout_ms, int(meta.state)))
    if version == 0:
        out += _I32.pack(len(by_topic))
        for topic, indexes in by_topic.items():
            out += _string(topic)
            out += _I32.pack(len(indexes))
            out += struct.pack(f">{len(indexes)}i", *indexes)
        out += _TIMES.pack(meta.last_update_ms, meta.start_ms)
        return bytes(out)
    write_uvarint(out, len(by_topic) + 1)
    for topic, indexes in by_topic.items():
        out += _compact_string(topic)
        write_uvarint(out, len(indexes) + 1)
        out += struct.pack(f">{len(indexes)}i", *indexes)
        out.append(0)  # no tagged fields in a topic entry
    out += _TIMES.pack(meta.last_update_ms, meta.start_ms)
    tags: list[tuple[int, bytes]] = []
    if meta.last_epoch >= 0:  # the KIP-360 retry window (see the module docstring)
        tags.append((_TAG_PREVIOUS_PRODUCER_ID, _I64.pack(meta.producer_id)))
    elif meta.previous_producer_id >= 0:
        tags.append((_TAG_PREVIOUS_PRODUCER_ID, _I64.pack(meta.previous_producer_id)))
    if meta.next_producer_id >= 0:
        tags.append((_TAG_NEXT_PRODUCER_ID, _I64.pack(meta.next_producer_id)))
    if meta.client_version:
        tags.append((_TAG_CLIENT_TRANSACTION_VERSION, _I16.pack(meta.client_version)))
    write_uvarint(out, len(tags))
    for tag, raw in tags:
        write_uvarint(out, tag)
        write_uvarint(out, len(raw))
        out += raw
    return bytes(out)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: struct.Struct) -> tuple[int, ...]:
        if self.pos + fmt.size > len(self.data):
            raise MalformedDataError("transaction log record is truncated")
        out = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return out

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            if self.pos >= len(self.data):
                raise MalformedDataError("transaction log record is truncated")
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7

    def string(self, compact: bool) -> str:
        length = self.uvarint() - 1 if compact else self.take(_I16)[0]
        if length < 0 or self.pos + length > len(self.data):
            raise MalformedDataError("transaction log string is truncated")
        text = self.data[self.pos:self.pos + length].decode("utf-8")
        self.pos += length
        return text

    def count(self, compact: bool) -> int:
        return self.uvarint() - 1 if compact else self.take(_I32)[0]

    def skip_tags(self) -> None:
        self.tags()

    def tags(self) -> dict[int, bytes]:
        found: dict[int, bytes] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            size = self.uvarint()
            if self.pos + size > len(self.data):
                raise MalformedDataError("transaction log tagged field is truncated")
            found[tag] = self.data[self.pos:self.pos + size]
            self.pos += size
        return found


def decode_key(key: bytes) -> str:
    reader = _Reader(key)
    (version,) = reader.take(_I16)
    if version != 0:
        raise MalformedDataError(f"transaction log key version {version} is unknown")
    return reader.string(False)


def decode_value(transactional_id: str, value: bytes) -> TxnMetadata:
    reader = _Reader(value)
    version, pid, epoch, timeout, state = reader.take(_HEAD)
    if version not in (0, 1):
        raise MalformedDataError(f"transaction log value version {version} is unknown")
    compact = version >= 1
    partitions: set[tuple[str, int]] = set()
    for _ in range(max(0, reader.count(compact))):
        topic = reader.string(compact)
        for _ in range(max(0, reader.count(compact))):
            partitions.add((topic, reader.take(_I32)[0]))
        if compact:
            reader.skip_tags()
    last_update, start = reader.take(_TIMES)
    meta = TxnMetadata(transactional_id, pid, epoch, timeout, TxnState(state), partitions,
                       start_ms=start, last_update_ms=last_update)
    if compact:
        tags = reader.tags()
        previous = _int64_tag(tags, _TAG_PREVIOUS_PRODUCER_ID)
        if previous == pid and epoch > 0:
            meta.last_epoch = epoch - 1
        elif previous >= 0 and previous != pid:
            meta.previous_producer_id = previous
        meta.next_producer_id = _int64_tag(tags, _TAG_NEXT_PRODUCER_ID)
        client = tags.get(_TAG_CLIENT_TRANSACTION_VERSION)
        if client is not None and len(client) == 2:
            meta.client_version = _I16.unpack(client)[0]
    return meta


def _int64_tag(tags: dict[int, bytes], tag: int) -> int:
    raw = tags.get(tag)
    return _I64.unpack(raw)[0] if raw is not None and len(raw) == 8 else -1


class TransactionStateLog:
    """Appends and replays ``__transaction_state`` on the broker's partition logs."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def _topic(self, create: bool) -> Topic | None:
        topics = self.broker.topics
        topic = topics.get(STATE_TOPIC)
        if topic is None and create and self.broker.cluster is not None:
            # Cluster mode: the controller creates it (FindCoordinator asks for it).
            raise CoordinatorNotAvailableError(f"{STATE_TOPIC} does not exist yet")
        if topic is None and create:
            config = self.broker.config
            topic = topics.create(
                STATE_TOPIC, int(config.get("transaction.state.log.num.partitions")), 1,
                {"cleanup.policy": "compact",
                 "segment.bytes": str(config.get("transaction.state.log.segment.bytes"))},
                internal=True)
        return topic

    def partition_for(self, transactional_id: str) -> Partition:
        topic = self._topic(create=True)
        assert topic is not None
        return topic.partitions[partition_for_group(transactional_id, len(topic.partitions))]

    def partition_index(self, transactional_id: str) -> int:
        return self.partition_for(transactional_id).index

    def write(self, meta: TxnMetadata) -> None:
        """Append the id's state before the caller answers: the log writes straight to its
        files (``os.write``), so a killed broker process keeps the decision; fsync follows
        the broker's flush settings like every other log."""
        partition = self.partition_for(meta.transactional_id)
        builder = RecordBatchBuilder()
        builder.append(None, self.broker.now_ms(), encode_key(meta.transactional_id),
                       encode_value(meta))
        append_as_leader(self.broker, partition, builder)

    def write_tombstone(self, transactional_id: str) -> None:
        """Forget the id (compaction drops its records)."""
        partition = self.partition_for(transactional_id)
        builder = RecordBatchBuilder()
        builder.append(None, self.broker.now_ms(), encode_key(transactional_id), None)
        append_as_leader(self.broker, partition, builder)

    def replay(self, partition: Partition | None = None
               ) -> Iterator[tuple[str, TxnMetadata | None]]:
        """Every id's records in log order: of the whole topic, or of one ``partition``
        (cluster mode: the partitions this broker leads)."""
        topic = self._topic(create=False)
        if topic is None:
            return
        source: Any = topic if partition is None else _OnePartition(partition)
        for batch, first in replay_batches(source):
            if isinstance(batch, RecordBatch) and batch.is_control:
                continue
            for record in batch.records():
                if record.key is None or record.offset < first:
                    continue
                txn_id = decode_key(record.key)
                yield txn_id, (None if record.value is None
                               else decode_value(txn_id, record.value))


class _OnePartition:
    """What ``replay_batches`` reads of a topic, narrowed to one partition."""

    def __init__(self, partition: Partition) -> None:
        self.partitions = [partition]
