"""The `make demo` entry point, run once with a small input, as a user would run it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .conftest import ROOT

pytestmark = pytest.mark.integration


def test_demo_pipeline_small_input() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo_pipeline.py"), "--records", "3000"],
        capture_output=True, text=True, timeout=280, cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "summary: records in 3000, records out" in out
    assert "views counted 3000" in out
    assert "demo: OK" in out
    assert "window   page" in out  # the result table was printed
