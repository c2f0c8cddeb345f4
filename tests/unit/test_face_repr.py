"""Every client face has a repr that tells clients apart (face, client id, servers, state)
and shows no other setting, so a config secret never reaches a log line."""

from __future__ import annotations

import asyncio
from typing import Any

from sdk import AdminClient, AsyncAdminClient, AsyncConsumer, AsyncProducer, Consumer, Producer


def test_async_faces_repr_before_start_and_after_close() -> None:
    servers = "h1:9092,[::1]:9093"
    faces: list[Any] = [
        AsyncProducer(bootstrap_servers=servers, client_id="p1", linger_ms=7,
                      value_serializer=lambda v: b"secret-serializer"),
        AsyncConsumer(bootstrap_servers=servers, client_id="c1", group_id="g1"),
        AsyncAdminClient(bootstrap_servers=servers, client_id="a1"),
    ]
    expected = [
        "<AsyncProducer client_id='p1' bootstrap_servers='h1:9092,[::1]:9093' new>",
        "<AsyncConsumer client_id='c1' bootstrap_servers='h1:9092,[::1]:9093' "
        "group_id='g1' new>",
        "<AsyncAdminClient client_id='a1' bootstrap_servers='h1:9092,[::1]:9093' new>",
    ]
    assert [repr(f) for f in faces] == expected

    async def close_all() -> None:
        for face in faces:
            await face.close()

    asyncio.run(close_all())
    assert [repr(f) for f in faces] == [e.replace(" new>", " closed>") for e in expected]


def test_blocking_faces_repr(embedded_broker: Any) -> None:
    servers = embedded_broker.bootstrap_servers
    with Producer(bootstrap_servers=servers, client_id="p2", linger_ms=3) as p, \
            Consumer(bootstrap_servers=servers, client_id="c2") as c, \
            AdminClient(bootstrap_servers=servers, client_id="a2") as a:
        assert repr(p) == f"<Producer client_id='p2' bootstrap_servers={servers!r} started>"
        assert repr(c) == (f"<Consumer client_id='c2' bootstrap_servers={servers!r} "
                           "group_id=None started>")
        assert repr(a) == f"<AdminClient client_id='a2' bootstrap_servers={servers!r} new>"
        a.list_topics()
        assert repr(a).endswith(" started>")
    assert [repr(f).rsplit(" ", 1)[1] for f in (p, c, a)] == ["closed>"] * 3
