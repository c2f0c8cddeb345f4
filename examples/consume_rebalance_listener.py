"""A rebalance listener: commit before partitions go away, start fresh when they arrive.

    python examples/consume_rebalance_listener.py [--bootstrap-server HOST:PORT] [--topic T]

Two members of one group run on threads; the second joins later, so the first member sees
its partitions revoked (and commits what it processed, from inside the listener) and then
reassigned. With cooperative-sticky only the partitions that move are revoked. Without
--bootstrap-server a reference broker is started in this process.
"""

from __future__ import annotations

import argparse
import contextlib
import threading
import time
from collections.abc import Iterator

from sdk import AdminClient, Consumer, NewTopic, Producer, TopicPartition


@contextlib.contextmanager
def broker(bootstrap: str | None) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    from server_ref import EmbeddedBroker

    with EmbeddedBroker(data_dir=None, port=0) as embedded:
        yield embedded.bootstrap_servers


class CommitOnRevoke:
    """Any object with these methods is a listener (each may also be ``async def``)."""

    def __init__(self, name: str, consumer: Consumer) -> None:
        self.name = name
        self.consumer = consumer

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        # Still a member of the old generation here, so the commit is accepted.
        self.consumer.commit()
        print(f"[{self.name}] revoked {sorted(map(str, revoked))}; committed")

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        print(f"[{self.name}] assigned {sorted(map(str, assigned))}")

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        # Membership was lost: these are someone else's already; committing would fail.
        print(f"[{self.name}] lost {sorted(map(str, lost))}")


def member(name: str, bootstrap: str, topic: str, strategy: str, stop: threading.Event) -> None:
    with Consumer(bootstrap_servers=bootstrap, group_id="listener-example",
                  auto_offset_reset="earliest", enable_auto_commit=False,
                  partition_assignment_strategy=strategy,
                  session_timeout_ms=6000, heartbeat_interval_ms=500) as consumer:
        consumer.subscribe([topic], listener=CommitOnRevoke(name, consumer))
        while not stop.is_set():
            for tp, records in consumer.poll(timeout_ms=200).items():
                print(f"[{name}] {tp}: {len(records)} records")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server", default=None)
    parser.add_argument("--topic", default="payments")
    parser.add_argument("--strategy", default="cooperative-sticky",
                        choices=["range", "roundrobin", "sticky", "cooperative-sticky"])
    args = parser.parse_args()
    with broker(args.bootstrap_server) as bootstrap:
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([NewTopic(args.topic, num_partitions=4, replication_factor=1)])
        with Producer(bootstrap_servers=bootstrap) as producer:
            for i in range(40):
                producer.send(args.topic, f"payment {i}".encode(), partition=i % 4)
        stop = threading.Event()
        first = threading.Thread(target=member, args=("one", bootstrap, args.topic,
                                                      args.strategy, stop))
        first.start()
        time.sleep(6)  # let the first member take every partition
        second = threading.Thread(target=member, args=("two", bootstrap, args.topic,
                                                       args.strategy, stop))
        second.start()
        time.sleep(8)
        stop.set()
        first.join()
        second.join()


if __name__ == "__main__":
    main()
