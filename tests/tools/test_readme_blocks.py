"""Every Python code block of README.md runs, against a fresh embedded reference broker, so
the README cannot drift from the API.

Each block is run exactly as written, with two substitutions: the address
``127.0.0.1:9092`` becomes the embedded broker's, and the Spark block's checkpoint
directory ``/tmp/counts-checkpoint`` becomes a temporary one. Blocks with top-level
``await`` run in ``asyncio.run``, as the asyncio REPL does. What a block uses without
defining it, and what it needs in the cluster, comes from its *prelude* below (a block
gets the empty prelude unless listed), each documented:

* Consumer block: ``handle(rec)`` (the README's placeholder) collects the records; the
  prelude first writes ``b"first"`` and ``b"stop"`` to ``orders``, so both loops (which
  stop at a ``b"stop"`` record) have an end.
* Admin block: the group ``billing`` exists with a committed offset (a consumer commits
  and leaves), so the group calls have a group to describe, reset and delete.
* Partial-success block: ``admin``, an ``AdminClient``, and ``NewTopic`` (the README
  continues the admin block there, with its names).
* Spark block: a local SparkSession made first with test settings (2 shuffle partitions,
  no UI), which the block's ``getOrCreate()`` returns; the topic ``events`` holds keyed
  records. Afterwards the streaming query the block started is given new records, run to
  completion of what is available and stopped; its counts and the batch copy are checked.
* Reference-broker block: ``run_app(bootstrap)`` (the README's placeholder) sends and
  reads back one record. The block starts a broker of its own.
* Share-group block: ``jobs`` holds ``b"a"``, ``b"bad"`` and ``b"c"``; ``handle(value)``
  (the placeholder) collects the values and raises ValueError for ``b"bad"``, and
  ``finished()`` is true once three were handled; afterwards each was handled once.
* Transactions block: ``payments`` holds three records; afterwards a read_committed
  reader finds their upper-cased copies in ``payments-enriched``, once each.
* Security blocks: a reference broker of their own with SASL_SSL (PLAIN users alice and
  admin, SCRAM-SHA-512, OAUTHBEARER) and mutual-TLS SSL listeners, certificates from a
  test CA made with ``trustme`` and trusted as the system's (``SSL_CERT_FILE``); the
  README's ``broker.example.com:9093`` / ``:9094`` become those listeners and
  ``/etc/kafka/`` the certificates' directory. Client block: the user bob has a SCRAM
  password and ``my_identity_provider()`` (the placeholder) returns an unsecured token.
  ACL block: the broker runs Kafka's authorizer with ``User:admin`` as super user.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import server_ref
from sdk import AdminClient, Consumer, NewTopic, Producer

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
ADDRESS = "127.0.0.1:9092"
CHECKPOINT = "/tmp/counts-checkpoint"


@dataclass
class Block:
    line: int  # of the first code line in README.md
    source: str

    @property
    def name(self) -> str:
        first = next(x for x in self.source.splitlines() if x.strip()
                     and not x.startswith(("from ", "import ")))
        return f"line{self.line}:{first.strip()[:40]}"


def python_blocks() -> list[Block]:
    blocks, lines = [], README.read_text().splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            start = i + 1
            end = next(j for j in range(start, len(lines)) if lines[j].strip() == "```")
            blocks.append(Block(start + 1, "\n".join(lines[start:end]) + "\n"))
            i = end
        i += 1
    return blocks


# ----------------------------------------------------------------------------- preludes


@dataclass
class Context:
    bootstrap: str
    tmp_path: Path
    ns: dict[str, Any] = field(default_factory=dict)
    cleanups: list[Callable[[], None]] = field(default_factory=list)
    handled: list[Any] = field(default_factory=list)
    replacements: dict[str, str] = field(default_factory=dict)  # applied after the prelude


def send(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes]]) -> None:
    with Producer(bootstrap_servers=bootstrap) as p:
        for key, value in records:
            p.send(topic, value, key=key)
        p.flush(timeout=30)


def consumer_prelude(ctx: Context) -> None:
    send(ctx.bootstrap, "orders", [(None, b"first"), (None, b"stop")])
    ctx.ns["handle"] = ctx.handled.append


def consumer_check(ctx: Context) -> None:
    # The blocking loop, then the asynchronous one (another group), each up to b"stop".
    assert [r.value for r in ctx.handled] == [b"first", b"stop", b"first", b"stop"]
    assert ctx.ns["batch"] == {}  # nothing after b"stop"


def admin_prelude(ctx: Context) -> None:
    send(ctx.bootstrap, "seed", [(None, b"x")])
    with Consumer("seed", bootstrap_servers=ctx.bootstrap, group_id="billing",
                  auto_offset_reset="earliest", enable_auto_commit=False) as c:
        assert next(iter(c)).value == b"x"
        c.commit()


def partial_prelude(ctx: Context) -> None:
    admin = AdminClient(bootstrap_servers=ctx.bootstrap)
    ctx.ns["admin"] = admin
    ctx.ns["NewTopic"] = NewTopic
    ctx.cleanups.append(admin.close)


def partial_check(ctx: Context) -> None:
    assert ctx.ns["results"].ok


SPARK_EVENTS = 40


def spark_prelude(ctx: Context) -> None:
    # Spark's Python workers run this interpreter and import this checkout.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    existing = SparkSession.getActiveSession()
    session = (SparkSession.builder.master("local[2]").appName("kafka-sdk-readme")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    if existing is None:  # a session other tests made stays theirs
        ctx.cleanups.append(session.stop)
    with AdminClient(bootstrap_servers=ctx.bootstrap) as admin:
        admin.create_topics([NewTopic("events", 2, 1)]).raise_if_failed()
    send(ctx.bootstrap, "events", [(b"user%d" % (i % 4), b"view") for i in range(SPARK_EVENTS)])


def spark_check(ctx: Context) -> None:
    query = ctx.ns["query"]
    ctx.cleanups.insert(0, query.stop)
    query.processAllAvailable()  # the stream starts at the latest offsets: give it records
    send(ctx.bootstrap, "events", [(b"user9", b"view")] * 3)
    query.processAllAvailable()
    assert query.exception() is None
    assert count_records(ctx.bootstrap, "events-copy") == SPARK_EVENTS
    counts = read_values(ctx.bootstrap, "counts")
    assert (b"user9", b"3") in counts, counts


def reference_prelude(ctx: Context) -> None:
    def run_app(bootstrap: str) -> None:
        send(bootstrap, "app", [(b"k", b"hello")])
        assert read_values(bootstrap, "app") == [(b"k", b"hello")]

    ctx.ns["run_app"] = run_app


PLAIN_USERS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
               'user_admin="admin-secret" user_alice="alice-secret";')


def secured_broker(ctx: Context, *, authorizer: bool) -> server_ref.EmbeddedBroker:
    import trustme

    ca = trustme.CA()
    root = ctx.tmp_path
    ca.cert_pem.write_to_path(str(root / "ca.pem"))
    ca.issue_cert("localhost", "127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
        str(root / "broker-keystore.pem"))
    client = ca.issue_cert("client@example.com", common_name="client")
    client.private_key_pem.write_to_path(str(root / "client.key"))
    for i, blob in enumerate(client.cert_chain_pems):
        blob.write_to_path(str(root / "client.pem"), append=i > 0)
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(root / "broker-keystore.pem"),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(root / "ca.pem"),
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_USERS,
    }
    if authorizer:
        config["authorizer.class.name"] = \
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
        config["super.users"] = "User:admin"
    broker = server_ref.EmbeddedBroker(data_dir=None, port=0, config=config)
    broker.start()
    ctx.cleanups.append(broker.stop)
    # The README's "cloud" settings trust the system's CAs: make the test CA one of them.
    previous = os.environ.get("SSL_CERT_FILE")
    os.environ["SSL_CERT_FILE"] = str(root / "ca.pem")
    ctx.cleanups.append(lambda: os.environ.pop("SSL_CERT_FILE") if previous is None
                        else os.environ.__setitem__("SSL_CERT_FILE", previous))
    ctx.replacements.update({
        "broker.example.com:9093": broker.listener_address("SASL_SSL"),
        "broker.example.com:9094": broker.listener_address("SSL"),
        "/etc/kafka/": f"{root}/",
    })
    return broker


def unsecured_token() -> tuple[str, int]:
    """An unsecured JWS (alg none), which the reference broker's default validator takes."""
    import base64
    import json
    import time

    def part(data: dict[str, Any]) -> str:
        raw = json.dumps(data, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    now_ms = time.time_ns() // 1_000_000
    claims = {"sub": "carol", "iat": now_ms / 1000, "exp": now_ms / 1000 + 3600}
    return f"{part({'alg': 'none'})}.{part(claims)}.", now_ms + 3_600_000


def transactions_prelude(ctx: Context) -> None:
    send(ctx.bootstrap, "payments", [(b"k1", b"a"), (b"k2", b"b"), (b"k1", b"c")])


def transactions_check(ctx: Context) -> None:
    copies = read_values(ctx.bootstrap, "payments-enriched", read_committed=True)
    assert sorted(copies) == [(b"k1", b"A"), (b"k1", b"C"), (b"k2", b"B")]


def share_prelude(ctx: Context) -> None:
    send(ctx.bootstrap, "jobs", [(None, b"a"), (None, b"bad"), (None, b"c")])

    def handle(value: bytes) -> None:
        ctx.handled.append(value)
        if value == b"bad":
            raise ValueError(value)

    ctx.ns["handle"] = handle
    ctx.ns["finished"] = lambda: len(ctx.handled) >= 3


def share_check(ctx: Context) -> None:
    assert sorted(ctx.handled) == [b"a", b"bad", b"c"]


def security_clients_prelude(ctx: Context) -> None:
    from sdk import ScramMechanism, UserScramCredentialUpsertion

    broker = secured_broker(ctx, authorizer=False)
    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "bob", ScramMechanism.SCRAM_SHA_512, "bob-secret")]).raise_if_failed()
    ctx.ns["my_identity_provider"] = unsecured_token


def security_clients_check(ctx: Context) -> None:
    batch = ctx.ns["batch"]
    assert sum(len(records) for records in batch.values()) >= 1


def security_acls_prelude(ctx: Context) -> None:
    secured_broker(ctx, authorizer=True)


def security_acls_check(ctx: Context) -> None:
    bindings = ctx.ns["bindings"]
    assert sorted(b.pattern.name for b in bindings) == ["audit", "pay"]


def read_values(bootstrap: str, topic: str, *, read_committed: bool = False
                ) -> list[tuple[bytes | None, bytes | None]]:
    """Every record of ``topic`` (from the beginning to the end offsets as of now)."""
    isolation = "read_committed" if read_committed else "read_uncommitted"
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                  isolation_level=isolation) as c:
        parts = c.partitions_for_topic(topic, timeout_ms=10_000)
        from sdk import TopicPartition

        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        c.assign(tps)
        ends = c.end_offsets(tps)
        out: list[tuple[bytes | None, bytes | None]] = []
        # Up to the positions, not a count: transaction markers take offsets too.
        while any(c.position(tp) < end for tp, end in ends.items()):
            for recs in c.poll(timeout_ms=1000).values():
                out += [(r.key, r.value) for r in recs]
        return out


def count_records(bootstrap: str, topic: str) -> int:
    return len(read_values(bootstrap, topic))


PRELUDES: dict[str, tuple[Callable[[Context], None] | None,
                          Callable[[Context], None] | None]] = {
    # key: a line that identifies the block -> (prelude, check after the block)
    'with Consumer("orders"': (consumer_prelude, consumer_check),
    "with AdminClient(": (admin_prelude, None),
    "results = admin.create_topics(": (partial_prelude, partial_check),
    "from pyspark.sql import SparkSession": (spark_prelude, spark_check),
    "import server_ref": (reference_prelude, None),
    "producer.init_transactions()": (transactions_prelude, transactions_check),
    'ShareConsumer("jobs"': (share_prelude, share_check),
    "my_identity_provider()": (security_clients_prelude, security_clients_check),
    "admin.create_acls(": (security_acls_prelude, security_acls_check),
}


def preludes_for(block: Block) -> tuple[Callable[[Context], None] | None,
                                        Callable[[Context], None] | None]:
    found = [v for k, v in PRELUDES.items() if k in block.source]
    assert len(found) <= 1, f"README block at line {block.line} matches several preludes"
    return found[0] if found else (None, None)


# ----------------------------------------------------------------------------- running


def run_source(block: Block, source: str, ns: dict[str, Any]) -> None:
    # Padded so tracebacks name the README's own line numbers.
    padded = "\n" * (block.line - 1) + source
    code = compile(padded, str(README), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if code.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(code, ns))
    else:
        exec(code, ns)


@pytest.fixture
def broker() -> Iterator[str]:
    with server_ref.EmbeddedBroker(data_dir=None, port=0) as b:
        yield b.bootstrap_servers


BLOCKS = python_blocks()


def test_readme_has_the_python_blocks_we_know() -> None:
    # A prelude whose block is gone (or was reworded) must be updated, not left dangling.
    for key in PRELUDES:
        assert any(key in b.source for b in BLOCKS), f"no README block contains {key!r}"
    assert len(BLOCKS) >= 6


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_readme_block_runs(block: Block, broker: str, tmp_path: Path) -> None:
    prelude, check = preludes_for(block)
    source = block.source.replace(ADDRESS, broker)
    if CHECKPOINT in source:
        source = source.replace(CHECKPOINT, str(tmp_path / "counts-checkpoint"))
    ctx = Context(broker, tmp_path, {"__name__": "__readme__"})
    try:
        if prelude is not None:
            prelude(ctx)
        for placeholder, value in ctx.replacements.items():
            source = source.replace(placeholder, value)
        run_source(block, source, ctx.ns)
        if check is not None:
            check(ctx)
    finally:
        for cleanup in ctx.cleanups:
            cleanup()
