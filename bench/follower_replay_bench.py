"""A follower's per-fetch work on our broker: the append, then the producer-state replay of
what was appended, with the batch headers read back from the log (as before) or parsed from
the fetched bytes (``headers_in``, what the fetcher does now).

Each round appends N idempotent batches (160 records of 100 B, one producer) to a fresh
follower log, one batch per simulated fetch answer, timing the append and both ways of
getting the headers for every batch (the two ways interleaved, since this machine's CPU
speed drifts). Reported: medians over the rounds of microseconds per batch, with the range.

    .venv/bin/python bench/follower_replay_bench.py [--batches 3000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sdk.records import RecordBatchBuilder
from server_ref.producer_state import PartitionProducers
from server_ref.storage import LogConfig, PartitionLog
from server_ref.storage.results import headers_in

RECORDS_PER_BATCH = 160
VALUE = b"x" * 100


def _batch(base_offset: int) -> bytes:
    """A batch as a leader stored it: offsets assigned (the base offset is outside the CRC)."""
    builder = RecordBatchBuilder(producer_id=7, producer_epoch=0, base_sequence=base_offset)
    for i in range(RECORDS_PER_BATCH):
        builder.append(None, 1_700_000_000_000 + i, None, VALUE)
    return struct.pack(">q", base_offset) + builder.build()[8:]


def one_round(batches: int) -> dict[str, float]:
    """Microseconds per batch: append, replay from the log, replay from the bytes."""
    totals = {"append": 0.0, "replay, headers from the log": 0.0,
              "replay, headers from the fetched bytes": 0.0}
    with tempfile.TemporaryDirectory() as directory:
        log = PartitionLog.open(Path(directory) / "t-0", LogConfig())
        from_log, from_bytes = PartitionProducers(), PartitionProducers()
        clock = time.perf_counter
        try:
            for i in range(batches):
                fetched = _batch(i * RECORDS_PER_BATCH)
                end = log.log_end_offset
                t0 = clock()
                log.append(bytearray(fetched), assign_offsets=False)
                t1 = clock()
                from_log.replay(log.batch_headers(end), 0, log)
                t2 = clock()
                from_bytes.replay(headers_in(fetched, end), 0, log)
                t3 = clock()
                totals["append"] += t1 - t0
                totals["replay, headers from the log"] += t2 - t1
                totals["replay, headers from the fetched bytes"] += t3 - t2
            assert from_log.entries.keys() == from_bytes.entries.keys()
        finally:
            log.close()
    return {name: seconds / batches * 1e6 for name, seconds in totals.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    rounds = [one_round(args.batches) for _ in range(args.rounds)]
    print(f"{args.batches} batches of {RECORDS_PER_BATCH} x 100 B, {args.rounds} rounds "
          "(median, range; microseconds per batch)")
    for name in rounds[0]:
        values = [r[name] for r in rounds]
        print(f"  {name:40s} {statistics.median(values):6.1f}  "
              f"({min(values):.1f}-{max(values):.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
