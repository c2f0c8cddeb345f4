"""The admin client and CLI on three Apache Kafka brokers, where replicas fall out of sync,
leaders move and partitions change brokers (one dedicated controller, RF 3,
``min.insync.replicas=2``).

* describe_topics shows the ISR shrink when a broker is killed, and grow back when it
  restarts (polled with a deadline: the controller fences a silent broker after
  ``broker.session.timeout.ms``, 6 s here);
* a preferred-leader election moves leadership back to the first replica after a restart.
  ``auto.leader.rebalance.enable=false``, so only the ElectLeaders call can have done it;
* an unclean election gives a leader to a partition whose in-sync replicas are all dead,
  losing the records only they had; with ``unclean.leader.election.enable=true`` on a
  topic Kafka does that by itself and the call finds ELECTION_NOT_NEEDED;
* a reassignment from replicas [1, 2] to [2, 3], held in progress while broker 3 is down,
  is listed and cancelled, then completed once broker 3 is back;
* the ``kafka-sdk partitions`` commands do the same from the command line;
* ``AsyncAdminClient`` moves a partition, lists the move until it is done, describes the
  new replicas and ISR and elects the preferred leader (the blocking face's calls above run
  the same core on its loop thread).

The cluster is this module's own (module scope; every test heals what it broke, so the
order of the tests does not matter).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from apache_support import apache_cluster

from sdk import AdminClient, AsyncAdminClient, ElectionType, NewTopic, Producer, TopicPartition
from sdk.admin import OffsetSpec, PartitionDescription, PartitionReassignment
from sdk.errors import (
    ElectionNotNeededError,
    InvalidReplicaAssignmentError,
    NoReassignmentInProgressError,
    PreferredLeaderNotAvailableError,
)
from tools.apache_kafka import ApacheKafkaCluster

from .conftest import wait_for as poll_until

pytestmark = pytest.mark.integration

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]
CONFIG = {
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    "broker.session.timeout.ms": "6000",  # a killed broker is fenced after 6 s (default 9)
    "broker.heartbeat.interval.ms": "1000",
    # Leadership stays where failover put it: only an ElectLeaders call moves it back.
    "auto.leader.rebalance.enable": "false",
    "unclean.leader.election.enable": "false",  # Kafka's default, stated: topics opt in
}
DEADLINE_S = 60.0  # for a state the cluster reaches in a few seconds


@pytest.fixture(scope="module")
def admin_cluster() -> Iterator[ApacheKafkaCluster]:
    with apache_cluster(brokers=3, controllers=1, config=CONFIG) as cluster:
        yield cluster


@pytest.fixture
def admin(admin_cluster: ApacheKafkaCluster) -> Iterator[AdminClient]:
    with AdminClient(bootstrap_servers=admin_cluster.bootstrap_servers,
                     default_api_timeout_ms=20_000) as client:
        yield client
        heal(admin_cluster, client)


# ----------------------------------------------------------------------------- helpers


def wait_for(condition: Callable[[], T], what: str, timeout_s: float = DEADLINE_S) -> T:
    """Poll ``condition`` until it returns something true; its errors mean "not yet"."""
    return poll_until(condition, timeout_s, what, interval_s=0.25)


def heal(cluster: ApacheKafkaCluster, admin: AdminClient) -> None:
    """Every broker running again and every replica of every topic in sync."""
    for node in cluster.brokers:
        if not node.running:
            cluster.start(node.node_id, wait=False)
    cluster.wait_ready()

    def in_sync() -> bool:
        topics = admin.describe_topics(None, timeout_ms=10_000)
        return all(d.error is None and all(p.leader is not None and set(p.isr) == set(p.replicas)
                                           for p in d.partitions)
                   for d in topics.values())

    wait_for(in_sync, "every replica back in sync")


def create(admin: AdminClient, prefix: str, assignment: dict[int, list[int]],
           configs: dict[str, str] | None = None) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, replica_assignment=assignment, configs=configs)]
                        ).raise_if_failed()
    wait_for(lambda: all(p.leader is not None for p in partitions(admin, name).values()),
             f"leaders of {name}")
    return name


def partitions(admin: AdminClient, topic: str) -> dict[int, PartitionDescription]:
    description = admin.describe_topics([topic], timeout_ms=10_000)[topic]
    if description.error is not None:
        raise description.error
    return {p.partition: p for p in description.partitions}


def partition(admin: AdminClient, topic: str, index: int = 0) -> PartitionDescription:
    return partitions(admin, topic)[index]


def fenced(admin: AdminClient, broker_id: int) -> bool:
    """The controller fenced the broker: Metadata no longer lists it."""
    return broker_id not in {b.node_id for b in admin.describe_cluster().brokers}


def end_offset(admin: AdminClient, tp: TopicPartition) -> int:
    listed = admin.list_offsets({tp: OffsetSpec.LATEST})[tp]
    if listed.error is not None:
        raise listed.error
    return listed.offset


def cli(cluster: ApacheKafkaCluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    run = subprocess.run([sys.executable, "-m", "sdk", "--bootstrap-server",
                          cluster.bootstrap_servers, *args],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert "Traceback" not in run.stderr, run.stderr
    return run


def cli_json(cluster: ApacheKafkaCluster, *args: str) -> Any:
    run = cli(cluster, *args, "--json")
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


# ----------------------------------------------------------------------------- tests


def test_isr_shrinks_and_recovers_then_preferred_election(
        admin_cluster: ApacheKafkaCluster, admin: AdminClient) -> None:
    # Broker 3 is the preferred leader of rotated-0 and of by-cli-0.
    rotated = create(admin, "pref", {0: [3, 1, 2], 1: [1, 2, 3], 2: [2, 3, 1]})
    by_cli = create(admin, "pref-cli", {0: [3, 1, 2]})
    assert partition(admin, rotated).leader == 3

    admin_cluster.kill(3)
    shrunk = wait_for(lambda: all(3 not in p.isr for t in (rotated, by_cli)
                                  for p in partitions(admin, t).values())
                      and partitions(admin, rotated), "broker 3 out of every ISR")
    for p in shrunk.values():
        assert set(p.isr) == set(p.replicas) - {3}
        assert p.leader is not None and p.leader != 3
        assert 3 in p.replicas  # still assigned, only out of sync
        assert 3 in p.offline_replicas
    assert shrunk[0].leader == 1  # the next in-sync replica of [3, 1, 2]

    admin_cluster.start(3)
    grown = wait_for(lambda: all(set(p.isr) == set(p.replicas) for t in (rotated, by_cli)
                                 for p in partitions(admin, t).values())
                     and partitions(admin, rotated), "broker 3 back in every ISR")
    assert all(not p.offline_replicas for p in grown.values())
    assert grown[0].leader == 1  # in sync again, but no automatic rebalance here

    tps = [TopicPartition(rotated, i) for i in range(3)]
    elected = admin.elect_leaders(ElectionType.PREFERRED, tps)
    assert elected[tps[0]].error is None
    for tp in tps[1:]:
        assert isinstance(elected[tp].error, ElectionNotNeededError)
    wait_for(lambda: partition(admin, rotated).leader == 3, "broker 3 leads rotated-0 again")
    again = admin.elect_leaders(ElectionType.PREFERRED, tps[:1])
    assert isinstance(again[tps[0]].error, ElectionNotNeededError)

    # The same from the command line, for the other topic.
    assert partition(admin, by_cli).leader == 1
    run = cli(admin_cluster, "partitions", "elect", "--topic", by_cli)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[1].split() == [by_cli, "0", "elected"]
    wait_for(lambda: partition(admin, by_cli).leader == 3, "broker 3 leads by-cli-0 again")
    doc = cli_json(admin_cluster, "partitions", "elect", "--topic", by_cli)
    assert doc["partitions"][0]["error"]["name"] == "ELECTION_NOT_NEEDED"


def test_unclean_election(admin_cluster: ApacheKafkaCluster, admin: AdminClient) -> None:
    # min.insync.replicas=1: the high watermark (the end offset consumers see) moves with
    # broker 1 alone, so the record an unclean election loses shows as an end offset that
    # goes back.
    strict = create(admin, "unclean-off", {0: [1, 2]}, {"min.insync.replicas": "1"})
    lenient = create(admin, "unclean-on", {0: [1, 2]},
                     {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"})
    tp_strict, tp_lenient = TopicPartition(strict, 0), TopicPartition(lenient, 0)
    with Producer(bootstrap_servers=admin_cluster.bootstrap_servers, acks="all") as producer:
        for topic in (strict, lenient):
            producer.send(topic, b"on both replicas").result(timeout=30)

    admin_cluster.kill(2)
    wait_for(lambda: all(partition(admin, t).isr == (1,) for t in (strict, lenient)),
             "broker 2 out of the ISR")
    # Broker 1 alone has this record.
    with Producer(bootstrap_servers=admin_cluster.bootstrap_servers, acks=1) as producer:
        for topic in (strict, lenient):
            producer.send(topic, b"only on broker 1").result(timeout=30)
    assert end_offset(admin, tp_strict) == 2

    admin_cluster.kill(1)  # the whole ISR is dead now
    wait_for(lambda: all(partition(admin, t).leader is None for t in (strict, lenient)),
             "no leader")
    admin_cluster.start(2)  # alive, but not in sync: broker 1 had a record it lacks
    # The topic that allows unclean elections gets broker 2 as leader by itself...
    wait_for(lambda: partition(admin, lenient).leader == 2, "Kafka's own unclean election")
    assert partition(admin, strict).leader is None  # ...the other waits for an operator.

    preferred = admin.elect_leaders(ElectionType.PREFERRED, [tp_strict])
    assert isinstance(preferred[tp_strict].error, PreferredLeaderNotAvailableError)
    unclean = admin.elect_leaders(ElectionType.UNCLEAN, [tp_strict, tp_lenient])
    assert unclean[tp_strict].error is None
    assert isinstance(unclean[tp_lenient].error, ElectionNotNeededError)
    wait_for(lambda: partition(admin, strict).leader == 2, "broker 2 leads after the election")
    assert partition(admin, strict).isr == (2,)
    assert end_offset(admin, tp_strict) == 1  # the record only broker 1 had is gone
    assert dict(admin.elect_leaders(ElectionType.UNCLEAN)) == {}  # every partition has one

    admin_cluster.start(1)  # it truncates its log to broker 2's and follows
    wait_for(lambda: set(partition(admin, strict).isr) == {1, 2}, "broker 1 back in sync")
    assert end_offset(admin, tp_strict) == 1


def test_reassignment_and_cancel(admin_cluster: ApacheKafkaCluster, admin: AdminClient) -> None:
    name = create(admin, "move", {0: [1, 2]})
    tp = TopicPartition(name, 0)

    admin_cluster.kill(3)  # the new replica cannot catch up: the move stays in progress
    wait_for(lambda: fenced(admin, 3), "broker 3 fenced")
    started = admin.alter_partition_reassignments({tp: [2, 3]})
    assert started[tp].error is None  # a fenced broker is still a registered one
    listed = admin.list_partition_reassignments()
    assert listed[tp] == PartitionReassignment(tp, (2, 3, 1), adding=(3,), removing=(1,))
    assert admin.list_partition_reassignments([tp]) == {tp: listed[tp]}
    # Target first, then the leaving. Metadata answers come from a broker, which learns of
    # the change from the metadata log a moment after the controller answered.
    wait_for(lambda: partition(admin, name).replicas == (2, 3, 1), "replicas (2, 3, 1) listed")
    doc = cli_json(admin_cluster, "partitions", "reassignments", "--topic", name)
    assert doc == [{"topic": name, "partition": 0, "replicas": [2, 3, 1], "adding": [3],
                    "removing": [1]}]

    cancelled = admin.alter_partition_reassignments({tp: None})
    assert cancelled[tp].error is None
    assert admin.list_partition_reassignments() == {}
    # Kafka reverts to the old replica set, in the order of the reassigning list.
    wait_for(lambda: (set(partition(admin, name).replicas) == {1, 2}
                      and set(partition(admin, name).isr) == {1, 2}), "the old replicas back")
    again = admin.alter_partition_reassignments({tp: None})
    assert isinstance(again[tp].error, NoReassignmentInProgressError)
    refused = admin.alter_partition_reassignments({tp: [2, 99]})
    refusal = refused[tp].error
    assert isinstance(refusal, InvalidReplicaAssignmentError)
    assert "includes broker 99, but no such broker is registered" in str(refusal)

    admin_cluster.start(3)
    assert admin.alter_partition_reassignments({tp: [2, 3]})[tp].error is None
    wait_for(lambda: admin.list_partition_reassignments([tp]) == {}, "the move finished")
    # The controller finished; the broker answering Metadata learns it from the log a moment
    # later, so the leaving replica may still be listed for a while.
    wait_for(lambda: (partition(admin, name).replicas == (2, 3)
                      and set(partition(admin, name).isr) == {2, 3}), "replicas (2, 3) listed")
    assert partition(admin, name).leader in (2, 3)


def test_cli_reassign(admin_cluster: ApacheKafkaCluster, admin: AdminClient) -> None:
    name = create(admin, "move-cli", {0: [1, 2]})
    run = cli(admin_cluster, "partitions", "reassign", "--topic", name, "--partition", "0",
              "--replicas", "3,2")
    assert run.returncode == 0, run.stderr
    assert run.stdout == f"Started the reassignment of {name}-0 to replicas 3,2.\n"
    wait_for(lambda: cli_json(admin_cluster, "partitions", "reassignments") == [],
             "the move finished")
    described = cli_json(admin_cluster, "topics", "describe", name)
    assert described[0]["partitions"][0]["replicas"] == [3, 2]

    run = cli(admin_cluster, "partitions", "reassign", "--topic", name, "-p", "0", "--cancel")
    assert run.returncode == 1
    assert "NO_REASSIGNMENT_IN_PROGRESS" in run.stderr
    run = cli(admin_cluster, "partitions", "reassignments")
    assert run.returncode == 0 and run.stdout == "No partition reassignment in progress.\n"


def test_async_face_reassigns_and_elects(admin_cluster: ApacheKafkaCluster,
                                         admin: AdminClient) -> None:
    """The same calls through AsyncAdminClient (no fault: a move from [1, 2] to [3, 1] keeps
    broker 1 leading, as it stays in the ISR, until a preferred election hands it to 3)."""
    name = create(admin, "move-async", {0: [1, 2]})
    tp = TopicPartition(name, 0)

    async def move_and_elect() -> tuple[dict[int, PartitionDescription], Any, Any]:
        async with AsyncAdminClient(bootstrap_servers=admin_cluster.bootstrap_servers,
                                    default_api_timeout_ms=20_000) as aadmin:
            started = await aadmin.alter_partition_reassignments({tp: [3, 1]})
            assert started[tp].error is None
            for _ in range(int(DEADLINE_S / 0.25)):
                if await aadmin.list_partition_reassignments([tp]) == {}:
                    description = (await aadmin.describe_topics([name]))[name]
                    moved = {p.partition: p for p in description.partitions}
                    if moved[0].replicas == (3, 1) and set(moved[0].isr) == {1, 3}:
                        break
                await asyncio.sleep(0.25)
            else:
                raise AssertionError(f"{tp} did not move to [3, 1]")
            elected = await aadmin.elect_leaders(ElectionType.PREFERRED, [tp])
            for _ in range(int(DEADLINE_S / 0.25)):
                if (await aadmin.describe_topics([name]))[name].partitions[0].leader == 3:
                    break
                await asyncio.sleep(0.25)
            again = await aadmin.elect_leaders(ElectionType.PREFERRED, [tp])
            return moved, elected[tp].error, again[tp].error

    moved, first, second = asyncio.run(move_and_elect())
    assert moved[0].leader == 1  # completing the move elected nobody
    assert first is None
    assert partition(admin, name).leader == 3
    assert isinstance(second, ElectionNotNeededError)
