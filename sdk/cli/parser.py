"""The argparse definition of ``kafka-sdk``: subcommands, their options, the help texts.

The connection options (``--bootstrap-server``, ``--command-config``, ``-X``, ``--json``,
``--timeout-ms``) are accepted before or after the subcommand, as Kafka's tools take them
after the command name.
"""

from __future__ import annotations

import argparse
from typing import NoReturn

from sdk import __version__
from sdk.cli.common import BOOTSTRAP_ENV, PROG
from sdk.cli.share_group_cmds import add_share_group_commands

__all__ = ["build_parser"]

_EPILOG = f"""\
exit codes: 0 success; 1 an operation (or one of its items) failed; 2 usage error or
invalid setting; 3 the cluster could not be reached; 130 interrupted.
The bootstrap servers come from --bootstrap-server, bootstrap.servers in --command-config,
or ${BOOTSTRAP_ENV}.
"""


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (plus a pointer to --help), exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _connection_options(parser: argparse.ArgumentParser, *, top_level: bool) -> None:
    # Subcommand copies default to SUPPRESS so they never overwrite a top-level value.
    default = None if top_level else argparse.SUPPRESS
    group = parser.add_argument_group("connection and output")
    group.add_argument("--bootstrap-server", "--bootstrap-servers", "-b",
                       dest="bootstrap_server", metavar="HOST:PORT[,HOST:PORT]",
                       default=default, help="brokers to connect to first")
    group.add_argument("--command-config", metavar="FILE", default=default,
                       help="a Kafka properties file with client settings")
    group.add_argument("-X", "--property", metavar="KEY=VALUE", action="append",
                       default=default, help="one client setting (repeatable)")
    group.add_argument("--json", action="store_true",
                       default=False if top_level else argparse.SUPPRESS,
                       help="print JSON for scripts instead of tables")
    group.add_argument("--timeout-ms", type=_positive_int, metavar="MS",
                       default=30_000 if top_level else argparse.SUPPRESS,
                       help="how long one operation may take (default 30000)")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, not {value}")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG, description="Administer, produce to and consume from Apache Kafka.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    _connection_options(parser, top_level=True)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(parent: argparse._SubParsersAction, name: str,  # type: ignore[type-arg]
                text: str) -> argparse.ArgumentParser:
        sub = parent.add_parser(name, help=text, description=text, epilog=_EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
        _connection_options(sub, top_level=False)
        return sub

    _topics(command, commands)
    _produce(command(commands, "produce", "write lines from stdin or a file as records"))
    _consume(command(commands, "consume", "print records of a topic"))
    _groups(command, commands)
    _partitions(command, commands)
    _acls(command, commands)
    _users(command, commands)
    _transactions(command, commands)
    add_share_group_commands(command, commands)  # sdk/cli/share_group_cmds.py
    command(commands, "cluster", "show the cluster id, controller and brokers")
    _top(command(commands, "top", "live view: topics' produce/consume rates and consumer "
                 "groups' lag, refreshed every second"))
    return parser


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, not {text}")
    return value


def _top(p: argparse.ArgumentParser) -> None:
    p.add_argument("--interval", type=_non_negative_float, default=1.0, metavar="SECONDS",
                   help="seconds between samples (default 1; with --once, 0 takes one "
                        "sample and leaves rates empty)")
    p.add_argument("--once", action="store_true",
                   help="print one frame (two samples --interval apart) and exit; with "
                        "--json, one document")
    p.add_argument("--topic", action="append", metavar="PATTERN",
                   help="only topics matching this shell-style pattern (repeatable)")
    p.add_argument("--group", action="append", metavar="PATTERN",
                   help="only groups matching this shell-style pattern (repeatable)")


def _topics(command, commands) -> None:  # type: ignore[no-untyped-def]
    topics = commands.add_parser("topics", help="list, describe, create, delete topics; "
                                 "change their configs")
    actions = topics.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = command(actions, "list", "list topics")
    p.add_argument("--include-internal", action="store_true",
                   help="also list internal topics such as __consumer_offsets")
    p = command(actions, "describe", "partitions, leaders, replicas and ISR of topics")
    p.add_argument("topics", nargs="*", metavar="TOPIC", help="topics (default: all)")
    p.add_argument("--configs", action="store_true", help="also show each topic's configs")
    p.add_argument("--sizes", action="store_true",
                   help="also show each partition's bytes at its leader: local, and in the "
                        "remote tier (tiered storage), from DescribeLogDirs")
    p = command(actions, "create", "create topics")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument("--partitions", type=_positive_int, default=-1,
                   help="partition count (default: the broker's)")
    p.add_argument("--replication-factor", type=_positive_int, default=-1,
                   help="replicas per partition (default: the broker's)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="a topic config (repeatable)")
    p.add_argument("--validate-only", action="store_true",
                   help="let the broker check the request without creating anything")
    p.add_argument("--if-not-exists", action="store_true",
                   help="a topic that already exists is not an error")
    p = command(actions, "delete", "delete topics")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument("--if-exists", action="store_true",
                   help="a topic that does not exist is not an error")
    p = command(actions, "alter-config", "set or reset configs of a topic (incrementally)")
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="set a config (repeatable)")
    p.add_argument("--delete", action="append", default=[], metavar="KEY",
                   help="reset a config to its default (repeatable)")
    p.add_argument("--validate-only", action="store_true")


def _produce(p: argparse.ArgumentParser) -> None:
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--file", "-f", metavar="FILE", help="read lines from FILE (default stdin)")
    p.add_argument("--key-separator", "-K", metavar="SEP",
                   help="each line is KEY SEP VALUE (split at the first SEP)")
    p.add_argument("--header", "-H", action="append", default=[], metavar="KEY=VALUE",
                   help="a header for every record (repeatable)")
    p.add_argument("--partition", "-p", type=_non_negative_int,
                   help="write every record to this partition")
    p.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="show a progress bar (default: when stderr is a terminal)")
    p.add_argument("--no-progress", dest="progress", action="store_false")
    p.add_argument("--quiet", "-q", action="store_true", help="no summary line")


def _consume(p: argparse.ArgumentParser) -> None:
    p.add_argument("topic", metavar="TOPIC")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true",
                       help="start at the earliest offset (default: only new records)")
    start.add_argument("--offset", type=_non_negative_int,
                       help="start at this offset (of --partition, or of every partition)")
    start.add_argument("--from-timestamp", metavar="MS|ISO-DATETIME",
                       help="start at the first record at or after this time")
    p.add_argument("--partition", "-p", type=_non_negative_int, action="append",
                   help="read only this partition (repeatable; not with --group)")
    p.add_argument("--group", "-g", metavar="GROUP",
                   help="consume as a member of GROUP, committing offsets")
    p.add_argument("--max-messages", "-n", type=_positive_int, metavar="N",
                   help="stop after N records")
    p.add_argument("--idle-timeout-ms", type=_positive_int, metavar="MS",
                   help="stop when no record arrives for MS (default: wait forever)")
    p.add_argument("--format", choices=("value", "json"), default="value",
                   help="value: the raw value per line; json: one JSON object per record")
    p.add_argument("--print-key", action="store_true",
                   help="value format: print KEY<separator>VALUE")
    p.add_argument("--key-separator", default="\t", metavar="SEP",
                   help="separator for --print-key (default: tab)")
    p.add_argument("--quiet", "-q", action="store_true", help="no summary line at the end")


def _groups(command, commands) -> None:  # type: ignore[no-untyped-def]
    groups = commands.add_parser("groups", help="list, describe, delete consumer groups; "
                                 "lag; reset offsets")
    actions = groups.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = command(actions, "list", "list consumer groups")
    p.add_argument("--state", action="append", metavar="STATE",
                   help="only groups in this state, e.g. Stable, Empty (repeatable)")
    p = command(actions, "describe", "state, protocol and members of groups")
    p.add_argument("groups", nargs="+", metavar="GROUP")
    p = command(actions, "lag", "committed vs end offsets per partition, and the total")
    p.add_argument("group", metavar="GROUP")
    p = command(actions, "delete", "delete groups and their committed offsets")
    p.add_argument("groups", nargs="+", metavar="GROUP")
    p = command(actions, "reset-offsets", "move a group's offsets (the group must be empty); "
                "a dry run unless --execute")
    p.add_argument("group", metavar="GROUP")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-offset", type=_non_negative_int, metavar="N")
    to.add_argument("--to-timestamp", type=_non_negative_int, metavar="MS",
                    help="the first offset at or after this time (ms since the epoch)")
    to.add_argument("--to-datetime", metavar="ISO-DATETIME",
                    help="as --to-timestamp, e.g. 2024-05-01T12:00:00Z")
    p.add_argument("--topic", action="append", metavar="TOPIC",
                   help="reset every partition of TOPIC (repeatable; default: the "
                        "partitions the group has committed)")
    p.add_argument("--execute", action="store_true", help="commit the new offsets")


def _transactions(command, commands) -> None:  # type: ignore[no-untyped-def]
    txns = commands.add_parser("transactions", help="list and describe transactions")
    actions = txns.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = command(actions, "list", "list the transactional ids every broker coordinates")
    p.add_argument("--state", action="append", metavar="STATE",
                   help="only transactions in this state, e.g. Ongoing (repeatable)")
    p.add_argument("--producer-id", action="append", type=int, metavar="ID",
                   help="only this producer id (repeatable)")
    p.add_argument("--min-duration-ms", type=_non_negative_int, metavar="MS",
                   help="only transactions open at least this long")
    p = command(actions, "describe", "state, producer, timeout and partitions of "
                "transactional ids")
    p.add_argument("ids", nargs="+", metavar="TRANSACTIONAL-ID")


def _partitions(command, commands) -> None:  # type: ignore[no-untyped-def]
    partitions = commands.add_parser("partitions", help="elect leaders; move replicas to "
                                     "other brokers")
    actions = partitions.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = command(actions, "elect", "elect the preferred (or, unclean, any live) replica as "
                "leader; without --topic, of every partition")
    p.add_argument("--type", choices=("preferred", "unclean"), default="preferred",
                   help="preferred: the first replica, if in sync (default); unclean: any "
                        "live replica of a partition without leader (records may be lost)")
    p.add_argument("--topic", action="append", metavar="TOPIC",
                   help="elect for the partitions of TOPIC (repeatable)")
    p.add_argument("--partition", "-p", type=_non_negative_int, action="append",
                   help="only this partition of the one --topic (repeatable)")
    p = command(actions, "reassign", "move partitions of a topic to other brokers, or "
                "cancel a move in progress")
    p.add_argument("--topic", required=True, metavar="TOPIC")
    p.add_argument("--partition", "-p", type=_non_negative_int, action="append",
                   required=True, help="a partition to move (repeatable)")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--replicas", metavar="ID,ID,...",
                    help="the new replica broker ids; the first is the preferred leader")
    to.add_argument("--cancel", action="store_true", help="cancel the move in progress")
    p = command(actions, "reassignments", "list the partition moves in progress")
    p.add_argument("--topic", action="append", metavar="TOPIC",
                   help="only the moves of TOPIC (repeatable)")


_OPERATIONS = ("ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, "
               "DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, CREATE_TOKENS, "
               "DESCRIBE_TOKENS, TWO_PHASE_COMMIT")


def _acl_options(p: argparse.ArgumentParser, *, create: bool) -> None:
    which = "the binding's" if create else "only bindings for this"
    p.add_argument("--topic", action="append", metavar="TOPIC", help=f"{which} topic "
                   "(repeatable; '*' with a literal pattern: every topic)")
    p.add_argument("--group", action="append", metavar="GROUP", help=f"{which} group")
    p.add_argument("--cluster", action="store_true", help=f"{which} cluster")
    p.add_argument("--transactional-id", action="append", metavar="ID",
                   help=f"{which} transactional id")
    p.add_argument("--user", action="append", metavar="PRINCIPAL", help=f"{which} user "
                   "resource (delegation tokens)")
    p.add_argument("--delegation-token", action="append", metavar="TOKEN",
                   help=f"{which} delegation token")
    p.add_argument("--resource-pattern-type", metavar="TYPE",
                   default="literal" if create else "any",
                   help="literal or prefixed" + ("" if create else "; in a filter also "
                        "any (default) or match (every binding that applies to the name)"))
    p.add_argument("--principal", action="append", required=create, metavar="TYPE:NAME",
                   help="e.g. User:alice, or User:* for everyone (repeatable)")
    p.add_argument("--host", default="*" if create else None, metavar="HOST",
                   help="client host the binding applies to" + (" (default * : any)"
                                                                 if create else ""))
    p.add_argument("--operation", action="append", required=create, metavar="OP",
                   help=f"{_OPERATIONS} (repeatable)")


def _acls(command, commands) -> None:  # type: ignore[no-untyped-def]
    acls = commands.add_parser("acls", help="create, list, delete ACL bindings")
    actions = acls.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = command(actions, "create", "allow (or --deny) principals operations on resources")
    _acl_options(p, create=True)
    p.add_argument("--deny", action="store_true", help="a DENY binding (default: ALLOW)")
    p = command(actions, "list", "the ACL bindings matching the options (default: all)")
    _acl_options(p, create=False)
    p.add_argument("--permission", metavar="allow|deny", help="only ALLOW or DENY bindings")
    p = command(actions, "delete", "delete the ACL bindings matching the options")
    _acl_options(p, create=False)
    p.add_argument("--permission", metavar="allow|deny", help="only ALLOW or DENY bindings")
    p.add_argument("--all", action="store_true", help="with no filter option: delete every "
                   "ACL binding")


def _users(command, commands) -> None:  # type: ignore[no-untyped-def]
    users = commands.add_parser("users", help="SCRAM users: describe, set a password, delete")
    actions = users.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = command(actions, "describe", "SCRAM mechanisms and iterations of users")
    p.add_argument("users", nargs="*", metavar="USER", help="users (default: all)")
    p = command(actions, "set-password", "set a user's SCRAM password (salted here; read "
                "from --password-file, standard input or a prompt)")
    p.add_argument("user", metavar="USER")
    p.add_argument("--mechanism", default="SCRAM-SHA-256",
                   help="SCRAM-SHA-256 (default) or SCRAM-SHA-512")
    p.add_argument("--iterations", type=_positive_int, default=4096,
                   help="PBKDF2 iterations (default 4096, Kafka's minimum)")
    p.add_argument("--password-file", metavar="FILE",
                   help="read the password from the first line of FILE")
    p = command(actions, "delete", "delete a user's SCRAM credentials")
    p.add_argument("user", metavar="USER")
    p.add_argument("--mechanism", action="append", metavar="MECHANISM",
                   help="only this mechanism (repeatable; default: every one the user has)")
