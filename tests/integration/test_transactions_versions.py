"""Transactions v1 and v2 (KIP-890 part 2) on Apache Kafka at transaction.version 1 and 2,
on our broker (transaction.version 2) and on tansu (no such feature: v1).

The producer asks the transaction coordinator's ApiVersions at ``init_transactions``: with
the finalized feature ``transaction.version`` >= 2 it speaks v2 (no AddPartitionsToTxn or
AddOffsetsToTxn, Produce v12+, TxnOffsetCommit v5, an epoch bump at every EndTxn v5),
otherwise v1. The requests the client really sends are counted on its connections, so each
test says which path ran; read_committed readers and the group's committed offsets check
the outcomes."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from apache_support import apache_cluster

from sdk.consumer import Consumer
from sdk.net.client import NetClient
from sdk.net.config import CommonConfig
from sdk.net.connection import BrokerConnection
from sdk.producer import Producer
from sdk.protocol.messages import ApiKey
from sdk.protocol.messages.api_versions import ApiVersionsRequest
from sdk.types import TopicPartition
from server_ref import EmbeddedBroker

from .conftest import TansuProcess, create_topic, new_topic, require_tansu
from .test_transactions import read_all


def _finalized(bootstrap: str) -> dict[str, int]:
    async def ask() -> dict[str, int]:
        client = NetClient(CommonConfig.build(bootstrap_servers=bootstrap))
        try:
            await client.start()
            response = await client.call(ApiVersionsRequest(client_software_name="test",
                                                            client_software_version="1"))
            return {f.name: f.max_version_level for f in response.finalized_features}
        finally:
            await client.close()

    return asyncio.run(ask())


@contextlib.contextmanager
def requests_sent() -> Iterator[Counter[tuple[int, int]]]:
    """Every (api key, version) this process's clients write to a broker meanwhile."""
    seen: Counter[tuple[int, int]] = Counter()
    real = BrokerConnection.send_nowait

    def counting(self: BrokerConnection, request: Any, version: int, *args: Any,
                 **kwargs: Any) -> Any:
        seen[(request.API_KEY, version)] += 1
        return real(self, request, version, *args, **kwargs)

    BrokerConnection.send_nowait = counting  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        BrokerConnection.send_nowait = real  # type: ignore[method-assign]


def _count(seen: Counter[tuple[int, int]], key: int) -> int:
    return sum(n for (k, _v), n in seen.items() if k == key)


def _versions(seen: Counter[tuple[int, int]], key: int) -> set[int]:
    return {v for (k, v), n in seen.items() if k == key and n}


@contextlib.contextmanager
def _broker(kind: str, level: int) -> Iterator[str]:
    if kind == "ref":
        with EmbeddedBroker(data_dir=None, port=0) as embedded:
            yield embedded.bootstrap_servers
        return
    with apache_cluster(brokers=1, features={"transaction.version": level}) as cluster:
        yield cluster.bootstrap_servers


@pytest.mark.parametrize(("kind", "level"), [("kafka", 1), ("kafka", 2), ("ref", 2)])
def test_commit_and_abort_at_each_transaction_version(kind: str, level: int) -> None:
    with _broker(kind, level) as bootstrap:
        # Our broker advertises what Apache Kafka 4.x formats a cluster with: level 2.
        assert _finalized(bootstrap).get("transaction.version") == level
        topic = new_topic("txn-tv")
        asyncio.run(create_topic(bootstrap, topic, 2))
        group = f"g-{uuid.uuid4().hex[:8]}"
        with requests_sent() as seen, Producer(
                bootstrap_servers=bootstrap,
                transactional_id=f"tv-{uuid.uuid4().hex[:8]}") as p:
            p.init_transactions(timeout=60)
            manager = p._core._manager()
            assert manager.protocol == level
            epochs = [manager.describe()["epoch"]]
            for round_no in range(3):  # several transactions: epochs and sequences carry on
                with p.transaction():
                    p.send(topic, f"c{round_no}".encode(), partition=round_no % 2)
                    p.send_offsets_to_transaction(
                        {TopicPartition(topic, 0): 10 + round_no}, group, timeout=30)
                epochs.append(manager.describe()["epoch"])
                p.begin_transaction()
                p.send(topic, f"a{round_no}".encode(), partition=round_no % 2)
                p.flush(timeout=30)
                p.abort_transaction(timeout=30)
                epochs.append(manager.describe()["epoch"])
        seen_values = sorted(v for _, v in read_all(bootstrap, topic, 2, "read_committed")
                             if v is not None)
        assert seen_values == [b"c0", b"c1", b"c2"]
        with Consumer(bootstrap_servers=bootstrap, group_id=group) as c:
            committed = c.committed(TopicPartition(topic, 0))
        assert committed is not None and committed.offset == 12

        add_partitions = seen[(ApiKey.ADD_PARTITIONS_TO_TXN, 3)]
        add_offsets = _count(seen, ApiKey.ADD_OFFSETS_TO_TXN)
        if level == 1:
            # v1: a partition joins with AddPartitionsToTxn, the group with AddOffsetsToTxn;
            # the versions stay below those that mean v2, and the epoch never moves.
            assert add_partitions >= 6 and add_offsets >= 3  # (retries count too)
            assert max(_versions(seen, ApiKey.PRODUCE)) <= 11
            assert _versions(seen, ApiKey.END_TXN) <= {0, 1, 2, 3, 4}
            assert _versions(seen, ApiKey.TXN_OFFSET_COMMIT) <= {0, 1, 2, 3, 4}
            assert len(set(epochs)) == 1
        else:
            # v2: the broker adds partitions and the group itself; each EndTxn v5 bumps the
            # epoch (six transactions ended: six bumps).
            assert add_partitions == 0 and add_offsets == 0
            assert min(_versions(seen, ApiKey.PRODUCE)) >= 12
            assert _versions(seen, ApiKey.END_TXN) == {5}
            assert _versions(seen, ApiKey.TXN_OFFSET_COMMIT) == {5}
            assert epochs == list(range(epochs[0], epochs[0] + 7))


def test_v2_abort_after_a_failed_send_needs_no_init_producer_id() -> None:
    """A batch refused by the broker leaves a sequence gap. v1 then bumps the epoch with a
    second InitProducerId after EndTxn; v2's EndTxn bumps it, so none is sent, and the
    next transaction's batches (sequence 0, new epoch) are accepted."""
    with apache_cluster(brokers=1, features={"transaction.version": 2},
                        config={"message.max.bytes": "20000"}) as cluster:
        bootstrap = cluster.bootstrap_servers
        topic = new_topic("txn-gap")
        asyncio.run(create_topic(bootstrap, topic, 1))
        with requests_sent() as seen, Producer(
                bootstrap_servers=bootstrap, transactional_id=f"gap-{uuid.uuid4().hex[:8]}",
                max_request_size=1 << 20) as p:
            p.init_transactions(timeout=60)
            manager = p._core._manager()
            assert manager.protocol == 2
            inits = _count(seen, ApiKey.INIT_PRODUCER_ID)  # with any retries of the first
            epoch = manager.describe()["epoch"]
            p.begin_transaction()
            p.send(topic, b"small", partition=0)
            p.flush(timeout=30)
            too_big = p.send(topic, b"x" * 50_000, partition=0)
            with pytest.raises(Exception, match=r"MESSAGE_TOO_LARGE|too large"):
                too_big.result(timeout=30)
            p.abort_transaction(timeout=30)
            assert manager.describe()["epoch"] == epoch + 1  # bumped by EndTxn alone
            with p.transaction():
                p.send(topic, b"after", partition=0)
        assert _count(seen, ApiKey.INIT_PRODUCER_ID) == inits
        values = [v for _, v in read_all(bootstrap, topic, 1, "read_committed")]
        assert values == [b"after"]


def test_a_broker_without_the_feature_gets_transactions_v1() -> None:
    """tansu finalizes no transaction.version: the producer speaks v1 (AddPartitionsToTxn,
    EndTxn <= v4) and the epoch stays put across commits."""
    tansu = TansuProcess(require_tansu()).start()
    try:
        bootstrap = tansu.bootstrap_servers
        assert "transaction.version" not in _finalized(bootstrap)
        topic = new_topic("txn-v1")
        asyncio.run(create_topic(bootstrap, topic, 1))
        with requests_sent() as seen, Producer(
                bootstrap_servers=bootstrap, transactional_id=f"v1-{uuid.uuid4().hex[:8]}") as p:
            p.init_transactions(timeout=60)
            manager = p._core._manager()
            assert manager.protocol == 1
            epoch = manager.describe()["epoch"]
            for round_no in range(2):
                with p.transaction():
                    p.send(topic, f"c{round_no}".encode(), partition=0).result(timeout=30)
            assert manager.describe()["epoch"] == epoch
        assert _count(seen, ApiKey.ADD_PARTITIONS_TO_TXN) >= 2
        assert _versions(seen, ApiKey.END_TXN) <= {0, 1, 2, 3, 4}
    finally:
        tansu.stop()
