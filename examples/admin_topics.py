"""Topics with the admin client: create, list, describe, grow, delete; partial failures.

    python examples/admin_topics.py [--bootstrap-server HOST:PORT]

Without --bootstrap-server a reference broker is started (on its own thread).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT))

from sdk import AdminClient, NewTopic, errors  # noqa: E402


@contextlib.contextmanager
def broker(bootstrap: str | None) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    from server_ref import EmbeddedBroker

    with EmbeddedBroker(data_dir=None, port=0) as embedded:
        yield embedded.bootstrap_servers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server")
    args = parser.parse_args()
    suffix = uuid.uuid4().hex[:6]
    orders, audit = f"orders-{suffix}", f"audit-{suffix}"

    with broker(args.bootstrap_server) as bootstrap, \
            AdminClient(bootstrap_servers=bootstrap) as admin:
        # Each topic has its own outcome; raise_if_failed() turns any failure into one error.
        admin.create_topics([
            NewTopic(orders, num_partitions=3, replication_factor=1),
            NewTopic(audit, num_partitions=1, replication_factor=1,
                     configs={"retention.ms": "86400000"}),
        ]).raise_if_failed()

        # Creating it again fails for that topic only: the other item still succeeds.
        again = admin.create_topics([NewTopic(orders, 3, 1), NewTopic(f"extra-{suffix}", 1, 1)])
        for name, result in again.items():
            if isinstance(result.error, errors.TopicAlreadyExistsError):
                print(f"{name}: already there")
            elif result.error is None:
                print(f"{name}: created")

        for name, listing in admin.list_topics().items():
            print(f"topic {name}: {listing.partition_count} partition(s)")

        described = admin.describe_topics([orders, "no-such-topic"])
        for p in described[orders].partitions:
            print(f"  {orders}-{p.partition}: leader {p.leader}, replicas {p.replicas}, "
                  f"isr {p.isr}")
        print("no-such-topic:", described["no-such-topic"].error)

        grown = admin.create_partitions({orders: 6})
        if grown[orders].error is None:
            print(f"{orders} now has", len(admin.describe_topics([orders])[orders].partitions),
                  "partitions")
        else:  # e.g. a broker without CreatePartitions
            print("could not add partitions:", grown[orders].error)

        deleted = admin.delete_topics([orders, audit, f"extra-{suffix}"])
        print("deleted:", sorted(name for name, r in deleted.items() if r.error is None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
