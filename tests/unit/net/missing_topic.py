"""Give up one wait for a missing topic so that the client remembers the cluster's answer.

A wait that ends on the cluster's "no such topic" answer is remembered; one that ends
before any answer came is not. On a loaded machine the first Metadata answer can take
longer than a short wait, so these helpers wait again until the memory holds.
"""

from __future__ import annotations

from typing import Any

import pytest

from sdk.errors import KafkaTimeoutError
from sdk.net import NetClient

ATTEMPTS = 30


async def give_up_once(client: NetClient, topic: str,
                       wait_s: float = 1.0) -> KafkaTimeoutError:
    """The error of the wait that was remembered."""
    for _ in range(ATTEMPTS):
        with pytest.raises(KafkaTimeoutError) as info:
            await client.wait_for_topic(topic, timeout_s=wait_s)
        if client.topic_problems.is_remembered_missing(topic):
            return info.value
    pytest.fail(f"no Metadata answer named {topic!r} missing in {ATTEMPTS} waits")


def give_up_once_blocking(producer: Any, topic: str,
                          wait_s: float = 1.0) -> KafkaTimeoutError:
    """``producer`` is a blocking ``Producer``; its core's client holds the memory."""
    for _ in range(ATTEMPTS):
        with pytest.raises(KafkaTimeoutError) as info:
            producer.partitions_for(topic, timeout=wait_s)
        if producer._core.client.topic_problems.is_remembered_missing(topic):
            return info.value
    pytest.fail(f"no Metadata answer named {topic!r} missing in {ATTEMPTS} waits")
