"""The checked-in protocol modules are exactly what the generator makes from the schemas."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "tools" / "generate_protocol.py"
SCHEMAS = ROOT.parent / "shared" / "kafka-protocol" / "messages"
MESSAGES = ROOT / "sdk" / "protocol" / "messages"


def run_check(out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(GENERATOR), "--check", "--schemas", str(SCHEMAS), "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)


@pytest.fixture(autouse=True)
def _need_schemas() -> None:
    if not SCHEMAS.is_dir():
        pytest.skip(f"Kafka message schemas not found at {SCHEMAS} (../shared is absent)")


def test_regeneration_is_a_no_op() -> None:
    result = run_check(MESSAGES)
    assert result.returncode == 0, (
        "sdk/protocol/messages is out of date; run `make regen`\n" + result.stdout + result.stderr)


def test_check_notices_an_edited_and_an_extra_module(tmp_path: Path) -> None:
    out = tmp_path / "messages"
    shutil.copytree(MESSAGES, out, ignore=shutil.ignore_patterns("__pycache__"))
    edited = out / "produce.py"
    edited.write_text(edited.read_text() + "\n# hand edit\n")
    (out / "stray.py").write_text("")
    result = run_check(out)
    assert result.returncode == 1
    assert "differs: produce.py" in result.stdout
    assert "not generated: stray.py" in result.stdout
