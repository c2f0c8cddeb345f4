"""The protocol overlay (tools/protocol_overlay.py) against Apache Kafka's own compiled
schemas: every version of every API Kafka 4.3.1 has must be generated here with the same
wire layout (``--verify``; needs Java and the cached Kafka jars, like the Apache tests)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from apache_support import require_apache_kafka

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT.parent / "shared" / "kafka-protocol" / "messages"


def test_every_kafka_version_is_generated_with_kafkas_layout() -> None:
    if not SCHEMAS.is_dir():
        pytest.skip(f"Kafka message schemas not found at {SCHEMAS} (../shared is absent)")
    require_apache_kafka()
    if shutil.which("javac") is None:
        pytest.skip("javac not found (a JDK is needed to compile the layout dumper)")
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "protocol_overlay.py"),
                             "--verify"], capture_output=True, text=True, timeout=600,
                            cwd=ROOT, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith("0 difference(s) for the APIs brokers serve")
    assert "ours v" not in result.stdout  # no API with versions we lack, controller ones too
