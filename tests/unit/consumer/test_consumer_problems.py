"""A consumer that cannot work says so (issue 21.3): a wrong address or a topic that does not
exist used to poll ``{}`` for ever in silence; now each is a WARNING and an ``on_error``
call with a typed error, against a closed port and the reference broker."""

from __future__ import annotations

import socket
import time
import uuid
from typing import Any

import pytest

from sdk.consumer import Consumer
from sdk.errors import KafkaConnectionError, KafkaError, UnknownTopicOrPartitionError


def _poll_until(consumer: Consumer[Any, Any], errors: list[KafkaError]) -> None:
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:
        assert consumer.poll(timeout_ms=200) == {}


def test_a_wrong_address_is_told(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        errors: list[KafkaError] = []
        with Consumer("t", bootstrap_servers=f"127.0.0.1:{port}", group_id="g",
                      on_error=errors.append) as consumer:
            _poll_until(consumer, errors)
    assert len(errors) == 1 and isinstance(errors[0], KafkaConnectionError)
    assert f"connection to 127.0.0.1:{port} refused (ECONNREFUSED)" in str(errors[0])
    assert any("ECONNREFUSED" in r.getMessage() for r in caplog.records
               if r.levelname == "WARNING")


def test_a_topic_that_does_not_exist_is_told() -> None:
    from server_ref import EmbeddedBroker

    topic = f"missing-{uuid.uuid4().hex[:8]}"
    errors: list[KafkaError] = []
    with EmbeddedBroker(data_dir=None, port=0, auto_create_topics_enable=False) as broker, \
            Consumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id="g",
                     config={"error_cb": errors.append}) as consumer:
        _poll_until(consumer, errors)
    assert len(errors) == 1 and isinstance(errors[0], UnknownTopicOrPartitionError)
    assert f"topic {topic!r} does not exist" in str(errors[0])
