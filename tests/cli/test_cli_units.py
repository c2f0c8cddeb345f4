"""The CLI's pure parts: properties files, settings precedence, times, tables, progress."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from sdk.cli.admin_cmds import parse_time
from sdk.cli.common import (
    EXIT_USAGE,
    CliError,
    Output,
    client_settings,
    connection_subset,
    load_properties,
    parse_key_values,
)
from sdk.cli.consume import record_json
from sdk.cli.produce import Progress
from sdk.types import ConsumerRecord, TimestampType


def test_properties_file_follows_java_rules(tmp_path: Path) -> None:
    path = tmp_path / "c.properties"
    path.write_text(
        "# comment\n! also a comment\n\n"
        "bootstrap.servers=h1:9092,h2:9092\n"
        "request.timeout.ms : 1000\n"
        "client.id   spaced\n"
        "long.value = first,\\\n    second\n"
        "escaped\\=key=tab\\there\n"
        "unicode=caf\\u00e9\n"
        "empty=\n"
    )
    assert load_properties(str(path)) == {
        "bootstrap.servers": "h1:9092,h2:9092",
        "request.timeout.ms": "1000",
        "client.id": "spaced",
        "long.value": "first,second",
        "escaped=key": "tab\there",
        "unicode": "café",
        "empty": "",
    }


def test_unreadable_properties_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(CliError) as caught:
        load_properties(str(tmp_path / "nope.properties"))
    assert caught.value.exit_code == EXIT_USAGE


def test_settings_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "c.properties"
    path.write_text("bootstrap.servers=from-file:1\nclient.id=file\nacks=all\n")
    args = argparse.Namespace(command_config=str(path), property=["client.id=flag"],
                              bootstrap_server="from-flag:2")
    settings = client_settings(args)
    assert settings["bootstrap.servers"] == "from-flag:2"
    assert settings["client.id"] == "flag"
    assert connection_subset(settings) == {"bootstrap.servers": "from-flag:2",
                                           "client.id": "flag"}  # acks is producer-only

    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "from-env:3")
    bare = argparse.Namespace(command_config=None, property=None, bootstrap_server=None)
    assert client_settings(bare)["bootstrap.servers"] == "from-env:3"
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS")
    with pytest.raises(CliError, match="no bootstrap server"):
        client_settings(bare)


def test_key_values() -> None:
    assert parse_key_values(["a=1", "b=x=y", "c="], "--config") == {"a": "1", "b": "x=y", "c": ""}
    with pytest.raises(CliError, match="KEY=VALUE"):
        parse_key_values(["novalue"], "--config")


def test_parse_time() -> None:
    assert parse_time("1700000000000") == 1_700_000_000_000
    assert parse_time("2023-11-14T22:13:20Z") == 1_700_000_000_000
    assert parse_time("2023-11-14T22:13:20") == 1_700_000_000_000  # UTC when no zone
    assert parse_time("2023-11-15T00:13:20+02:00") == 1_700_000_000_000
    with pytest.raises(CliError, match="ISO date-time"):
        parse_time("last tuesday")


def test_table_aligns_columns_and_marks_missing_values() -> None:
    buffer = io.StringIO()
    out = Output(False, out=buffer, err=io.StringIO())
    out.table(["TOPIC", "LEADER", "ISR"], [("orders", 1, (1, 2)), ("t", None, ())])
    assert buffer.getvalue().splitlines() == [
        "TOPIC   LEADER  ISR",
        "orders  1       1,2",
        "t       -       -",
    ]
    assert out.exit_code == 0
    out.error("topic 'x': boom")
    assert out.exit_code == 1
    assert out.err.getvalue() == "kafka-sdk: error: topic 'x': boom\n"  # type: ignore[attr-defined]


def test_progress_draws_a_bar_only_when_enabled() -> None:
    stream = io.StringIO()
    bar = Progress(stream, total_bytes=1000, enabled=True)
    bar.update(10, 500, force=True)
    assert "[###############...............]  50%" in stream.getvalue()
    bar.finish()
    quiet = io.StringIO()
    Progress(quiet, total_bytes=None, enabled=False).update(10, 10, force=True)
    assert quiet.getvalue() == ""


def test_record_json_keeps_binary_data_readable() -> None:
    record = ConsumerRecord("t", 0, 5, b"\xff\x00", b"text", [("h", b"\xfe"), ("n", None)],
                            1_000, TimestampType.CREATE_TIME)
    assert record_json(record) == {
        "topic": "t", "partition": 0, "offset": 5, "timestamp": 1000,
        "timestamp_type": "CREATE_TIME", "key": {"base64": "/wA="}, "value": "text",
        "headers": [["h", {"base64": "/g=="}], ["n", None]],
    }
