"""The asyncio producer: send_and_wait, awaitable futures, callbacks and send_many.

    python examples/produce_async.py [--bootstrap-server HOST:PORT] [--topic T] [--count N]

Without --bootstrap-server a reference broker is started (on its own thread).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import Iterator

from sdk import AsyncProducer, RecordMetadata


@contextlib.contextmanager
def broker(bootstrap: str | None) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    from server_ref import EmbeddedBroker

    with EmbeddedBroker(data_dir=None, port=0) as embedded:
        yield embedded.bootstrap_servers


async def produce(bootstrap: str, topic: str, count: int) -> None:
    async with AsyncProducer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        # 1. synchronous style: wait for the acknowledgement
        meta = await producer.send_and_wait(topic, b"hello", key=b"greeting")
        print(f"send_and_wait -> partition {meta.partition} offset {meta.offset}")

        # 2. enqueue many, await the futures later (one batch acknowledges many records)
        futures = [await producer.send(topic, f"event {i}".encode()) for i in range(count)]
        last = await futures[-1]
        print(f"{count} sends, last -> partition {last.partition} offset {last.offset}")

        # 3. callback style
        def on_delivery(err: BaseException | None, meta: RecordMetadata) -> None:
            print(f"callback: err={err!r} offset={meta.offset}")

        await producer.send(topic, b"with callback", on_delivery=on_delivery)

        # 4. many records in one call
        bulk = await producer.send_many(topic, [(b"k", f"bulk {i}".encode()) for i in range(count)])
        metas = await bulk
        print(f"send_many: {len(metas)} records, offsets {metas[0].offset}..{metas[-1].offset}")
        await producer.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server", default=None)
    parser.add_argument("--topic", default="events")
    parser.add_argument("--count", type=int, default=1000)
    args = parser.parse_args()
    with broker(args.bootstrap_server) as bootstrap:
        asyncio.run(produce(bootstrap, args.topic, args.count))


if __name__ == "__main__":
    main()
