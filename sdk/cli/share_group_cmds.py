"""``share-groups list|describe|delete|reset-offsets``: share groups (KIP-932).

``describe`` shows the members (id, client, host, assigned partitions) and, with
``--offsets``, each share-partition's start offset and lag. ``reset-offsets`` moves the
start offsets of a group without members to ``--to-earliest``, ``--to-latest`` or
``--to-offset N`` for every partition of the ``--topic``s; without ``--execute`` it only
prints the plan (as Kafka's kafka-share-groups.sh does).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from sdk.admin import AdminClient, OffsetSpec
from sdk.cli.common import Output, describe_error, error_json
from sdk.types import TopicPartition

__all__ = ["HANDLERS", "add_share_group_commands"]

Handler = Callable[[argparse.Namespace, AdminClient, Output], int]


def add_share_group_commands(command: Any, commands: Any) -> None:
    """The ``share-groups`` subcommands (``command`` makes a subparser with the
    connection options, as for every other command)."""
    groups = commands.add_parser("share-groups", help="list, describe, delete share groups; "
                                 "reset their start offsets")
    actions = groups.add_subparsers(dest="action", metavar="ACTION", required=True)
    command(actions, "list", "list the share groups")
    p = command(actions, "describe", "members of share groups (and start offsets)")
    p.add_argument("groups", nargs="+", metavar="GROUP")
    p.add_argument("--offsets", action="store_true",
                   help="also each share-partition's start offset and lag")
    p = command(actions, "delete", "delete share groups without members")
    p.add_argument("groups", nargs="+", metavar="GROUP")
    p = command(actions, "reset-offsets", "move the start offsets of a share group that "
                "has no members")
    p.add_argument("group", metavar="GROUP")
    p.add_argument("--topic", action="append", required=True, metavar="TOPIC",
                   help="every partition of TOPIC (repeatable)")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-offset", type=int, metavar="OFFSET")
    p.add_argument("--execute", action="store_true", help="apply (default: show the plan)")


def share_groups_list(args: argparse.Namespace, admin: AdminClient, out: Output) -> int:
    listing = admin.list_share_groups(timeout_ms=args.timeout_ms)
    if out.json_mode:
        out.json([{"group_id": g.group_id, "state": g.state, "coordinator": g.coordinator}
                  for g in listing.values()])
    else:
        out.table(["GROUP", "STATE", "COORDINATOR"],
                  [(g.group_id, g.state, g.coordinator) for g in listing.values()])
    return out.exit_code


def share_groups_describe(args: argparse.Namespace, admin: AdminClient, out: Output) -> int:
    results = admin.describe_share_groups(args.groups, timeout_ms=args.timeout_ms)
    documents: list[dict[str, Any]] = []
    rows: list[tuple[Any, ...]] = []
    for group_id, d in results.items():
        if d.error is not None:
            out.error(f"share group {group_id!r}: {describe_error(d.error)}")
            documents.append({"group_id": group_id, "error": error_json(d.error)})
            continue
        doc: dict[str, Any] = {
            "group_id": group_id, "state": d.state, "group_epoch": d.group_epoch,
            "assignor": d.assignor, "error": None,
            "members": [{"member_id": m.member_id, "client_id": m.client_id,
                         "host": m.client_host, "epoch": m.member_epoch,
                         "partitions": [str(tp) for tp in m.assignment]}
                        for m in d.members]}
        for m in d.members:
            rows.append((group_id, d.state, m.member_id, m.client_id, m.client_host,
                         ",".join(str(tp) for tp in m.assignment) or "-"))
        if not d.members:
            rows.append((group_id, d.state, "-", "-", "-", "-"))
        if args.offsets:
            offsets = admin.list_share_group_offsets(group_id, timeout_ms=args.timeout_ms)
            doc["offsets"] = [{"topic": tp.topic, "partition": tp.partition,
                               "start_offset": o.start_offset, "lag": o.lag}
                              for tp, o in offsets.items()]
        documents.append(doc)
    if out.json_mode:
        out.json(documents)
        return out.exit_code
    out.table(["GROUP", "STATE", "MEMBER", "CLIENT-ID", "HOST", "PARTITIONS"], rows)
    if args.offsets:
        out.table(["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"],
                  [(doc["group_id"], o["topic"], o["partition"], o["start_offset"], o["lag"])
                   for doc in documents for o in doc.get("offsets", [])])
    return out.exit_code


def share_groups_delete(args: argparse.Namespace, admin: AdminClient, out: Output) -> int:
    results = admin.delete_share_groups(args.groups, timeout_ms=args.timeout_ms)
    for group_id, r in results.items():
        if r.error is not None:
            out.error(f"share group {group_id!r}: {describe_error(r.error)}")
        elif not out.json_mode:
            out.line(f"deleted share group {group_id}")
    if out.json_mode:
        out.json([{"group_id": g, "error": error_json(r.error) if r.error else None}
                  for g, r in results.items()])
    return out.exit_code


def share_groups_reset_offsets(args: argparse.Namespace, admin: AdminClient, out: Output
                               ) -> int:
    described = admin.describe_topics(args.topic, timeout_ms=args.timeout_ms)
    partitions = [TopicPartition(t, p.partition) for t, d in described.items()
                  if d.error is None for p in d.partitions]
    for t, d in described.items():
        if d.error is not None:
            out.error(f"topic {t!r}: {describe_error(d.error)}")
    if args.to_offset is not None:
        plan = dict.fromkeys(partitions, args.to_offset)
    else:
        spec = OffsetSpec.EARLIEST if args.to_earliest else OffsetSpec.LATEST
        found = admin.list_offsets(dict.fromkeys(partitions, spec), timeout_ms=args.timeout_ms)
        plan = {tp: r.offset for tp, r in found.items() if r.error is None}
    outcome: dict[TopicPartition, Any] = {}
    if args.execute and plan:
        outcome = dict(admin.alter_share_group_offsets(args.group, plan,
                                                       timeout_ms=args.timeout_ms))
    rows = []
    for tp, offset in sorted(plan.items()):
        error = outcome[tp].error if tp in outcome else None
        if error is not None:
            out.error(f"{tp}: {describe_error(error)}")
        rows.append((args.group, tp.topic, tp.partition, offset,
                     "error" if error else "done" if args.execute else "planned"))
    if out.json_mode:
        out.json([{"group_id": g, "topic": t, "partition": p, "start_offset": o, "status": s}
                  for g, t, p, o, s in rows])
    else:
        out.table(["GROUP", "TOPIC", "PARTITION", "NEW-START-OFFSET", "STATUS"], rows)
    return out.exit_code


HANDLERS: dict[tuple[str, str | None], Handler] = {
    ("share-groups", "list"): share_groups_list,
    ("share-groups", "describe"): share_groups_describe,
    ("share-groups", "delete"): share_groups_delete,
    ("share-groups", "reset-offsets"): share_groups_reset_offsets,
}
