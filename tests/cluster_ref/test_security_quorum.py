"""ACLs, SCRAM users and broker configs across a change of active controller (3 brokers,
3 controllers): what the old active controller committed is in the new one's image, so it
deletes a binding made before, refuses to delete a SCRAM credential that never existed, and
extends a broker-config level rather than replacing it; every broker holds the result."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sdk import AdminClient
from sdk.admin.acl_types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePattern,
    ResourceType,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from sdk.admin.results import ConfigResource
from sdk.errors import ResourceNotFoundError
from server_ref.cluster import EmbeddedCluster

SETTLE_S = 30.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedCluster]:
    config = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:ANONYMOUS"}
    with EmbeddedCluster(brokers=3, controllers=3, config=config) as c:
        yield c


def settle(read: Callable[[], Any], expected: Any, what: str) -> None:
    deadline = time.monotonic() + SETTLE_S
    seen: Any = None
    while time.monotonic() < deadline:
        seen = read()
        if seen == expected:
            return
        time.sleep(0.05)
    raise AssertionError(f"{what}: still {seen!r}, expected {expected!r}")


def read_on(cluster: EmbeddedCluster, node: int, read: Callable[[AdminClient], Any]) -> Any:
    with AdminClient(bootstrap_servers=cluster.address_of(node)) as admin:
        return read(admin)


def test_a_new_active_controller_knows_the_security_state(cluster: EmbeddedCluster) -> None:
    first = AclBinding(ResourcePattern(ResourceType.TOPIC, "q-orders"), "User:ann", "*",
                       AclOperation.READ, AclPermissionType.ALLOW)
    second = AclBinding(ResourcePattern(ResourceType.TOPIC, "q-orders"), "User:ann", "*",
                        AclOperation.WRITE, AclPermissionType.ALLOW)
    key = "log.cleaner.backoff.ms"
    with AdminClient(bootstrap_servers=cluster.address_of(1)) as admin:
        assert admin.create_acls([first]).ok
        assert admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "ann", ScramMechanism.SCRAM_SHA_256, "ann-secret")]).ok
        assert admin.alter_configs({ConfigResource.broker(""): {key: "16000"}}).ok
    old = cluster.active_controller()
    assert old is not None
    cluster.kill(old)
    settle(lambda: cluster.active_controller() not in (None, old), True, "a new controller")
    with AdminClient(bootstrap_servers=cluster.address_of(2)) as admin:
        assert admin.create_acls([second]).ok
        deleted = admin.delete_acls(AclBindingFilter.of(first))
        assert deleted.ok, deleted.errors
        assert deleted[AclBindingFilter.of(first)].deleted == (first,)  # it knew the binding
        refused = admin.alter_user_scram_credentials(deletions=[UserScramCredentialDeletion(
            "ann", ScramMechanism.SCRAM_SHA_512)])
        assert isinstance(refused.errors["ann"], ResourceNotFoundError)
        done = admin.alter_configs({ConfigResource.broker(""): {
            "log.cleaner.io.buffer.load.factor": "0.8"}})
        assert done.ok, done.errors
    for node in (1, 2, 3):
        settle(lambda node=node: set(read_on(cluster, node, lambda a: a.describe_acls(
            AclBindingFilter(principal="User:ann")))), {second}, f"ann's ACLs on {node}")
        settle(lambda node=node: read_on(cluster, node, lambda a: {
            k: e.value for k, e in a.describe_configs([ConfigResource.broker("")])[
                ConfigResource.broker("")].entries.items()}),
            {key: "16000", "log.cleaner.io.buffer.load.factor": "0.8"},
            f"cluster defaults on {node}")
    cluster.start(old)
