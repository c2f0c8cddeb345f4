"""``kafka-sdk acls create|list|delete`` and ``kafka-sdk users describe|set-password|delete``
as a subprocess against the reference broker (with Kafka's StandardAuthorizer settings and
the PLAINTEXT principal, User:ANONYMOUS, as super user so it may manage ACLs)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sdk.cli.common import EXIT_FAILED, EXIT_USAGE
from server_ref import EmbeddedBroker

from .test_cli import cli, name, one_error_line

pytestmark = pytest.mark.integration

AUTH = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS"}


@pytest.fixture(scope="module")
def ref() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir=None, port=0, config=AUTH) as broker:
        yield broker


def test_help_lists_acls_and_users() -> None:
    run = cli("--help")
    assert run.code == 0 and "acls" in run.out and "users" in run.out
    run = cli("acls", "create", "--help")
    assert run.code == 0 and "--resource-pattern-type" in run.out and "--deny" in run.out


def test_create_list_delete(ref: EmbeddedBroker) -> None:
    b = ref.bootstrap_servers
    topic = name("orders")
    run = cli("acls", "create", "--topic", topic, "--principal", "User:alice",
              "--operation", "read", "--operation", "DESCRIBE", bootstrap=b)
    assert run.code == 0, run.err
    assert run.out.count("Created: ALLOW User:alice@* ") == 2
    run = cli("acls", "create", "--topic", topic[:6], "--resource-pattern-type", "prefixed",
              "--principal", "User:bob", "--operation", "WRITE", "--deny", "--host", "10.0.0.9",
              bootstrap=b)
    assert run.code == 0, run.err

    run = cli("acls", "list", "--topic", topic, "--resource-pattern-type", "match", bootstrap=b)
    assert run.code == 0, run.err
    rows = [line.split() for line in run.out.splitlines()]
    assert rows[0] == ["PERMISSION", "PRINCIPAL", "HOST", "OPERATION", "RESOURCE", "PATTERN",
                       "NAME"]
    assert sorted(rows[1:]) == sorted([
        ["ALLOW", "User:alice", "*", "READ", "TOPIC", "LITERAL", topic],
        ["ALLOW", "User:alice", "*", "DESCRIBE", "TOPIC", "LITERAL", topic],
        ["DENY", "User:bob", "10.0.0.9", "WRITE", "TOPIC", "PREFIXED", topic[:6]]])

    run = cli("acls", "list", "--principal", "User:bob", "--json", bootstrap=b)
    assert run.code == 0, run.err
    assert run.json() == [{"resource_type": "TOPIC", "name": topic[:6],
                           "pattern_type": "PREFIXED", "principal": "User:bob",
                           "host": "10.0.0.9", "operation": "WRITE", "permission": "DENY"}]

    run = cli("acls", "delete", "--topic", topic, "--operation", "READ", "--json", bootstrap=b)
    assert run.code == 0, run.err
    assert [d["operation"] for d in run.json()] == ["READ"]  # type: ignore[union-attr]
    run = cli("acls", "delete", "--principal", "User:alice", bootstrap=b)
    assert run.code == 0, run.err
    assert "Deleted 1 ACL." in run.out
    run = cli("acls", "delete", "--principal", "User:bob", bootstrap=b)
    assert run.code == 0 and "Deleted 1 ACL." in run.out
    run = cli("acls", "list", "--topic", topic, "--resource-pattern-type", "match", bootstrap=b)
    assert run.out == "No ACL matches.\n"


def test_usage_errors_and_refusals(ref: EmbeddedBroker) -> None:
    b = ref.bootstrap_servers
    run = cli("acls", "create", "--principal", "User:a", "--operation", "READ", bootstrap=b)
    assert run.code == EXIT_USAGE and "name a resource" in one_error_line(run)
    run = cli("acls", "create", "--topic", "t", "--principal", "alice", "--operation", "READ",
              bootstrap=b)
    assert run.code == EXIT_USAGE and "Type:name" in one_error_line(run)
    run = cli("acls", "create", "--topic", "t", "--principal", "User:a", "--operation",
              "READ_ALL", bootstrap=b)
    assert run.code == EXIT_USAGE and "operation must be one of" in one_error_line(run)
    run = cli("acls", "delete", bootstrap=b)
    assert run.code == EXIT_USAGE and "--all" in one_error_line(run)
    # The broker's refusal, with Kafka's name for it.
    plain = EmbeddedBroker(data_dir=None, port=0)
    with plain:
        run = cli("acls", "list", bootstrap=plain.bootstrap_servers)
        assert run.code == EXIT_FAILED and "SECURITY_DISABLED" in one_error_line(run)


def test_users(ref: EmbeddedBroker, tmp_path: Path) -> None:
    b = ref.bootstrap_servers
    user = name("carol")
    run = cli("users", "set-password", user, stdin="carol-secret\n", bootstrap=b)
    assert run.code == 0, run.err
    secret = tmp_path / "pw"
    secret.write_text("other-secret\n")
    run = cli("users", "set-password", user, "--mechanism", "scram-sha-512", "--iterations",
              "8192", "--password-file", str(secret), bootstrap=b)
    assert run.code == 0, run.err
    run = cli("users", "describe", user, bootstrap=b)
    assert run.code == 0, run.err
    rows = sorted(line.split() for line in run.out.splitlines()[1:])
    assert rows == [[user, "SCRAM-SHA-256", "4096"], [user, "SCRAM-SHA-512", "8192"]]
    assert "secret" not in run.out

    run = cli("users", "set-password", user, "--iterations", "10", stdin="x\n", bootstrap=b)
    assert run.code == EXIT_FAILED and "UNACCEPTABLE_CREDENTIAL" in one_error_line(run)

    run = cli("users", "delete", user, bootstrap=b)  # every mechanism it has
    assert run.code == 0, run.err
    run = cli("users", "describe", user, "--json", bootstrap=b)
    assert run.code == EXIT_FAILED and "RESOURCE_NOT_FOUND" in run.err
    (doc,) = run.json()  # type: ignore[misc]
    assert doc["credentials"] == [] and doc["error"]["name"] == "RESOURCE_NOT_FOUND"


def test_against_apache_kafka() -> None:
    """The same commands against Apache Kafka (one KRaft node; its metadata log applies a
    change a moment after the command returns, so the reads wait for it)."""
    import time

    from apache_support import apache_cluster

    def until(check: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 30
        while not check():
            assert time.monotonic() < deadline, "never happened"
            time.sleep(0.2)

    with apache_cluster(1, config=AUTH) as cluster:
        b = cluster.bootstrap_servers
        topic = name("orders")
        run = cli("acls", "create", "--topic", topic, "--principal", "User:alice",
                  "--operation", "READ", bootstrap=b)
        assert run.code == 0, run.err
        want = {"resource_type": "TOPIC", "name": topic, "pattern_type": "LITERAL",
                "principal": "User:alice", "host": "*", "operation": "READ",
                "permission": "ALLOW"}
        until(lambda: cli("acls", "list", "--topic", topic, "--json", bootstrap=b).json()
              == [want])
        run = cli("acls", "delete", "--topic", topic, "--json", bootstrap=b)
        assert run.code == 0 and run.json() == [want], run.err
        # Refused by the broker, with Kafka's name for it: no ACL on a CLUSTER resource
        # of another name (the CLI only names kafka-cluster, so through the admin client).
        from sdk import AclBinding, AdminClient, ResourcePattern
        from sdk.errors import InvalidRequestError

        bad = AclBinding(ResourcePattern("CLUSTER", "elsewhere"), "User:x", operation="READ")
        with AdminClient(bootstrap_servers=b) as admin:
            assert isinstance(admin.create_acls([bad])[bad].error, InvalidRequestError)

        user = name("erin")
        run = cli("users", "set-password", user, stdin="erin-secret\n", bootstrap=b)
        assert run.code == 0, run.err
        until(lambda: cli("users", "describe", user, bootstrap=b).out.split()[3:]
              == [user, "SCRAM-SHA-256", "4096"])
        assert cli("users", "delete", user, bootstrap=b).code == 0
        until(lambda: "RESOURCE_NOT_FOUND" in cli("users", "describe", user, bootstrap=b).err)
