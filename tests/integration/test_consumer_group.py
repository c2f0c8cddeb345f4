"""Consumer groups against real brokers: sharing, failover, restarts, cooperative
rebalancing, static membership, poll-interval enforcement and mixed-client groups.

Members are our blocking Consumer on threads, a subprocess (so it can be killed with
SIGKILL, like a crashed application), or kafka-python / aiokafka members. Data comes from
confluent-kafka. Sessions are short (6 s) so failover is quick, and tansu, which holds a
JoinGroup for about half the session timeout, stays fast enough.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from sdk import Consumer, TopicPartition
from sdk.consumer import ConsumerRebalanceListener
from sdk.errors import CommitFailedError

from .conftest import Target, new_topic
from .test_consumer import produce

ROOT = Path(__file__).resolve().parents[2]
SESSION_MS = 6000
GROUP = {"session_timeout_ms": SESSION_MS, "heartbeat_interval_ms": 500}
WAIT_S = 60.0  # generous: a rebalance on tansu takes a few seconds per round


def wait_until(predicate: Any, timeout_s: float = WAIT_S, what: str = "condition") -> float:
    """Wait for ``predicate()``; returns the seconds it took."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout_s:
            raise AssertionError(f"{what} not reached within {timeout_s:g} s")
        time.sleep(0.1)
    return time.monotonic() - start


class Member:
    """One of our consumers polling on a thread, committing after every poll. With
    ``keep_on_commit_failed`` a ``CommitFailedError`` is kept in ``commit_failures`` and the
    member polls on (as a Java application catching CommitFailedException does: its next
    poll rejoins); otherwise any exception ends the member."""

    def __init__(self, name: str, bootstrap: str, topic: str, group: str, *,
                 keep_on_commit_failed: bool = False, **settings: Any) -> None:
        self.name = name
        self.keep_on_commit_failed = keep_on_commit_failed
        self.commit_failures: list[CommitFailedError] = []
        self.seen: list[tuple[int, int]] = []
        self.events: list[tuple[str, frozenset[int]]] = []
        self.assigned: set[int] = set()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._settings = dict(bootstrap_servers=bootstrap, group_id=group,
                              auto_offset_reset="earliest", enable_auto_commit=False,
                              **GROUP, **settings)
        self._topic = topic
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
                member.events.append(("revoked", frozenset(tp.partition for tp in revoked)))

            def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
                member.events.append(("assigned", frozenset(tp.partition for tp in assigned)))

        try:
            with Consumer(**self._settings) as consumer:
                consumer.subscribe([self._topic], listener=Listener())
                while not self._stop.is_set():
                    batch = consumer.poll(timeout_ms=200, max_records=50)
                    for tp, records in batch.items():
                        self.seen.extend((tp.partition, r.offset) for r in records)
                    if batch:
                        try:
                            consumer.commit()
                        except CommitFailedError as exc:
                            if not self.keep_on_commit_failed:
                                raise
                            self.commit_failures.append(exc)
                    self.assigned = {tp.partition for tp in consumer.assignment()}
        except BaseException as exc:  # reported by the test
            self.error = exc

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise self.error


CHILD = r"""
import json, sys, time
from sdk import Consumer
bootstrap, topic, group = sys.argv[1:4]
with Consumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
              enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500) as c:
    while True:
        batch = c.poll(timeout_ms=200, max_records=10)
        consumed = [(tp.partition, r.offset) for tp, rs in batch.items() for r in rs]
        if consumed:
            print(json.dumps({"consumed": consumed}), flush=True)
            c.commit()
            print(json.dumps({"committed": {tp.partition: rs[-1].offset + 1
                                            for tp, rs in batch.items()}}), flush=True)
        print(json.dumps({"assigned": sorted(tp.partition for tp in c.assignment())}), flush=True)
        time.sleep(0.1)  # slow, so it still has work when it is killed
"""


class ChildMember:
    """A consumer in a subprocess that reports what it consumed and committed."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, bootstrap, topic, group],
                                     stdout=subprocess.PIPE, text=True, env=env)
        self.seen: list[tuple[int, int]] = []
        self.committed: dict[int, int] = {}
        self.assigned: list[int] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            msg = json.loads(line)
            if "consumed" in msg:
                self.seen.extend(tuple(x) for x in msg["consumed"])
            elif "committed" in msg:
                self.committed.update({int(p): o for p, o in msg["committed"].items()})
            else:
                self.assigned = msg["assigned"]

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)


def test_group_of_three_shares_twelve_partitions_and_survives_a_killed_member(
        broker: Target) -> None:
    topic, group = new_topic(), f"g-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 12)
    produce(broker.bootstrap_servers, topic, 1200, 12)  # 100 records per partition
    a = Member("a", broker.bootstrap_servers, topic, group)
    b = Member("b", broker.bootstrap_servers, topic, group)
    child = ChildMember(broker.bootstrap_servers, topic, group)
    try:
        wait_until(lambda: len(a.assigned) == len(b.assigned) == len(child.assigned) == 4,
                   what="three members with four partitions each")
        assert a.assigned | b.assigned | set(child.assigned) == set(range(12))
        wait_until(lambda: len(child.seen) >= 20, what="the child consuming")
        child.kill()
        moved_after = wait_until(lambda: a.assigned | b.assigned == set(range(12)),
                                 what="the killed member's partitions moving")
        logging.getLogger(__name__).info("partitions moved %.1f s after the kill "
                                         "(session timeout %d ms)", moved_after, SESSION_MS)
        everything = {(p, o) for p in range(12) for o in range(100)}
        wait_until(lambda: everything <= set(a.seen) | set(b.seen) | set(child.seen),
                   what="every record consumed")
    finally:
        a.stop()
        b.stop()
        if child.proc.poll() is None:
            child.kill()
    counts = Counter(a.seen + b.seen + child.seen)
    duplicates = [pair for pair, n in counts.items() if n > 1]
    for partition, offset in duplicates:
        # Only what the killed member consumed but had not committed is read twice.
        assert (partition, offset) in set(child.seen)
        assert offset >= child.committed.get(partition, 0)
    # The survivors never lost anything they committed: each of their records came once.
    assert not (Counter(a.seen) - Counter(set(a.seen))) and not (Counter(b.seen) - Counter(set(b.seen)))


def test_cooperative_rebalance_moves_only_what_it_must(broker: Target) -> None:
    topic, group = new_topic(), f"g-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 6)
    stop_producing = threading.Event()

    def keep_producing() -> None:
        start = 0
        while not stop_producing.is_set():
            produce(broker.bootstrap_servers, topic, 60, 6, start=start)
            start += 60
            time.sleep(0.2)

    producer = threading.Thread(target=keep_producing, daemon=True)
    producer.start()
    settings = {"partition_assignment_strategy": "cooperative-sticky"}
    a = Member("a", broker.bootstrap_servers, topic, group, **settings)
    b = Member("b", broker.bootstrap_servers, topic, group, **settings)
    c = None
    try:
        wait_until(lambda: len(a.assigned) == len(b.assigned) == 3, what="two members of three")
        before = {"a": set(a.assigned), "b": set(b.assigned)}
        # Only the rebalance that c's arrival starts counts (a may have held all six first).
        events_before = {"a": len(a.events), "b": len(b.events)}
        seen_before = {"a": len(a.seen), "b": len(b.seen)}
        c = Member("c", broker.bootstrap_servers, topic, group, **settings)
        wait_until(lambda: len(a.assigned) == len(b.assigned) == len(c.assigned) == 2,
                   what="three members of two")
        wait_until(lambda: len(a.seen) > seen_before["a"] and len(b.seen) > seen_before["b"],
                   what="the first members still consuming")
        # Read before closing, which revokes everything.
        events = {m.name: list(m.events)[events_before.get(m.name, 0):] for m in (a, b, c)}
        final = {m.name: set(m.assigned) for m in (a, b, c)}
    finally:
        stop_producing.set()
        producer.join(30)
        for m in (a, b, c):
            if m is not None:
                m.stop()
    assert final["a"] | final["b"] | final["c"] == set(range(6))
    for name in ("a", "b"):
        kept = final[name]
        assert kept <= before[name]  # sticky: nothing new, one partition given away
        revoked = set().union(*(parts for kind, parts in events[name] if kind == "revoked"))
        assert revoked == before[name] - kept  # only the moved partition was revoked
    assert all(kind == "assigned" for kind, _ in events["c"])


def test_restart_of_a_static_member_keeps_its_partitions(broker: Target) -> None:
    topic, group = new_topic(), f"g-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 4)
    settings = dict(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                    auto_offset_reset="earliest", **GROUP)
    other = Member("other", broker.bootstrap_servers, topic, group, group_instance_id="other")
    try:
        with Consumer(topic, group_instance_id="static-1", **settings) as first:
            wait_until(lambda: (first.poll(timeout_ms=100) is not None
                                and len(first.assignment()) == 2 and len(other.assigned) == 2),
                       what="two static members of two partitions")
            mine = first.assignment()
        # Closing a static member sends no LeaveGroup: its partitions wait for it.
        with Consumer(topic, group_instance_id="static-1", **settings) as again:
            wait_until(lambda: again.poll(timeout_ms=100) is not None and again.assignment(),
                       what="the restarted member rejoining")
            assert again.assignment() == mine
        assert len(other.assigned) == 2
        assert [kind for kind, _ in other.events] == ["assigned"]  # never rebalanced
    finally:
        other.stop()


def test_exceeding_max_poll_interval_leaves_the_group(broker: Target,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    topic, group = new_topic(), f"g-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 2)
    produce(broker.bootstrap_servers, topic, 10, 2)
    caplog.set_level(logging.WARNING, logger="sdk.consumer.membership")
    other = Member("other", broker.bootstrap_servers, topic, group)
    try:
        with Consumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                      auto_offset_reset="earliest", max_poll_interval_ms=3000, **GROUP) as slow:
            wait_until(lambda: slow.poll(timeout_ms=100) is not None
                       and len(slow.assignment()) == 1 and len(other.assigned) == 1,
                       what="two members")
            # The application stops polling: the member must leave, the other takes over.
            wait_until(lambda: len(other.assigned) == 2, what="the stuck member leaving")
            assert "max_poll_interval_ms" in caplog.text
            wait_until(lambda: slow.poll(timeout_ms=100) is not None
                       and len(slow.assignment()) == 1,
                       what="the member rejoining on its next poll")
    finally:
        other.stop()


def test_unsubscribe_hands_the_partitions_over(broker: Target) -> None:
    topic, group = new_topic(), f"g-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 2)
    revoked: list[set[TopicPartition]] = []

    class Remember(ConsumerRebalanceListener):
        def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
            revoked.append(partitions)

    other = Member("other", broker.bootstrap_servers, topic, group)
    try:
        with Consumer(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                      **GROUP) as leaving:
            leaving.subscribe([topic], listener=Remember())
            wait_until(lambda: leaving.poll(timeout_ms=100) is not None
                       and len(leaving.assignment()) == 1 and len(other.assigned) == 1,
                       what="two members")
            mine = leaving.assignment()
            leaving.unsubscribe()
            # Still open and heartbeating: only a LeaveGroup lets the other member take over.
            wait_until(lambda: len(other.assigned) == 2, what="the other member taking over")
            assert leaving.assignment() == set() and revoked == [mine]
    finally:
        other.stop()


def test_commit_inside_the_revoke_listener(broker: Target) -> None:
    topic, group = new_topic(), f"g-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 2)
    produce(broker.bootstrap_servers, topic, 200, 2)
    committed_in_listener: list[set[TopicPartition]] = []
    consumer = Consumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                        auto_offset_reset="earliest", enable_auto_commit=False, **GROUP)

    class CommitOnRevoke(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
            consumer.commit()  # a blocking call from inside the listener
            committed_in_listener.append(revoked)

    try:
        consumer.subscribe([topic], listener=CommitOnRevoke())
        got: list[tuple[int, int]] = []
        wait_until(lambda: got.extend((tp.partition, r.offset)
                                      for tp, rs in consumer.poll(timeout_ms=100, max_records=20).items()
                                      for r in rs) or len(got) >= 40,
                   what="the first member consuming")
        second = Member("second", broker.bootstrap_servers, topic, group)
        try:
            wait_until(lambda: consumer.poll(timeout_ms=100) is not None
                       and len(consumer.assignment()) == 1 and len(second.assigned) == 1,
                       what="the partitions split")
        finally:
            second.stop()
        assert committed_in_listener
        moved = TopicPartition(topic, second.assigned.pop())
        mine_before = [o for p, o in got if p == moved.partition]
        theirs = [o for p, o in second.seen if p == moved.partition]
        if mine_before and theirs:
            assert min(theirs) == max(mine_before) + 1  # resumed exactly after our commit
    finally:
        consumer.close()


@pytest.mark.parametrize("peer", ["kafka-python", "aiokafka"])
def test_mixed_group_with_another_client(broker: Target, peer: str) -> None:
    topic, group = new_topic(), f"g-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 6)
    produce(broker.bootstrap_servers, topic, 60, 6)
    theirs: dict[str, Any] = {"assigned": set(), "seen": 0}
    stop = threading.Event()

    def run_peer() -> None:
        if peer == "kafka-python":
            import kafka

            c = kafka.KafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers,
                                    group_id=group, auto_offset_reset="earliest",
                                    session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500)
            while not stop.is_set():
                for records in c.poll(200).values():
                    theirs["seen"] += len(records)
                theirs["assigned"] = {tp.partition for tp in c.assignment()}
            c.close()
        else:
            import asyncio

            import aiokafka
            from aiokafka.coordinator.assignors.range import RangePartitionAssignor

            async def run() -> None:
                c = aiokafka.AIOKafkaConsumer(
                    topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                    auto_offset_reset="earliest", session_timeout_ms=SESSION_MS,
                    heartbeat_interval_ms=500,
                    partition_assignment_strategy=(RangePartitionAssignor,))
                await c.start()
                while not stop.is_set():
                    for records in (await c.getmany(timeout_ms=200)).values():
                        theirs["seen"] += len(records)
                    theirs["assigned"] = {tp.partition for tp in c.assignment()}
                await c.stop()

            asyncio.run(run())

    thread = threading.Thread(target=run_peer, daemon=True)
    thread.start()
    ours = Member("ours", broker.bootstrap_servers, topic, group,
                  partition_assignment_strategy="range")
    try:
        wait_until(lambda: len(ours.assigned) == 3 and len(theirs["assigned"]) == 3,
                   what="the two clients splitting six partitions")
        assert ours.assigned | theirs["assigned"] == set(range(6))
        wait_until(lambda: len(ours.seen) >= 30, what="ours consuming its half")
    finally:
        stop.set()
        thread.join(60)
        ours.stop()


def _tansu_restart_loses_the_group_and_topic(broker: Target) -> None:
    """tansu's difference, asserted: it has no control surface to inject coordinator errors,
    and its memory storage forgets topics, records and committed offsets when it restarts,
    so there is no member to keep (the other targets keep all three)."""
    from sdk import AdminClient

    assert broker.tansu is not None
    topic, group = new_topic(), f"g-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 2)
    produce(broker.bootstrap_servers, topic, 20, 2)
    with Consumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                  auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
        seen = 0
        deadline = time.monotonic() + WAIT_S
        while seen < 20 and time.monotonic() < deadline:
            seen += sum(len(r) for r in consumer.poll(timeout_ms=1000).values())
        assert seen == 20
        consumer.commit()
    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        assert topic in admin.list_topics()
        assert len(admin.list_consumer_group_offsets(group).succeeded) == 2
    broker.tansu.stop()
    broker.tansu.start()  # same port, empty memory
    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        assert topic not in admin.list_topics()
        assert admin.list_consumer_group_offsets(group).succeeded == {}


def test_member_survives_coordinator_errors_and_a_broker_restart(broker: Target) -> None:
    """Coordinator errors (injected through our broker's control surface, so on ``ref``
    only), then the only broker crashes and restarts (``ref`` restarted in place, Apache
    Kafka's node SIGKILLed and started on the same data): the member reads on.

    A difference: our broker is back within the session and keeps the member; Apache
    Kafka's restarted coordinator answers its first heartbeat UNKNOWN_MEMBER_ID (seen with
    restarts of 14-20 s against a 6 s session), so the member rejoins, and a commit of
    records it had fetched before it learned that raises CommitFailedError."""
    if broker.tansu is not None:
        _tansu_restart_loses_the_group_and_topic(broker)
        return
    from sdk.protocol.api import ApiKey

    topic, group = new_topic(), f"g-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 2)
    produce(broker.bootstrap_servers, topic, 20, 2)
    member = Member("m", broker.bootstrap_servers, topic, group,
                    keep_on_commit_failed=broker.embedded is None)
    control = broker.embedded.control if broker.embedded is not None else None
    try:
        wait_until(lambda: len(set(member.seen)) == 20, what="the first records")
        if control is not None:
            # The coordinator "moves": heartbeats, commits and lookups fail for a while.
            control.fail_next(ApiKey.HEARTBEAT, 16, times=3)  # NOT_COORDINATOR
            control.fail_next(ApiKey.OFFSET_COMMIT, 16, times=2)
            control.fail_next(ApiKey.FIND_COORDINATOR, 15, times=2)  # COORDINATOR_NOT_AVAILABLE
        produce(broker.bootstrap_servers, topic, 20, 2, start=20)
        wait_until(lambda: len(set(member.seen)) == 40, what="records after coordinator errors")
        if control is not None:
            wait_until(lambda: control.pending(ApiKey.HEARTBEAT) == 0, what="heartbeats retried")
        # The only broker restarts: connections drop, the group is reloaded from its log.
        if broker.embedded is not None:
            broker.embedded.restart()
        else:
            broker.cluster.kill(1)
            broker.cluster.start(1)  # same port and data; waits until it answers Metadata
        produce(broker.bootstrap_servers, topic, 20, 2, start=40)
        wait_until(lambda: len(set(member.seen)) == 60, what="records after the restart")
    finally:
        if control is not None:
            control.clear()
        member.stop()  # raises what the member's thread raised
    assert set(member.seen) == {(p, o) for p in range(2) for o in range(30)}
    if broker.embedded is not None:  # our broker kept the member through it all
        assert [kind for kind, _ in member.events] == ["assigned", "revoked"]  # (at close)
        assert member.commit_failures == []
