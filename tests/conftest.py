"""Suite-wide set-up: the repository root and this directory are importable, so tests reach
``tools.apache_kafka`` (Apache Kafka as JVM processes) and ``apache_support``."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
for _path in (_HERE.parent, _HERE):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

# Hypothesis' per-example deadline is a timing assertion: on a loaded 2-core machine (JVM
# brokers starting beside the suite) a fast property can miss 200 ms. The examples still run.
from hypothesis import settings  # noqa: E402

settings.register_profile("kafka-sdk", deadline=None)
settings.load_profile("kafka-sdk")
