"""The API reference (docs/, Sphinx autodoc over the public faces) builds with warnings as
errors, so a docstring that breaks the markup, a page missing from the table of contents
or a face that cannot be imported fails the suite. Sphinx comes with the ``dev`` extra
(``make test`` installs it); there is no skip when it is missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FACES = ["Producer", "AsyncProducer", "Consumer", "AsyncConsumer", "AdminClient",
         "AsyncAdminClient", "ShareConsumer", "AsyncShareConsumer"]


def test_docs_build_without_warnings(tmp_path: Path) -> None:
    out = tmp_path / "html"
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-E", "-q", "-b", "html",
         "-d", str(tmp_path / "doctrees"), str(ROOT / "docs"), str(out)],
        capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    api = (out / "api.html").read_text()
    for face in FACES:
        assert f'id="sdk.{face}"' in api, f"{face} is missing from the API reference"
    # Methods are documented from their docstrings (a sample of each blocking face).
    for anchor in ("sdk.Consumer.seek_to_end", "sdk.AdminClient.delete_records",
                   "sdk.Producer.partitions_for", "sdk.ConsumerRecord",
                   "sdk.ShareConsumer.acknowledge", "sdk.AcknowledgeType"):
        assert f'id="{anchor}"' in api, anchor
    threads = (out / "threads.html").read_text()
    assert "fork()" in threads and "Timeouts" in threads
