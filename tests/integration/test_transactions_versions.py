"""Transactions on Apache Kafka with transaction.version 1 and 2 (KIP-890).

This SDK speaks transactions v1 (AddPartitionsToTxn before a partition's first batch,
Produce <= v11, EndTxn <= v4): the protocol schemas it is generated from stop at Produce
v11 and mark EndTxn v5 unstable. A broker whose finalized ``transaction.version`` is 2
serves such clients as v1 transactions; this checks both levels, reading the finalized
level from the ApiVersions answer, with commit, abort and read_committed readers."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from apache_support import apache_cluster

from sdk.net.client import NetClient
from sdk.net.config import CommonConfig
from sdk.producer import Producer
from sdk.protocol.messages.api_versions import ApiVersionsRequest

from .conftest import create_topic, new_topic
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


@pytest.mark.parametrize("level", [1, 2])
def test_commit_and_abort_at_each_transaction_version(level: int) -> None:
    with apache_cluster(brokers=1, features={"transaction.version": level}) as cluster:
        bootstrap = cluster.bootstrap_servers
        assert _finalized(bootstrap).get("transaction.version") == level
        topic = new_topic("txn-tv")
        asyncio.run(create_topic(bootstrap, topic, 2))
        with Producer(bootstrap_servers=bootstrap,
                      transactional_id=f"tv-{uuid.uuid4().hex[:8]}") as p:
            p.init_transactions(timeout=60)
            for round_no in range(3):  # several transactions: epochs and sequences carry on
                with p.transaction():
                    p.send(topic, f"c{round_no}".encode(), partition=round_no % 2)
                p.begin_transaction()
                p.send(topic, f"a{round_no}".encode(), partition=round_no % 2)
                p.flush(timeout=30)
                p.abort_transaction(timeout=30)
        seen = sorted(v for _, v in read_all(bootstrap, topic, 2, "read_committed")
                      if v is not None)
        assert seen == [b"c0", b"c1", b"c2"]
