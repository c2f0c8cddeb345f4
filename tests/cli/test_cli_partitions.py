"""``kafka-sdk partitions elect|reassign|reassignments`` as a subprocess against the reference
broker (one node: no election is needed and nothing can move, so these check the command
lines, outputs and refusals; tests/cluster/test_cluster_admin.py runs them on three Apache
Kafka brokers, where leaders and replicas really move)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sdk.cli.common import EXIT_USAGE, CliError
from sdk.cli.partition_cmds import parse_replicas
from server_ref import EmbeddedBroker

from .test_cli import cli, name, one_error_line

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def ref() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir=None, port=0) as broker:
        yield broker


@pytest.fixture(scope="module")
def topic(ref: EmbeddedBroker) -> str:
    created = name("cli-parts")
    run = cli("topics", "create", created, "--partitions", "2", bootstrap=ref.bootstrap_servers)
    assert run.code == 0, run.err
    return created


def test_parse_replicas() -> None:
    assert parse_replicas("1,2,3") == [1, 2, 3]
    assert parse_replicas(" 4 ") == [4]
    for bad in ("1,,2", "a", "1;2", "-1"):
        with pytest.raises(CliError) as failed:
            parse_replicas(bad)
        assert failed.value.exit_code == EXIT_USAGE


def test_help_lists_partitions() -> None:
    run = cli("--help")
    assert run.code == 0 and "partitions" in run.out
    run = cli("partitions", "elect", "--help")
    assert run.code == 0 and "--type" in run.out and "unclean" in run.out


def test_elect(ref: EmbeddedBroker, topic: str) -> None:
    b = ref.bootstrap_servers
    run = cli("partitions", "elect", "--topic", topic, bootstrap=b)
    assert run.code == 0, run.err  # "already elected" is not a failure (as Kafka's tool)
    rows = [line.split(None, 2) for line in run.out.splitlines()]
    assert rows[0] == ["TOPIC", "PARTITION", "RESULT"]
    assert rows[1:] == [[topic, "0", "already elected"], [topic, "1", "already elected"]]

    run = cli("partitions", "elect", bootstrap=b)  # every partition: none needs one
    assert run.code == 0, run.err
    assert run.out == "No partition needed a preferred leader election.\n"

    run = cli("partitions", "elect", "--type", "unclean", "--topic", topic, "-p", "1", "--json",
              bootstrap=b)
    assert run.code == 0, run.err
    doc = run.json()
    assert isinstance(doc, dict) and doc["election_type"] == "unclean"
    (only,) = doc["partitions"]
    assert only["topic"] == topic and only["partition"] == 1 and not only["elected"]
    assert only["error"]["name"] == "ELECTION_NOT_NEEDED"

    run = cli("partitions", "elect", "--topic", topic, "--partition", "7", bootstrap=b)
    assert run.code == 1
    line = one_error_line(run)
    assert f"{topic}-7" in line and "UNKNOWN_TOPIC_OR_PARTITION" in line
    run = cli("partitions", "elect", "--topic", "no-such-topic", bootstrap=b)
    assert run.code == 1
    assert "'no-such-topic'" in one_error_line(run)


def test_elect_usage_errors(ref: EmbeddedBroker, topic: str) -> None:
    b = ref.bootstrap_servers
    run = cli("partitions", "elect", "--partition", "0", bootstrap=b)
    assert run.code == 2 and "--partition needs exactly one --topic" in one_error_line(run)
    run = cli("partitions", "elect", "--topic", topic, "--topic", "x", "-p", "0", bootstrap=b)
    assert run.code == 2
    run = cli("partitions", "elect", "--type", "random", bootstrap=b)
    assert run.code == 2 and "invalid choice" in one_error_line(run)


def test_reassign(ref: EmbeddedBroker, topic: str) -> None:
    b = ref.bootstrap_servers
    node = ref.config.node_id
    run = cli("partitions", "reassign", "--topic", topic, "--partition", "0",
              "--replicas", str(node), bootstrap=b)
    assert run.code == 0, run.err  # the current replicas: accepted, nothing moves
    assert run.out == f"Started the reassignment of {topic}-0 to replicas {node}.\n"

    run = cli("partitions", "reassign", "--topic", topic, "-p", "0", "-p", "1",
              "--replicas", f"{node},{node + 5}", bootstrap=b)
    assert run.code == 1
    lines = run.err.splitlines()
    assert len(lines) == 2 and all("INVALID_REPLICA_ASSIGNMENT" in line for line in lines)
    assert f"includes broker {node + 5}, but no such broker is registered" in lines[0]

    run = cli("partitions", "reassign", "--topic", topic, "-p", "1", "--cancel", "--json",
              bootstrap=b)
    assert run.code == 1
    doc = run.json()
    assert isinstance(doc, list) and doc[0]["cancel"] and doc[0]["replicas"] is None
    assert doc[0]["error"]["name"] == "NO_REASSIGNMENT_IN_PROGRESS"

    run = cli("partitions", "reassign", "--topic", topic, "-p", "0", "--replicas", "1,x",
              bootstrap=b)
    assert run.code == 2 and "broker ids separated by commas" in one_error_line(run)
    run = cli("partitions", "reassign", "--topic", topic, "-p", "0", "--replicas", "1",
              "--cancel", bootstrap=b)
    assert run.code == 2 and "not allowed with" in one_error_line(run)
    run = cli("partitions", "reassign", "--topic", topic, "--replicas", "1", bootstrap=b)
    assert run.code == 2 and "--partition" in one_error_line(run)


def test_reassignments(ref: EmbeddedBroker, topic: str) -> None:
    b = ref.bootstrap_servers
    run = cli("partitions", "reassignments", bootstrap=b)
    assert run.code == 0, run.err
    assert run.out == "No partition reassignment in progress.\n"
    run = cli("partitions", "reassignments", "--topic", topic, "--json", bootstrap=b)
    assert run.code == 0 and run.json() == []
