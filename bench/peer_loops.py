"""Loops the benches share for driving peer clients as their users drive them."""

from __future__ import annotations

from typing import Any


def confluent_produce(producer: Any, topic: str, value: bytes, count: int, *,
                      poll_s: float = 0.01, partitions: int = 0, first: int = 0) -> None:
    """Produce ``value`` ``count`` times with confluent-kafka's own back-pressure idiom: when
    its queue is full (BufferError) serve delivery reports for ``poll_s`` and try the same
    record again. With ``partitions``, record i goes to partition (first + i) % partitions
    instead of the partitioner's choice."""
    for i in range(count):
        while True:
            try:
                if partitions:
                    producer.produce(topic, value, partition=(first + i) % partitions)
                else:
                    producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(poll_s)
