"""Share groups on our 3-broker cluster (server_ref/share/cluster_state.py has the design):
membership with the group coordinator, each share-partition's delivery state on its topic
partition's leader, journaled to the replicated ``__share_group_state`` and reloaded by a
new leader. Three share consumers on three partitions (RF=3); the leader of partition 0 is
SIGKILLed mid-way: every record is still processed, and a record processed twice was either
on a partition the killed broker led (in flight there: locked, or its acknowledgement lost
with the broker) or says so with a delivery count above 1.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from cluster_ref.conftest import REF_CONFIG

from sdk import AdminClient, AsyncShareConsumer, Producer
from sdk.types import NewTopic
from server_ref.cluster import EmbeddedCluster

COUNT = 300
CONFIG = {**REF_CONFIG,
          "group.share.min.record.lock.duration.ms": "1000",
          "group.share.record.lock.duration.ms": "5000"}


def _consumer(bootstrap: str, topic: str, group: str) -> AsyncShareConsumer[bytes, bytes]:
    return AsyncShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                              config={"share.acquire.mode": "record_limit",
                                      "max.poll.records": 10})


async def test_share_consumers_carry_on_when_a_partition_leader_is_killed() -> None:
    with EmbeddedCluster(brokers=3, controllers=1, config=CONFIG) as cluster:
        bootstrap = cluster.bootstrap_servers
        topic, group = f"share-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([NewTopic(topic, 3, 3)]).raise_if_failed()
        got: list[Any] = []
        killed, led = None, set()
        async with _consumer(bootstrap, topic, group) as c1, \
                _consumer(bootstrap, topic, group) as c2, \
                _consumer(bootstrap, topic, group) as c3:
            # Group configs are each broker's own in cluster mode (not in the metadata
            # log yet), so the group starts at the latest offset (the default): the
            # records are produced once every member is assigned and has fetched.
            members = (c1, c2, c3)
            while not all(c.assignment() for c in members):
                for c in members:
                    assert not await c.poll(100)
            for c in members:
                assert not await c.poll(300)
            with Producer(bootstrap_servers=bootstrap) as producer:
                for i in range(COUNT):
                    producer.send(topic, b"%d" % i, partition=i % 3)
            deadline = time.monotonic() + 150
            while len({r.value for r in got}) < COUNT and time.monotonic() < deadline:
                for c in (c1, c2, c3):
                    got.extend(await c.poll(200))
                if killed is None and len(got) >= 60:
                    killed = cluster.leader_of(topic, 0)
                    led = {p for p in range(3) if cluster.leader_of(topic, p) == killed}
                    cluster.kill(killed)
        assert killed is not None
    values = [r.value for r in got]
    assert set(values) == {b"%d" % i for i in range(COUNT)}  # nothing lost
    seen: set[bytes] = set()
    again = []
    for record in got:
        if record.value in seen:
            again.append(record)
        seen.add(record.value)
    assert all(r.delivery_count > 1 or r.partition in led for r in again), again
