"""The ``partitions ...`` subcommands: leader elections and replica reassignments.

``partitions elect`` asks the controller for preferred (or unclean) leaders; a partition
that already has the wanted leader is reported, not failed, as Kafka's
``kafka-leader-election.sh`` does. ``partitions reassign`` starts or cancels moves of
partitions to other brokers, ``partitions reassignments`` lists the moves in progress.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from sdk.admin import AdminClient, ElectionType, TopicPartition
from sdk.cli.common import EXIT_USAGE, CliError, Output, describe_error, error_json
from sdk.errors import ElectionNotNeededError

__all__ = ["HANDLERS", "parse_replicas"]

Handler = Callable[[argparse.Namespace, AdminClient, Output], int]


def parse_replicas(text: str) -> list[int]:
    """``"1,2,3"`` -> ``[1, 2, 3]``; a usage error for anything else."""
    try:
        replicas = [int(part) for part in text.split(",")]
    except ValueError:
        raise CliError(f"--replicas takes broker ids separated by commas (1,2,3), not "
                       f"{text!r}", EXIT_USAGE) from None
    if any(r < 0 for r in replicas):
        raise CliError(f"--replicas: broker ids are >= 0, not {text!r}", EXIT_USAGE)
    return replicas


def _chosen(args: argparse.Namespace, admin: AdminClient) -> list[TopicPartition] | None:
    """The partitions named by ``--topic``/``--partition``; None (every partition) without
    ``--topic``; every partition of each topic given without ``--partition``."""
    topics: list[str] = list(dict.fromkeys(args.topic or ()))
    if args.partition:
        if len(topics) != 1:
            raise CliError("--partition needs exactly one --topic", EXIT_USAGE)
        return [TopicPartition(topics[0], p) for p in dict.fromkeys(args.partition)]
    if not topics:
        return None
    described = admin.describe_topics(topics, timeout_ms=args.timeout_ms)
    for name, d in described.items():
        if d.error is not None:
            raise CliError(f"topic {name!r}: {describe_error(d.error)}")
    return [TopicPartition(n, p.partition) for n, d in described.items() for p in d.partitions]


def partitions_elect(args: argparse.Namespace, admin: AdminClient, out: Output) -> int:
    kind = ElectionType[args.type.upper()]
    chosen = _chosen(args, admin)
    results = admin.elect_leaders(kind, chosen, timeout_ms=args.timeout_ms)
    documents, rows = [], []
    for tp, result in results.items():
        error = result.error
        not_needed = isinstance(error, ElectionNotNeededError)
        if error is not None and not not_needed:
            out.error(f"{tp}: {describe_error(error)}")
        outcome = "elected" if error is None else "already elected" if not_needed else "failed"
        rows.append((tp.topic, tp.partition, outcome))
        documents.append({"topic": tp.topic, "partition": tp.partition,
                          "elected": error is None,
                          "error": None if error is None else error_json(error)})
    if out.json_mode:
        out.json({"election_type": kind.name.lower(), "partitions": documents})
    elif rows:
        out.table(["TOPIC", "PARTITION", "RESULT"], rows)
    else:  # every partition asked for, and none needed an election
        out.line(f"No partition needed a {kind.name.lower()} leader election.")
    return out.exit_code


def partitions_reassign(args: argparse.Namespace, admin: AdminClient, out: Output) -> int:
    replicas = None if args.cancel else parse_replicas(args.replicas)
    chosen = [TopicPartition(args.topic, p) for p in dict.fromkeys(args.partition)]
    results = admin.alter_partition_reassignments(dict.fromkeys(chosen, replicas),
                                                  timeout_ms=args.timeout_ms)
    documents = []
    for tp, result in results.items():
        documents.append({"topic": tp.topic, "partition": tp.partition, "replicas": replicas,
                          "cancel": replicas is None, "error": error_json(result.error)})
        if result.error is not None:
            out.error(f"{tp}: {describe_error(result.error)}")
        elif out.json_mode:
            continue
        elif replicas is None:
            out.line(f"Cancelled the reassignment of {tp}.")
        else:
            out.line(f"Started the reassignment of {tp} to replicas "
                     f"{','.join(map(str, replicas))}.")
    if out.json_mode:
        out.json(documents)
    return out.exit_code


def partitions_reassignments(args: argparse.Namespace, admin: AdminClient, out: Output) -> int:
    listing = admin.list_partition_reassignments(timeout_ms=args.timeout_ms)
    wanted = set(args.topic or ())
    moves = [r for r in listing.values() if not wanted or r.topic_partition.topic in wanted]
    if out.json_mode:
        document: list[dict[str, Any]] = [
            {"topic": r.topic_partition.topic, "partition": r.topic_partition.partition,
             "replicas": list(r.replicas), "adding": list(r.adding),
             "removing": list(r.removing)} for r in moves]
        out.json(document)
    elif moves:
        out.table(["TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING"],
                  [(r.topic_partition.topic, r.topic_partition.partition, r.replicas,
                    r.adding, r.removing) for r in moves])
    else:
        out.line("No partition reassignment in progress.")
    return out.exit_code


HANDLERS: dict[tuple[str, str | None], Handler] = {
    ("partitions", "elect"): partitions_elect,
    ("partitions", "reassign"): partitions_reassign,
    ("partitions", "reassignments"): partitions_reassignments,
}
