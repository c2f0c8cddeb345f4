"""bench/throughput_rounds.py, shared by bench/consumer_bench.py and bench/producer_bench.py:
the rotation of clients across rounds, the median-and-range figures and the result table
(ratios only against peers that ran, every row as wide as its header's columns)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load(name: str) -> ModuleType:
    if str(BENCH) not in sys.path:  # the bench scripts import their helper by name
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _sample(rounds: ModuleType, rate: float, cpu_us: float, startup_s: float = 0.5) -> object:
    records = 100_000
    return rounds.Sample(records, startup_s, records / rate, cpu_us * records / 1e6)


def test_each_round_starts_one_client_later() -> None:
    order = list(_load("throughput_rounds").rotations(["a", "b", "c"], 4))
    assert [c for _, c in order] == list("abc" "bca" "cab" "abc")
    assert [r for r, _ in order] == [0] * 3 + [1] * 3 + [2] * 3 + [3] * 3


def test_spread_is_the_median_with_the_lowest_and_highest() -> None:
    spread = _load("throughput_rounds").spread
    assert spread([3.0, 1.0, 2.0]) == "2.00 (1.00-3.00)"
    assert spread([310_000, 290_000, 330_000], 0, 1e-3, "k") == "310k (290-330k)"
    assert spread([]) == "-"


def test_rates_and_cpu_per_record_against_the_peers_that_ran() -> None:
    rounds = _load("throughput_rounds")
    samples = {
        "ours": [_sample(rounds, 300_000, 1.0), _sample(rounds, 200_000, 2.0),
                 _sample(rounds, 250_000, 1.5)],
        "aiokafka": [_sample(rounds, 100_000, 3.0)],
        "java": [],  # every run failed
    }
    lines = rounds.table(samples, 100, ("aiokafka", "confluent"))
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header[-2:] == ["rate ÷ aiokafka", "CPU: aiokafka ÷ client"]  # no confluent run
    ours = [c.strip() for c in lines[2].strip("|").split("|")]
    assert ours[0] == "ours" and ours[1] == "3"
    assert ours[2] == "250k (200-300k)"
    assert ours[3] == "25.0"  # MB/s of the median rate
    assert ours[4] == "1.50 (1.00-2.00)"
    assert ours[-2:] == ["2.50x", "2.00x"]
    assert all(len(line.split("|")) == len(lines[0].split("|")) for line in lines[1:4])
    assert lines[-1] == "(no run finished: java)"


def test_a_run_with_no_record_after_the_first_is_refused() -> None:
    rounds = _load("throughput_rounds")
    with pytest.raises(RuntimeError, match="steady state"):
        rounds.Sample.parse({"records": 0, "startup_s": 1, "steady_s": 0, "cpu_s": 0})


@pytest.mark.parametrize("script", ["consumer_bench", "producer_bench"])
def test_the_bench_scripts_load_with_their_helper(script: str) -> None:
    module = _load(script)
    assert "java" in module.CLIENTS and module.REFS


def test_brokers_are_chosen_by_a_comma_separated_list() -> None:
    parse = _load("throughput_rounds").parse_brokers
    assert parse("ref,tansu,apache") == ["ref", "tansu", "apache"]
    assert parse("both") == ["tansu", "ref"]  # the older names, as `make bench` passes them
    assert parse("server_ref") == ["ref"]
    with pytest.raises(SystemExit, match="kafka"):
        parse("ref,kafka")
