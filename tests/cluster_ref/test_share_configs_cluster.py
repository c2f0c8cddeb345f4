"""Group configs (the GROUP config resource, KIP-932) on our 3-broker cluster.

A share group's delivery state lives on each topic partition's leader and its membership
with its group coordinator, so a group config must hold on every broker, whichever broker
the admin client sent the change to. As in Kafka (whose brokers forward GROUP config
changes to the controller, which keeps them in the metadata log as ConfigRecords), the
change goes through the active controller and every broker replays it:

* IncrementalAlterConfigs sent to one broker is described the same by every broker, and
  survives that broker's SIGKILL and restart (it lives in the metadata log);
* ``share.auto.offset.reset=earliest`` set through the leader of partition 0 makes a share
  consumer read the records produced before it joined on every partition, including those
  led by the other brokers;
* Kafka's checks answer on the controller: INVALID_CONFIG with Kafka's message for a value
  out of the broker's ``group.share.*`` bounds, an unknown name; ``validate_only`` changes
  nothing.

The static ``group.share.*`` broker configs come to every node from the launcher; the one
dynamic one, ``group.share.assignment.interval.ms``, goes through the controller like any
broker config (tests/integration/test_share_configs.py covers it on our cluster too).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_ref.conftest import REF_CONFIG

from sdk import AdminClient, AsyncShareConsumer, Producer
from sdk.errors import InvalidConfigError, for_code
from sdk.protocol.messages.describe_configs import DescribeConfigsRequest
from sdk.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from sdk.types import NewTopic
from server_ref.cluster import EmbeddedCluster
from server_ref.cluster.processes import ask

GROUP = 32  # the GROUP config resource type
SET, DELETE = 0, 1
BEFORE = 30  # records produced before the share consumer joins


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(brokers=3, controllers=1, config=REF_CONFIG) as running:
        yield running


def _alter(cluster: EmbeddedCluster, node_id: int, group: str,
           configs: dict[str, str | None], validate_only: bool = False) -> tuple[int, str]:
    """IncrementalAlterConfigs of one GROUP resource, sent to broker ``node_id``."""
    request = IncrementalAlterConfigsRequest(validate_only=validate_only, resources=[
        IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=GROUP, resource_name=group, configs=[
                IncrementalAlterConfigsRequest.AlterableConfig(
                    name=name, config_operation=DELETE if value is None else SET,
                    value=value) for name, value in configs.items()])])
    response = ask(cluster.nodes[node_id].port, request, 1, 30.0)
    entry = response.responses[0]
    return entry.error_code, entry.error_message or ""


def _described(cluster: EmbeddedCluster, node_id: int, group: str) -> dict[str, str]:
    """The group's configs as broker ``node_id`` describes them."""
    request = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=GROUP, resource_name=group, configuration_keys=None)])
    result = ask(cluster.nodes[node_id].port, request, 4, 10.0).results[0]
    assert result.error_code == 0, result.error_message
    return {c.name: c.value for c in result.configs}


def _everywhere(cluster: EmbeddedCluster, group: str, name: str) -> dict[int, str]:
    return {n.node_id: _described(cluster, n.node_id, group)[name] for n in cluster.brokers}


def _settles(cluster: EmbeddedCluster, group: str, name: str, value: str) -> dict[int, str]:
    """``name`` as every broker describes it, once all say ``value`` (or after 15 s): the
    broker that took the change answers once it has replayed it, the others replay the
    metadata log on their own time, as Kafka's brokers do."""
    deadline = time.monotonic() + 15
    while set((seen := _everywhere(cluster, group, name)).values()) != {value} \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    return seen


def test_a_group_config_set_through_one_broker_holds_on_every_broker(
        cluster: EmbeddedCluster) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    assert _alter(cluster, 2, group, {"share.record.lock.duration.ms": "20000",
                                      "share.auto.offset.reset": "earliest"}) == (0, "")
    assert _described(cluster, 2, group)["share.record.lock.duration.ms"] == "20000"
    assert _settles(cluster, group, "share.record.lock.duration.ms", "20000") == \
        {1: "20000", 2: "20000", 3: "20000"}
    assert _settles(cluster, group, "share.auto.offset.reset", "earliest") == \
        {1: "earliest", 2: "earliest", 3: "earliest"}

    # DELETE through another broker: the default again everywhere
    assert _alter(cluster, 3, group, {"share.record.lock.duration.ms": None}) == (0, "")
    assert _settles(cluster, group, "share.record.lock.duration.ms", "30000") == \
        {1: "30000", 2: "30000", 3: "30000"}

    # the metadata log is where it lives: a broker killed and started again still has it
    cluster.kill(1)
    cluster.start(1)
    assert _described(cluster, 1, group)["share.auto.offset.reset"] == "earliest"


def test_the_controller_checks_group_configs(cluster: EmbeddedCluster) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    code, message = _alter(cluster, 1, group, {"share.record.lock.duration.ms": "90000"})
    assert for_code(code) is InvalidConfigError
    assert message == ("share.record.lock.duration.ms must be less than or equal to "
                       "group.share.max.record.lock.duration.ms (60000)")
    code, message = _alter(cluster, 1, group, {"share.no.such.config": "1"})
    assert for_code(code) is InvalidConfigError
    assert message == "Unknown group config name: share.no.such.config"
    assert _alter(cluster, 1, group, {"share.auto.offset.reset": "earliest"},
                  validate_only=True) == (0, "")
    assert _everywhere(cluster, group, "share.auto.offset.reset") == \
        {1: "latest", 2: "latest", 3: "latest"}


def _share_consumer(bootstrap: str, topic: str, group: str
                    ) -> AsyncShareConsumer[bytes, bytes]:
    return AsyncShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group)


async def test_share_auto_offset_reset_applies_on_every_partition_leader(
        cluster: EmbeddedCluster) -> None:
    bootstrap = cluster.bootstrap_servers
    topic, group = f"share-cfg-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 3, 3)]).raise_if_failed()
    deadline = time.monotonic() + 30
    while -1 in (leaders := {p: cluster.leader_of(topic, p) for p in range(3)}).values():
        assert time.monotonic() < deadline, leaders
        await asyncio.sleep(0.2)
    with Producer(bootstrap_servers=bootstrap) as producer:
        for i in range(BEFORE):
            producer.send(topic, b"%d" % i, partition=i % 3).result(timeout=30)
    # set through the leader of partition 0 only; the others lead other partitions
    assert _alter(cluster, leaders[0], group, {"share.auto.offset.reset": "earliest"}) \
        == (0, "")
    # (a leader that has not replayed the change yet would start the group at the latest)
    assert set(_settles(cluster, group, "share.auto.offset.reset", "earliest").values()) \
        == {"earliest"}
    got: list[Any] = []
    async with _share_consumer(bootstrap, topic, group) as consumer:
        deadline = time.monotonic() + 60
        while len(got) < BEFORE and time.monotonic() < deadline:
            got.extend(await consumer.poll(500))
    by_partition = {p: sorted(int(r.value) for r in got if r.partition == p) for p in range(3)}
    assert by_partition == {p: list(range(p, BEFORE, 3)) for p in range(3)}, (leaders,
                                                                               by_partition)
