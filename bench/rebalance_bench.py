"""Rebalance time: a fifth member joins a group of four, with three group protocols.

    .venv/bin/python bench/rebalance_bench.py                      # both brokers, 5 rounds
    .venv/bin/python bench/rebalance_bench.py --brokers ref --rounds 9
    .venv/bin/python bench/rebalance_bench.py --fast               # 500 ms heartbeats

Protocols (our consumer in each):

* ``eager``       classic group, ``partition_assignment_strategy="range"``: every member
  gives up everything, rejoins, and gets a new assignment;
* ``cooperative`` classic group, ``cooperative-sticky``: two rebalances, only moved
  partitions stop;
* ``consumer``    KIP-848 (``group_protocol="consumer"``): the broker assigns; members learn
  of it at their next heartbeat and hand over partitions one by one.

A round: four members join a 20-partition topic and settle (not timed); then the clock
starts, a fifth member subscribes, and it stops when the five assignments are disjoint,
cover every partition and the newcomer owns some. Each member polls in a thread of its own
(100 ms polls). "stopped" counts the partitions the members gave up on the way (revoked or
lost; the median of the rounds): eager stops all of them, the others only those that move. Brokers use their defaults unless ``--fast``: classic heartbeats every 3 s
(heartbeat.interval.ms), consumer-protocol heartbeats every 5 s
(group.consumer.heartbeat.interval.ms) on both brokers; ``--fast`` sets 500 ms for both, so
the figures show the protocols rather than the heartbeat timers. Apache Kafka 4.3.1 runs as
a single node (tools/apache_kafka.py). Prints the median, min and max of the rounds.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sdk import AdminClient, Consumer, TopicPartition  # noqa: E402
from sdk.types import NewTopic  # noqa: E402

PARTITIONS = 20
PROTOCOLS = ("eager", "cooperative", "consumer")
SETTLE_TIMEOUT_S = 120.0


def settings(protocol: str, fast: bool) -> dict[str, Any]:
    if protocol == "consumer":
        return {"group_protocol": "consumer"}
    strategy = "range" if protocol == "eager" else "cooperative-sticky"
    out: dict[str, Any] = {"partition_assignment_strategy": strategy}
    if fast:
        out.update(heartbeat_interval_ms=500, session_timeout_ms=10_000)
    return out


class Member:
    def __init__(self, bootstrap: str, group: str, topic: str, extra: dict[str, Any]) -> None:
        self.consumer = Consumer(bootstrap_servers=bootstrap, group_id=group,
                                 auto_offset_reset="earliest", **extra)
        self.revoked = 0  # partitions this member stopped consuming (revoked or lost)
        self.consumer.subscribe([topic], listener=self)
        self.assignment: set[TopicPartition] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.revoked += len(revoked)

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.revoked += len(lost)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(timeout_ms=100)
            self.assignment = set(self.consumer.assignment())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def settled(members: list[Member], everything: set[TopicPartition]) -> bool:
    seen: set[TopicPartition] = set()
    for m in members:
        a = m.assignment
        if seen & a:
            return False
        seen |= a
    return seen == everything and all(m.assignment for m in members)


def wait_settled(members: list[Member], everything: set[TopicPartition]) -> None:
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while not settled(members, everything):
        if time.monotonic() > deadline:
            raise TimeoutError("the group did not settle")
        time.sleep(0.01)


def one_round(bootstrap: str, topic: str, protocol: str, fast: bool) -> tuple[float, int]:
    """(seconds until settled, partitions the four members stopped consuming)."""
    group = f"bench-{protocol}-{uuid.uuid4().hex[:8]}"
    everything = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    extra = settings(protocol, fast)
    members = [Member(bootstrap, group, topic, extra) for _ in range(4)]
    try:
        wait_settled(members, everything)
        for m in members:
            m.revoked = 0
        start = time.monotonic()
        members.append(Member(bootstrap, group, topic, extra))
        wait_settled(members, everything)
        return time.monotonic() - start, sum(m.revoked for m in members)
    finally:
        for m in members:
            m.close()


@contextlib.contextmanager
def broker(name: str, fast: bool) -> Iterator[str]:
    if name == "ref":
        from server_ref import EmbeddedBroker

        config = {"group.initial.rebalance.delay.ms": 0}
        if fast:  # the bounds must allow it on either broker, as Kafka checks at start
            config.update({"group.consumer.heartbeat.interval.ms": 500,
                           "group.consumer.min.heartbeat.interval.ms": 500})
        with EmbeddedBroker(config=config) as b:
            yield b.bootstrap_servers
    else:
        from tools.apache_kafka import ApacheKafkaCluster

        config = {"group.initial.rebalance.delay.ms": 0}
        if fast:
            config.update({"group.consumer.heartbeat.interval.ms": 500,
                           "group.consumer.min.heartbeat.interval.ms": 500})
        with ApacheKafkaCluster(1, 1, config=config) as cluster:
            yield cluster.bootstrap_servers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--brokers", default="ref,apache")
    parser.add_argument("--protocols", default=",".join(PROTOCOLS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--fast", action="store_true")
    args = parser.parse_args()
    rows = []
    for name in args.brokers.split(","):
        with broker(name, args.fast) as bootstrap:
            topic = f"rebalance-{uuid.uuid4().hex[:6]}"
            with AdminClient(bootstrap_servers=bootstrap) as admin:
                admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
            times: dict[str, list[float]] = {p: [] for p in args.protocols.split(",")}
            stopped: dict[str, list[int]] = {p: [] for p in times}
            for _ in range(args.rounds):  # protocols interleaved round by round
                for protocol in times:
                    seconds, revoked = one_round(bootstrap, topic, protocol, args.fast)
                    times[protocol].append(seconds)
                    stopped[protocol].append(revoked)
            for protocol, ts in times.items():
                paused = statistics.median(stopped[protocol])
                rows.append((name, protocol, statistics.median(ts), min(ts), max(ts), len(ts),
                             paused))
                print(f"{name:6} {protocol:12} median {statistics.median(ts):6.2f} s  "
                      f"min {min(ts):6.2f}  max {max(ts):6.2f}  ({len(ts)} rounds)  "
                      f"partitions stopped {paused:g}", flush=True)
    print("\nbroker protocol     median   min    max  stopped  (s, a fifth member joining "
          f"four, {PARTITIONS} partitions; "
          f"{'500 ms heartbeats' if args.fast else 'default heartbeats'})")
    for name, protocol, med, lo, hi, n, paused in rows:
        print(f"{name:6} {protocol:12} {med:6.2f} {lo:6.2f} {hi:6.2f}  {paused:7g}  n={n}")


if __name__ == "__main__":
    main()
