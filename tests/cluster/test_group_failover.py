"""A consumer group of three members (classic protocol) while its coordinator is SIGKILLed.

The group mixes the faces (two blocking ``Consumer`` members and one ``AsyncConsumer``, or
the other way round), so both meet the same coordinator failure. The members read a topic
of 6 partitions at a bounded pace, committing explicit offsets after each poll. Once a third
of the records were read, the broker that coordinates the group (as ``AdminClient``'s
``describe_consumer_groups`` names it, a FindCoordinator answer) is killed; it also leads
some partitions, so fetching fails over too. In one case a member only starts joining as the
coordinator is killed: the group then rebalances at the new coordinator while the other
members' commits wait for it, and partitions move away from members in mid-commit. Checked:

* the group finds the new coordinator: commits succeed again after the kill, and at the end
  every partition's committed offset is its end offset, as a different broker reports it;
* no record is lost: every offset below the end offsets was handed to some member;
* a record seen twice is at or after the last commit of its partition made before it was
  read again (a member starting below the last commit would repeat what was done). A commit
  counts once ``commit()`` returned; one that raised (e.g. CommitFailedError for a partition
  revoked while the commit waited for a rebalance) committed nothing for that partition.

The time from the kill to the end of the first successful commit begun after it is printed
in the summary.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from sdk import AdminClient, AsyncConsumer, Consumer, Producer, TopicPartition
from tools.apache_kafka import ApacheKafkaCluster

from .conftest import create_topic, new_topic, wait_for

PARTITIONS = 6
COUNT = 3000
POLL_RECORDS = 20
POLL_PAUSE_S = 0.1  # per poll: ~200 records/s per member, the run lasts ~10 s with the outage


@dataclass
class GroupLog:
    """Reads and successful commits of every member, in one order (``seq``)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    events: list[tuple[int, str, str, TopicPartition, int, float]] = field(default_factory=list)
    failed_commits: list[tuple[str, float, BaseException]] = field(default_factory=list)
    commit_times: list[tuple[float, float]] = field(default_factory=list)  # (begun, done)
    seen: set[tuple[int, int]] = field(default_factory=set)

    def add(self, kind: str, member: str, tp: TopicPartition, offset: int) -> None:
        with self.lock:
            self.events.append((len(self.events), kind, member, tp, offset, time.monotonic()))
            if kind == "read":
                self.seen.add((tp.partition, offset))

    def commit_failed(self, member: str, exc: BaseException) -> None:
        with self.lock:
            self.failed_commits.append((member, time.monotonic(), exc))

    def commit_done(self, begun: float) -> None:
        with self.lock:
            self.commit_times.append((begun, time.monotonic()))

    def first_commit_after(self, t0: float) -> float | None:
        """Seconds from ``t0`` to the end of the first successful commit begun after it."""
        with self.lock:
            times = [done for begun, done in self.commit_times if begun > t0]
        return min(times) - t0 if times else None


class Member:
    """One group member in a thread of its own: poll, handle, commit, until told to stop."""

    def __init__(self, name: str, face: str, topic: str, log: GroupLog, stop: threading.Event,
                 settings: dict[str, Any]) -> None:
        self.name, self.face, self.topic, self.log, self.stop = name, face, topic, log, stop
        self.settings = settings
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, name=f"member-{name}", daemon=True)

    def _handle(self, batch: dict[TopicPartition, list[Any]]) -> dict[TopicPartition, int]:
        offsets: dict[TopicPartition, int] = {}
        for tp, records in batch.items():
            for record in records:
                self.log.add("read", self.name, tp, record.offset)
            if records:
                offsets[tp] = records[-1].offset + 1
        return offsets

    def _committed(self, offsets: dict[TopicPartition, int], begun: float) -> None:
        self.log.commit_done(begun)
        for tp, offset in offsets.items():
            self.log.add("commit", self.name, tp, offset)

    def _main(self) -> None:
        try:
            if self.face == "sync":
                self._run_sync()
            else:
                asyncio.run(self._run_async())
        except BaseException as exc:
            self.error = exc

    def _run_sync(self) -> None:
        with Consumer(self.topic, **self.settings) as consumer:
            while not self.stop.is_set():
                offsets = self._handle(consumer.poll(timeout_ms=200, max_records=POLL_RECORDS))
                if offsets:
                    begun = time.monotonic()
                    try:
                        consumer.commit(offsets, timeout_ms=10_000)
                        self._committed(offsets, begun)
                    except Exception as exc:  # retried with the next poll's commit
                        self.log.commit_failed(self.name, exc)
                time.sleep(POLL_PAUSE_S)

    async def _run_async(self) -> None:
        async with AsyncConsumer(self.topic, **self.settings) as consumer:
            while not self.stop.is_set():
                offsets = self._handle(await consumer.getmany(timeout_ms=200,
                                                              max_records=POLL_RECORDS))
                if offsets:
                    begun = time.monotonic()
                    try:
                        await consumer.commit(offsets, timeout_ms=10_000)
                        self._committed(offsets, begun)
                    except Exception as exc:
                        self.log.commit_failed(self.name, exc)
                await asyncio.sleep(POLL_PAUSE_S)


def _produce(bootstrap: str, topic: str) -> dict[int, int]:
    """COUNT records spread evenly over the partitions; returns the end offsets."""
    with Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=5) as producer:
        futures = [producer.send(topic, str(i).encode(), partition=i % PARTITIONS)
                   for i in range(COUNT)]
        producer.flush(timeout=60)
        assert all(f.exception(0) is None for f in futures)
    return {p: COUNT // PARTITIONS for p in range(PARTITIONS)}


def _coordinator(admin: AdminClient, group: str) -> int:
    description = admin.describe_consumer_groups([group], timeout_ms=10_000)[group]
    if description.error is not None:
        raise description.error
    assert description.coordinator is not None
    return description.coordinator.node_id


def _check_duplicates(log: GroupLog) -> list[str]:
    """Reads of an offset already read that lie below the partition's last commit made
    before the re-read (see the module docstring)."""
    bad: list[str] = []
    committed: dict[TopicPartition, tuple[int, str]] = {}  # highest commit, and its member
    seen: dict[tuple[TopicPartition, int], str] = {}
    for _, kind, member, tp, offset, _t in log.events:
        if kind == "commit":
            if offset > committed.get(tp, (0, ""))[0]:
                committed[tp] = (offset, member)
        elif (tp, offset) in seen and offset < committed.get(tp, (0, ""))[0]:
            bad.append(f"{tp.topic}-{tp.partition}@{offset} read by {seen[tp, offset]}, then "
                       f"by {member} although {committed[tp][1]} had committed offset "
                       f"{committed[tp][0]}")
        else:
            seen.setdefault((tp, offset), member)
    return bad


@pytest.mark.timeout(300)
@pytest.mark.parametrize("assignor, faces, late", [
    ("range", ("sync", "async", "sync"), False),
    ("cooperative-sticky", ("async", "sync", "async"), False),
    # The second member joins as the coordinator dies: the group rebalances at the new
    # coordinator while the others' commits wait for it (partitions move mid-commit).
    ("cooperative-sticky", ("async", "sync", "async"), True),
])
def test_group_survives_its_coordinator_killed(
        kafka_cluster: ApacheKafkaCluster, failover_report: list[str], assignor: str,
        faces: tuple[str, ...], late: bool) -> None:
    cluster = kafka_cluster
    topic = create_topic(cluster, f"group-{assignor}", PARTITIONS)
    ends = _produce(cluster.bootstrap_servers, topic)
    group = new_topic(f"g-{assignor}")
    log = GroupLog()
    stop = threading.Event()
    settings = {"bootstrap_servers": cluster.bootstrap_servers, "group_id": group,
                "partition_assignment_strategy": assignor, "enable_auto_commit": False,
                "auto_offset_reset": "earliest", "request_timeout_ms": 10_000}
    members = [Member(f"{face}{i}", face, topic, log, stop, {**settings, "client_id": f"{face}{i}"})
               for i, face in enumerate(faces)]
    late_member = members[1] if late else None
    for member in members:
        if member is not late_member:
            member.thread.start()
    try:
        with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
            _wait_all_read(log, members, COUNT // 3, 90)
            coordinator = _coordinator(admin, group)
            if late_member is not None:
                late_member.thread.start()
            t_kill = time.monotonic()
            cluster.kill(coordinator)
            _wait_all_read(log, members, COUNT, 120)
            resumed = wait_for(lambda: log.first_commit_after(t_kill), 60,
                               "a successful commit after the coordinator was killed")
            failover_report.append(
                f"group {assignor:18} coordinator broker {coordinator} killed"
                f"{' as a member joined' if late else ''}: first commit "
                f"after {resumed:.2f} s; {len(log.failed_commits)} commits failed meanwhile; "
                f"{_reads(log) - len(log.seen)} records read twice")
            new_coordinator = wait_for(lambda: _coordinator(admin, group), 60,
                                       "the group's new coordinator")
            assert new_coordinator != coordinator
            # Let the last commits land, then stop the members (they leave the group).
            wait_for(lambda: _committed_to_end(admin, group, topic, ends), 60,
                     "committed offsets at the end offsets")
    finally:
        stop.set()
        for member in members:
            if member.thread.ident is not None:  # started
                member.thread.join(60)
    for member in members:
        assert not member.thread.is_alive(), f"member {member.name} did not close"
        assert member.error is None, f"member {member.name}: {member.error!r}"
    lost = [(p, o) for p in range(PARTITIONS) for o in range(ends[p])
            if (p, o) not in log.seen]
    assert not lost, f"{len(lost)} records never handed out, e.g. {lost[:10]}"
    bad = _check_duplicates(log)
    assert not bad, f"{len(bad)} records repeated from before a commit: {bad[:10]}"


def _reads(log: GroupLog) -> int:
    with log.lock:
        return sum(1 for event in log.events if event[1] == "read")


def _wait_all_read(log: GroupLog, members: list[Member], n: int, timeout_s: float) -> None:
    def enough() -> bool:
        for member in members:
            if member.error is not None:
                raise AssertionError(f"member {member.name} failed: {member.error!r}")
        return len(log.seen) >= n

    try:
        wait_for(enough, timeout_s, f"{n} distinct records read by the group", interval_s=0.05)
    except TimeoutError as exc:
        failures = log.failed_commits[-3:]
        raise AssertionError(f"{exc}; read {len(log.seen)}; last failed commits: "
                             f"{failures}") from None


def _committed_to_end(admin: AdminClient, group: str, topic: str,
                      ends: dict[int, int]) -> bool:
    offsets = admin.list_consumer_group_offsets(group, timeout_ms=10_000)
    got = {tp.partition: offsets[tp].offset for tp in offsets if tp.topic == topic}
    return got == ends
