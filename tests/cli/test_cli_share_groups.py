"""``kafka-sdk share-groups list|describe|delete|reset-offsets`` as a subprocess against the
reference broker, after a share consumer of this process read the topic."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest

from sdk import AdminClient, AsyncShareConsumer, ConfigResource, Producer
from sdk.admin import ConfigResourceType
from server_ref import EmbeddedBroker

from .test_cli import cli, name

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def ref() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir=None, port=0) as broker:
        yield broker


async def _consume(bootstrap: str, topic: str, group: str, count: int) -> None:
    async with AsyncShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group) as c:
        got = 0
        while got < count:
            got += len(await c.poll(500))
        await c.commit_sync()


def test_share_groups_commands(ref: EmbeddedBroker) -> None:
    b = ref.bootstrap_servers
    topic = name("cli-share")
    group = f"cli-{uuid.uuid4().hex[:8]}"
    assert cli("topics", "create", topic, bootstrap=b).code == 0
    with AdminClient(bootstrap_servers=b) as admin:
        admin.alter_configs({ConfigResource(ConfigResourceType.GROUP, group):
                             {"share.auto.offset.reset": "earliest"}}).raise_if_failed()
    with Producer(bootstrap_servers=b) as p:
        for i in range(5):
            p.send(topic, b"%d" % i)
    asyncio.run(_consume(b, topic, group, 5))

    run = cli("share-groups", "list", bootstrap=b)
    assert run.code == 0, run.err
    rows = [line.split() for line in run.out.splitlines()]
    assert rows[0] == ["GROUP", "STATE", "COORDINATOR"]
    assert [group, "Empty"] == next(r for r in rows if r[0] == group)[:2]

    run = cli("share-groups", "describe", group, "--offsets", "--json", bootstrap=b)
    assert run.code == 0, run.err
    (doc,) = run.json()
    assert doc["state"] == "Empty" and doc["members"] == []
    assert doc["offsets"] == [{"topic": topic, "partition": 0, "start_offset": 5, "lag": 0}]

    run = cli("share-groups", "reset-offsets", group, "--topic", topic, "--to-earliest",
              bootstrap=b)
    assert run.code == 0 and "planned" in run.out  # a plan only, without --execute
    run = cli("share-groups", "reset-offsets", group, "--topic", topic, "--to-offset", "2",
              "--execute", "--json", bootstrap=b)
    assert run.code == 0, run.err
    assert run.json() == [{"group_id": group, "topic": topic, "partition": 0,
                           "start_offset": 2, "status": "done"}]
    run = cli("share-groups", "describe", group, "--offsets", "--json", bootstrap=b)
    assert run.json()[0]["offsets"][0]["start_offset"] == 2

    run = cli("share-groups", "delete", group, bootstrap=b)
    assert run.code == 0 and f"deleted share group {group}" in run.out
    run = cli("share-groups", "describe", group, bootstrap=b)
    assert run.code != 0 and "GROUP_ID_NOT_FOUND" in run.err
