"""Admin calls for transactions on every broker: list, describe, describe producers, and
the abort of a hanging transaction (WriteTxnMarkers to the partition leader)."""

from __future__ import annotations

import time
import uuid

import pytest

from sdk.admin import AdminClient
from sdk.errors import KafkaError
from sdk.producer import Producer
from sdk.types import TopicPartition

from .conftest import Target, new_topic
from .test_transactions import read_all


def test_list_describe_and_abort_a_hanging_transaction(broker: Target) -> None:
    topic = new_topic("txn-admin")
    broker.create_topic(topic, 2)
    tp = TopicPartition(topic, 0)
    txn_id = f"admin-{uuid.uuid4().hex[:8]}"
    with Producer(bootstrap_servers=broker.bootstrap_servers, transactional_id=txn_id) as p, \
            Producer(bootstrap_servers=broker.bootstrap_servers) as plain, \
            AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        p.init_transactions(timeout=30)
        p.begin_transaction()
        p.send(topic, b"open", partition=0).result(timeout=30)
        plain.send(topic, b"after", partition=0).result(timeout=30)
        if broker.name == "tansu":  # TANSU: no ListTransactions / DescribeTransactions
            with pytest.raises(KafkaError):
                admin.list_transactions(timeout_ms=5000)
            p.abort_transaction(timeout=30)
            return

        listed = admin.list_transactions()
        assert listed[txn_id].state == "Ongoing"
        assert txn_id in admin.list_transactions(states=["Ongoing"])
        assert txn_id not in admin.list_transactions(states=["CompleteCommit"])
        description = admin.describe_transactions([txn_id]).raise_if_failed()[txn_id]
        assert description.state == "Ongoing" and tp in description.partitions
        assert description.producer_id == listed[txn_id].producer_id >= 0
        assert description.start_time_ms > 0

        producers = admin.describe_producers([tp]).raise_if_failed()[tp].producers
        mine = [s for s in producers if s.producer_id == description.producer_id]
        assert len(mine) == 1 and mine[0].current_txn_start_offset == 0
        assert mine[0].producer_epoch == description.producer_epoch

        # The open transaction holds read_committed readers back...
        assert read_all(broker.bootstrap_servers, topic, 1, "read_committed",
                        idle_s=0.3) == []
        # ...until an abort marker is written on the partition (a hanging transaction's
        # remedy: here the coordinator still knows it, which is what makes it testable).
        result = admin.abort_transaction(tp, description.producer_id)
        assert result.error is None
        deadline = time.monotonic() + 30
        seen: list[tuple[int, bytes | None]] = []
        while not seen and time.monotonic() < deadline:
            seen = read_all(broker.bootstrap_servers, topic, 1, "read_committed", idle_s=0.3)
        assert seen == [(0, b"after")]
        producers = admin.describe_producers([tp]).raise_if_failed()[tp].producers
        assert all(s.current_txn_start_offset == -1 for s in producers)
        p.abort_transaction(timeout=30)
        # Kafka answers EndTxn before its markers are written: PrepareAbort for a moment.
        assert admin.describe_transactions([txn_id])[txn_id].state in (
            "PrepareAbort", "CompleteAbort", "Empty")
