"""A transaction coordinator's broker SIGKILLed between the two steps of EndTxn, on our
3-broker cluster: the PrepareCommit/PrepareAbort record is in ``__transaction_state``
(replicated: EndTxn is answered only then) but the markers are not written yet. The new
leader of that partition loads the id, finds the transaction prepared and writes its
markers to every partition's leader, then Complete*: the transaction commits (or aborts)
as a whole.

The window is made wide with the broker's test hook ``SERVER_REF_TXN_MARKER_DELAY_MS``
(set for this module's cluster only: every transaction's markers wait 8 s, longer than a
transactions v2 EndTxn waits for them, 5 s), so the kill lands in it every time.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator

import pytest
from cluster.conftest import create_topic, wait_for
from cluster.test_transactions_failover import _coordinator_of
from cluster_ref.conftest import REF_CONFIG

from sdk import AdminClient, Consumer, Producer, TopicPartition
from server_ref.cluster import EmbeddedCluster

PARTITIONS = 3
MARKER_DELAY_MS = 8000


@pytest.fixture(scope="module")
def kafka_cluster() -> Iterator[EmbeddedCluster]:
    saved = os.environ.get("SERVER_REF_TXN_MARKER_DELAY_MS")
    os.environ["SERVER_REF_TXN_MARKER_DELAY_MS"] = str(MARKER_DELAY_MS)  # node processes
    try:
        with EmbeddedCluster(brokers=3, controllers=1, config=REF_CONFIG) as cluster:
            yield cluster
    finally:
        if saved is None:
            del os.environ["SERVER_REF_TXN_MARKER_DELAY_MS"]
        else:
            os.environ["SERVER_REF_TXN_MARKER_DELAY_MS"] = saved


def _state(cluster: EmbeddedCluster, txn_id: str) -> tuple[str, int]:
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        found = admin.describe_transactions([txn_id], timeout_ms=30_000)[txn_id]
    if found.error is not None:
        raise found.error
    return found.state, found.coordinator


def _read_committed(cluster: EmbeddedCluster, topic: str) -> list[bytes]:
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    out: list[bytes] = []
    with Consumer(bootstrap_servers=cluster.bootstrap_servers,
                  isolation_level="read_committed", auto_offset_reset="earliest") as c:
        c.assign(tps)
        ends = c.end_offsets(tps)
        deadline = time.monotonic() + 30
        while any(c.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=300).values():
                out.extend(r.value for r in records if r.value is not None)
    return out


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_prepared_transaction_completed_by_the_new_coordinator(
        kafka_cluster: EmbeddedCluster, commit: bool, failover_report: list[str]) -> None:
    topic = create_topic(kafka_cluster, "txn-prepared", PARTITIONS)
    bootstrap = kafka_cluster.bootstrap_servers
    txn_id = f"prepared-{uuid.uuid4().hex[:8]}"
    values = [f"v-{i}".encode() for i in range(30)]
    with Producer(bootstrap_servers=bootstrap, transactional_id=txn_id, linger_ms=2) as p, \
            Producer(bootstrap_servers=bootstrap) as plain:
        p.init_transactions(timeout=60)
        coordinator = _coordinator_of(bootstrap, txn_id)
        p.begin_transaction()
        for i, value in enumerate(values):
            p.send(topic, value, partition=i % PARTITIONS)
        if commit:
            p.commit_transaction(timeout=60)  # answered with the markers still held back
        else:
            p.flush(timeout=60)
            p.abort_transaction(timeout=60)
        prepared = "PrepareCommit" if commit else "PrepareAbort"
        assert _state(kafka_cluster, txn_id) == (prepared, coordinator)
        kafka_cluster.kill(coordinator)
        killed_at = time.monotonic()
        for q in range(PARTITIONS):  # behind the transaction in every partition
            plain.send(topic, b"after", partition=q).result(timeout=60)
        complete = "CompleteCommit" if commit else "CompleteAbort"
        _complete, moved_to = wait_for(
            lambda: (found := _state(kafka_cluster, txn_id))[0] == complete and found, 60,
            f"{txn_id} {complete} on a new coordinator")
        failover_report.append(
            f"{prepared} completed by node {moved_to} {time.monotonic() - killed_at:.1f} s "
            f"after its coordinator (node {coordinator}) was SIGKILLed")
        assert moved_to != coordinator
        expected = sorted([*values, *[b"after"] * PARTITIONS]) if commit else \
            [b"after"] * PARTITIONS
        assert sorted(wait_for(
            lambda: (seen := _read_committed(kafka_cluster, topic)) and
            len(seen) >= len(expected) and seen, 60, "every partition's marker")) == expected
        # The producer goes on with the new coordinator.
        p.begin_transaction()
        p.send(topic, b"next", partition=0)
        p.commit_transaction(timeout=60)
