"""ACLs and SCRAM credentials in the metadata log (cluster mode).

As Kafka's KRaft controller keeps them (AccessControlEntryRecord /
RemoveAccessControlEntryRecord, UserScramCredentialRecord / RemoveUserScramCredentialRecord;
here our own JSON records, ``records.py``): brokers forward CreateAcls, DeleteAcls and
AlterUserScramCredentials to the active controller, which checks them against its image,
writes the records and answers once they are committed. Every broker replays them into
its ACL store and credential store (``load_acls``, ``load_credentials``), so a binding or a
user created through one broker holds on all of them, and after a restart (the log and its
snapshots are their durable copy). DescribeAcls and DescribeUserScramCredentials are
answered by each broker from what it replayed.
"""

from __future__ import annotations

import base64
import uuid
from typing import TYPE_CHECKING, Any

from sdk.errors import InvalidRequestError, KafkaError, UnknownServerError
from sdk.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)
from sdk.protocol.messages.create_acls import CreateAclsRequest, CreateAclsResponse
from sdk.protocol.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
from server_ref.security.acls import AclEntry, AclFilter, AclStore, invalid_reason
from server_ref.security.credentials import CredentialStore
from server_ref.security.scram import ScramCredential

if TYPE_CHECKING:
    from server_ref.controller.controller import QuorumController
    from server_ref.controller.image import MetadataImage

__all__ = ["load_acls", "load_credentials", "register_security_apis"]

_INVALID = InvalidRequestError.errno
_FIELDS = ("resource_type", "name", "pattern_type", "principal", "host", "operation",
           "permission")


def _entry(fields: dict[str, Any]) -> AclEntry:
    return AclEntry(**{k: fields[k] for k in _FIELDS})


def _fields(e: AclEntry) -> dict[str, Any]:
    return {k: getattr(e, k) for k in _FIELDS}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _failure(exc: BaseException) -> tuple[int, str]:
    if isinstance(exc, KafkaError):
        return int(getattr(exc, "errno", UnknownServerError.errno)), exc.message or str(exc)
    return UnknownServerError.errno, str(exc)


# ---------------------------------------------------------------------------- brokers


def load_acls(image: MetadataImage, store: AclStore) -> bool:
    """The store holds the image's bindings; whether they changed."""
    return store.replace(_entry(fields) for fields in image.acls.values())


def load_credentials(image: MetadataImage, store: CredentialStore) -> None:
    users: dict[str, dict[str, ScramCredential]] = {}
    for (user, mechanism), c in image.scram.items():
        users.setdefault(user, {})[mechanism] = ScramCredential(
            salt=base64.b64decode(c["salt"]), stored_key=base64.b64decode(c["stored_key"]),
            server_key=base64.b64decode(c["server_key"]), iterations=int(c["iterations"]))
    store.replace(users)


# ---------------------------------------------------------------------------- controller


def register_security_apis(server: Any, controller: QuorumController) -> None:
    apis = SecurityApis(controller)
    server.register(CreateAclsRequest.API_KEY, 0, 3, apis.create_acls)
    server.register(DeleteAclsRequest.API_KEY, 0, 3, apis.delete_acls)
    server.register(51, 0, 0, apis.alter_user_scram_credentials)


class SecurityApis:
    """Who may call these was checked by the broker that forwarded them (its authorizer);
    whether an authorizer is configured too (SECURITY_DISABLED otherwise)."""

    def __init__(self, controller: QuorumController) -> None:
        self.c = controller

    async def create_acls(self, req: CreateAclsRequest, version: int) -> CreateAclsResponse:
        results = [CreateAclsResponse.AclCreationResult() for _ in req.creations]

        def decide() -> tuple[list[dict[str, Any]], None]:
            present = {_entry(f) for f in self.c.image.acls.values()}
            batch: list[dict[str, Any]] = []
            for c, result in zip(req.creations, results, strict=True):
                entry = AclEntry(c.resource_type, c.resource_name, c.resource_pattern_type,
                                 c.principal, c.host, c.operation, c.permission_type)
                reason = invalid_reason(entry)
                if reason is not None:
                    result.error_code, result.error_message = _INVALID, reason
                elif entry not in present:  # an existing binding is left as is
                    present.add(entry)
                    batch.append({"type": "acl", "id": str(uuid.uuid4()), **_fields(entry)})
            return batch, None

        try:
            await self.c.write(decide)
        except Exception as exc:
            code, message = _failure(exc)
            for result in results:
                if result.error_code == 0:
                    result.error_code, result.error_message = code, message
        return CreateAclsResponse(results=results)

    async def delete_acls(self, req: DeleteAclsRequest, version: int) -> DeleteAclsResponse:
        Result = DeleteAclsResponse.DeleteAclsFilterResult
        results = [Result() for _ in req.filters]

        def decide() -> tuple[list[dict[str, Any]], None]:
            gone: set[str] = set()
            for f, result in zip(req.filters, results, strict=True):
                acl_filter = AclFilter(f.resource_type_filter, f.resource_name_filter,
                                       f.pattern_type_filter, f.principal_filter,
                                       f.host_filter, f.operation, f.permission_type)
                reason = acl_filter.invalid_reason()
                if reason is not None:
                    result.error_code, result.error_message = _INVALID, reason
                    continue
                # A binding two filters match is reported by both, as Kafka does.
                for acl_id, fields in self.c.image.acls.items():
                    e = _entry(fields)
                    if acl_filter.matches(e):
                        gone.add(acl_id)
                        result.matching_acls.append(DeleteAclsResponse.DeleteAclsMatchingAcl(
                            resource_type=e.resource_type, resource_name=e.name,
                            pattern_type=e.pattern_type, principal=e.principal, host=e.host,
                            operation=e.operation, permission_type=e.permission))
            return [{"type": "remove_acl", "id": acl_id} for acl_id in sorted(gone)], None

        try:
            await self.c.write(decide)
        except Exception as exc:
            code, message = _failure(exc)
            for result in results:
                if result.error_code == 0:
                    result.error_code, result.error_message = code, message
                    result.matching_acls = []
        return DeleteAclsResponse(filter_results=results)

    async def alter_user_scram_credentials(self, req: AlterUserScramCredentialsRequest,
                                           version: int) -> AlterUserScramCredentialsResponse:
        from server_ref.handlers.scram_users import plan_scram_alter

        def existing(user: str, mechanism: str) -> ScramCredential | None:
            found = self.c.image.scram.get((user, mechanism))
            return None if found is None else ScramCredential(b"", b"", b"", 0)

        def decide() -> tuple[list[dict[str, Any]], AlterUserScramCredentialsResponse]:
            derived, removed, response = plan_scram_alter(req, existing)
            batch: list[dict[str, Any]] = [
                {"type": "remove_scram_credential", "user": u, "mechanism": m}
                for u, m in removed]
            batch += [{"type": "scram_credential", "user": u, "mechanism": m,
                       "salt": _b64(c.salt), "stored_key": _b64(c.stored_key),
                       "server_key": _b64(c.server_key), "iterations": c.iterations}
                      for (u, m), c in derived.items()]
            return batch, response

        try:
            answer: AlterUserScramCredentialsResponse = await self.c.write(decide)
            return answer
        except Exception as exc:
            code, message = _failure(exc)
            users = [d.name for d in req.deletions] + [u.name for u in req.upsertions]
            return AlterUserScramCredentialsResponse(results=[
                AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult(
                    user=name, error_code=code, error_message=message)
                for name in dict.fromkeys(users)])
