"""Replication cost: ``bench/broker_bench.py --cluster`` under its former name.

    .venv/bin/python bench/cluster_bench.py [--rounds 2] [--count 50000] [--size 100]

is ``broker_bench.py --cluster`` with the same options (its docstring has the method).
"""

from __future__ import annotations

import sys

import broker_bench

if __name__ == "__main__":
    sys.exit(broker_bench.main(["--cluster", *sys.argv[1:]]))
