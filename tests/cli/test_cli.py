"""``python -m sdk`` driven as a subprocess against the reference broker: every subcommand,
its table and JSON output, and the errors users make, with their exit codes and messages.

Exit codes: 0 ok, 1 an operation failed, 2 usage or setting error, 3 cluster unreachable.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from server_ref import EmbeddedBroker

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
RECORDS = 3000


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> object:
        return json.loads(self.out)


@pytest.fixture(scope="module")
def ref() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir=None, port=0) as broker:
        yield broker


def cli(*args: str, stdin: str | None = None, bootstrap: str | None = None,
        timeout: float = 90) -> Run:
    command = [sys.executable, "-m", "sdk"]
    if bootstrap is not None:
        command += ["--bootstrap-server", bootstrap]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    proc = subprocess.run([*command, *args], input=stdin, capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=timeout)
    run = Run(proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in run.err, run.err
    return run


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def one_error_line(run: Run) -> str:
    lines = [line for line in run.err.splitlines() if line.strip()]
    assert len(lines) == 1, run.err
    assert re.match(r"kafka-sdk( [a-z-]+)*: error: ", lines[0]), lines[0]
    return lines[0]


# ============================================================================ usage


def test_help_and_usage_errors() -> None:
    run = cli("--help")
    assert run.code == 0
    for command in ("topics", "produce", "consume", "groups", "cluster", "exit codes"):
        assert command in run.out
    assert cli("topics", "create", "--help").code == 0

    run = cli()
    assert run.code == 2
    assert "required: COMMAND" in one_error_line(run)
    run = cli("groups", "lag")
    assert run.code == 2
    assert "GROUP" in one_error_line(run)

    import sdk

    run = cli("--version")
    assert (run.code, run.out, run.err) == (0, f"kafka-sdk {sdk.__version__}\n", "")


def test_missing_bootstrap_server_is_a_usage_error() -> None:
    run = cli("topics", "list")
    assert run.code == 2
    assert "no bootstrap server" in one_error_line(run)


# ============================================================================ cluster


def test_cluster(ref: EmbeddedBroker) -> None:
    run = cli("cluster", bootstrap=ref.bootstrap_servers)
    assert run.code == 0, run.err
    assert run.out.startswith("Cluster id: ")
    assert "BROKER" in run.out and str(ref.port) in run.out
    doc = cli("cluster", "--json", bootstrap=ref.bootstrap_servers).json()
    assert isinstance(doc, dict) and doc["cluster_id"]
    assert [b["port"] for b in doc["brokers"]] == [ref.port]


# ============================================================================ topics


def test_topics_create_list_describe_alter_delete(ref: EmbeddedBroker) -> None:
    b = ref.bootstrap_servers
    t1, t2 = name("cli-t1"), name("cli-t2")
    run = cli("topics", "create", t1, t2, "--partitions", "3", "--config", "retention.ms=60000",
              bootstrap=b)
    assert run.code == 0, run.err
    assert f"Created topic '{t1}'." in run.out and f"Created topic '{t2}'." in run.out

    run = cli("topics", "create", t1, bootstrap=b)
    assert run.code == 1
    assert "TOPIC_ALREADY_EXISTS" in one_error_line(run)
    assert cli("topics", "create", t1, "--if-not-exists", bootstrap=b).code == 0
    run = cli("topics", "create", name("cli-v"), "--validate-only", bootstrap=b)
    assert run.code == 0 and "Validated topic" in run.out

    listed = cli("topics", "list", "--json", bootstrap=b).json()
    assert isinstance(listed, list)
    by_name = {t["name"]: t for t in listed}
    assert by_name[t1]["partitions"] == 3 and not by_name[t1]["internal"]
    table = cli("topics", "list", bootstrap=b).out
    assert table.splitlines()[0].split() == ["TOPIC", "PARTITIONS", "INTERNAL"]
    assert t1 in table

    run = cli("topics", "describe", t1, bootstrap=b)
    assert run.code == 0
    rows = [line.split() for line in run.out.splitlines()[1:] if line.strip()]
    assert [r[1] for r in rows] == ["0", "1", "2"] and all(r[0] == t1 for r in rows)

    run = cli("topics", "alter-config", t1, "--set", "retention.ms=1000",
              "--set", "segment.ms=3600000", bootstrap=b)
    assert run.code == 0, run.err
    assert "retention.ms=1000" in run.out
    doc = cli("topics", "describe", t1, "--configs", "--json", bootstrap=b).json()
    assert isinstance(doc, list)
    assert doc[0]["configs"]["retention.ms"] == "1000"
    assert len(doc[0]["partitions"]) == 3
    assert cli("topics", "alter-config", t1, "--delete", "retention.ms", bootstrap=b).code == 0

    run = cli("topics", "alter-config", t1, "--set", "retention.ms=abc", bootstrap=b)
    assert run.code == 1
    assert "INVALID_CONFIG" in one_error_line(run)
    run = cli("topics", "alter-config", t1, bootstrap=b)
    assert run.code == 2 and "nothing to change" in one_error_line(run)

    run = cli("topics", "delete", t2, bootstrap=b)
    assert run.code == 0 and f"Deleted topic '{t2}'." in run.out
    run = cli("topics", "delete", t2, bootstrap=b)
    assert run.code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in one_error_line(run)
    run = cli("topics", "delete", t2, "--if-exists", bootstrap=b)
    assert run.code == 0 and "does not exist; skipped" in run.out


def test_unknown_topic(ref: EmbeddedBroker) -> None:
    b = ref.bootstrap_servers
    for args in (("topics", "describe", "no-such-topic"),
                 ("produce", "no-such-topic"),
                 ("consume", "no-such-topic", "--max-messages", "1")):
        run = cli(*args, stdin="x\n", bootstrap=b)
        assert run.code == 1, (args, run.err)
        line = one_error_line(run)
        assert "'no-such-topic'" in line and "UNKNOWN_TOPIC_OR_PARTITION" in line
    doc = cli("topics", "describe", "no-such-topic", "--json", bootstrap=b).json()
    assert isinstance(doc, list) and doc[0]["error"]["code"] == 3


# ============================================================================ produce / consume


def test_produce_and_consume(ref: EmbeddedBroker, tmp_path: Path) -> None:
    b = ref.bootstrap_servers
    topic = name("cli-pc")
    assert cli("topics", "create", topic, "--partitions", "2", bootstrap=b).code == 0
    data = tmp_path / "lines.txt"
    data.write_text("".join(f"key{i}|value {i}\n" for i in range(RECORDS)))

    run = cli("produce", topic, "--file", str(data), "--key-separator", "|",
              "--header", "source=cli", "--progress", bootstrap=b)
    assert run.code == 0, run.err
    assert f"Produced {RECORDS:,} records to '{topic}'" in run.err
    assert "records/s" in run.err and "[####" in run.err  # the progress bar was drawn

    run = cli("consume", topic, "--from-beginning", "--max-messages", str(RECORDS),
              "--format", "json", bootstrap=b)
    assert run.code == 0, run.err
    records = [json.loads(line) for line in run.out.splitlines()]
    assert len(records) == RECORDS
    assert {r["key"] for r in records} == {f"key{i}" for i in range(RECORDS)}
    by_key = {r["key"]: r for r in records}
    assert by_key["key7"]["value"] == "value 7"
    assert by_key["key7"]["headers"] == [["source", "cli"]]
    assert {"topic", "partition", "offset", "timestamp", "timestamp_type"} <= set(records[0])
    assert f"Processed a total of {RECORDS} messages" in run.err

    first = min((r for r in records if r["partition"] == 0), key=lambda r: r["offset"])
    run = cli("consume", topic, "--partition", "0", "--offset", "0", "--max-messages", "1",
              "--print-key", "--key-separator", "=", bootstrap=b)
    assert run.code == 0 and run.out == f"{first['key']}={first['value']}\n"
    run = cli("consume", topic, "--partition", "0", "--from-timestamp", str(first["timestamp"]),
              "--max-messages", "1", bootstrap=b)
    assert run.out == f"{first['value']}\n"
    run = cli("consume", topic, "--idle-timeout-ms", "1500", "-q", bootstrap=b)  # from the end
    assert run.code == 0 and run.out == "" and run.err == ""

    run = cli("produce", topic, "--json", stdin="a\nb\n", bootstrap=b)
    doc = run.json()
    assert isinstance(doc, dict) and doc["records"] == 2 and doc["failed"] == 0


def test_produce_input_errors(ref: EmbeddedBroker) -> None:
    b = ref.bootstrap_servers
    topic = name("cli-bad")
    assert cli("topics", "create", topic, bootstrap=b).code == 0
    run = cli("produce", topic, "--key-separator", ":", stdin="k1:v1\nno separator\nk3:v3\n",
              bootstrap=b)
    assert run.code == 2
    assert "line 2 has no key separator ':'; stopped after 1 records" in run.err
    run = cli("produce", topic, "--file", "/no/such/file", bootstrap=b)
    assert run.code == 2 and "cannot read /no/such/file" in one_error_line(run)
    run = cli("produce", topic, "--partition", "5", stdin="x\n", bootstrap=b)
    assert run.code == 1 and "has no partition 5" in one_error_line(run)
    run = cli("consume", topic, "--group", "g", "--offset", "3", bootstrap=b)
    assert run.code == 2 and "do not go with a group" in one_error_line(run)
    # suggestions in the dotted form typed; refused before any connection (no cluster here)
    closed = f"127.0.0.1:{_closed_port()}"
    for command, typo, meant in (("produce", "linger.msx", "linger.ms"),
                                 ("consume", "fetch.max.bytez", "fetch.max.bytes")):
        run = cli(command, topic, "-X", f"{typo}=5", stdin="x\n", bootstrap=closed)
        line = one_error_line(run)
        assert run.code == 2 and f"{typo}: unknown setting" in line, line
        assert f"(did you mean {meant} " in line or f"(did you mean {meant}?" in line, line
        assert "_" not in line.split("allowed:")[1], line


# ============================================================================ groups


def test_groups_lag_reset_delete(ref: EmbeddedBroker) -> None:
    b = ref.bootstrap_servers
    topic, group = name("cli-grp"), name("grp")
    assert cli("topics", "create", topic, "--partitions", "3", bootstrap=b).code == 0
    lines = "".join(f"k{i}:v{i}\n" for i in range(RECORDS))
    assert cli("produce", topic, "-K", ":", "-q", stdin=lines, bootstrap=b).code == 0

    run = cli("consume", topic, "--group", group, "--from-beginning", "--max-messages", "400",
              "-q", bootstrap=b)
    assert run.code == 0, run.err
    assert len(run.out.splitlines()) == 400

    listed = cli("groups", "list", "--json", bootstrap=b).json()
    assert isinstance(listed, list) and group in {g["group"] for g in listed}
    assert group in cli("groups", "list", bootstrap=b).out
    run = cli("groups", "describe", group, bootstrap=b)
    assert run.code == 0 and f"GROUP {group}: state Empty" in run.out

    lag = cli("groups", "lag", group, "--json", bootstrap=b).json()
    assert isinstance(lag, dict)
    assert lag["total_lag"] == RECORDS - 400  # our broker's end offsets are exact
    assert sum(p["end_offset"] for p in lag["partitions"]) == RECORDS
    assert all(p["lag"] == p["end_offset"] - p["committed"] for p in lag["partitions"])
    run = cli("groups", "lag", group, bootstrap=b)
    assert f"total lag {RECORDS - 400}" in run.out

    run = cli("groups", "reset-offsets", group, "--to-earliest", bootstrap=b)
    assert run.code == 0 and "Dry run" in run.err
    assert cli("groups", "lag", group, "--json", bootstrap=b).json()["total_lag"] == RECORDS - 400  # type: ignore[index]
    run = cli("groups", "reset-offsets", group, "--to-earliest", "--execute", bootstrap=b)
    assert run.code == 0 and "Dry run" not in run.err
    assert cli("groups", "lag", group, "--json", bootstrap=b).json()["total_lag"] == RECORDS  # type: ignore[index]
    run = cli("groups", "reset-offsets", group, "--to-latest", "--topic", topic, "--execute",
              "--json", bootstrap=b)
    doc = run.json()
    assert isinstance(doc, dict) and doc["executed"] and len(doc["partitions"]) == 3
    assert cli("groups", "lag", group, "--json", bootstrap=b).json()["total_lag"] == 0  # type: ignore[index]
    assert cli("groups", "reset-offsets", group, "--to-offset", "1", "--execute",
               bootstrap=b).code == 0
    run = cli("groups", "reset-offsets", group, "--to-datetime", "2001-01-01T00:00:00",
              "--execute", bootstrap=b)
    assert run.code == 0
    assert cli("groups", "lag", group, "--json", bootstrap=b).json()["total_lag"] == RECORDS  # type: ignore[index]
    run = cli("groups", "reset-offsets", group, "--to-datetime", "yesterday", bootstrap=b)
    assert run.code == 2 and "ISO date-time" in one_error_line(run)
    for how in ("--to-earliest", "--to-offset"):  # nothing committed: that, and only that
        run = cli("groups", "reset-offsets", "never-committed", how,
                  *(["0"] if how == "--to-offset" else []), bootstrap=b)
        assert (run.code, run.out, run.err) == (
            0, "", "group 'never-committed' has no committed offsets to reset; name --topic\n")

    run = cli("groups", "delete", group, "no-such-group", bootstrap=b)
    assert run.code == 1
    assert f"Deleted group '{group}'." in run.out
    assert "GROUP_ID_NOT_FOUND" in one_error_line(run)
    run = cli("groups", "lag", group, bootstrap=b)
    assert run.code == 1 and "does not exist" in one_error_line(run)
    run = cli("groups", "describe", group, bootstrap=b)
    assert run.code == 1 and "does not exist" in one_error_line(run)


# ============================================================================ connection errors


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_bad_bootstrap_addresses() -> None:
    run = cli("topics", "list", bootstrap=f"127.0.0.1:{_closed_port()}")
    assert run.code == 3
    assert "cannot reach the cluster at 127.0.0.1:" in one_error_line(run)
    run = cli("produce", "t", stdin="x\n", bootstrap=f"127.0.0.1:{_closed_port()}")
    assert run.code == 3
    run = cli("topics", "list", bootstrap="localhost:notaport")
    assert run.code == 2
    line = one_error_line(run)
    assert "invalid setting" in line and "non-numeric port" in line


def test_command_config_file(ref: EmbeddedBroker, tmp_path: Path) -> None:
    good = tmp_path / "client.properties"
    good.write_text(f"# a comment\nbootstrap.servers = {ref.bootstrap_servers}\n"
                    "request.timeout.ms: 20000\nclient.id=cli-\\\n  test\n")
    run = cli("--command-config", str(good), "cluster")
    assert run.code == 0, run.err

    bad = tmp_path / "bad.properties"
    bad.write_text(f"bootstrap.servers={ref.bootstrap_servers}\nrequest.timeout.ms=abc\n")
    run = cli("cluster", "--command-config", str(bad))
    assert run.code == 2
    line = one_error_line(run)
    assert "request.timeout.ms" in line and "'abc'" in line

    unknown = tmp_path / "unknown.properties"
    unknown.write_text("retention.mss=5\n")
    run = cli("cluster", "--command-config", str(unknown), bootstrap=ref.bootstrap_servers)
    assert run.code == 2 and "unknown setting" in one_error_line(run)

    run = cli("cluster", "--command-config", str(tmp_path / "missing.properties"),
              bootstrap=ref.bootstrap_servers)
    assert run.code == 2 and "cannot read" in one_error_line(run)
    run = cli("cluster", "-X", "request.timeout.ms=-5", bootstrap=ref.bootstrap_servers)
    assert run.code == 2 and "request.timeout.ms" in one_error_line(run)
