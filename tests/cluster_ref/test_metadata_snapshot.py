"""A broker that was down while the controller snapshotted the metadata log and deleted
the log up to the snapshot catches up through FetchSnapshot when it comes back: its
Fetch of ``__cluster_metadata`` is answered with the snapshot id, it downloads the
snapshot (FetchSnapshot), replaces its image with it and fetches on from there — and then
knows every topic created and forgets every topic deleted while it was down."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from cluster.conftest import CLUSTER_CONFIG

from sdk import AdminClient, NewTopic
from server_ref.cluster import EmbeddedCluster

TOPICS = 30
# A snapshot every ~2 KB of metadata records (Kafka's default is 20 MB): the log the broker
# had read is deleted long before it returns.
CONFIG = {**CLUSTER_CONFIG, "metadata.log.max.record.bytes.between.snapshots": "2000"}


def _until(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)


def _snapshots(node_dir: Path) -> list[str]:
    """The metadata snapshots (``<end offset>-<epoch>.checkpoint``) in a node's data."""
    return sorted(p.name for p in node_dir.rglob("__cluster_metadata-0/*.checkpoint"))


def _known(cluster: EmbeddedCluster, broker: int, topic: str) -> bool:
    try:
        return bool(cluster.partition_states(broker, topic))
    except OSError:
        return False


def test_restarted_broker_catches_up_through_fetch_snapshot() -> None:
    with EmbeddedCluster(brokers=3, controllers=1, config=CONFIG) as cluster:
        victim = 3
        with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("gone-later", 1, 3)]).raise_if_failed()
            _until(lambda: _known(cluster, victim, "gone-later"), 30,
                   f"broker {victim} to learn gone-later")
            cluster.kill(victim)
            names = [f"made-while-down-{i}" for i in range(TOPICS)]
            admin.create_topics([NewTopic(n, 2, 2) for n in names]).raise_if_failed()
            admin.delete_topics(["gone-later"]).raise_if_failed()
        controller = cluster.controllers[0]
        before = _snapshots(cluster.nodes[victim].directory)
        assert _snapshots(controller.directory), "the controller never snapshotted"
        assert before == []  # brokers never write snapshots of their own
        cluster.start(victim)
        _until(lambda: all(_known(cluster, victim, n) for n in names), 60,
               f"broker {victim} to know every topic created while it was down")
        assert not _known(cluster, victim, "gone-later")
        # It got there through a snapshot it downloaded (FetchSnapshot).
        assert _snapshots(cluster.nodes[victim].directory) != []
