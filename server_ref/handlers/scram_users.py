"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), with the rules and
error codes of Kafka's controller (ScramControlManager) and metadata image (ScramImage).

Alter: a user named twice in one request (deletions and upsertions together) fails with
DUPLICATE_RESOURCE; an empty name with UNACCEPTABLE_CREDENTIAL; an unknown mechanism with
UNSUPPORTED_SASL_MECHANISM; iterations outside 4096..16384 with UNACCEPTABLE_CREDENTIAL;
deleting a credential that does not exist with RESOURCE_NOT_FOUND. The accepted changes are
applied together and persisted (``server_ref.security.credentials``). Results list the
deletions, then the upsertions, then the failures, as Kafka does.

Describe: no users (null or empty) lists every user; a user asked twice gets
DUPLICATE_RESOURCE, an unknown one RESOURCE_NOT_FOUND; only mechanisms and iterations are
ever shown.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sdk.errors import (
    DuplicateResourceError,
    ResourceNotFoundError,
    UnacceptableCredentialError,
    UnsupportedSaslMechanismError,
)
from sdk.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)
from sdk.protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from server_ref.handlers import RequestContext, handles
from server_ref.security.scram import (
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredential,
    derive_credential,
)

_BY_NUMBER = {number: name for name, (number, _) in MECHANISMS.items()}
_TWICE = "A user credential cannot be altered twice in the same request"
Alter = AlterUserScramCredentialsResponse
Describe = DescribeUserScramCredentialsResponse


def _check(name: str, mechanism: int) -> tuple[int, str] | None:
    if not name:
        return UnacceptableCredentialError.errno, "Username must not be empty"
    if mechanism not in _BY_NUMBER:
        return UnsupportedSaslMechanismError.errno, "Unknown SCRAM mechanism"
    return None


@handles(51, 0, 0)
def alter_user_scram_credentials(ctx: RequestContext, req: AlterUserScramCredentialsRequest
                                 ) -> Any:
    if ctx.broker.cluster is not None:  # credentials live in the metadata log
        from server_ref.cluster import forwarding

        return forwarding.alter_user_scram_credentials(ctx, req)
    store = ctx.broker.credentials
    derived, deletions, response = plan_scram_alter(req, store.get)
    store.apply(derived, deletions)
    return response


def plan_scram_alter(req: AlterUserScramCredentialsRequest,
                     existing: Callable[[str, str], ScramCredential | None]
                     ) -> tuple[dict[tuple[str, str], ScramCredential], list[tuple[str, str]],
                                AlterUserScramCredentialsResponse]:
    """Kafka's checks of one request against the credentials ``existing(user, mechanism)``
    finds: (credentials to set, (user, mechanism) to delete, the answer). Used by a single
    broker and by the controller, which writes them to the metadata log."""
    errors: dict[str, tuple[int, str]] = {}
    deletions: dict[str, AlterUserScramCredentialsRequest.ScramCredentialDeletion] = {}
    upserts: dict[str, AlterUserScramCredentialsRequest.ScramCredentialUpsertion] = {}
    for deletion in req.deletions:
        if deletion.name in errors:
            continue
        if deletions.pop(deletion.name, None) is not None:
            errors[deletion.name] = (DuplicateResourceError.errno, _TWICE)
            continue
        problem = _check(deletion.name, deletion.mechanism)
        if problem is None and existing(deletion.name, _BY_NUMBER[deletion.mechanism]) is None:
            problem = (ResourceNotFoundError.errno,
                       "Attempt to delete a user credential that does not exist")
        if problem is not None:
            errors[deletion.name] = problem
        else:
            deletions[deletion.name] = deletion
    for upsert in req.upsertions:
        if upsert.name in errors:
            continue
        if (deletions.pop(upsert.name, None) is not None
                or upserts.pop(upsert.name, None) is not None):
            errors[upsert.name] = (DuplicateResourceError.errno, _TWICE)
            continue
        problem = _check(upsert.name, upsert.mechanism)
        if problem is None and upsert.iterations < MIN_ITERATIONS:
            problem = (UnacceptableCredentialError.errno, "Too few iterations")
        elif problem is None and upsert.iterations > MAX_ITERATIONS:
            problem = (UnacceptableCredentialError.errno, "Too many iterations")
        if problem is not None:
            errors[upsert.name] = problem
        else:
            upserts[upsert.name] = upsert
    derived: dict[tuple[str, str], ScramCredential] = {}
    for name, upsert in upserts.items():
        mechanism = _BY_NUMBER[upsert.mechanism]
        derived[(name, mechanism)] = derive_credential(
            mechanism, bytes(upsert.salted_password), bytes(upsert.salt), upsert.iterations)
    removed = [(d.name, _BY_NUMBER[d.mechanism]) for d in deletions.values()]
    results = [Alter.AlterUserScramCredentialsResult(user=name, error_code=0,
                                                     error_message=None)
               for name in (*deletions, *upserts)]
    results += [Alter.AlterUserScramCredentialsResult(user=name, error_code=code,
                                                      error_message=message)
                for name, (code, message) in errors.items()]
    return derived, removed, Alter(results=results)


@handles(50, 0, 0)
def describe_user_scram_credentials(ctx: RequestContext,
                                    req: DescribeUserScramCredentialsRequest
                                    ) -> DescribeUserScramCredentialsResponse:
    store = ctx.broker.credentials
    asked: dict[str, bool] = {}  # user -> asked twice
    if not req.users:
        asked = dict.fromkeys(sorted(store.users), False)
    else:
        for user in req.users:
            asked[user.name] = user.name in asked
    results = []
    for name, twice in asked.items():
        if twice:
            results.append(Describe.DescribeUserScramCredentialsResult(
                user=name, error_code=DuplicateResourceError.errno,
                error_message="Cannot describe SCRAM credentials for the same user twice in a "
                              f"single request: {name}"))
            continue
        found = store.users.get(name, {})
        if not found:
            results.append(Describe.DescribeUserScramCredentialsResult(
                user=name, error_code=ResourceNotFoundError.errno,
                error_message=f"Attempt to describe a user credential that does not exist: "
                              f"{name}"))
            continue
        results.append(Describe.DescribeUserScramCredentialsResult(
            user=name, credential_infos=[
                Describe.CredentialInfo(mechanism=MECHANISMS[m][0], iterations=c.iterations)
                for m, c in sorted(found.items(), key=lambda item: MECHANISMS[item[0]][0])]))
    return Describe(results=results)
