"""``transactions list`` and ``transactions describe``: the transactional ids the
coordinators know, their state, producer, timeout and partitions (``--json`` for a
document per id; an id that fails sets the exit code and is reported with its error)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from sdk.admin import AdminClient
from sdk.cli.common import Output, describe_error, error_json

__all__ = ["HANDLERS"]

Handler = Callable[[argparse.Namespace, AdminClient, Output], int]


def transactions_list(args: argparse.Namespace, admin: AdminClient, out: Output) -> int:
    listing = admin.list_transactions(states=args.state, producer_ids=args.producer_id,
                                      min_duration_ms=args.min_duration_ms,
                                      timeout_ms=args.timeout_ms)
    if out.json_mode:
        out.json([{"transactional_id": t.transactional_id, "producer_id": t.producer_id,
                   "state": t.state, "coordinator": t.coordinator}
                  for t in listing.values()])
    else:
        out.table(["TRANSACTIONAL-ID", "PRODUCER-ID", "STATE", "COORDINATOR"],
                  [(t.transactional_id, t.producer_id, t.state, t.coordinator)
                   for t in listing.values()])
    return out.exit_code


def transactions_describe(args: argparse.Namespace, admin: AdminClient, out: Output) -> int:
    results = admin.describe_transactions(args.ids, timeout_ms=args.timeout_ms)
    documents: list[dict[str, Any]] = []
    rows: list[tuple[Any, ...]] = []
    for txn_id, d in results.items():
        if d.error is not None:
            out.error(f"transactional id {txn_id!r}: {describe_error(d.error)}")
            documents.append({"transactional_id": txn_id, "error": error_json(d.error)})
            continue
        documents.append({
            "transactional_id": txn_id, "state": d.state, "producer_id": d.producer_id,
            "producer_epoch": d.producer_epoch, "timeout_ms": d.timeout_ms,
            "start_time_ms": d.start_time_ms if d.start_time_ms >= 0 else None,
            "coordinator": d.coordinator, "error": None,
            "partitions": [{"topic": tp.topic, "partition": tp.partition}
                           for tp in d.partitions]})
        rows.append((txn_id, d.state, d.producer_id, d.producer_epoch, d.timeout_ms,
                     d.start_time_ms if d.start_time_ms >= 0 else None, d.coordinator,
                     [str(tp) for tp in d.partitions]))
    if out.json_mode:
        out.json(documents)
    else:
        out.table(["TRANSACTIONAL-ID", "STATE", "PRODUCER-ID", "EPOCH", "TIMEOUT-MS",
                   "START-TIME-MS", "COORDINATOR", "PARTITIONS"], rows)
    return out.exit_code


HANDLERS: dict[tuple[str, str | None], Handler] = {
    ("transactions", "list"): transactions_list,
    ("transactions", "describe"): transactions_describe,
}
