"""Fire and forget: ignore the futures (or use acks=0), flush once at the end.

    python examples/produce_fire_and_forget.py [--bootstrap-server HOST:PORT] [--count N]

Without --bootstrap-server a reference broker is started in this process. With acks=0 the
broker sends no acknowledgement at all: the fastest, and records can be lost silently.
send_many() hands many records over in one call, for the highest throughput.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Iterator

from sdk import Producer


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
    parser.add_argument("--topic", default="metrics")
    parser.add_argument("--count", type=int, default=100_000)
    args = parser.parse_args()
    payload = b"x" * 100

    with broker(args.bootstrap_server) as bootstrap:
        for acks in ("all", 0):
            with Producer(bootstrap_servers=bootstrap, acks=acks, linger_ms=5) as p:
                start = time.perf_counter()
                for _ in range(args.count):
                    p.send(args.topic, payload)  # the returned future is ignored
                p.flush(timeout=60)
                rate = args.count / (time.perf_counter() - start)
                print(f"acks={acks}: {args.count} records, {rate:,.0f} records/s")

        with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
            start = time.perf_counter()
            p.send_many(args.topic, (payload for _ in range(args.count)))
            p.flush(timeout=60)
            rate = args.count / (time.perf_counter() - start)
            print(f"send_many: {args.count} records, {rate:,.0f} records/s")


if __name__ == "__main__":
    main()
