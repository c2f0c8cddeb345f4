"""No background task of a client ends with an exception nobody retrieved (asyncio would
print "Task exception was never retrieved" with a traceback at the user)."""

from __future__ import annotations

import gc
import logging

import pytest

from sdk import Producer


@pytest.mark.parametrize("security", [
    {},
    {"security.protocol": "SSL"},
    {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "a",
     "sasl.password": "b"},
])
def test_closing_while_a_metadata_request_fails_leaves_no_loose_task(
        security: dict[str, str], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="asyncio")
    for _ in range(3):
        # Port 1: refused at once, while the first metadata refresh is being made.
        producer = Producer({"bootstrap.servers": "127.0.0.1:1", **security})
        producer.close(0)
    gc.collect()  # asyncio reports unretrieved exceptions when the task is collected
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
