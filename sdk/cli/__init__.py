"""``kafka-sdk`` / ``python -m sdk``: the command-line tool.

Subcommands: ``topics list|describe|create|delete|alter-config``, ``produce TOPIC``,
``consume TOPIC``, ``groups list|describe|lag|reset-offsets|delete``,
``partitions elect|reassign|reassignments``, ``acls create|list|delete``,
``users describe|set-password|delete``, ``cluster`` and ``top`` (a live view of rates and
lag); run
``kafka-sdk COMMAND --help`` for each. Tables for people, ``--json`` for scripts; errors are
one line on stderr, and the exit code says what happened (see :mod:`sdk.cli.common`).

Modules: ``parser.py`` (argparse), ``common.py`` (settings, output, exit codes),
``admin_cmds.py`` (topics, groups, cluster), ``partition_cmds.py`` (elections,
reassignments), ``security_cmds.py`` (ACLs, SCRAM users), ``produce.py``, ``consume.py``, ``top.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Sequence

from sdk.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    PROG,
    CliError,
    Output,
    client_settings,
    connect_admin,
    describe_error,
    exit_code_for,
)
from sdk.cli.parser import build_parser
from sdk.errors import KafkaError

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (never raises for user mistakes)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 for --help
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_USAGE
    out = Output(args.json)
    _route_warnings(args.command, out)
    try:
        return _run(args, out)
    except CliError as exc:
        out.err.write(f"{PROG}: error: {exc}\n")
        return exc.exit_code
    except KafkaError as exc:
        out.err.write(f"{PROG}: error: {describe_error(exc)}\n")
        return exit_code_for(exc)
    except ValueError as exc:  # input our API rejected (e.g. a bad topic spec)
        out.err.write(f"{PROG}: error: {exc}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        out.err.write(f"{PROG}: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return 0


class _CliWarnings(logging.Handler):
    """The SDK's warnings as ``kafka-sdk: warning: ...`` lines on stderr. For a one-shot
    command, what the client reports while it cannot reach the cluster is left out: the
    command fails with that cause as its one error line. ``produce`` and ``consume`` run
    on, so there the warnings are the only sign of a wrong address or topic."""

    def __init__(self, out: Output, long_running: bool) -> None:
        super().__init__(logging.WARNING)
        self._out = out
        self._long_running = long_running

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "sdk.net.problems" and not self._long_running:
            return
        with contextlib.suppress(Exception):
            self._out.err.write(f"{PROG}: warning: {record.getMessage()}\n")


def _route_warnings(command: str, out: Output) -> None:
    sdk_log = logging.getLogger("sdk")
    if not any(isinstance(h, _CliWarnings) for h in sdk_log.handlers):
        sdk_log.addHandler(_CliWarnings(out, command in ("produce", "consume")))
        sdk_log.propagate = False  # not also through Python's last-resort handler


def _run(args: argparse.Namespace, out: Output) -> int:
    settings = client_settings(args)
    if args.command == "produce":
        from sdk.cli.produce import produce

        return produce(args, settings, out)
    if args.command == "consume":
        from sdk.cli.consume import consume

        return consume(args, settings, out)
    from sdk.cli.admin_cmds import HANDLERS

    handler = HANDLERS[(args.command, getattr(args, "action", None))]
    admin = connect_admin(settings, args.timeout_ms)
    try:
        return handler(args, admin, out)
    finally:
        admin.close()


def _silence_stdout() -> None:
    # The reader went away (e.g. `| head`): stop writing, and keep Python from complaining
    # about the unflushable stdout at exit.
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass  # best effort: at worst Python prints one more complaint at exit


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
