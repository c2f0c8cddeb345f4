"""Synchronous sends: wait for each record's acknowledgement before the next.

    python examples/produce_sync.py [--bootstrap-server HOST:PORT] [--topic T] [--count N]

Without --bootstrap-server a reference broker is started in this process.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator

from sdk import Producer, errors


@contextlib.contextmanager
def broker(bootstrap: str | None) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    from server_ref import EmbeddedBroker

    with EmbeddedBroker(data_dir=None, port=0) as embedded:
        yield embedded.bootstrap_servers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server", default=None)
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--count", type=int, default=5)
    args = parser.parse_args()

    with broker(args.bootstrap_server) as bootstrap, \
            Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=5) as producer:
        for i in range(args.count):
            future = producer.send(args.topic, f"order {i}".encode(), key=f"customer-{i % 3}".encode(),
                                   headers=[("source", b"produce_sync")])
            try:
                meta = future.result(timeout=10)  # blocks until the broker acknowledged it
            except errors.KafkaError as exc:
                print(f"record {i} failed: {exc}")
                continue
            print(f"record {i} -> {meta.topic}[{meta.partition}] offset {meta.offset}")


if __name__ == "__main__":
    main()
