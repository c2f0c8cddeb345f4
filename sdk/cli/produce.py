"""``kafka-sdk produce TOPIC``: each input line becomes one record.

Lines come from stdin or ``--file``; ``--key-separator`` splits each line into key and value
at the first separator; ``--header`` adds headers to every record. Records without headers
go through ``Producer.send_many`` in chunks (the fast path); with headers, one ``send`` per
record. A progress bar on stderr (when it is a terminal, or with ``--progress``) and a final
line with the count and rate; every failed delivery is counted and the first one named.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import deque
from collections.abc import Iterator, Mapping
from typing import IO, Any

from sdk.cli.common import EXIT_USAGE, CliError, Output, describe_error, topic_partitions
from sdk.errors import ConfigError
from sdk.producer import Producer, ProducerConfig

__all__ = ["Progress", "produce"]

_CHUNK = 2_000  # lines handed to send_many at once
_MAX_PENDING_CHUNKS = 64  # completed chunks are counted from the oldest
_REDRAW_S = 0.2


class Progress:
    """A one-line progress display on a text stream: a bar when the total size is known."""

    def __init__(self, stream: IO[str], total_bytes: int | None, enabled: bool) -> None:
        self.stream = stream
        self.total_bytes = total_bytes if total_bytes else None
        self.enabled = enabled
        self.started = time.monotonic()
        self._drawn_at = 0.0
        self._drawn = False

    def update(self, records: int, read_bytes: int, *, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._drawn_at < _REDRAW_S:
            return
        self._drawn_at = now
        rate = records / max(now - self.started, 1e-9)
        text = f"{records:,} records  {rate:,.0f}/s"
        if self.total_bytes:
            share = min(read_bytes / self.total_bytes, 1.0)
            filled = int(share * 30)
            text = f"[{'#' * filled}{'.' * (30 - filled)}] {share:4.0%}  " + text
        self.stream.write("\r" + text + "\x1b[K")
        self.stream.flush()
        self._drawn = True

    def finish(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def _lines(source: IO[bytes]) -> Iterator[bytes]:
    for raw in source:
        if raw.endswith(b"\n"):
            raw = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
        yield raw


def _headers(items: list[str]) -> list[tuple[str, bytes | None]]:
    out: list[tuple[str, bytes | None]] = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"--header must look like KEY=VALUE, not {item!r}", EXIT_USAGE)
        out.append((key, value.encode("utf-8")))
    return out


def _check_topic(args: argparse.Namespace, settings: Mapping[str, Any]) -> None:
    topic_partitions(args.topic, settings, args.timeout_ms,
                     () if args.partition is None else (args.partition,))


class _Tally:
    """Delivery outcomes; updated by callbacks on the producer's thread."""

    def __init__(self) -> None:
        self.acked = 0
        self.failed = 0
        self.first_error: BaseException | None = None

    def on_delivery(self, error: BaseException | None, _meta: Any) -> None:
        if error is None:
            self.acked += 1
        else:
            self.failed += 1
            if self.first_error is None:
                self.first_error = error


def produce(args: argparse.Namespace, settings: Mapping[str, Any], out: Output) -> int:
    headers = _headers(args.header)
    separator = args.key_separator.encode("utf-8") if args.key_separator else None
    try:  # a bad -X is a usage error even when the cluster cannot be reached
        ProducerConfig.build(dict(settings))
    except ConfigError as exc:
        raise CliError(f"invalid setting: {exc}", EXIT_USAGE) from None
    _check_topic(args, settings)
    try:
        source: IO[bytes] = open(args.file, "rb") if args.file else sys.stdin.buffer
    except OSError as exc:
        raise CliError(f"cannot read {args.file}: {exc.strerror or exc}", EXIT_USAGE) from None
    total = None
    if args.file:
        try:
            total = os.fstat(source.fileno()).st_size
        except OSError:
            total = None
    enabled = args.progress if args.progress is not None else out.err.isatty()
    progress = Progress(out.err, total, enabled and not out.json_mode)
    try:
        producer = Producer(dict(settings))
    except ConfigError as exc:
        raise CliError(f"invalid setting: {exc}", EXIT_USAGE) from None
    tally = _Tally()
    bulks: deque[Any] = deque()
    sent = read_bytes = 0
    bad_line: str | None = None
    started = time.monotonic()
    try:
        chunk: list[Any] = []
        for number, line in enumerate(_lines(source), 1):
            read_bytes += len(line) + 1
            key: bytes | None = None
            value = line
            if separator is not None:
                key, found, value = line.partition(separator)
                if not found:
                    bad_line = f"line {number} has no key separator {args.key_separator!r}"
                    break
            if headers:
                producer.send(args.topic, value, key, headers, args.partition,
                              on_delivery=tally.on_delivery)
                sent += 1
            else:
                chunk.append(value if separator is None else (key, value))
                if len(chunk) >= _CHUNK:
                    sent += _send_chunk(producer, args, chunk, bulks, tally)
                    chunk = []
            progress.update(sent, read_bytes)
        if chunk:
            sent += _send_chunk(producer, args, chunk, bulks, tally)
        producer.flush()
        while bulks:
            _count_bulk(bulks.popleft(), tally)
    finally:
        progress.update(sent, read_bytes, force=True)
        progress.finish()
        if source is not sys.stdin.buffer:
            source.close()
        producer.close(timeout=5)
    elapsed = max(time.monotonic() - started, 1e-9)
    return _summary(args, out, tally, elapsed, read_bytes, bad_line)


def _send_chunk(producer: Producer, args: argparse.Namespace, chunk: list[Any],
                bulks: deque[Any], tally: _Tally) -> int:
    bulks.append(producer.send_many(args.topic, chunk, partition=args.partition))
    while bulks and (len(bulks) > _MAX_PENDING_CHUNKS or bulks[0].done()):
        _count_bulk(bulks.popleft(), tally)
    return len(chunk)


def _count_bulk(bulk: Any, tally: _Tally) -> None:
    errors = bulk.errors()
    tally.failed += len(errors)
    tally.acked += len(bulk) - len(errors)
    if errors and tally.first_error is None:
        tally.first_error = errors[0][1]


def _summary(args: argparse.Namespace, out: Output, tally: _Tally, elapsed: float,
             read_bytes: int, bad_line: str | None) -> int:
    total = tally.acked + tally.failed
    if out.json_mode:
        out.json({"topic": args.topic, "records": tally.acked, "failed": tally.failed,
                  "seconds": round(elapsed, 3), "records_per_second": round(total / elapsed),
                  "error": None if tally.first_error is None else str(tally.first_error)})
    elif not args.quiet:
        out.note(f"Produced {tally.acked:,} records to {args.topic!r} in {elapsed:.2f} s "
                 f"({total / elapsed:,.0f} records/s, "
                 f"{read_bytes / elapsed / 1e6:.1f} MB/s)")
    if tally.failed:
        out.error(f"{tally.failed:,} of {total:,} records failed; first error: "
                  f"{describe_error(tally.first_error or RuntimeError('unknown'))}")
    if bad_line is not None:
        raise CliError(f"{bad_line}; stopped after {total:,} records", EXIT_USAGE)
    return out.exit_code
