"""The admin subcommands: ``topics ...``, ``groups ...`` and ``cluster`` (``partitions ...``
live in :mod:`sdk.cli.partition_cmds`).

Each handler takes the parsed arguments, a connected AdminClient and an Output, prints the
results (a table, or JSON with ``--json``), reports each failed item as one error line, and
returns the exit code.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from sdk.admin import (
    AdminClient,
    CommittedOffset,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResultSet,
    TopicPartition,
)
from sdk.cli.common import (
    EXIT_USAGE,
    CliError,
    Output,
    describe_error,
    error_json,
    parse_key_values,
)
from sdk.cli.partition_cmds import HANDLERS as PARTITION_HANDLERS
from sdk.cli.security_cmds import HANDLERS as SECURITY_HANDLERS
from sdk.cli.share_group_cmds import HANDLERS as SHARE_GROUP_HANDLERS
from sdk.cli.top import HANDLERS as TOP_HANDLERS
from sdk.cli.transaction_cmds import HANDLERS as TRANSACTION_HANDLERS
from sdk.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError

__all__ = ["HANDLERS", "parse_time"]

Handler = Callable[[argparse.Namespace, AdminClient, Output], int]


def _tp_json(tp: TopicPartition) -> dict[str, Any]:
    return {"topic": tp.topic, "partition": tp.partition}


def parse_time(text: str) -> int:
    """Milliseconds since the epoch from an integer or an ISO-8601 date-time (UTC when no
    zone is given)."""
    stripped = text.strip()
    if stripped.isdigit():
        return int(stripped)
    try:
        moment = datetime.fromisoformat(stripped.replace("Z", "+00:00"))
    except ValueError:
        raise CliError(f"not a timestamp in ms or an ISO date-time: {text!r}",
                       EXIT_USAGE) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


# ============================================================================ topics


def topics_list(args: argparse.Namespace, admin: AdminClient, out: Output) -> int:
    listing = admin.list_topics(include_internal=args.include_internal,
                                timeout_ms=args.timeout_ms)
    if out.json_mode:
        out.json([{"name": t.name, "partitions": t.partition_count, "internal": t.is_internal,
                   "topic_id": str(t.topic_id) if t.topic_id else None}
                  for t in listing.values()])
    else:
        out.table(["TOPIC", "PARTITIONS", "INTERNAL"],
                  [(t.name, t.partition_count, t.is_internal) for t in listing.values()])
    return out.exit_code


def topics_describe(args: argparse.Namespace, admin: AdminClient, out: Output) -> int:
    results = admin.describe_topics(args.topics or None, timeout_ms=args.timeout_ms)
    configs = {}
    if args.configs:
        found = [ConfigResource.topic(n) for n, r in results.items() if r.error is None]
        configs = dict(admin.describe_configs(found, timeout_ms=args.timeout_ms)) if found else {}
    sizes = _partition_sizes(args, admin, results) if args.sizes else {}
    documents: list[dict[str, Any]] = []
    rows: list[tuple[Any, ...]] = []
    config_rows: list[tuple[Any, ...]] = []
    for name, result in results.items():
        if result.error is not None:
            out.error(f"topic {name!r}: {describe_error(result.error)}")
            documents.append({"name": name, "error": error_json(result.error)})
            continue
        doc: dict[str, Any] = {
            "name": name, "topic_id": str(result.topic_id) if result.topic_id else None,
            "internal": result.is_internal, "error": None,
            "partitions": [{"partition": p.partition, "leader": p.leader,
                            "replicas": list(p.replicas), "isr": list(p.isr)}
                           for p in result.partitions]}
        rows.extend((name, p.partition, p.leader, p.replicas, p.isr)
                    + (tuple("-" if v is None else v
                             for v in sizes.get((name, p.partition), (None, None)))
                       if args.sizes else ())
                    for p in result.partitions)
        if args.sizes:
            for p in doc["partitions"]:
                local, remote = sizes.get((name, p["partition"]), (None, None))
                p["local_bytes"], p["remote_bytes"] = local, remote
        described = configs.get(ConfigResource.topic(name))
        if described is not None:
            if described.error is not None:
                out.error(f"configs of topic {name!r}: {describe_error(described.error)}")
            doc["configs"] = {k: e.value for k, e in sorted(described.entries.items())}
            config_rows.extend((name, k, e.value, e.source.name.lower())
                               for k, e in sorted(described.entries.items()))
        documents.append(doc)
    if out.json_mode:
        out.json(documents)
        return out.exit_code
    if rows:
        out.table(["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"]
                  + (["LOCAL_BYTES", "REMOTE_BYTES"] if args.sizes else []), rows)
    if config_rows:
        out.line()
        out.table(["TOPIC", "CONFIG", "VALUE", "SOURCE"], config_rows)
    return out.exit_code


def _partition_sizes(args: argparse.Namespace, admin: AdminClient, results: Any
                     ) -> dict[tuple[str, int], tuple[Any, Any]]:
    """(local bytes, remote-tier bytes) of each partition at its leader, from DescribeLogDirs;
    a size the leader does not report is None (remote: no tiered storage there)."""
    leaders = {(name, p.partition): p.leader for name, r in results.items() if r.error is None
               for p in r.partitions if p.leader is not None and p.leader >= 0}
    dirs = admin.describe_log_dirs(sorted(set(leaders.values())), timeout_ms=args.timeout_ms)
    sizes: dict[tuple[str, int], tuple[Any, Any]] = {}
    for (name, index), leader in leaders.items():
        local = remote = None
        for d in dirs.get(leader, []):
            info = d.replicas.get(TopicPartition(name, index))
            if info is None or info.is_future:
                continue
            if d.is_remote:
                remote = (remote or 0) + info.size
            else:
                local = (local or 0) + info.size
        sizes[(name, index)] = (local, remote)
    return sizes


def _report(out: Output, results: ResultSet[Any, Any], done: str, label: str,
            ignore: tuple[type[Exception], str] | None = None) -> int:
    """Print a per-item outcome ("Created topic 'x'.") or error line for each item;
    ``ignore`` names an error that is not a failure here, and what to say instead."""
    documents = []
    for key, result in results.items():
        error, skipped = result.error, False
        if error is not None and ignore is not None and isinstance(error, ignore[0]):
            error, skipped = None, True
        documents.append({"name": str(key), "error": error_json(error), "skipped": skipped})
        if error is not None:
            out.error(f"{label} {str(key)!r}: {describe_error(error)}")
        elif out.json_mode:
            continue
        elif skipped:
            out.line(f"{label.capitalize()} {str(key)!r} {ignore[1]}; skipped.")  # type: ignore[index]
        else:
            out.line(f"{done} {label} {str(key)!r}.")
    if out.json_mode:
        out.json(documents)
    return out.exit_code


def topics_create(args: argparse.Namespace, admin: AdminClient, out: Output) -> int:
    configs = parse_key_values(args.config, "--config") or None
    try:
        new = [NewTopic(name, args.partitions, args.replication_factor, configs=configs)
               for name in args.topics]
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    results = admin.create_topics(new, validate_only=args.validate_only,
                                  timeout_ms=args.timeout_ms)
    verb = "Validated" if args.validate_only else "Created"
    return _report(out, results, verb, "topic",
                   (TopicAlreadyExistsError, "already exists") if args.if_not_exists else None)


def topics_delete(args: argparse.Namespace, admin: AdminClient, out: Output) -> int:
    results = admin.delete_topics(args.topics, timeout_ms=args.timeout_ms)
    return _report(out, results, "Deleted", "topic",
                   (UnknownTopicOrPartitionError, "does not exist") if args.if_exists else None)


def topics_alter_config(args: argparse.Namespace, admin: AdminClient, out: Output) -> int:
    changes: dict[str, str | None] = dict(parse_key_values(args.set, "--set"))
    for name in args.delete:
        changes[name] = None
    if not changes:
        raise CliError("nothing to change: give --set KEY=VALUE and/or --delete KEY",
                       EXIT_USAGE)
    resource = ConfigResource.topic(args.topic)
    results = admin.alter_configs({resource: changes}, validate_only=args.validate_only,
                                  timeout_ms=args.timeout_ms)
    result = results[resource]
    if result.error is not None:
        out.error(f"topic {args.topic!r}: {describe_error(result.error)}")
    if out.json_mode:
        out.json({"topic": args.topic, "changes": changes, "error": error_json(result.error)})
    elif result.error is None:
        verb = "Validated" if args.validate_only else "Updated"
        out.line(f"{verb} configs of topic {args.topic!r}: " + ", ".join(
            f"{k}={'(default)' if v is None else v}" for k, v in changes.items()))
    return out.exit_code


# ============================================================================ groups


def groups_list(args: argparse.Namespace, admin: AdminClient, out: Output) -> int:
    listing = admin.list_consumer_groups(states=args.state, timeout_ms=args.timeout_ms)
    if out.json_mode:
        out.json([{"group": g.group_id, "state": g.state or None,
                   "protocol_type": g.protocol_type, "coordinator": g.coordinator}
                  for g in listing.values()])
    else:
        out.table(["GROUP", "STATE", "PROTOCOL-TYPE", "COORDINATOR"],
                  [(g.group_id, g.state or None, g.protocol_type or None, g.coordinator)
                   for g in listing.values()])
    return out.exit_code


def groups_describe(args: argparse.Namespace, admin: AdminClient, out: Output) -> int:
    results = admin.describe_consumer_groups(args.groups, timeout_ms=args.timeout_ms)
    documents: list[dict[str, Any]] = []
    for group, d in results.items():
        if d.error is None and d.state == "Dead":
            out.error(f"group {group!r} does not exist")
            documents.append({"group": group, "error": {"code": None, "name": "GROUP_NOT_FOUND",
                                                       "message": "the group does not exist"}})
            continue
        if d.error is not None:
            out.error(f"group {group!r}: {describe_error(d.error)}")
            documents.append({"group": group, "error": error_json(d.error)})
            continue
        coordinator = None if d.coordinator is None else {
            "id": d.coordinator.node_id, "host": d.coordinator.host, "port": d.coordinator.port}
        documents.append({
            "group": group, "state": d.state, "protocol_type": d.protocol_type,
            "protocol": d.protocol, "coordinator": coordinator, "error": None,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "client_host": m.client_host,
                         "assignment": [_tp_json(tp) for tp in m.assignment]}
                        for m in d.members]})
        if not out.json_mode:
            where = "-" if d.coordinator is None else (
                f"{d.coordinator.node_id} ({d.coordinator.address})")
            out.line(f"GROUP {group}: state {d.state}, protocol {d.protocol or '-'}, "
                     f"coordinator {where}, {len(d.members)} member(s)")
            if d.members:
                out.table(["MEMBER", "CLIENT-ID", "HOST", "PARTITIONS"],
                          [(m.member_id, m.client_id, m.client_host,
                            [str(tp) for tp in m.assignment]) for m in d.members])
            out.line()
    if out.json_mode:
        out.json(documents)
    return out.exit_code


def groups_lag(args: argparse.Namespace, admin: AdminClient, out: Output) -> int:
    lag = admin.consumer_group_lag(args.group, timeout_ms=args.timeout_ms)
    if lag.state == "Dead" and not lag.partitions:
        raise CliError(f"group {args.group!r} does not exist")
    for p in lag.partitions:
        if p.error is not None:
            out.error(f"{p.topic_partition}: {describe_error(p.error)}")
    if out.json_mode:
        out.json({"group": lag.group_id, "state": lag.state, "total_lag": lag.total_lag,
                  "partitions": [{**_tp_json(p.topic_partition), "committed": p.committed,
                                  "end_offset": p.end_offset, "lag": p.lag,
                                  "member_id": p.member_id or None,
                                  "client_id": p.client_id or None,
                                  "error": error_json(p.error)} for p in lag.partitions]})
        return out.exit_code
    out.table(["TOPIC", "PARTITION", "COMMITTED", "END", "LAG", "MEMBER", "CLIENT-ID"],
              [(p.topic_partition.topic, p.topic_partition.partition, p.committed,
                p.end_offset, p.lag, p.member_id or None, p.client_id or None)
               for p in lag.partitions])
    out.line(f"\nGROUP {lag.group_id} ({lag.state}): total lag {lag.total_lag}")
    return out.exit_code


def groups_delete(args: argparse.Namespace, admin: AdminClient, out: Output) -> int:
    results = admin.delete_consumer_groups(args.groups, timeout_ms=args.timeout_ms)
    return _report(out, results, "Deleted", "group")


def groups_reset_offsets(args: argparse.Namespace, admin: AdminClient, out: Output) -> int:
    dry_run = not args.execute
    if args.to_offset is not None:
        results = _reset_to_offset(args, admin, dry_run)
    else:
        if args.to_earliest:
            to: OffsetSpec | int = OffsetSpec.EARLIEST
        elif args.to_latest:
            to = OffsetSpec.LATEST
        elif args.to_timestamp is not None:
            to = args.to_timestamp
        else:
            to = parse_time(args.to_datetime)
        results = admin.reset_consumer_group_offsets(args.group, to, topics=args.topic,
                                                     dry_run=dry_run,
                                                     timeout_ms=args.timeout_ms)
    for tp, r in results.items():
        if r.error is not None:
            out.error(f"{tp}: {describe_error(r.error)}")
    if out.json_mode:
        out.json({"group": args.group, "executed": not dry_run,
                  "partitions": [{**_tp_json(tp), "new_offset": r.offset,
                                  "error": error_json(r.error)} for tp, r in results.items()]})
        return out.exit_code
    if not results:  # nothing to reset, so nothing a dry run or --execute could change
        out.note(f"group {args.group!r} has no committed offsets to reset; name --topic")
        return out.exit_code
    out.table(["TOPIC", "PARTITION", "NEW-OFFSET"],
              [(tp.topic, tp.partition, r.offset) for tp, r in results.items()
               if r.error is None])
    if dry_run:
        out.note("Dry run: nothing was committed. Add --execute to commit these offsets.")
    return out.exit_code


def _reset_to_offset(args: argparse.Namespace, admin: AdminClient,
                     dry_run: bool) -> ResultSet[TopicPartition, CommittedOffset]:
    if args.topic:
        described = admin.describe_topics(args.topic, timeout_ms=args.timeout_ms)
        for name, d in described.items():
            if d.error is not None:
                raise CliError(f"topic {name!r}: {describe_error(d.error)}")
        scope = [TopicPartition(n, p.partition) for n, d in described.items()
                 for p in d.partitions]
    else:
        scope = list(admin.list_consumer_group_offsets(args.group, timeout_ms=args.timeout_ms))
    group = admin.describe_consumer_groups([args.group], timeout_ms=args.timeout_ms)[args.group]
    if group.members:
        raise CliError(f"group {args.group!r} is {group.state} with {len(group.members)} "
                       "member(s); offsets can be reset only while it has none")
    if dry_run:
        return ResultSet({tp: CommittedOffset(tp, args.to_offset) for tp in sorted(scope)})
    return admin.alter_consumer_group_offsets(
        args.group, dict.fromkeys(scope, args.to_offset), timeout_ms=args.timeout_ms)


# ============================================================================ cluster


def cluster(args: argparse.Namespace, admin: AdminClient, out: Output) -> int:
    c = admin.describe_cluster(timeout_ms=args.timeout_ms)
    if out.json_mode:
        out.json({"cluster_id": c.cluster_id, "controller_id": c.controller_id,
                  "brokers": [{"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                              for b in c.brokers]})
        return out.exit_code
    out.line(f"Cluster id: {c.cluster_id or '-'}")
    out.line(f"Controller: {'-' if c.controller_id is None else c.controller_id}")
    out.table(["BROKER", "HOST", "PORT", "RACK"],
              [(b.node_id, b.host, b.port, b.rack) for b in c.brokers])
    return out.exit_code


HANDLERS: dict[tuple[str, str | None], Handler] = {
    ("topics", "list"): topics_list,
    ("topics", "describe"): topics_describe,
    ("topics", "create"): topics_create,
    ("topics", "delete"): topics_delete,
    ("topics", "alter-config"): topics_alter_config,
    ("groups", "list"): groups_list,
    ("groups", "describe"): groups_describe,
    ("groups", "lag"): groups_lag,
    ("groups", "delete"): groups_delete,
    ("groups", "reset-offsets"): groups_reset_offsets,
    ("cluster", None): cluster,
    **PARTITION_HANDLERS,
    **SECURITY_HANDLERS,
    **TRANSACTION_HANDLERS,
    **SHARE_GROUP_HANDLERS,
    **TOP_HANDLERS,
}
