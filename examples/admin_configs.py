"""Configs with the admin client: read a topic's and a broker's configs, change them
incrementally, reset one to its default, and see a bad value rejected for that item only.

    python examples/admin_configs.py [--bootstrap-server HOST:PORT]

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

from sdk import AdminClient, ConfigResource, NewTopic  # noqa: E402


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
    name = f"configs-{uuid.uuid4().hex[:6]}"

    with broker(args.bootstrap_server) as bootstrap, \
            AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(name, 1, 1)]).raise_if_failed()
        topic = ConfigResource.topic(name)
        broker_id = admin.describe_cluster().brokers[0].node_id

        configs = admin.describe_configs([topic, ConfigResource.broker(broker_id)])
        for resource, result in configs.items():
            print(f"{resource}: {len(result.entries)} configs", result.error or "")
        print("retention.ms =", configs[topic].value("retention.ms"))

        # Incremental: only the named configs change; None resets one to its default.
        admin.alter_configs({topic: {"retention.ms": "3600000",
                                     "cleanup.policy": "compact"}}).raise_if_failed()
        entry = admin.describe_configs([topic], names=["retention.ms"])[topic].entries[
            "retention.ms"]
        print(f"retention.ms = {entry.value} (source {entry.source.name})")
        admin.alter_configs({topic: {"cleanup.policy": None}}).raise_if_failed()

        # A bad value fails that resource only, with the broker's reason.
        bad = admin.alter_configs({topic: {"retention.ms": "forever"}})
        print("rejected:", bad[topic].error)

        admin.delete_topics([name])
    return 0


if __name__ == "__main__":
    sys.exit(main())
