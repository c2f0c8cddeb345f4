"""``kafka-sdk consume TOPIC``: print records, one per line.

Without ``--group`` the tool assigns itself the partitions (all, or ``--partition``) and
starts at the end, the beginning (``--from-beginning``), an offset (``--offset``) or a time
(``--from-timestamp``); it commits nothing. With ``--group`` it joins the group, starts at
the committed offsets (``--from-beginning`` sets ``auto.offset.reset=earliest`` for
partitions without one) and commits what it printed before leaving.

``--format value`` writes the raw value bytes (``--print-key``: key, separator, value);
``--format json`` writes one JSON object per record with its metadata, keys and values as
text when they are UTF-8 and as ``{"base64": ...}`` otherwise. Ctrl-C is the normal way to
stop (exit code 0).
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from collections.abc import Mapping
from typing import IO, Any

from sdk.cli.admin_cmds import parse_time
from sdk.cli.common import EXIT_USAGE, CliError, Output, topic_partitions
from sdk.consumer import Consumer, ConsumerConfig
from sdk.errors import ConfigError
from sdk.types import ConsumerRecord, TopicPartition

__all__ = ["consume", "record_json"]

_POLL_MS = 500


def _text(data: Any) -> Any:
    if data is None:
        return None
    if isinstance(data, str):
        return data
    raw = bytes(data)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(raw).decode("ascii")}


def record_json(r: ConsumerRecord) -> dict[str, Any]:
    return {
        "topic": r.topic, "partition": r.partition, "offset": r.offset,
        "timestamp": r.timestamp, "timestamp_type": r.timestamp_type.name,
        "key": _text(r.key), "value": _text(r.value),
        "headers": [[k, _text(v)] for k, v in r.headers],
    }


def _bytes(data: Any) -> bytes:
    if data is None:
        return b"null"
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


def _partitions(args: argparse.Namespace, settings: Mapping[str, Any]) -> list[int]:
    existing = topic_partitions(args.topic, settings, args.timeout_ms, args.partition or ())
    return sorted(set(args.partition)) if args.partition else existing


def _consumer_settings(args: argparse.Namespace, settings: Mapping[str, Any]) -> dict[str, Any]:
    config = {k: v for k, v in settings.items()
              if k.replace("_", ".") not in ("group.id", "auto.offset.reset")}
    group = args.group
    if group is None:
        group = next((v for k, v in settings.items() if k.replace("_", ".") == "group.id"), None)
    if group is not None:
        if args.offset is not None or args.from_timestamp is not None or args.partition:
            raise CliError("--offset, --from-timestamp and --partition do not go with a group; "
                           "use `groups reset-offsets` to move a group", EXIT_USAGE)
        config["group.id"] = group
        config["auto.offset.reset"] = "earliest" if args.from_beginning else "latest"
        config.setdefault("enable.auto.commit", "false")  # committed explicitly below
    return config


def consume(args: argparse.Namespace, settings: Mapping[str, Any], out: Output) -> int:
    config = _consumer_settings(args, settings)
    try:  # a bad -X is a usage error even when the cluster cannot be reached
        ConsumerConfig.build(config)
    except ConfigError as exc:
        raise CliError(f"invalid setting: {exc}", EXIT_USAGE) from None
    start_ms = parse_time(args.from_timestamp) if args.from_timestamp is not None else None
    partitions = _partitions(args, settings)
    in_group = "group.id" in config
    try:
        consumer = Consumer(args.topic, config=config) if in_group else Consumer(config=config)
    except ConfigError as exc:
        raise CliError(f"invalid setting: {exc}", EXIT_USAGE) from None
    count = 0
    try:
        if not in_group:
            _position(consumer, args, [TopicPartition(args.topic, p) for p in partitions],
                      start_ms)
        count = _loop(consumer, args, out)
        if in_group and count:
            consumer.commit(timeout_ms=args.timeout_ms)
    finally:
        consumer.close(timeout_ms=args.timeout_ms)
    if not args.quiet:
        out.note(f"Processed a total of {count} messages")
    return out.exit_code


def _position(consumer: Consumer, args: argparse.Namespace, tps: list[TopicPartition],
              start_ms: int | None) -> None:
    consumer.assign(tps)
    if args.from_beginning:
        consumer.seek_to_beginning(*tps)
    elif args.offset is not None:
        for tp in tps:
            consumer.seek(tp, args.offset)
    elif start_ms is not None:
        found = consumer.offsets_for_times(dict.fromkeys(tps, start_ms),
                                           timeout_ms=args.timeout_ms)
        for tp in tps:
            hit = found.get(tp)
            if hit is None:
                consumer.seek_to_end(tp)
            else:
                consumer.seek(tp, hit.offset)
    else:
        consumer.seek_to_end(*tps)


def _loop(consumer: Consumer, args: argparse.Namespace, out: Output) -> int:
    sink: IO[bytes] = sys.stdout.buffer if out.out is sys.stdout else None  # type: ignore[assignment]
    count = 0
    idle_since = time.monotonic()
    try:
        while args.max_messages is None or count < args.max_messages:
            remaining = None if args.max_messages is None else args.max_messages - count
            batch = consumer.poll(timeout_ms=_POLL_MS, max_records=remaining)
            if not batch:
                idle = (time.monotonic() - idle_since) * 1000
                if args.idle_timeout_ms is not None and idle >= args.idle_timeout_ms:
                    break
                continue
            idle_since = time.monotonic()
            for tp in sorted(batch):
                for record in batch[tp]:
                    _write(record, args, out, sink)
                    count += 1
            (sink or out.out).flush()
    except KeyboardInterrupt:
        pass  # the normal way to stop a console consumer
    return count


def _write(record: ConsumerRecord, args: argparse.Namespace, out: Output,
           sink: IO[bytes] | None) -> None:
    if args.format == "json":
        line = json.dumps(record_json(record), ensure_ascii=False)
        if sink is not None:
            sink.write(line.encode("utf-8") + b"\n")
        else:
            out.out.write(line + "\n")
        return
    data = _bytes(record.value)
    if args.print_key:
        data = _bytes(record.key) + args.key_separator.encode("utf-8") + data
    if sink is not None:
        sink.write(data + b"\n")
    else:
        out.out.write(data.decode("utf-8", "replace") + "\n")
