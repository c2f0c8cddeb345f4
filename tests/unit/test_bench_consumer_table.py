"""bench/consumer_bench.py's result table: a ratio against a client that did not run is
shown as ``-`` (it printed ``nanx``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench" / "consumer_bench.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("consumer_bench_under_test", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_ratios_against_clients_that_did_not_run_are_dashes() -> None:
    lines = _bench().table([(100, 1000, {"ours-sync": 200_000.0, "aiokafka": 100_000.0})],
                           with_java=False)
    assert "vs kafka-python" in lines[0]
    ours = lines[1].split()
    assert ours[:3] == ["100", "1000", "ours-sync"]
    assert ours[-2:] == ["2.00x", "-"]
    assert not any("nan" in line for line in lines)


def test_every_ratio_when_every_client_ran() -> None:
    medians = {"ours-async": 300.0, "aiokafka": 100.0, "kafka-python": 150.0, "java": 600.0}
    lines = _bench().table([(1000, 5000, medians)], with_java=True)
    assert lines[0].split()[-2:] == ["vs", "java"]
    assert lines[1].split()[-3:] == ["3.00x", "2.00x", "0.50x"]
    # Columns line up: each row is as wide as the header.
    assert {len(line) for line in lines} == {len(lines[0])}


def test_java_column_shows_a_dash_for_a_size_it_missed() -> None:
    lines = _bench().table([(100, 1000, {"ours-sync": 50.0, "kafka-python": 25.0})],
                           with_java=True)
    assert lines[1].split()[-3:] == ["-", "2.00x", "-"]
    assert len(lines[1]) == len(lines[0])
