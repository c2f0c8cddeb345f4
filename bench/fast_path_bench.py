"""Per-record work, the pure loops against the compiled ones (sdk.records.fast_path).

Decode: batches as a producer builds them (1 MB of 100 B or 1 KB values, small keys, a header on
every fourth record), decoded with ``decode_consumer_records`` (the consumer's call: record
bytes, decompression for lz4, the GC pause and the record loop) by each implementation in
turn, interleaved within every round since this machine's CPU speed drifts. Times are the
process's CPU time (other processes on a shared machine do not count; the decode is
single-threaded). The table shows the median ns per record over the rounds and the spread
(lowest-highest round).

Encode: ``RecordBatchBuilder.append_values`` (the producer's bulk encoding of staged
keyless records into 16 KB batches, as the accumulator fills them; 50 records per
millisecond), then ``build()`` (header and CRC32C, which stays with the crc32c package; lz4
compression for lz4). Same rounds, same CPU-time measure.

Send: the producer's per-record ``send`` of a plain 100 B record (``Stage.stager``'s pure
function against ``_fast.Stager``), staged until the stage is full, then drained into
batches (the compiled encoder on both sides), which are completed and recycled as the sender
would (the drain is in the figure).
Metadata: one ``RecordMetadata`` as a delivery callback gets it (the pure slot writes
against ``_fast.SlotMaker``). Same rounds, same CPU-time measure.

    .venv/bin/python bench/fast_path_bench.py [--rounds 15] [--batches 20]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sdk.records import RecordBatch, RecordBatchBuilder, consumer_records, fast_path
from sdk.records import builder as builder_module

BATCH_BYTES = 1 << 20


def build_batches(size: int, codec: str, batches: int) -> list[RecordBatch]:
    rng = random.Random(size)
    value = rng.randbytes(size)
    out = []
    for n in range(batches):
        b = RecordBatchBuilder(codec)
        i = 0
        while b.has_room_for(b"key-00000", value, None, max_bytes=BATCH_BYTES):
            headers = [("trace", b"abcdef")] if i % 4 == 0 else []
            b.append(i, 1_700_000_000_000 + i, f"key-{i:05d}".encode(), value, headers)
            i += 1
        out.append(RecordBatch(bytes(b.build())))
        del n
    return out


def time_decode(loop: Callable[..., list[Any]] | None, batches: list[RecordBatch]) -> float:
    """CPU seconds to decode every batch once with ``loop`` (None: the pure loop)."""
    consumer_records._compiled = loop
    decode = consumer_records.decode_consumer_records
    start = time.process_time()
    for batch in batches:
        decode(batch, "bench", 0)
    return time.process_time() - start


def time_encode(loop: Callable[..., Any] | None, values: list[bytes], stamps: list[int],
                codec: str) -> float:
    """CPU seconds to encode ``values`` into 16 KB batches with ``loop`` (None: pure)."""
    builder_module._fast_encode = loop
    start = time.process_time()
    i, n = 0, len(values)
    while i < n:
        b = RecordBatchBuilder(codec)
        i = b.append_values(values, stamps, i, n, 16384)
        b.build()
    return time.process_time() - start


def _stage(compiled: bool) -> tuple[Any, Any, Any]:
    """A producer's stage over a three-partition topic "t" (no network), and its send."""
    from sdk.net.metadata import ClusterMetadata
    from sdk.producer import staging
    from sdk.producer.accumulator import BufferPool, RecordAccumulator
    from sdk.producer.partitioner import DefaultPartitioner
    from sdk.protocol.messages.metadata import MetadataResponse as R

    acc = RecordAccumulator(batch_size=16384, linger_s=0.005, delivery_timeout_s=120,
                            compression="none", pool=BufferPool(1 << 30),
                            partitioner=DefaultPartitioner(16384), wake_sender=lambda: None,
                            record_limit=1 << 20)
    acc.metadata = ClusterMetadata()
    acc.metadata.apply(R(brokers=[R.MetadataResponseBroker(node_id=1, host="h", port=1)],
                         topics=[R.MetadataResponseTopic(name="t", partitions=[
                             R.MetadataResponsePartition(partition_index=p, leader_id=1)
                             for p in range(3)])]))

    def unused(*_: Any) -> None:
        raise AssertionError("not reached")

    stage = staging.Stage(acc, cap=256 * 1024, linger_s=0.005, delivery_timeout_s=120,
                          wake_sender=lambda: None, reserve_blocking=unused,
                          reserve_async=unused, topic_blocking=unused, topic_async=unused,
                          max_block_s=1.0)
    saved = staging._Stager
    if not compiled:
        staging._Stager = None
    try:
        return stage, acc, stage.stager(True, None)
    finally:
        staging._Stager = saved


def time_send(compiled: bool, count: int) -> float:
    """CPU seconds to send ``count`` plain 100 B records (staging, drains, completion)."""
    stage, acc, send = _stage(compiled)
    value = b"x" * 100
    start = time.process_time()
    sent = 0
    while sent < count:
        while send("t", value) is not None:
            sent += 1
        stage.drain()
        for pq in acc.all_queues():
            while pq.batches:
                with acc.lock:
                    batch = acc.pop_head(pq)
                batch.complete(0)
                acc.finished(batch)
    return time.process_time() - start


def time_metadata(make: Callable[..., Any], count: int) -> float:
    start = time.process_time()
    for i in range(count):
        make("topic", 3, i, 1_700_000_000_000, -1, 100)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--batches", type=int, default=20, help="1 MB batches per case")
    args = parser.parse_args()
    compiled = fast_path.load_compiled()
    if compiled is None:
        raise SystemExit("sdk.records._fast is not built (pip install -e . with a C compiler)")
    encoder = fast_path.load_compiled_encoder()
    if encoder is None:
        raise SystemExit("sdk.records._fast is stale: rebuild it (pip install -e .)")
    saved, saved_encoder = consumer_records._compiled, builder_module._fast_encode
    print(f"{'size':>6} {'codec':<5} {'records':>8} {'pure ns/rec':>18} {'compiled ns/rec':>18}"
          f" {'speed-up':>9}")
    try:
        for size in (100, 1000):
            for codec in ("none", "lz4"):
                batches = build_batches(size, codec, args.batches)
                count = sum(b.record_count for b in batches)
                times: dict[str, list[float]] = {"pure": [], "compiled": []}
                time_decode(compiled, batches)  # warm caches and the allocator once
                for r in range(args.rounds):
                    order = [("pure", None), ("compiled", compiled)]
                    for name, loop in order if r % 2 else order[::-1]:
                        times[name].append(time_decode(loop, batches) / count * 1e9)
                cells = []
                for name in ("pure", "compiled"):
                    t = times[name]
                    cells.append(f"{statistics.median(t):>6.0f} ({min(t):>4.0f}-{max(t):>4.0f})")
                ratio = statistics.median(times["pure"]) / statistics.median(times["compiled"])
                print(f"{size:>6} {codec:<5} {count:>8} {cells[0]:>18} {cells[1]:>18}"
                      f" {ratio:>8.2f}x", flush=True)
        print(f"\nencode {'size':>6} {'codec':<5} {'records':>8} {'pure ns/rec':>18}"
              f" {'compiled ns/rec':>18} {'speed-up':>9}")
        for size in (100, 1000):
            values = [random.Random(size).randbytes(size)] * (BATCH_BYTES * 4 // size)
            stamps = [1_700_000_000_000 + i // 50 for i in range(len(values))]
            for codec in ("none", "lz4"):
                enc: dict[str, list[float]] = {"pure": [], "compiled": []}
                time_encode(encoder, values, stamps, codec)
                for r in range(args.rounds):
                    pair = [("pure", None), ("compiled", encoder)]
                    for name, loop in pair if r % 2 else pair[::-1]:
                        enc[name].append(time_encode(loop, values, stamps, codec)
                                         / len(values) * 1e9)
                cells = [f"{statistics.median(t):>6.0f} ({min(t):>4.0f}-{max(t):>4.0f})"
                         for t in (enc["pure"], enc["compiled"])]
                ratio = statistics.median(enc["pure"]) / statistics.median(enc["compiled"])
                print(f"       {size:>6} {codec:<5} {len(values):>8} {cells[0]:>18}"
                      f" {cells[1]:>18} {ratio:>8.2f}x", flush=True)
        print(f"\nproducer {'step':<14} {'records':>8} {'pure ns/rec':>18}"
              f" {'compiled ns/rec':>18} {'speed-up':>9}")
        from sdk.producer import batch as batch_module
        from sdk.types import RecordMetadata

        maker = fast_path.load_compiled_slot_maker()
        if fast_path.load_compiled_stager() is None or maker is None:
            raise SystemExit("sdk.records._fast is stale: rebuild it (pip install -e .)")
        make = maker(RecordMetadata, batch_module._FIELDS)
        builder_module._fast_encode = saved_encoder  # only the stager differs below
        count = 200_000
        steps: list[tuple[str, Callable[[bool], float]]] = [
            ("send 100 B", lambda c: time_send(c, count)),
            ("metadata", lambda c: time_metadata(
                make if c else batch_module._metadata_pure, count)),
        ]
        for step, run in steps:
            res: dict[bool, list[float]] = {False: [], True: []}
            run(True)
            for r in range(args.rounds):
                for compiled_step in ((False, True) if r % 2 else (True, False)):
                    res[compiled_step].append(run(compiled_step) / count * 1e9)
            cells = [f"{statistics.median(t):>6.0f} ({min(t):>4.0f}-{max(t):>4.0f})"
                     for t in (res[False], res[True])]
            ratio = statistics.median(res[False]) / statistics.median(res[True])
            print(f"         {step:<14} {count:>8} {cells[0]:>18} {cells[1]:>18}"
                  f" {ratio:>8.2f}x", flush=True)
    finally:
        consumer_records._compiled = saved
        builder_module._fast_encode = saved_encoder
    print(f"\nmedian of {args.rounds} interleaved rounds (lowest-highest), process CPU time; "
          f"decode_consumer_records incl. lz4 decompression; append_values + build(); "
          f"send: staging, drains and completion")


if __name__ == "__main__":
    main()
