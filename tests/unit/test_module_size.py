"""The engineering rule "small modules (at most ~800 lines)" for the SDK's core packages: a
module that outgrows it is split (sdk/net/client.py reached 848 lines; its topic problems
moved to sdk/net/topic_problems.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

SDK = Path(__file__).resolve().parents[2] / "sdk"
LIMIT = 800
PACKAGES = ("net", "producer", "consumer")


@pytest.mark.parametrize("package", PACKAGES)
def test_core_modules_stay_small(package: str) -> None:
    sizes = {path.relative_to(SDK.parent).as_posix(): len(path.read_text().splitlines())
             for path in sorted((SDK / package).rglob("*.py"))}
    assert sizes, f"no modules found under sdk/{package}"
    assert {name: n for name, n in sizes.items() if n > LIMIT} == {}
