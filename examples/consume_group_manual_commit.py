"""A consumer group member that commits by hand, after processing each batch.

    python examples/consume_group_manual_commit.py [--bootstrap-server HOST:PORT] [--topic T]

Records are processed first and committed afterwards, so a crash in between only means
they are read again (at-least-once). Run it twice at once with the same --group to see the
partitions shared between the two members. Without --bootstrap-server a reference broker is
started in this process, and some records are produced first.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator

from sdk import Consumer, NewTopic, OffsetAndMetadata, Producer, TopicPartition, errors


@contextlib.contextmanager
def broker(bootstrap: str | None) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    from server_ref import EmbeddedBroker

    with EmbeddedBroker(data_dir=None, port=0) as embedded:
        yield embedded.bootstrap_servers


def produce_some(bootstrap: str, topic: str, count: int) -> None:
    from sdk import AdminClient

    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        for i in range(count):
            producer.send(topic, f"order {i}".encode(), key=f"customer-{i % 5}".encode())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server", default=None)
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--group", default="billing")
    parser.add_argument("--count", type=int, default=30, help="stop after this many records")
    args = parser.parse_args()

    with broker(args.bootstrap_server) as bootstrap:
        if args.bootstrap_server is None:
            produce_some(bootstrap, args.topic, args.count)
        with Consumer(args.topic, bootstrap_servers=bootstrap, group_id=args.group,
                      auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
            processed = 0
            polls_without_records = 0
            while processed < args.count and polls_without_records < 20:
                batch = consumer.poll(timeout_ms=500, max_records=10)
                polls_without_records = 0 if batch else polls_without_records + 1
                for tp, records in batch.items():
                    for record in records:
                        print(f"{tp} offset {record.offset}: {record.key!r} {record.value!r}")
                    processed += len(records)
                    # Commit the position after the last processed record, with a note.
                    last = records[-1].offset
                    offsets = {TopicPartition(tp.topic, tp.partition):
                               OffsetAndMetadata(last + 1, "processed by example")}
                    try:
                        consumer.commit(offsets)
                    except errors.KafkaError as exc:  # e.g. the group rebalanced meanwhile
                        print(f"commit of {tp} failed, these records may come again: {exc}")
            for tp in sorted(consumer.assignment()):
                print(f"{tp}: committed {consumer.committed(tp)}, position {consumer.position(tp)}")


if __name__ == "__main__":
    main()
