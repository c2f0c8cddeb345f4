"""DescribeUserScramCredentials / AlterUserScramCredentials on the reference broker: Kafka's
error codes and messages (checked against Apache Kafka with the same raw requests), users
created through confluent-kafka and through our SDK's admin client then able to log in, and
deletions."""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # importlib mode: the helpers beside us
from raw_wire import Wire

from sdk.protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest
from sdk.protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
)
from server_ref import EmbeddedBroker

Upsert = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
Delete = AlterUserScramCredentialsRequest.ScramCredentialDeletion
UserName = DescribeUserScramCredentialsRequest.UserName
SHA256, SHA512 = 1, 2


def upsert(name: str, mechanism: int = SHA256, iterations: int = 4096,
           password: str = "pw") -> Upsert:
    salt = b"0123456789abcdef"
    digest = "sha512" if mechanism == SHA512 else "sha256"
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), salt, max(1, min(iterations, 5000)))
    return Upsert(name=name, mechanism=mechanism, iterations=iterations, salt=salt,
                  salted_password=salted)


def alter(wire: Wire, upsertions: list[Upsert], deletions: list[Delete] = ()
          ) -> list[tuple[str, int, str | None]]:
    response = wire.call(AlterUserScramCredentialsRequest(deletions=list(deletions),
                                                          upsertions=upsertions), 0)
    return sorted((r.user, r.error_code, r.error_message) for r in response.results)


def describe(wire: Wire, users: list[str] | None) -> list[tuple[Any, ...]]:
    request = DescribeUserScramCredentialsRequest(
        users=None if users is None else [UserName(name=u) for u in users])
    response = wire.call(request, 0)
    assert response.error_code == 0
    # (Kafka lists a user's mechanisms in no particular order: sorted here.)
    return sorted((r.user, r.error_code, r.error_message,
                   tuple(sorted((c.mechanism, c.iterations) for c in r.credential_infos)))
                  for r in response.results)


def scenario(wire: Wire, settle: Any) -> list[Any]:
    """The same requests for both brokers; what each answered. ``settle`` waits until a
    change is visible to Describe (Apache Kafka applies it from its metadata log)."""
    out: list[Any] = []
    out.append(alter(wire, [upsert("too-few", iterations=4095),
                            upsert("too-many", iterations=16385),
                            upsert("no-mechanism", mechanism=0),
                            upsert("bad-mechanism", mechanism=3),
                            upsert("", iterations=4096),
                            upsert("twice"), upsert("twice", SHA512),
                            upsert("max-ok", SHA512, iterations=16384)],
                     [Delete(name="ghost", mechanism=SHA256),
                      Delete(name="del-and-set", mechanism=SHA256)]))
    out.append(alter(wire, [upsert("del-and-set")], [Delete(name="del-and-set",
                                                            mechanism=SHA256)]))
    out.append(alter(wire, [upsert("erin"), upsert("frank", SHA512, 8192)]))
    out.append(alter(wire, [upsert("erin", SHA512, 5000)]))
    settle(lambda: describe(wire, ["erin"])[0][3] == ((SHA256, 4096), (SHA512, 5000)))
    out.append(describe(wire, ["erin", "frank", "max-ok", "nobody", "frank"]))
    out.append(alter(wire, [], [Delete(name="erin", mechanism=SHA256),
                                Delete(name="frank", mechanism=SHA256)]))
    settle(lambda: describe(wire, ["erin"])[0][3] == ((SHA512, 5000),))
    out.append(describe(wire, ["erin"]))
    listed = [row for row in describe(wire, None) if row[0] in ("erin", "frank", "max-ok")]
    out.append(listed)
    return out


def settle_now(check: Any) -> None:
    assert check()


def settle_eventually(check: Any) -> None:
    deadline = time.monotonic() + 30
    while not check():
        assert time.monotonic() < deadline, "the change never became visible"
        time.sleep(0.2)


@pytest.fixture
def ref() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


def test_scram_admin_codes_match_apache_kafka(ref: EmbeddedBroker) -> None:
    from apache_support import apache_cluster

    with Wire(ref.bootstrap_servers) as wire:
        ours = scenario(wire, settle_now)
    with apache_cluster(brokers=1) as cluster, Wire(cluster.bootstrap_servers) as wire:
        theirs = scenario(wire, settle_eventually)
    assert ours == theirs
    # What they are (spelled out, so a change on both sides is noticed too).
    first = {user: (code, message) for user, code, message in ours[0]}
    assert first["too-few"] == (93, "Too few iterations")
    assert first["too-many"] == (93, "Too many iterations")
    assert first["no-mechanism"] == first["bad-mechanism"] == (33, "Unknown SCRAM mechanism")
    assert first[""] == (93, "Username must not be empty")
    assert first["twice"] == (92, "A user credential cannot be altered twice in the same "
                                   "request")
    assert first["ghost"] == first["del-and-set"] == (
        91, "Attempt to delete a user credential that does not exist")
    assert first["max-ok"] == (0, None)
    # A deletion and an upsertion of one user: the deletion is checked first, and fails.
    assert ours[1] == [("del-and-set", 91, "Attempt to delete a user credential that does "
                                           "not exist")]
    described = {row[0]: row[1:] for row in ours[4]}
    assert described["frank"][0] == 92 and described["nobody"][0] == 91
    assert described["erin"][0] == 0
    assert described["erin"][2] == ((SHA256, 4096), (SHA512, 5000))


def test_users_made_by_confluent_and_our_sdk_can_log_in(ref: EmbeddedBroker, tls: Any) -> None:
    from broker_setup import add_scram_user, scram_exchange, secured_config

    from sdk import AdminClient, ScramMechanism
    from sdk.admin.acl_types import UserScramCredentialDeletion, UserScramCredentialUpsertion

    with EmbeddedBroker(config=secured_config(tls)) as b:
        add_scram_user(b.bootstrap_servers, "gina", "gina-secret", "SCRAM-SHA-512", 6000)
        with AdminClient(bootstrap_servers=b.bootstrap_servers) as admin:
            admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                "hank", ScramMechanism.SCRAM_SHA_256, "hank-secret", iterations=4096)]
            ).raise_if_failed()
            described = admin.describe_user_scram_credentials(["gina", "hank", "nobody"])
            assert [(c.mechanism, c.iterations) for c in described["gina"].credentials] == [
                (ScramMechanism.SCRAM_SHA_512, 6000)]
            assert described.errors["nobody"].errno == 91
        for user, mechanism in (("gina", "SCRAM-SHA-512"), ("hank", "SCRAM-SHA-256")):
            with Wire(b.listener_address("SASL_PLAINTEXT")) as wire:
                assert scram_exchange(wire, mechanism, user, f"{user}-secret")[1].error_code == 0
        with AdminClient(bootstrap_servers=b.bootstrap_servers) as admin:
            admin.alter_user_scram_credentials(deletions=[UserScramCredentialDeletion(
                "hank", ScramMechanism.SCRAM_SHA_256)]).raise_if_failed()
        with Wire(b.listener_address("SASL_PLAINTEXT")) as wire:
            first, _ = scram_exchange(wire, "SCRAM-SHA-256", "hank", "hank-secret")
            assert first.error_code == 58  # the deleted credential no longer logs in
