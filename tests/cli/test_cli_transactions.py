"""``kafka-sdk transactions list|describe`` as a subprocess against the reference broker,
with a transaction left open by a producer of this process."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from sdk.producer import Producer
from server_ref import EmbeddedBroker

from .test_cli import cli, name, one_error_line

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def ref() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir=None, port=0) as broker:
        yield broker


def test_list_and_describe(ref: EmbeddedBroker) -> None:
    b = ref.bootstrap_servers
    topic = name("cli-txn")
    assert cli("topics", "create", topic, "--partitions", "2", bootstrap=b).code == 0
    txn_id = f"cli-{uuid.uuid4().hex[:8]}"
    with Producer(bootstrap_servers=b, transactional_id=txn_id) as p:
        p.init_transactions(timeout=10)
        p.begin_transaction()
        p.send(topic, b"v", partition=1).result(timeout=10)

        run = cli("transactions", "list", bootstrap=b)
        assert run.code == 0, run.err
        rows = [line.split() for line in run.out.splitlines()]
        assert rows[0] == ["TRANSACTIONAL-ID", "PRODUCER-ID", "STATE", "COORDINATOR"]
        assert next(r for r in rows[1:] if r[0] == txn_id)[2] == "Ongoing"
        run = cli("transactions", "list", "--state", "CompleteCommit", "--json", bootstrap=b)
        assert run.code == 0 and txn_id not in [t["transactional_id"] for t in run.json()]

        run = cli("transactions", "describe", txn_id, "--json", bootstrap=b)
        assert run.code == 0, run.err
        (doc,) = run.json()
        assert doc["state"] == "Ongoing" and doc["error"] is None
        assert doc["partitions"] == [{"topic": topic, "partition": 1}]
        assert doc["producer_id"] >= 0 and doc["timeout_ms"] == 60_000

        run = cli("transactions", "describe", txn_id, bootstrap=b)
        assert run.code == 0 and run.out.split()[8:10] == [txn_id, "Ongoing"]
        p.abort_transaction(timeout=10)

    run = cli("transactions", "describe", "no-such-id", bootstrap=b)
    assert run.code == 1
    assert "'no-such-id'" in one_error_line(run)
