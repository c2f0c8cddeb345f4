"""Consumer groups with the admin client: consume part of a topic in a group, then list
and describe the group, show its lag, reset its offsets and delete it.

    python examples/admin_groups.py [--bootstrap-server HOST:PORT]

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

from sdk import AdminClient, Consumer, NewTopic, OffsetSpec, Producer  # noqa: E402

RECORDS = 1000
CONSUMED = 300


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
    topic, group = f"events-{suffix}", f"billing-{suffix}"

    with broker(args.bootstrap_server) as bootstrap, \
            AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 3, 1)]).raise_if_failed()
        with Producer(bootstrap_servers=bootstrap) as producer:
            for i in range(RECORDS):
                producer.send(topic, f"event {i}".encode(), key=f"user-{i % 17}".encode())

        # Read part of the topic in the group, commit, and leave.
        with Consumer(topic, bootstrap_servers=bootstrap, group_id=group,
                      auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
            seen = 0
            while seen < CONSUMED:
                batch = consumer.poll(timeout_ms=1000, max_records=CONSUMED - seen)
                seen += sum(len(records) for records in batch.values())
            consumer.commit()

        print("groups:", sorted(admin.list_consumer_groups()))
        description = admin.describe_consumer_groups([group])[group]
        print(f"{group}: state {description.state}, {len(description.members)} member(s)")

        lag = admin.consumer_group_lag(group)
        for p in lag.partitions:
            print(f"  {p.topic_partition}: committed {p.committed}, end {p.end_offset}, "
                  f"lag {p.lag}")
        print("total lag:", lag.total_lag)  # RECORDS - CONSUMED

        # Start the group over (it has no members now, which a reset requires).
        admin.reset_consumer_group_offsets(group, OffsetSpec.EARLIEST).raise_if_failed()
        print("lag after reset to earliest:", admin.consumer_group_lag(group).total_lag)

        admin.delete_consumer_groups([group]).raise_if_failed()
        admin.delete_topics([topic])
    return 0


if __name__ == "__main__":
    sys.exit(main())
