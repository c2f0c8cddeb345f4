"""The transactional producer's rules on the reference broker: settings, call order,
abortable vs fatal errors (injected with the broker's control surface), batched
AddPartitionsToTxn. End-to-end flows on every broker are in
tests/integration/test_transactions.py."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from sdk.consumer import Consumer
from sdk.errors import (
    ConfigError,
    IllegalStateError,
    InvalidRecordError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionAbortedError,
)
from sdk.producer import Producer
from sdk.producer.config import ProducerConfig
from sdk.types import TopicPartition

PRODUCE, ADD_PARTITIONS_TO_TXN, END_TXN = 0, 24, 26
INVALID_RECORD, PRODUCER_FENCED = 87, 90


def _read_committed(bootstrap: str, topic: str, partitions: int) -> list[bytes | None]:
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    out: list[bytes | None] = []
    with Consumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                  auto_offset_reset="earliest") as c:
        c.assign(tps)
        ends = c.end_offsets(tps)
        for _ in range(100):
            for recs in c.poll(timeout_ms=100).values():
                out.extend(r.value for r in recs)
            if all(c.position(tp) >= ends[tp] for tp in tps):
                break
    return out


def test_transactional_id_implies_idempotence() -> None:
    cfg = ProducerConfig.build({"bootstrap.servers": "h", "transactional.id": "t1",
                                "transaction.timeout.ms": 5000})
    assert cfg.transactional_id == "t1" and cfg.enable_idempotence
    assert cfg.transaction_timeout_ms == 5000
    assert ProducerConfig.build({"bootstrap.servers": "h",
                                 "transactional.id": ""}).transactional_id is None
    with pytest.raises(ConfigError, match="idempotent"):
        ProducerConfig.build(bootstrap_servers="h", transactional_id="t",
                             enable_idempotence=False)
    with pytest.raises(ConfigError, match="transactional_id"):
        ProducerConfig.build(bootstrap_servers="h", transactional_id="t", acks=1)


def test_calls_out_of_order_are_refused(embedded_broker: Any, topic: str) -> None:
    bootstrap = embedded_broker.bootstrap_servers
    with Producer(bootstrap_servers=bootstrap) as plain:
        with pytest.raises(IllegalStateError, match="transactional_id"):
            plain.begin_transaction()
    with Producer(bootstrap_servers=bootstrap, transactional_id=uuid.uuid4().hex) as p:
        with pytest.raises(IllegalStateError, match="init_transactions"):
            p.send(topic, b"v")
        with pytest.raises(IllegalStateError, match="begin_transaction"):
            p.begin_transaction()
        p.init_transactions(timeout=10)
        with pytest.raises(IllegalStateError, match="begin_transaction"):
            p.send(topic, b"v")
        with pytest.raises(IllegalStateError, match="begin_transaction"):
            p.send_many(topic, [b"v"])
        with pytest.raises(IllegalStateError, match="commit_transaction"):
            p.commit_transaction()
        p.begin_transaction()
        with pytest.raises(IllegalStateError, match="begin_transaction"):
            p.begin_transaction()
        p.abort_transaction(timeout=10)  # nothing sent: no EndTxn needed


def test_failed_send_makes_the_transaction_abortable(embedded_broker: Any, control: Any,
                                                      topic: str) -> None:
    """A send that fails inside a transaction: commit raises TransactionAbortableError
    (the cause attached), abort works, the next transaction commits."""
    bootstrap = embedded_broker.bootstrap_servers
    with Producer(bootstrap_servers=bootstrap, transactional_id=uuid.uuid4().hex,
                  linger_ms=0) as p:
        p.init_transactions(timeout=10)
        p.begin_transaction()
        control.fail_next(PRODUCE, INVALID_RECORD)
        fut = p.send(topic, b"refused")
        with pytest.raises(InvalidRecordError):
            fut.result(timeout=10)
        with pytest.raises(TransactionAbortableError, match="abort_transaction") as info:
            p.commit_transaction(timeout=10)
        assert info.value.__cause__ is not None
        with pytest.raises(TransactionAbortableError):
            p.send(topic, b"still refused")
        p.abort_transaction(timeout=10)
        with p.transaction():
            p.send(topic, b"committed")
    assert _read_committed(bootstrap, topic, 1) == [b"committed"]


def test_abort_fails_records_not_sent_yet(embedded_broker: Any, topic: str) -> None:
    bootstrap = embedded_broker.bootstrap_servers
    with Producer(bootstrap_servers=bootstrap, transactional_id=uuid.uuid4().hex,
                  linger_ms=60_000, batch_size=1 << 20) as p:
        p.init_transactions(timeout=10)
        p.begin_transaction()
        futures = [p.send(topic, f"v{i}".encode()) for i in range(5)]
        p.abort_transaction(timeout=10)
        for fut in futures:
            with pytest.raises(TransactionAbortedError):
                fut.result(timeout=10)
        with p.transaction():
            p.send(topic, b"after")
    assert _read_committed(bootstrap, topic, 1) == [b"after"]


def test_fenced_commit_is_fatal(embedded_broker: Any, control: Any, topic: str) -> None:
    with Producer(bootstrap_servers=embedded_broker.bootstrap_servers,
                  transactional_id=uuid.uuid4().hex) as p:
        p.init_transactions(timeout=10)
        p.begin_transaction()
        p.send(topic, b"v")
        control.fail_next(END_TXN, PRODUCER_FENCED)
        with pytest.raises(ProducerFencedError):
            p.commit_transaction(timeout=10)
        with pytest.raises(ProducerFencedError, match=r"fatal.*close it"):
            p.begin_transaction()
        with pytest.raises(ProducerFencedError, match="fatal"):
            p.send(topic, b"v")


def test_partitions_join_in_one_request(embedded_broker: Any, control: Any,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Transactions v1 (the broker finalizes transaction.version 1): partitions whose
    batches become sendable together are added with one AddPartitionsToTxn; a partition
    already in the transaction needs none."""
    monkeypatch.setenv("SERVER_REF_TRANSACTION_VERSION", "1")
    topic = f"p-{uuid.uuid4().hex[:10]}"
    bootstrap = embedded_broker.bootstrap_servers
    with Producer(bootstrap_servers=bootstrap, transactional_id=uuid.uuid4().hex,
                  linger_ms=60_000) as p:
        p.init_transactions(timeout=10)
        assert p._core._manager().protocol == 1
        p.partitions_for(topic)  # auto-created with the broker's default partition count
        parts = len(p.partitions_for(topic))
        before = control.seen(ADD_PARTITIONS_TO_TXN)
        with p.transaction():
            for i in range(parts):
                p.send(topic, f"v{i}".encode(), partition=i)
            p.flush(timeout=10)  # everything ready in the same sender pass
            p.send(topic, b"again", partition=0)
        assert control.seen(ADD_PARTITIONS_TO_TXN) - before == 1
    assert len(_read_committed(bootstrap, topic, parts)) == parts + 1
