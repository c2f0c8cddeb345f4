"""What every subcommand shares: settings from flags and properties files, output as tables
or JSON, and the mapping from errors to one-line messages and exit codes.

Exit codes (also in ``kafka-sdk --help``):

====  ==========================================================================
0     success
1     the cluster answered, and an operation (or one item of it) failed
2     usage error: bad arguments, an invalid setting, an unreadable file, bad input
3     the cluster could not be reached (no bootstrap server answered in time)
130   interrupted (Ctrl-C), except for ``consume``, where Ctrl-C is the normal stop
====  ==========================================================================
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from sdk.admin import AdminClient, AdminConfig
from sdk.errors import (
    BrokerResponseError,
    ConfigError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NoBrokersAvailableError,
)
from sdk.net.config_names import Alias, lookup

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "CliError",
    "Output",
    "client_settings",
    "connect_admin",
    "error_json",
    "load_properties",
    "parse_key_values",
    "topic_partitions",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_INTERRUPTED = 130

BOOTSTRAP_ENV = "KAFKA_BOOTSTRAP_SERVERS"
PROG = "kafka-sdk"


class CliError(Exception):
    """A failure to report as one line on stderr, with its exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


# ============================================================================ settings


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 6 <= len(text):
                try:
                    out.append(chr(int(text[i + 2:i + 6], 16)))
                    i += 6
                    continue
                except ValueError:
                    pass  # not four hex digits: a plain escaped "u", like any other letter
            out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _split_property(line: str) -> tuple[str, str]:
    """Split at the first unescaped '=', ':' or whitespace, as java.util.Properties does."""
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch.isspace():
            break
        i += 1
    rest = line[i:].lstrip()
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip()
    return line[:i], rest


def load_properties(path: str) -> dict[str, str]:
    """Read a Java properties file (``key=value``, ``key: value`` or ``key value``; ``#`` and
    ``!`` comments; a trailing backslash continues the line)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}", EXIT_USAGE) from None
    except UnicodeDecodeError:
        raise CliError(f"{path} is not UTF-8 text", EXIT_USAGE) from None
    props: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:  # an odd number of backslashes: the line continues
            logical += line[:-1]
            continue
        logical += line
        key, value = _split_property(logical)
        props[_unescape(key)] = _unescape(value.rstrip())
        logical = ""
    if logical:
        key, value = _split_property(logical)
        props[_unescape(key)] = _unescape(value.rstrip())
    return props


def parse_key_values(items: Iterable[str], what: str) -> dict[str, str]:
    """``["a=1", "b=2"]`` -> ``{"a": "1", "b": "2"}``; a usage error names a malformed one."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"{what} must look like KEY=VALUE, not {item!r}", EXIT_USAGE)
        out[key.strip()] = value
    return out


def _normal(name: str) -> str:
    return name.strip().replace(".", "_").replace("-", "_")


def client_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The client settings of a command: the ``--command-config`` file, then ``-X`` pairs,
    then ``--bootstrap-server`` (later ones win), as one dotted-name mapping."""
    settings: dict[str, Any] = {}
    if getattr(args, "command_config", None):
        settings.update(load_properties(args.command_config))
    settings.update(parse_key_values(getattr(args, "property", None) or (), "-X/--property"))
    bootstrap = getattr(args, "bootstrap_server", None) or None
    if bootstrap is None and not any(_normal(k) == "bootstrap_servers" for k in settings):
        bootstrap = os.environ.get(BOOTSTRAP_ENV) or None
        if bootstrap is None:
            raise CliError("no bootstrap server: give --bootstrap-server HOST:PORT (or "
                           f"bootstrap.servers in --command-config, or ${BOOTSTRAP_ENV})",
                           EXIT_USAGE)
    if bootstrap is not None:
        settings = {k: v for k, v in settings.items() if _normal(k) != "bootstrap_servers"}
        settings["bootstrap.servers"] = bootstrap
    return settings


def connection_subset(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings an admin client understands (for the topic checks of produce/consume,
    whose properties may also hold producer- or consumer-only keys)."""
    known = set(AdminConfig.model_fields)

    def admin_takes(key: str) -> bool:
        if _normal(key) in known:
            return True
        # Another client's name for one of the admin's settings (ssl.truststore.location,
        # ssl.ca.location, sasl.mechanisms ...): dropping it would lose TLS/SASL settings.
        entry, _ = lookup(key.strip(), "A")
        return isinstance(entry, Alias) and _normal(entry.target) in known

    return {k: v for k, v in settings.items() if admin_takes(k)}


def connect_admin(settings: Mapping[str, Any], timeout_ms: int) -> AdminClient:
    """An admin client that has reached the cluster, or CliError with exit code 2 (bad
    setting) or 3 (unreachable)."""
    config = dict(settings)
    config.setdefault("default.api.timeout.ms", timeout_ms)
    try:
        admin = AdminClient(config)
    except ConfigError as exc:
        raise CliError(f"invalid setting: {exc}", EXIT_USAGE) from None
    try:
        admin.start(timeout_ms=timeout_ms)
    except BaseException as exc:
        admin.close()
        if isinstance(exc, NoBrokersAvailableError | KafkaConnectionError | KafkaTimeoutError):
            where = settings.get("bootstrap.servers", "the bootstrap servers")
            raise CliError(f"cannot reach the cluster at {where}: {exc}",
                           EXIT_UNREACHABLE) from None
        raise
    return admin


def topic_partitions(topic: str, settings: Mapping[str, Any], timeout_ms: int,
                     wanted: Iterable[int] = ()) -> list[int]:
    """The partition ids of ``topic``, asked through a short-lived admin client; CliError
    when the topic cannot be described or lacks one of the ``wanted`` partitions."""
    admin = connect_admin(connection_subset(settings), timeout_ms)
    try:
        described = admin.describe_topics([topic], timeout_ms=timeout_ms)[topic]
    finally:
        admin.close()
    if described.error is not None:
        raise CliError(f"topic {topic!r}: {describe_error(described.error)}")
    existing = [p.partition for p in described.partitions]
    for p in wanted:
        if p not in existing:
            raise CliError(f"topic {topic!r} has no partition {p} (it has {len(existing)})")
    return existing


def describe_error(exc: BaseException) -> str:
    """One line for an error: Kafka's name and the detail, without the class machinery."""
    if isinstance(exc, BrokerResponseError):
        detail = exc.message or exc.description
        return f"{exc.name}: {detail}"
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0] if text else type(exc).__name__


def error_json(exc: BaseException | None) -> dict[str, Any] | None:
    if exc is None:
        return None
    if isinstance(exc, BrokerResponseError):
        return {"code": exc.errno, "name": exc.name, "message": exc.message or exc.description}
    return {"code": None, "name": type(exc).__name__, "message": str(exc)}


def exit_code_for(exc: BaseException) -> int:
    if isinstance(exc, ConfigError | ValueError | TypeError):
        return EXIT_USAGE
    if isinstance(exc, NoBrokersAvailableError):
        return EXIT_UNREACHABLE
    return EXIT_FAILED


# ============================================================================ output


class Output:
    """Writes results for people (aligned tables) or scripts (``--json``), and error lines."""

    def __init__(self, json_mode: bool, out: TextIO | None = None,
                 err: TextIO | None = None) -> None:
        self.json_mode = json_mode
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.failed = False

    def json(self, document: Any) -> None:
        self.out.write(json.dumps(document, indent=2, sort_keys=False, default=str) + "\n")

    def line(self, text: str = "") -> None:
        self.out.write(text + "\n")

    def table(self, headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        cells = [[_cell(v) for v in row] for row in rows]
        widths = [len(h) for h in headers]
        for row in cells:
            for i, value in enumerate(row):
                widths[i] = max(widths[i], len(value))
        self.line("  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
        for row in cells:
            self.line("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())

    def error(self, text: str) -> None:
        """Report one failed item; the command then exits with EXIT_FAILED."""
        self.failed = True
        self.err.write(f"{PROG}: error: {text}\n")

    def note(self, text: str) -> None:
        self.err.write(text + "\n")

    @property
    def exit_code(self) -> int:
        return EXIT_FAILED if self.failed else EXIT_OK


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, tuple | list):
        return ",".join(str(v) for v in value) or "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)
