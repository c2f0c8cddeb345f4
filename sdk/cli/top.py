"""``kafka-sdk top``: a live view of a cluster's topics and consumer groups.

Every ``--interval`` seconds (default 1) it samples, through the admin client, the end
offset of every partition (ListOffsets, latest) and the committed offsets of every group
(OffsetFetch), and redraws: per topic the produce rate (end offsets' growth) and consume
rate (the groups' committed offsets' growth), per group the total lag and, under it, the
lag of each partition, each with a trend arrow against the previous sample (↑ growing,
↓ shrinking, → unchanged). Lag is end offset minus committed offset, as
``groups lag`` and Kafka's kafka-consumer-groups.sh compute it, so it works against any
Kafka-protocol cluster (ours, Apache Kafka, tansu).

On a terminal the screen is redrawn in place with ANSI escapes and ``q`` or Ctrl-C quits
(Ctrl-C once a sample being taken ends; a second Ctrl-C at once);
piped, frames follow one another. ``--once`` prints one frame (``--json``: one document)
made of two samples ``--interval`` apart, so rates are filled (``--interval 0``: one
sample, rates null); ``--json`` without ``--once`` prints one such document per line per
sample. ``--topic`` and ``--group`` (repeatable, shell-style patterns) narrow the view;
topics whose name starts with ``__`` (Kafka's internal ones) are left out.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import os
import select
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TextIO

from sdk.admin import AdminClient, CommittedOffset, OffsetSpec, ResultSet
from sdk.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Output,
    client_settings,
    describe_error,
)
from sdk.errors import KafkaError
from sdk.types import TopicPartition

__all__ = ["HANDLERS", "Sample", "View", "build_view", "take_sample", "top"]

GROUP_FETCHES = 8  # groups' committed offsets asked for at once
TREND_ARROWS = {"up": "↑", "down": "↓", "steady": "→", None: " "}
CLEAR = "\x1b[H\x1b[2J"
HIDE_CURSOR, SHOW_CURSOR = "\x1b[?25l", "\x1b[?25h"


# ---------------------------------------------------------------------------- sampling


@dataclass
class Sample:
    """One look at the cluster: end offsets, and each group's state and commits."""

    taken: float  # time.monotonic()
    ends: dict[TopicPartition, int] = field(default_factory=dict)
    groups: dict[str, str] = field(default_factory=dict)  # group id -> state
    committed: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def _matches(name: str, patterns: Sequence[str] | None) -> bool:
    return not patterns or any(fnmatch.fnmatchcase(name, p) for p in patterns)


def take_sample(admin: AdminClient, topics: Sequence[str] | None,
                groups: Sequence[str] | None, timeout_ms: int) -> Sample:
    """End offsets of the (matching, non-internal) topics and committed offsets of the
    matching groups; failures of single items are noted in ``errors``, not raised."""
    sample = Sample(time.monotonic())
    listed = admin.list_topics(timeout_ms=timeout_ms)
    specs = {TopicPartition(name, p): OffsetSpec.LATEST
             for name, listing in listed.items() if _matches(name, topics)
             for p in range(listing.partition_count)}
    if specs:
        offsets = admin.list_offsets(specs, timeout_ms=timeout_ms)
        for tp, listed_offset in offsets.succeeded.items():
            sample.ends[tp] = listed_offset.offset
        for tp, exc in offsets.errors.items():
            sample.errors.append(f"{tp.topic}-{tp.partition}: {describe_error(exc)}")
    listed_groups = admin.list_consumer_groups(timeout_ms=timeout_ms)
    wanted = [g for g in sorted(listed_groups) if _matches(g, groups)]

    def fetch(group_id: str) -> ResultSet[TopicPartition, CommittedOffset]:
        return admin.list_consumer_group_offsets(group_id, timeout_ms=timeout_ms)

    # The groups' OffsetFetch requests overlap (the client's loop serves every thread), so
    # a cluster with many groups still refreshes in about one round trip.
    with ThreadPoolExecutor(max_workers=min(GROUP_FETCHES, max(1, len(wanted)))) as pool:
        fetched = list(pool.map(fetch, wanted))
    for group_id, committed in zip(wanted, fetched):
        sample.groups[group_id] = listed_groups[group_id].state or "?"
        mine = sample.committed[group_id] = {}
        for tp, offset in committed.succeeded.items():
            if offset.offset is not None and _matches(tp.topic, topics) \
                    and not tp.topic.startswith("__"):
                mine[tp] = offset.offset
        for tp, exc in committed.errors.items():
            sample.errors.append(f"group {group_id} {tp.topic}-{tp.partition}: "
                                 f"{describe_error(exc)}")
    return sample


# ---------------------------------------------------------------------------- the view


def _trend(now: int | None, before: int | None) -> str | None:
    if now is None or before is None:
        return None
    return "up" if now > before else "down" if now < before else "steady"


def _rate(now: int, before: int | None, seconds: float | None) -> float | None:
    if before is None or not seconds:
        return None
    return round(max(0, now - before) / seconds, 1)


@dataclass
class View:
    """What one frame shows, as plain data (``--json`` prints exactly this)."""

    document: dict[str, Any]


def build_view(bootstrap: str, current: Sample, previous: Sample | None) -> View:
    seconds = current.taken - previous.taken if previous is not None else None
    topics: dict[str, dict[str, Any]] = {}
    for tp, end in sorted(current.ends.items()):
        entry = topics.setdefault(tp.topic, {"topic": tp.topic, "partitions": 0,
                                             "end_offset": 0, "produce_rate": None,
                                             "consume_rate": None})
        entry["partitions"] += 1
        entry["end_offset"] += end
    if previous is not None:
        for name, entry in topics.items():
            before = [previous.ends.get(tp) for tp in current.ends if tp.topic == name]
            known = [b for b in before if b is not None]
            if len(known) == len(before):  # a partition added since: no rate this time
                entry["produce_rate"] = _rate(entry["end_offset"], sum(known), seconds)
    groups = []
    consumed: dict[str, float] = {}
    for group_id, state in current.groups.items():
        committed = current.committed.get(group_id, {})
        earlier = previous.committed.get(group_id, {}) if previous is not None else {}
        partitions = []
        total: int | None = 0
        total_before: int | None = 0 if previous is not None else None
        group_rate: float | None = 0.0 if previous is not None else None
        for tp, offset in sorted(committed.items()):
            end_now = current.ends.get(tp)
            lag = None if end_now is None else max(0, end_now - offset)
            lag_before: int | None = None
            if previous is not None:
                end_before, offset_before = previous.ends.get(tp), earlier.get(tp)
                if end_before is not None and offset_before is not None:
                    lag_before = max(0, end_before - offset_before)
                rate = _rate(offset, offset_before, seconds)
                if rate is not None and group_rate is not None:
                    group_rate += rate
                    consumed[tp.topic] = consumed.get(tp.topic, 0.0) + rate
            total = None if total is None or lag is None else total + lag
            if total_before is not None:
                total_before = None if lag_before is None else total_before + lag_before
            partitions.append({"topic": tp.topic, "partition": tp.partition,
                               "committed": offset, "end_offset": end_now, "lag": lag,
                               "trend": _trend(lag, lag_before)})
        groups.append({"group": group_id, "state": state, "total_lag": total,
                       "trend": _trend(total, total_before),
                       "consume_rate": None if group_rate is None else round(group_rate, 1),
                       "partitions": partitions})
    if previous is not None:
        for name, entry in topics.items():
            entry["consume_rate"] = round(consumed.get(name, 0.0), 1)
    return View({"bootstrap_servers": bootstrap, "time": datetime.now().isoformat(
                     timespec="seconds"),
                 "interval_s": None if seconds is None else round(seconds, 3),
                 "topics": list(topics.values()), "groups": groups,
                 "errors": list(current.errors)})


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}" if isinstance(value, float) else f"{value:,}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]
           ) -> Iterator[str]:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    yield line(headers)
    for row in rows:
        yield line(row)


def render(view: View, interval: float) -> list[str]:
    """The frame as lines (without escapes)."""
    doc = view.document
    lines = [f"kafka-sdk top  {doc['bootstrap_servers']}  {doc['time']}  "
             f"(every {interval:g} s; q or Ctrl-C quits)", ""]
    topic_rows = [[t["topic"], str(t["partitions"]), _number(t["end_offset"]),
                   _number(t["produce_rate"]), _number(t["consume_rate"])]
                  for t in doc["topics"]]
    lines.extend(_table(["TOPIC", "PARTITIONS", "END OFFSET", "PRODUCE/S", "CONSUME/S"],
                        topic_rows, {1, 2, 3, 4}))
    if not topic_rows:
        lines.append("(no topics)")
    lines.append("")
    rows = []
    for g in doc["groups"]:
        rows.append([g["group"], g["state"], _number(g["total_lag"]),
                     TREND_ARROWS[g["trend"]], _number(g["consume_rate"])])
        for p in g["partitions"]:
            rows.append([f"  {p['topic']}-{p['partition']}", "", _number(p["lag"]),
                         TREND_ARROWS[p["trend"]], ""])
    lines.extend(_table(["GROUP / PARTITION", "STATE", "LAG", "", "CONSUME/S"], rows,
                        {2, 4}))
    if not doc["groups"]:
        lines.append("(no consumer groups)")
    for error in doc["errors"]:
        lines.append(f"error: {error}")
    return lines


# ---------------------------------------------------------------------------- the loop


class _Keys:
    """``q`` from a terminal's standard input, read without Enter (cbreak mode), and Ctrl-C.

    Ctrl-C sets a flag and wakes the wait through a pipe instead of raising
    KeyboardInterrupt wherever the main thread happens to be (inside the client's locks or
    a thread pool's shutdown, whose interrupted state could keep the process from exiting);
    the view then ends between two samples.
    """

    def __init__(self, stream: TextIO) -> None:
        self.fd: int | None = None
        self._saved: Any = None
        self.interrupted = False
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._previous_handler: Any = None
        with contextlib.suppress(ValueError):  # not the main thread: Ctrl-C raises as usual
            self._previous_handler = signal.signal(signal.SIGINT, self._on_sigint)
        with contextlib.suppress(AttributeError, OSError, ValueError):
            if stream.isatty():
                import termios
                import tty

                self.fd = stream.fileno()
                self._saved = termios.tcgetattr(self.fd)
                tty.setcbreak(self.fd)

    def _on_sigint(self, _signum: int, _frame: Any) -> None:
        if self.interrupted:  # a second Ctrl-C while a sample is still being taken
            raise KeyboardInterrupt
        self.interrupted = True
        with contextlib.suppress(OSError):  # a full pipe already holds a wake-up
            os.write(self._wake_w, b"x")

    def wait_for_quit(self, seconds: float) -> bool:
        """Sleep ``seconds``; True as soon as ``q`` is typed or Ctrl-C pressed."""
        deadline = time.monotonic() + seconds
        watched = [self._wake_r] if self.fd is None else [self._wake_r, self.fd]
        while not self.interrupted:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            ready, _, _ = select.select(watched, [], [], left)
            if self.fd is not None and self.fd in ready:
                typed = os.read(self.fd, 32)
                if not typed or b"q" in typed.lower():
                    return True
        return True

    def restore(self) -> None:
        if self._previous_handler is not None:
            signal.signal(signal.SIGINT, self._previous_handler)
            self._previous_handler = None
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.fd is not None and self._saved is not None:
            import termios

            with contextlib.suppress(OSError):
                termios.tcsetattr(self.fd, termios.TCSANOW, self._saved)  # no wait on output


def top(args: argparse.Namespace, admin: AdminClient, out: Output) -> int:
    if not args.once and args.interval <= 0:
        raise CliError("--interval must be > 0 for the live view (0 only with --once)",
                       EXIT_USAGE)
    bootstrap = str(client_settings(args).get("bootstrap.servers", ""))  # for the header

    def sample() -> Sample:
        return take_sample(admin, args.topic, args.group, args.timeout_ms)

    if args.once:
        first = sample()
        if args.interval <= 0:
            view = build_view(bootstrap, first, None)
        else:
            time.sleep(args.interval)
            view = build_view(bootstrap, sample(), first)
        if out.json_mode:
            out.json(view.document)
        else:
            for line in render(view, args.interval):
                out.line(line)
        return EXIT_OK
    return _live(args, bootstrap, sample, out)


def _live(args: argparse.Namespace, bootstrap: str, sample: Any, out: Output) -> int:
    stream = out.out
    terminal = stream.isatty()
    keys = _Keys(sys.stdin)
    previous: Sample | None = None
    try:
        if terminal:
            stream.write(HIDE_CURSOR)
        while True:
            try:
                current = sample()
                view = build_view(bootstrap, current, previous)
                previous = current
            except KafkaError as exc:  # e.g. the cluster is restarting: keep watching
                current = Sample(time.monotonic(), errors=[describe_error(exc)])
                view = build_view(bootstrap, current, None)
            if out.json_mode:
                stream.write(_one_line_json(view) + "\n")
            else:
                lines = render(view, args.interval)
                if terminal:
                    size = shutil.get_terminal_size()
                    lines = [line[:size.columns] for line in lines[:size.lines - 1]]
                    stream.write(CLEAR + "\n".join(lines) + "\n")
                else:
                    stream.write("\n".join(lines) + "\n\n")
            stream.flush()
            taken = time.monotonic() - current.taken
            if keys.wait_for_quit(max(0.0, args.interval - taken)):
                return EXIT_OK
    except KeyboardInterrupt:
        return EXIT_OK  # Ctrl-C is how a live view ends
    finally:
        keys.restore()
        if terminal:
            stream.write(SHOW_CURSOR)
            stream.flush()


def _one_line_json(view: View) -> str:
    import json

    return json.dumps(view.document, separators=(",", ":"), default=str)


Handler = Callable[[argparse.Namespace, AdminClient, Output], int]
HANDLERS: dict[tuple[str, str | None], Handler] = {("top", None): top}
