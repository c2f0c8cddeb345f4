"""Suite-wide set-up: the repository root and this directory are importable, so tests reach
``tools.apache_kafka`` (Apache Kafka as JVM processes) and ``apache_support``."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
for _path in (_HERE.parent, _HERE):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
