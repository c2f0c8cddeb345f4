"""SCRAM credentials through our admin client (describe_user_scram_credentials,
alter_user_scram_credentials: salted on the client), the same steps and answers on our
broker and on Apache Kafka (one KRaft node)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from apache_support import apache_cluster

from sdk import (
    AdminClient,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from sdk.admin import ScramCredentialInfo
from sdk.errors import (
    DuplicateResourceError,
    ResourceNotFoundError,
    UnacceptableCredentialError,
)
from server_ref import EmbeddedBroker

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


@pytest.fixture(scope="module", params=["ref", "kafka"])
def admin(request: pytest.FixtureRequest) -> Iterator[AdminClient]:
    if request.param == "ref":
        with EmbeddedBroker(data_dir=None, port=0) as broker, \
                AdminClient(bootstrap_servers=broker.bootstrap_servers) as client:
            yield client
    else:
        with apache_cluster(1, 1) as cluster, \
                AdminClient(bootstrap_servers=cluster.bootstrap_servers) as client:
            yield client


def _credentials(admin: AdminClient, user: str) -> set[ScramCredentialInfo]:
    result = admin.describe_user_scram_credentials([user])[user]
    return set() if result.error is not None else set(result.credentials)


def _settle(admin: AdminClient, user: str, want: set[ScramCredentialInfo]) -> None:
    """Apache Kafka's broker answers from its metadata image, which follows the controller a
    moment after the alter returned."""
    deadline = time.monotonic() + 20
    while _credentials(admin, user) != want:
        assert time.monotonic() < deadline, f"{user}: {_credentials(admin, user)} != {want}"
        time.sleep(0.1)


def test_set_describe_and_delete_credentials(admin: AdminClient) -> None:
    alice, bob = f"alice-{uuid.uuid4().hex[:6]}", f"bob-{uuid.uuid4().hex[:6]}"
    result = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(alice, SHA256, "alice-secret"),
        UserScramCredentialUpsertion(bob, "SCRAM-SHA-512", b"bob-secret"),
    ])
    assert result.ok, result.errors
    # One alteration per user and request (Kafka: DUPLICATE_RESOURCE otherwise).
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        alice, SHA512, "alice-secret", iterations=8192)]).raise_if_failed()
    _settle(admin, alice, {ScramCredentialInfo(SHA256, 4096), ScramCredentialInfo(SHA512, 8192)})
    _settle(admin, bob, {ScramCredentialInfo(SHA512, 4096)})
    everyone = admin.describe_user_scram_credentials()
    assert {alice, bob} <= set(everyone)

    missing = f"nobody-{uuid.uuid4().hex[:6]}"
    described = admin.describe_user_scram_credentials([alice, missing])
    assert described[alice].error is None
    assert isinstance(described[missing].error, ResourceNotFoundError)

    deleted = admin.alter_user_scram_credentials(deletions=[
        UserScramCredentialDeletion(alice, SHA256), UserScramCredentialDeletion(missing, SHA256)])
    assert deleted[alice].error is None
    assert isinstance(deleted[missing].error, ResourceNotFoundError)
    _settle(admin, alice, {ScramCredentialInfo(SHA512, 8192)})


def test_refusals_carry_kafkas_codes(admin: AdminClient) -> None:
    user = f"carol-{uuid.uuid4().hex[:6]}"
    result = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(user, SHA256, "pw", iterations=100)])
    assert isinstance(result[user].error, UnacceptableCredentialError)  # < 4096 iterations
    twice = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(user, SHA256, "pw"),
        UserScramCredentialUpsertion(user, SHA512, "pw")])
    assert isinstance(twice[user].error, DuplicateResourceError)  # one user, twice
    # An upsertion and a deletion of the same credential: both brokers check the deletion
    # against what exists first.
    both = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, SHA256, "pw")],
        [UserScramCredentialDeletion(user, SHA256)])
    assert isinstance(both[user].error, ResourceNotFoundError)
    assert _credentials(admin, user) == set()  # nothing was set by any of them


def test_bad_input_is_refused_before_sending() -> None:
    with pytest.raises(ValueError, match="mechanism"):
        UserScramCredentialUpsertion("u", "SCRAM-SHA-1", "pw")
    with pytest.raises(ValueError, match="empty"):
        UserScramCredentialUpsertion("", SHA256, "pw")
    upsert = UserScramCredentialUpsertion("u", SHA256, "hunter2", salt=b"salt")
    assert "hunter2" not in repr(upsert) and "salt" not in repr(upsert).replace("Upsert", "")
    # RFC 5802 Hi(): PBKDF2-HMAC with the mechanism's hash.
    import hashlib

    assert upsert.salted_password() == hashlib.pbkdf2_hmac("sha256", b"hunter2", b"salt", 4096)
