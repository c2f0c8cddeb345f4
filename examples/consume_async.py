"""AsyncConsumer: read records with ``async for`` and in batches with ``getmany``.

    python examples/consume_async.py [--bootstrap-server HOST:PORT] [--topic T]

Auto-commit is on (the default with a group): positions of the records handed out are
committed every auto_commit_interval_ms and on close. Without --bootstrap-server a reference
broker is started in this process and some records are produced first.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import Iterator

from sdk import AsyncConsumer, AsyncProducer


@contextlib.contextmanager
def broker(bootstrap: str | None) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    from server_ref import EmbeddedBroker

    with EmbeddedBroker(data_dir=None, port=0) as embedded:
        yield embedded.bootstrap_servers


async def run(bootstrap: str, topic: str, count: int, produce: bool) -> None:
    if produce:
        async with AsyncProducer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
            for i in range(count * 2):
                await producer.send(topic, f"event {i}".encode())
    async with AsyncConsumer(topic, bootstrap_servers=bootstrap, group_id="async-example",
                             auto_offset_reset="earliest",
                             value_deserializer=lambda v: v.decode()) as consumer:
        seen = 0
        async for record in consumer:  # one record at a time
            print(f"{record.topic}[{record.partition}] {record.offset}: {record.value}")
            seen += 1
            if seen == count:
                break
        batch = await consumer.getmany(timeout_ms=2000, max_records=count)  # or in batches
        for tp, records in batch.items():
            print(f"{tp}: a batch of {len(records)}, offsets {records[0].offset}..{records[-1].offset}")
        for tp in sorted(consumer.assignment()):
            print(f"{tp}: lag {consumer.lag(tp)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server", default=None)
    parser.add_argument("--topic", default="events")
    parser.add_argument("--count", type=int, default=10)
    args = parser.parse_args()
    with broker(args.bootstrap_server) as bootstrap:
        asyncio.run(run(bootstrap, args.topic, args.count, args.bootstrap_server is None))


if __name__ == "__main__":
    main()
