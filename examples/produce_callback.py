"""Asynchronous sends with a delivery callback: on_delivery(err, metadata) per record.

    python examples/produce_callback.py [--bootstrap-server HOST:PORT] [--topic T] [--count N]

Without --bootstrap-server a reference broker is started in this process. Callbacks run on
the producer's I/O thread: keep them short and never block on the producer inside them.
"""

from __future__ import annotations

import argparse
import contextlib
import threading
from collections import Counter
from collections.abc import Iterator

from sdk import Producer, RecordMetadata


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
    parser.add_argument("--topic", default="clicks")
    parser.add_argument("--count", type=int, default=10_000)
    args = parser.parse_args()

    lock = threading.Lock()
    per_partition: Counter[int] = Counter()
    failures: list[BaseException] = []

    def on_delivery(err: BaseException | None, meta: RecordMetadata) -> None:
        with lock:
            if err is not None:
                failures.append(err)
            else:
                per_partition[meta.partition] += 1

    with broker(args.bootstrap_server) as bootstrap, \
            Producer(bootstrap_servers=bootstrap, linger_ms=10, compression_type="lz4") as p:
        for i in range(args.count):
            p.send(args.topic, f"click {i}".encode(), key=f"user-{i % 100}".encode(),
                   on_delivery=on_delivery)
        p.flush(timeout=60)  # every callback has run when flush returns

    print(f"delivered {sum(per_partition.values())} records, {len(failures)} failed")
    for partition, n in sorted(per_partition.items()):
        print(f"  partition {partition}: {n}")
    if failures:
        print(f"first failure: {failures[0]!r}")


if __name__ == "__main__":
    main()
