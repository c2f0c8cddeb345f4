"""Installing without a C compiler: the build succeeds, says so once, and the SDK runs its
pure-Python path.

The package is built from a clean copy of the tracked files with ``CC=/bin/false`` (a
compiler that fails every call, as a machine without one does for setuptools), installed
into a directory of its own, and imported from there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTICE = "kafka-sdk: the compiled fast path (sdk.records._fast) could not be built"


def _tracked_copy(dest: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())


def test_a_failing_compiler_installs_the_pure_path(tmp_path: Path) -> None:
    source, wheels, target = tmp_path / "src", tmp_path / "wheels", tmp_path / "site"
    _tracked_copy(source)
    env = {**os.environ, "CC": "/bin/false", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("KAFKA_SDK_PURE_PYTHON", None)
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w",
                            str(wheels), str(source)], capture_output=True, text=True,
                           env=env, timeout=300)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    assert (build.stdout + build.stderr).count(NOTICE) == 1
    (wheel,) = wheels.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.startswith("sdk/records/_fast") and
                n.endswith((".so", ".pyd"))], names

    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(target), str(wheel)], check=True, env=env, timeout=300)
    probe = subprocess.run(
        [sys.executable, "-c", "import sdk, sdk.records.fast_path as f; "
                               "print(f.IMPLEMENTATION, sdk.__file__)"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
        env={**env, "PYTHONPATH": str(target)})
    assert probe.returncode == 0, probe.stderr
    implementation, module_file = probe.stdout.split()
    assert implementation == "pure"
    assert Path(module_file).is_relative_to(target)
