"""Transactions end to end: the transactional producer, read_committed readers, offsets
committed in a transaction (KIP-447), zombie fencing and the coordinator's timeout abort.

Runs on every ``broker`` target. tansu accepts the transactional requests but does not
isolate: its read_committed fetches return aborted records too, it does not check the
group generation of TxnOffsetCommit (and reports generation 0), and it closes the
connection of a fenced producer's EndTxn instead of answering PRODUCER_FENCED. Those
differences are asserted where they occur (``TANSU``)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from sdk.consumer import Consumer
from sdk.errors import (
    IllegalStateError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaError,
    ProducerFencedError,
    TransactionAbortableError,
)
from sdk.producer import Producer
from sdk.types import OffsetAndMetadata, TopicPartition

from .conftest import Target, new_topic


def _txn_id() -> str:
    return f"txn-{uuid.uuid4().hex[:10]}"


def _producer(broker: Target, txn_id: str, **kwargs: Any) -> Producer[Any, Any]:
    return Producer(bootstrap_servers=broker.bootstrap_servers, transactional_id=txn_id,
                    linger_ms=2, **kwargs)


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str,
             idle_s: float = 1.5) -> list[tuple[int, bytes | None]]:
    """Every record a reader with ``isolation`` sees, as (partition, value), per partition
    in order: read from the start until the end offsets (the LSO under read_committed)
    are reached and nothing new arrived for ``idle_s``."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    out: list[tuple[int, bytes | None]] = []
    with Consumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                  auto_offset_reset="earliest", enable_auto_commit=False) as c:
        c.assign(tps)
        ends = c.end_offsets(tps)
        last = time.monotonic()
        deadline = last + 30
        while time.monotonic() < deadline:
            got = c.poll(timeout_ms=200)
            for recs in got.values():
                out.extend((r.partition, r.value) for r in recs)
                last = time.monotonic()
            done = all(c.position(tp) >= ends[tp] for tp in tps)
            if done and time.monotonic() - last > idle_s:
                break
    return out


def _isolates(broker: Target) -> bool:
    """False on tansu: aborted records reach read_committed readers (see the docstring)."""
    return broker.name != "tansu"


@pytest.fixture
def txn_topic(broker: Target) -> str:
    name = new_topic("txn")
    broker.create_topic(name, 3)
    return name


def test_commit_and_abort_across_partitions(broker: Target, txn_topic: str) -> None:
    """Committed transactions are seen by both readers; aborted ones only by
    read_uncommitted readers; control records never reach the application."""
    with _producer(broker, _txn_id()) as p:
        p.init_transactions(timeout=30)
        with p.transaction():
            for i in range(30):
                p.send(txn_topic, f"c1-{i}".encode(), partition=i % 3)
        p.begin_transaction()
        for i in range(30):
            p.send(txn_topic, f"a-{i}".encode(), partition=i % 3)
        p.flush(timeout=30)  # written to the log, then aborted
        p.abort_transaction(timeout=30)
        with pytest.raises(IllegalStateError):
            p.send(txn_topic, b"outside a transaction")
        with p.transaction():
            p.send_many(txn_topic, [f"c2-{i}".encode() for i in range(30)], partition=1)
    committed = read_all(broker.bootstrap_servers, txn_topic, 3, "read_committed")
    values = sorted(v.decode() for _, v in committed if v is not None)
    aborted = [f"a-{i}" for i in range(30)]
    wanted = [f"c1-{i}" for i in range(30)] + [f"c2-{i}" for i in range(30)]
    if not _isolates(broker):  # TANSU: the aborted transaction is read as committed
        assert values == sorted(wanted + aborted)
        return
    assert values == sorted(wanted)
    uncommitted = read_all(broker.bootstrap_servers, txn_topic, 3, "read_uncommitted")
    assert sorted(v.decode() for _, v in uncommitted if v is not None) == sorted(
        values + aborted)
    # Per partition, committed records keep their send order.
    p1 = [v.decode() for part, v in committed if part == 1 and v is not None]
    assert [v for v in p1 if v.startswith("c2-")] == [f"c2-{i}" for i in range(30)]


def test_exception_in_block_aborts(broker: Target, txn_topic: str) -> None:
    with _producer(broker, _txn_id()) as p:
        p.init_transactions(timeout=30)
        with pytest.raises(RuntimeError, match="boom"), p.transaction():
            p.send(txn_topic, b"never-visible", partition=0)
            p.flush(timeout=30)
            raise RuntimeError("boom")
        with p.transaction():  # usable again
            p.send(txn_topic, b"visible", partition=0)
    seen = [v for _, v in read_all(broker.bootstrap_servers, txn_topic, 3, "read_committed")]
    assert seen == ([b"visible"] if _isolates(broker) else [b"never-visible", b"visible"])


def test_open_transaction_hides_later_records(broker: Target, txn_topic: str) -> None:
    """read_committed stops at the last stable offset: a non-transactional record written
    after an open transaction's first record is not returned until the transaction ends."""
    if not _isolates(broker):  # TANSU: holds an open transaction back, shows it aborted
        with _producer(broker, _txn_id()) as p:
            p.init_transactions(timeout=30)
            p.begin_transaction()
            p.send(txn_topic, b"in-txn", partition=0).result(timeout=30)
            assert read_all(broker.bootstrap_servers, txn_topic, 1, "read_committed",
                            idle_s=0.5) == []
            p.abort_transaction(timeout=30)
        assert read_all(broker.bootstrap_servers, txn_topic, 1, "read_committed",
                        idle_s=0.5) == [(0, b"in-txn")]
        return
    with _producer(broker, _txn_id()) as p, \
            Producer(bootstrap_servers=broker.bootstrap_servers) as plain:
        p.init_transactions(timeout=30)
        p.begin_transaction()
        p.send(txn_topic, b"in-txn", partition=0).result(timeout=30)
        plain.send(txn_topic, b"plain-after", partition=0).result(timeout=30)
        assert read_all(broker.bootstrap_servers, txn_topic, 1, "read_committed",
                        idle_s=0.5) == []
        assert [v for _, v in read_all(broker.bootstrap_servers, txn_topic, 1,
                                       "read_uncommitted", idle_s=0.5)] == [
            b"in-txn", b"plain-after"]
        p.commit_transaction(timeout=30)
    assert [v for _, v in read_all(broker.bootstrap_servers, txn_topic, 1,
                                   "read_committed")] == [b"in-txn", b"plain-after"]


def test_zombie_is_fenced(broker: Target, txn_topic: str) -> None:
    """A second producer with the same transactional id fences the first: its commit
    raises ProducerFencedError (fatal), its open transaction is aborted."""
    txn_id = _txn_id()
    with _producer(broker, txn_id) as zombie:
        zombie.init_transactions(timeout=30)
        zombie.begin_transaction()
        zombie.send(txn_topic, b"zombie", partition=0).result(timeout=30)
        with _producer(broker, txn_id) as fresh:
            fresh.init_transactions(timeout=30)
            with fresh.transaction():
                fresh.send(txn_topic, b"fresh", partition=0)
            if not _isolates(broker):  # TANSU: closes the connection instead of answering
                with pytest.raises(KafkaError):
                    zombie.commit_transaction(timeout=5)
                return
            with pytest.raises(ProducerFencedError) as info:
                zombie.commit_transaction(timeout=30)
            assert "fatal" in str(info.value) or info.value.errno in (47, 90)
            with pytest.raises(ProducerFencedError, match="fatal"):
                zombie.begin_transaction()
    seen = [v for _, v in read_all(broker.bootstrap_servers, txn_topic, 3, "read_committed")]
    assert seen == [b"fresh"]


def test_offsets_committed_with_the_transaction(broker: Target, txn_topic: str) -> None:
    """send_offsets_to_transaction: offsets become the group's committed offsets only when
    the transaction commits."""
    group = f"g-{uuid.uuid4().hex[:8]}"
    tp = TopicPartition(txn_topic, 0)
    with Producer(bootstrap_servers=broker.bootstrap_servers) as plain:
        for i in range(10):
            plain.send(txn_topic, f"in-{i}".encode(), partition=0)
        plain.flush(timeout=30)
    with Consumer(txn_topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                  auto_offset_reset="earliest", enable_auto_commit=False,
                  isolation_level="read_committed") as c, \
            _producer(broker, _txn_id()) as p:
        p.init_transactions(timeout=30)
        got: list[Any] = []
        deadline = time.monotonic() + 60
        while len(got) < 10 and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                got.extend(recs)
        assert len(got) == 10
        meta = c.group_metadata()
        # TANSU: its first generation is 0 (Kafka's is 1).
        assert meta.group_id == group and meta.member_id
        assert meta.generation_id >= (1 if _isolates(broker) else 0)
        p.begin_transaction()
        p.send(txn_topic, b"out", partition=1)
        p.send_offsets_to_transaction({tp: OffsetAndMetadata(5)}, meta, timeout=30)
        p.abort_transaction(timeout=30)
        assert c.committed(tp) is None
        with p.transaction():
            p.send(txn_topic, b"out", partition=1)
            p.send_offsets_to_transaction({tp: 10}, c.group_metadata(), timeout=30)
        committed = c.committed(tp)
        assert committed is not None and committed.offset == 10


def test_stale_generation_is_fenced(broker: Target, txn_topic: str) -> None:
    """KIP-447: offsets sent with a generation the group has moved past are refused; the
    transaction must abort (TransactionAbortableError on commit), then the producer goes on."""
    group = f"g-{uuid.uuid4().hex[:8]}"
    tp = TopicPartition(txn_topic, 0)
    with Consumer(txn_topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                  enable_auto_commit=False) as c, _producer(broker, _txn_id()) as p:
        p.init_transactions(timeout=30)
        deadline = time.monotonic() + 60
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(timeout_ms=200)
        meta = c.group_metadata()
        stale = type(meta)(meta.group_id, meta.generation_id - 1 if meta.generation_id > 1
                           else meta.generation_id + 5, meta.member_id, None)
        p.begin_transaction()
        p.send(txn_topic, b"out", partition=1)
        if not _isolates(broker):  # TANSU: the generation is not checked
            p.send_offsets_to_transaction({tp: 3}, stale, timeout=30)
            p.abort_transaction(timeout=30)
            return
        with pytest.raises(KafkaError) as info:
            p.send_offsets_to_transaction({tp: 3}, stale, timeout=30)
        assert getattr(info.value, "name", "") == "ILLEGAL_GENERATION"
        with pytest.raises(TransactionAbortableError):
            p.commit_transaction(timeout=30)
        p.abort_transaction(timeout=30)
        with p.transaction():
            p.send_offsets_to_transaction({tp: 3}, c.group_metadata(), timeout=30)
        committed = c.committed(tp)
        assert committed is not None and committed.offset == 3


def test_transaction_left_open_is_aborted_by_its_timeout(broker: Target, txn_topic: str
                                                         ) -> None:
    """The coordinator aborts a transaction older than transaction_timeout_ms (it checks
    every 10 s by default) and bumps the epoch: the late commit is fenced (fatal)."""
    with _producer(broker, _txn_id(), transaction_timeout_ms=1000) as p, \
            Producer(bootstrap_servers=broker.bootstrap_servers) as plain:
        p.init_transactions(timeout=30)
        p.begin_transaction()
        p.send(txn_topic, b"timed-out", partition=0).result(timeout=30)
        plain.send(txn_topic, b"after", partition=0).result(timeout=30)
        seen: list[bytes | None] = []
        deadline = time.monotonic() + (60 if _isolates(broker) else 8)
        while not seen and time.monotonic() < deadline:
            seen = [v for _, v in read_all(broker.bootstrap_servers, txn_topic, 1,
                                           "read_committed", idle_s=0.2)]
        # TANSU: nothing aborts the transaction (no timeout), so the LSO never moves on.
        if not _isolates(broker):
            assert seen == []
            return
        assert seen == [b"after"]
        fenced: tuple[type[Exception], ...] = (ProducerFencedError, InvalidProducerEpochError)
        if p._core._manager().protocol == 2:
            # Transactions v2 (Apache Kafka at transaction.version 2, our broker): the
            # timeout's abort bumped the epoch by one, so the coordinator takes our EndTxn
            # (epoch - 1) for one asking again about the transaction it ended, and a commit
            # of what it aborted is INVALID_TXN_STATE, fatal as well.
            fenced = (InvalidTxnStateError,)
        with pytest.raises(fenced):
            p.commit_transaction(timeout=30)


def test_offsets_of_a_member_a_rebalance_fenced(broker: Target, txn_topic: str) -> None:
    """KIP-447 in a real rebalance: a second member joins, the group moves to a new
    generation, and offsets sent with the first member's old group metadata are refused
    (ILLEGAL_GENERATION); after an abort, the member's new metadata commits."""
    group = f"g-{uuid.uuid4().hex[:8]}"
    tp = TopicPartition(txn_topic, 0)
    settings: dict[str, Any] = {"bootstrap_servers": broker.bootstrap_servers,
                                "group_id": group, "enable_auto_commit": False}
    with Consumer(txn_topic, **settings) as first, _producer(broker, _txn_id()) as p:
        p.init_transactions(timeout=30)
        deadline = time.monotonic() + 60
        while not first.assignment() and time.monotonic() < deadline:
            first.poll(timeout_ms=200)
        old = first.group_metadata()
        with Consumer(txn_topic, **settings) as second:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and not (
                    first.assignment() and second.assignment()
                    and first.group_metadata().generation_id > old.generation_id):
                first.poll(timeout_ms=100)
                second.poll(timeout_ms=100)
            new = first.group_metadata()
            assert new.generation_id > old.generation_id and new.member_id == old.member_id
            p.begin_transaction()
            p.send(txn_topic, b"out", partition=1)
            if not _isolates(broker):  # TANSU: the generation is not checked
                p.send_offsets_to_transaction({tp: 1}, old, timeout=30)
                p.abort_transaction(timeout=30)
                return
            with pytest.raises(KafkaError) as info:
                p.send_offsets_to_transaction({tp: 1}, old, timeout=30)
            assert getattr(info.value, "name", "") == "ILLEGAL_GENERATION"
            p.abort_transaction(timeout=30)
            owned = next(iter(first.assignment()))
            with p.transaction():
                p.send_offsets_to_transaction({owned: 1}, first.group_metadata(), timeout=30)
            committed = first.committed(owned)
            assert committed is not None and committed.offset == 1
