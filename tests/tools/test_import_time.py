"""``import sdk`` stays light: the generated API modules and optional extras load on first use.

No timing assertion here (timings belong in bench/import_time.py); each check runs a fresh
interpreter and looks at which modules the import pulled in.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = ROOT / "sdk" / "protocol" / "messages"
API_MODULES = {f"sdk.protocol.messages.{p.stem}" for p in MESSAGES.glob("*.py")
               if p.stem not in ("__init__", "headers")}
OPTIONAL = ("pyspark", "cramjam", "lz4", "zstandard", "snappy", "confluent_kafka", "kafka",
            "aiokafka")
HEAVY = ("asyncio", "pydantic", "ssl", "concurrent.futures", "tenacity", "crc32c", "socket",
         "selectors", "threading", "logging")


def modules_after(statement: str) -> set[str]:
    code = (f"import json, sys\nbefore = set(sys.modules)\n{statement}\n"
            "print(json.dumps(sorted(set(sys.modules) - before)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120, check=True)
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_api_modules_exist() -> None:
    assert {"sdk.protocol.messages.produce", "sdk.protocol.messages.fetch"} <= API_MODULES


@pytest.mark.parametrize("statement", [
    "import sdk",
    "from sdk import TopicPartition, RecordMetadata, ConsumerRecord, errors",
    "import sdk.errors, sdk.types",
])
def test_import_sdk_loads_no_generated_api_module(statement: str) -> None:
    loaded = modules_after(statement)
    assert not loaded & API_MODULES, sorted(loaded & API_MODULES)
    assert not {m for m in loaded if m.split(".")[0] in OPTIONAL}, sorted(loaded)
    heavy = sorted(m for m in loaded if m in HEAVY)
    print(f"{statement!r}: {len(loaded)} new modules; heavy ones: {heavy or 'none'}")


def test_bare_import_sdk_has_no_heavy_dependencies() -> None:
    loaded = modules_after("import sdk")
    assert not loaded & {"asyncio", "pydantic", "ssl", "concurrent.futures"}, sorted(loaded)
    assert {m for m in loaded if m.startswith("sdk")} == {"sdk"}


def test_framing_loads_only_the_header_module() -> None:
    loaded = modules_after("import sdk.protocol.framing, sdk.protocol.versions")
    assert not loaded & API_MODULES, sorted(loaded & API_MODULES)
    assert "sdk.protocol.messages.headers" in loaded


def test_request_class_loads_exactly_its_module() -> None:
    loaded = modules_after("from sdk.protocol.api import request_class\nrequest_class(3)")
    assert loaded & API_MODULES == {"sdk.protocol.messages.metadata"}


def test_importing_the_clients_defers_what_only_use_needs() -> None:
    """The client classes load without pydantic (their settings model loads at construction),
    the codecs and crc32c (at the first batch), tenacity (at the first retried call), the
    admin results and families (at the first admin call) and unused API modules."""
    loaded = modules_after("from sdk import Producer, Consumer, AdminClient")
    deferred = {"pydantic", "tenacity", "crc32c", "importlib.metadata", "sdk.admin.results",
                "sdk.admin.topics", "sdk.producer.config", "sdk.consumer.config",
                "sdk.admin.config", "sdk.net.config"}
    assert not loaded & deferred, sorted(loaded & deferred)
    assert not {m for m in loaded if m.split(".")[0] in OPTIONAL}, sorted(loaded)
    admin_apis = {"sdk.protocol.messages.create_topics", "sdk.protocol.messages.describe_configs"}
    assert not loaded & admin_apis

    constructed = modules_after(
        "from sdk import AsyncProducer\nAsyncProducer(bootstrap_servers='127.0.0.1:9')")
    assert {"pydantic", "sdk.producer.config"} <= constructed
