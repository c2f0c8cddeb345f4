"""The ``acls ...`` and ``users ...`` subcommands: ACL bindings and SCRAM credentials.

``acls create`` makes one binding per principal, operation and resource given (as Kafka's
``kafka-acls.sh --add``); ``acls list`` and ``acls delete`` take the same options as a
filter (anything not given matches everything; ``delete`` without any filter option needs
``--all``). ``users describe`` lists SCRAM credentials (mechanism and iterations, never a
secret); ``users set-password`` salts the password here and sends only the salted form;
the password comes from ``--password-file``, standard input, or a prompt.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Callable
from typing import Any

from sdk.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    PatternType,
    ResourcePattern,
    ResourceType,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from sdk.cli.common import EXIT_USAGE, CliError, Output, describe_error, error_json

__all__ = ["HANDLERS"]

Handler = Callable[[argparse.Namespace, AdminClient, Output], int]
CLUSTER_NAME = "kafka-cluster"


def _enum(cls: type[Any], text: str, option: str) -> Any:
    """A member of ``cls`` by name, any case, '-' for '_' (a usage error otherwise)."""
    key = text.strip().upper().replace("-", "_")
    if key in cls.__members__ and key != "UNKNOWN":
        return cls[key]
    choices = ", ".join(m.name for m in cls if m.name != "UNKNOWN")
    raise CliError(f"{option} must be one of {choices}, not {text!r}", EXIT_USAGE)


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    """The resources named by --topic/--group/--transactional-id/--user/
    --delegation-token/--cluster, in that order."""
    found: list[tuple[ResourceType, str]] = []
    for kind, names in ((ResourceType.TOPIC, args.topic), (ResourceType.GROUP, args.group),
                        (ResourceType.TRANSACTIONAL_ID, args.transactional_id),
                        (ResourceType.USER, args.user),
                        (ResourceType.DELEGATION_TOKEN, args.delegation_token)):
        found += [(kind, n) for n in dict.fromkeys(names or ())]
    if args.cluster:
        found.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return found


def _binding_json(b: AclBinding) -> dict[str, Any]:
    return {"resource_type": b.pattern.resource_type.name, "name": b.pattern.name,
            "pattern_type": b.pattern.pattern_type.name, "principal": b.principal,
            "host": b.host, "operation": b.operation.name, "permission": b.permission.name}


def _binding_row(b: AclBinding) -> tuple[str, ...]:
    return (b.permission.name, b.principal, b.host, b.operation.name,
            b.pattern.resource_type.name, b.pattern.pattern_type.name, b.pattern.name)


_HEADERS = ["PERMISSION", "PRINCIPAL", "HOST", "OPERATION", "RESOURCE", "PATTERN", "NAME"]


def acls_create(args: argparse.Namespace, admin: AdminClient, out: Output) -> int:
    resources = _resources(args)
    if not resources:
        raise CliError("name a resource: --topic, --group, --cluster, --transactional-id, "
                       "--user or --delegation-token", EXIT_USAGE)
    pattern_type = _enum(PatternType, args.resource_pattern_type, "--resource-pattern-type")
    permission = AclPermissionType.DENY if args.deny else AclPermissionType.ALLOW
    operations = [_enum(AclOperation, op, "--operation") for op in args.operation]
    bindings = []
    for kind, name in resources:
        pattern = ResourcePattern(kind, name, pattern_type)
        for principal in dict.fromkeys(args.principal):
            for op in dict.fromkeys(operations):
                binding = AclBinding(pattern, principal, args.host, op, permission)
                try:
                    binding.validate()
                except ValueError as exc:
                    raise CliError(str(exc), EXIT_USAGE) from None
                bindings.append(binding)
    results = admin.create_acls(bindings, timeout_ms=args.timeout_ms)
    documents = []
    for binding, result in results.items():
        documents.append({**_binding_json(binding), "error": error_json(result.error)})
        if result.error is not None:
            out.error(f"{binding}: {describe_error(result.error)}")
        elif not out.json_mode:
            out.line(f"Created: {binding}")
    if out.json_mode:
        out.json(documents)
    return out.exit_code


def _filters(args: argparse.Namespace) -> list[AclBindingFilter]:
    pattern_type = _enum(PatternType, args.resource_pattern_type, "--resource-pattern-type")
    permission = AclPermissionType.ANY if args.permission is None else \
        _enum(AclPermissionType, args.permission, "--permission")
    operations = [_enum(AclOperation, op, "--operation") for op in args.operation or ()] \
        or [AclOperation.ANY]
    principals: list[str | None] = list(dict.fromkeys(args.principal or ())) or [None]
    resources: list[tuple[ResourceType, str | None]] = list(_resources(args)) \
        or [(ResourceType.ANY, None)]
    return [AclBindingFilter(kind, name, pattern_type, principal, args.host, op, permission)
            for kind, name in resources for principal in principals for op in operations]


def acls_list(args: argparse.Namespace, admin: AdminClient, out: Output) -> int:
    found: dict[AclBinding, None] = {}
    for f in _filters(args):
        for binding in admin.describe_acls(f, timeout_ms=args.timeout_ms):
            found[binding] = None
    bindings = list(found)
    if out.json_mode:
        out.json([_binding_json(b) for b in bindings])
    elif bindings:
        out.table(_HEADERS, [_binding_row(b) for b in bindings])
    else:
        out.line("No ACL matches.")
    return out.exit_code


def _any_filter_option(args: argparse.Namespace) -> bool:
    return bool(_resources(args) or args.principal or args.operation or args.host is not None
                or args.permission is not None)


def acls_delete(args: argparse.Namespace, admin: AdminClient, out: Output) -> int:
    if not args.all and not _any_filter_option(args):
        raise CliError("no filter given: this would delete every ACL; add --all to mean "
                       "that", EXIT_USAGE)
    results = admin.delete_acls(_filters(args), timeout_ms=args.timeout_ms)
    deleted: dict[AclBinding, None] = {}
    for f, result in results.items():
        if result.error is not None:
            out.error(f"{f}: {describe_error(result.error)}")
        for binding in result.deleted:
            deleted[binding] = None
    if out.json_mode:
        out.json([_binding_json(b) for b in deleted])
    elif deleted:
        out.table(_HEADERS, [_binding_row(b) for b in deleted])
        out.line(f"Deleted {len(deleted)} ACL{'s' if len(deleted) != 1 else ''}.")
    else:
        out.line("No ACL matched: nothing deleted.")
    return out.exit_code


# ============================================================================ users


def users_describe(args: argparse.Namespace, admin: AdminClient, out: Output) -> int:
    results = admin.describe_user_scram_credentials(args.users or None,
                                                    timeout_ms=args.timeout_ms)
    documents, rows = [], []
    for user, result in sorted(results.items()):
        if result.error is not None:
            out.error(f"user {user!r}: {describe_error(result.error)}")
        documents.append({"user": user, "credentials": [
            {"mechanism": c.mechanism.mechanism_name, "iterations": c.iterations}
            for c in result.credentials], "error": error_json(result.error)})
        rows += [(user, c.mechanism.mechanism_name, c.iterations) for c in result.credentials]
    if out.json_mode:
        out.json(documents)
    elif rows:
        out.table(["USER", "MECHANISM", "ITERATIONS"], rows)
    elif not out.failed:
        out.line("No user has SCRAM credentials.")
    return out.exit_code


def _password(args: argparse.Namespace) -> str:
    if args.password_file:
        try:
            with open(args.password_file, encoding="utf-8") as fh:
                text = fh.readline()
        except OSError as exc:
            raise CliError(f"--password-file: {exc.strerror}: {args.password_file}",
                           EXIT_USAGE) from None
    elif sys.stdin.isatty():
        text = getpass.getpass(f"Password for {args.user}: ")
    else:
        text = sys.stdin.readline()
    password = text.rstrip("\r\n")
    if not password:
        raise CliError("the password is empty", EXIT_USAGE)
    return password


def users_set_password(args: argparse.Namespace, admin: AdminClient, out: Output) -> int:
    mechanism = _enum(ScramMechanism, args.mechanism, "--mechanism")
    try:
        upsertion = UserScramCredentialUpsertion(args.user, mechanism, _password(args),
                                                 iterations=args.iterations)
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    result = admin.alter_user_scram_credentials([upsertion], timeout_ms=args.timeout_ms)
    return _report(result, f"set the {mechanism.mechanism_name} password of", out)


def users_delete(args: argparse.Namespace, admin: AdminClient, out: Output) -> int:
    if args.mechanism:
        mechanisms = [_enum(ScramMechanism, m, "--mechanism") for m in args.mechanism]
    else:  # every mechanism the user has
        described = admin.describe_user_scram_credentials([args.user],
                                                          timeout_ms=args.timeout_ms)
        found = described[args.user]
        if found.error is not None:
            raise CliError(f"user {args.user!r}: {describe_error(found.error)}")
        mechanisms = [c.mechanism for c in found.credentials]
    # Kafka takes one alteration per user and request.
    code = out.exit_code
    for mechanism in dict.fromkeys(mechanisms):
        result = admin.alter_user_scram_credentials(
            deletions=[UserScramCredentialDeletion(args.user, mechanism)],
            timeout_ms=args.timeout_ms)
        code = _report(result, f"deleted the {mechanism.mechanism_name} credential of", out)
    return code


def _report(result: Any, what: str, out: Output) -> int:
    for user, r in result.items():
        if r.error is not None:
            out.error(f"user {user!r}: {describe_error(r.error)}")
        elif out.json_mode:
            out.json({"user": user, "done": what, "error": None})
        else:
            out.line(f"Done: {what} {user!r}.")
    return out.exit_code


HANDLERS: dict[tuple[str, str | None], Handler] = {
    ("acls", "create"): acls_create,
    ("acls", "list"): acls_list,
    ("acls", "delete"): acls_delete,
    ("users", "describe"): users_describe,
    ("users", "set-password"): users_set_password,
    ("users", "delete"): users_delete,
}
