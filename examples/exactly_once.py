"""Exactly-once consume-transform-produce: every input record's output is written once,
however often this process is killed and restarted.

    python examples/exactly_once.py --bootstrap HOST:PORT --input IN --output OUT \\
        [--group G] [--transactional-id ID] [--idle-exit SECONDS]

Each poll's records are transformed and written, and the consumer's next offsets are
committed, in one transaction (``send_offsets_to_transaction``): the outputs and the
progress become visible together or not at all. Killed at any point (even SIGKILL):

* before the commit, the open transaction is aborted when the next process calls
  ``init_transactions`` with the same transactional id (or by the transaction timeout),
  so its outputs never reach ``read_committed`` readers, and the offsets it would have
  committed were not: the restarted process reads those inputs again;
* after the commit, its outputs and offsets are both committed: nothing is read again.

The new process's ``init_transactions`` also *fences* the old one: were it only paused,
not dead, its next transactional call would fail with ProducerFencedError. Readers of the
output topic must use ``isolation_level="read_committed"``.

The transform keeps the key, so the output partition of a key never changes and the
order of each key's records is kept. With ``--idle-exit`` the loop stops after that many
seconds without input (for tests); without it, it runs until interrupted.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT))

from sdk import Consumer, OffsetAndMetadata, Producer, TopicPartition  # noqa: E402
from sdk.errors import KafkaError, ProducerFencedError  # noqa: E402


def transform(value: bytes) -> bytes:
    """The application's work: here, a visible change of each value."""
    return b"processed:" + value


def rewind(consumer: Consumer[bytes, bytes]) -> None:
    """After an aborted transaction: go back to the committed offsets, so the records
    whose outputs were aborted are processed again."""
    for tp in consumer.assignment():
        committed = consumer.committed(tp)
        if committed is not None:
            consumer.seek(tp, committed.offset)
        else:
            consumer.seek_to_beginning(tp)


def run(bootstrap: str, input_topic: str, output_topic: str, group: str,
        transactional_id: str, idle_exit: float | None) -> int:
    processed = 0
    with Producer(bootstrap_servers=bootstrap, transactional_id=transactional_id,
                  linger_ms=5) as producer:
        # First: finish or abort what an earlier process left open, so the group's
        # committed offsets read below are final (and fence that process).
        producer.init_transactions(timeout=60)
        # A static member (group_instance_id): a restarted process takes its predecessor's
        # place at once, without waiting for the dead member's session to expire.
        with Consumer(input_topic, bootstrap_servers=bootstrap, group_id=group,
                      group_instance_id=transactional_id, session_timeout_ms=10_000,
                      enable_auto_commit=False, auto_offset_reset="earliest",
                      isolation_level="read_committed") as consumer:
            last_input = time.monotonic()
            while idle_exit is None or time.monotonic() - last_input < idle_exit:
                polled = consumer.poll(timeout_ms=500)
                if not consumer.assignment():
                    last_input = time.monotonic()  # idle counts once partitions are ours
                if not polled:
                    continue
                last_input = time.monotonic()
                offsets: dict[TopicPartition, OffsetAndMetadata] = {}
                try:
                    with producer.transaction(timeout=60):
                        for tp, records in polled.items():
                            for record in records:
                                producer.send(output_topic, transform(record.value or b""),
                                              key=record.key)
                            offsets[tp] = OffsetAndMetadata(records[-1].offset + 1)
                        producer.send_offsets_to_transaction(
                            offsets, consumer.group_metadata(), timeout=60)
                except ProducerFencedError:
                    print("fenced by a newer instance; stopping", file=sys.stderr)
                    return 1
                except KafkaError as exc:  # the transaction was aborted: do it again
                    print(f"transaction aborted ({exc}); reprocessing", file=sys.stderr)
                    rewind(consumer)
                    continue
                processed += sum(len(r) for r in polled.values())
    print(f"processed {processed} records", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", default=None, help="default: eos-<input>")
    parser.add_argument("--transactional-id", default=None, help="default: eos-<input>-0")
    parser.add_argument("--idle-exit", type=float, default=None,
                        help="stop after this many seconds without input")
    args = parser.parse_args(argv)
    group = args.group or f"eos-{args.input}"
    return run(args.bootstrap, args.input, args.output, group,
               args.transactional_id or f"eos-{args.input}-0", args.idle_exit)


if __name__ == "__main__":
    sys.exit(main())
