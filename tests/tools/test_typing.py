"""The public API type-checks as users write it: mypy (strict) on a small program.

``ConsumerRecord``, ``Consumer`` and ``AsyncConsumer`` are generic over the key and value
types: ``bytes`` without deserializers, what the deserializers return otherwise; ``key`` and
``value`` of a record are ``K | None`` and ``V | None`` (no key, tombstones).
``Producer`` and ``AsyncProducer`` are generic over what ``send`` takes: bytes-likes without
serializers, the serializers' input types otherwise. The program
below uses the faces as the README does; mypy must find no error in it, and its
``reveal_type`` lines must show those types. A second program holds mistakes mypy must
catch (a deserializer that cannot take None, a value of the wrong type).
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = '''
from __future__ import annotations

import asyncio

from sdk import (AdminClient, AsyncConsumer, AsyncProducer, Consumer, ConsumerRecord,
                 NewTopic, Producer, RecordMetadata, TopicPartition)


def text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8")


def number(data: bytes | None) -> int | None:
    return None if data is None else int(data)


def number_bytes(n: int) -> bytes:
    return str(n).encode()


def handle(rec: ConsumerRecord) -> None:  # bare: ConsumerRecord[bytes, bytes]
    reveal_type(rec)  # R1
    if rec.value is not None:
        print(rec.value.decode(), rec.key)


def blocking(servers: str) -> None:
    with AdminClient(bootstrap_servers=servers) as admin:
        admin.create_topics([NewTopic("t", 1, 1)]).raise_if_failed()
    with Producer(bootstrap_servers=servers) as p:
        reveal_type(p)  # R14
        meta: RecordMetadata = p.send("t", b"v", key=b"k").result(timeout=10)
        print(meta.offset)
        p.send("t", bytearray(b"v"), key=None)
        p.send_many("t", [b"a", (b"k", b"b")]).result(timeout=10)
    with Producer(bootstrap_servers=servers, value_serializer=str.encode) as sp:
        reveal_type(sp)  # R15
        sp.send("t", "text", key=b"k")
        sp.send_many("t", ["a", (None, "b")])
    with Consumer("t", bootstrap_servers=servers, auto_offset_reset="earliest") as c:
        reveal_type(c)  # R2
        for rec in c:
            reveal_type(rec.key)  # R3
            reveal_type(rec.value)  # R4
            handle(rec)
            break
        batches: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]] = c.poll(timeout_ms=100)
        print(len(batches))
    with Consumer("t", bootstrap_servers=servers, value_deserializer=text,
                  key_deserializer=number) as s:
        reveal_type(s)  # R5
        for r in s:
            reveal_type(r.key)  # R6
            reveal_type(r.value)  # R7
            if r.value is not None:
                print(r.value.upper())
            break
        for tp, recs in s.poll(timeout_ms=100).items():
            reveal_type(recs)  # R8
    only_values = Consumer("t", bootstrap_servers=servers, value_deserializer=text)
    reveal_type(only_values)  # R9
    only_values.close()
    dotted = Consumer("t", config={"bootstrap.servers": servers,
                                   "value.deserializer": "string"})
    reveal_type(dotted)  # R10
    dotted.close()


async def asynchronous(servers: str) -> None:
    async with AsyncProducer(bootstrap_servers=servers, key_serializer=number_bytes) as ap:
        reveal_type(ap)  # R16
        meta = await ap.send_and_wait("t", b"v", key=42)
        print(meta.partition)
    async with AsyncConsumer("t", bootstrap_servers=servers, value_deserializer=text) as ac:
        reveal_type(ac)  # R11
        async for rec in ac:
            reveal_type(rec)  # R12
            break
        got = await ac.getone()
        reveal_type(got.value)  # R13
        many = await ac.getmany(timeout_ms=100)
        print(len(many))


blocking("127.0.0.1:9092")
asyncio.run(asynchronous("127.0.0.1:9092"))
'''

RAW = "bytes | bytearray | memoryview[int]"  # sdk.producer.producer.RawBytes
EXPECTED = {
    "R1": "sdk.types.ConsumerRecord[bytes, bytes]",
    "R2": "sdk.consumer.sync.Consumer[bytes, bytes]",
    "R3": "bytes | None",
    "R4": "bytes | None",
    "R5": "sdk.consumer.sync.Consumer[int, str]",
    "R6": "int | None",
    "R7": "str | None",
    "R8": "list[sdk.types.ConsumerRecord[int, str]]",
    "R9": "sdk.consumer.sync.Consumer[bytes, str]",
    # A config mapping (or a deserializer given by name) is only known at run time.
    "R10": "sdk.consumer.sync.Consumer[Any, Any]",
    "R11": "sdk.consumer.consumer.AsyncConsumer[bytes, str]",
    "R12": "sdk.types.ConsumerRecord[bytes, str]",
    "R13": "str | None",
    "R14": f"sdk.producer.sync.Producer[{RAW}, {RAW}]",
    "R15": f"sdk.producer.sync.Producer[{RAW}, str]",
    "R16": f"sdk.producer.producer.AsyncProducer[int, {RAW}]",
}

MISTAKES = '''
from __future__ import annotations

from sdk import Consumer, Producer


def strict(data: bytes) -> str:  # crashes on a tombstone: the consumer passes None
    return data.decode()


Consumer("t", value_deserializer=strict)  # E1

with Consumer("t", bootstrap_servers="x") as c:
    for rec in c:
        rec.value.decode()  # E2: a tombstone's value is None
        n: int = rec.key  # E3

Producer(bootstrap_servers="x").send("t", "text")  # E4: no serializer, so bytes only
Producer(bootstrap_servers="x", value_serializer=str.encode).send("t", 1)  # E5
'''


def run_mypy(tmp_path: Path, source: str) -> list[str]:
    program = tmp_path / "program.py"
    program.write_text(textwrap.dedent(source))
    # --strict on the program; the SDK's own modules are analysed for their types only
    # (follow_imports=silent): `mypy sdk server_ref` checks them with the project's rules.
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         "--python-version", "3.10", "--no-incremental", "--cache-dir", str(tmp_path / "cache"),
         "--config-file", "", "--show-error-codes", str(program)],
        capture_output=True, text=True, cwd=ROOT, timeout=600)
    lines = out.stdout.splitlines()
    assert lines, out.stderr
    return lines


def test_public_api_type_checks_with_typed_records(tmp_path: Path) -> None:
    lines = run_mypy(tmp_path, PROGRAM)
    errors = [line for line in lines if ": error:" in line]
    assert not errors, "\n".join(lines)
    source = textwrap.dedent(PROGRAM).splitlines()
    revealed: dict[str, str] = {}
    for line in lines:
        m = re.match(r".*program\.py:(\d+): note: Revealed type is \"(.*)\"$", line)
        if m:
            tag = re.search(r"# (R\d+)", source[int(m.group(1)) - 1])
            assert tag, line
            revealed[tag.group(1)] = m.group(2)
    assert revealed == EXPECTED


def test_mypy_catches_wrong_types(tmp_path: Path) -> None:
    lines = run_mypy(tmp_path, MISTAKES)
    source = textwrap.dedent(MISTAKES).splitlines()
    flagged: dict[str, str] = {}
    for line in lines:
        m = re.match(r".*program\.py:(\d+): error: (.*)$", line)
        if m:
            tag = re.search(r"# (E\d+)", source[int(m.group(1)) - 1])
            assert tag, line  # no error on an unmarked line
            flagged[tag.group(1)] = m.group(2)
    assert set(flagged) == {"E1", "E2", "E3", "E4", "E5"}, "\n".join(lines)
    assert "value_deserializer" in flagged["E1"]
    assert '"None" of "bytes | None" has no attribute "decode"' in flagged["E2"]
