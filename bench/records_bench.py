"""Record batch encode/decode throughput: ours against kafka-python and aiokafka.

Encodes N records (100-byte values, small keys, no headers) into 16 KB batches the way a
producer accumulator does, then decodes the concatenated batches the way a consumer does
(CRC check, then every record). The implementations run interleaved within each round, since
this machine's CPU speed drifts; the table shows medians over the rounds.

    .venv/bin/python bench/records_bench.py [--records 200000] [--rounds 5] [--compression none]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sdk.records import Compression, RecordBatchBuilder, iter_batches

BATCH_SIZE = 16384
VALUE_SIZE = 100

Encoder = Callable[[list[bytes], list[bytes], int, int], list[bytes]]
Decoder = Callable[[bytes], int]


# ----------------------------------------------------------------------------- ours


def ours_encode(keys: list[bytes], values: list[bytes], ts: int, codec: int) -> list[bytes]:
    out = []
    b = RecordBatchBuilder(codec)
    for key, value in zip(keys, values):
        if not b.has_room_for(key, value, (), BATCH_SIZE):
            out.append(b.build())
            b = RecordBatchBuilder(codec)
        b.append(None, ts, key, value)
    out.append(b.build())
    return out


def ours_decode(data: bytes) -> int:
    n = 0
    for batch in iter_batches(data):
        batch.validate_crc()
        for _ in batch:
            n += 1
    return n


# ----------------------------------------------------------------------------- peers


def _make_peer(builder_cls: type, memory_records_cls: type) -> tuple[Encoder, Decoder]:
    def encode(keys: list[bytes], values: list[bytes], ts: int, codec: int) -> list[bytes]:
        out = []
        b = builder_cls(2, codec, 0, -1, -1, -1, BATCH_SIZE)
        offset = 0
        for key, value in zip(keys, values):
            if b.append(offset, ts, key, value, []) is None:  # None: the batch is full
                out.append(bytes(b.build()))
                b = builder_cls(2, codec, 0, -1, -1, -1, BATCH_SIZE)
                offset = 0
                b.append(offset, ts, key, value, [])
            offset += 1
        out.append(bytes(b.build()))
        return out

    def decode(data: bytes) -> int:
        n = 0
        records = memory_records_cls(data)
        while True:
            batch = records.next_batch()
            if batch is None:
                return n
            batch.validate_crc()
            for _ in batch:
                n += 1

    return encode, decode


def _peers() -> dict[str, tuple[Encoder, Decoder]]:
    peers: dict[str, tuple[Encoder, Decoder]] = {}
    try:
        from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
        from kafka.record.memory_records import MemoryRecords as KpRecords

        peers["kafka-python 3.0.12 (pure Python)"] = _make_peer(KpBuilder, KpRecords)
    except ImportError as exc:
        print(f"kafka-python left out of the comparison: {exc}", file=sys.stderr)
    try:
        from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
        from aiokafka.record.memory_records import MemoryRecords as AioRecords

        kind = "C ext" if "_crecords" in getattr(AioBuilder, "__module__", "") else "Python"
        peers[f"aiokafka 0.14.0 ({kind})"] = _make_peer(AioBuilder, AioRecords)
    except ImportError as exc:
        print(f"aiokafka left out of the comparison: {exc}", file=sys.stderr)
    return peers


# ----------------------------------------------------------------------------- driver


def _timed(fn: Callable[[], object]) -> tuple[float, object]:
    gc.collect()
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--compression", default="none", choices=[c.name.lower() for c in Compression])
    args = ap.parse_args()
    codec = int(Compression.parse(args.compression))

    n = args.records
    keys = [b"key-%d" % (i % 1000) for i in range(n)]
    base = os.urandom(64) + bytes(range(36))  # some entropy, some repetition
    values = [base[i % VALUE_SIZE :] + base[: i % VALUE_SIZE] for i in range(n)]
    ts = int(time.time() * 1000)

    impls: dict[str, tuple[Encoder, Decoder]] = {"kafka-sdk (this)": (ours_encode, ours_decode)}
    impls.update(_peers())
    # Every decoder reads the same bytes: the batches our encoder produced.
    shared = b"".join(ours_encode(keys, values, ts, codec))

    enc: dict[str, list[float]] = {name: [] for name in impls}
    dec: dict[str, list[float]] = {name: [] for name in impls}
    for _ in range(args.rounds):
        for name, (encode, decode) in impls.items():
            secs, batches = _timed(lambda e=encode: e(keys, values, ts, codec))
            assert sum(len(b) for b in batches) > 0  # type: ignore[attr-defined]
            enc[name].append(n / secs)
            secs, count = _timed(lambda d=decode: d(shared))
            if count != n:
                raise SystemExit(f"{name} decoded {count} records, expected {n}")
            dec[name].append(n / secs)

    batches = sum(1 for _ in iter_batches(shared))
    print(
        f"{n} records, {VALUE_SIZE} B values, {BATCH_SIZE} B batches ({batches} batches), "
        f"compression={args.compression}, median of {args.rounds} interleaved rounds\n"
    )
    ref = next((k for k in impls if k.startswith("kafka-python")), None)
    head = f"{'implementation':36} {'encode rec/s':>14} {'decode rec/s':>14}"
    if ref:
        head += f" {'enc x kp':>9} {'dec x kp':>9}"
    print(head)
    print("-" * len(head))
    for name in impls:
        e, d = statistics.median(enc[name]), statistics.median(dec[name])
        line = f"{name:36} {e:14,.0f} {d:14,.0f}"
        if ref:
            e0, d0 = statistics.median(enc[ref]), statistics.median(dec[ref])
            line += f" {e / e0:9.2f} {d / d0:9.2f}"
        print(line)


if __name__ == "__main__":
    main()
