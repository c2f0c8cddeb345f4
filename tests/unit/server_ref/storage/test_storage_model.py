"""Random operation sequences checked against a plain list-of-batches model of the log."""

from __future__ import annotations

import random

import pytest

from server_ref.storage import LogConfig, PartitionLog


def expected_read(model: list[tuple[int, int, bytes]], offset: int, max_bytes: int) -> bytes:
    out: list[bytes] = []
    size = 0
    for _base, last, data in model:
        if last < offset:
            continue
        if out and size + len(data) > max_bytes:
            break
        out.append(data)
        size += len(data)
    return b"".join(out)


@pytest.mark.parametrize("seed", range(6))
def test_random_operations_match_the_model(log_dir, make_batch, clock, seed: int) -> None:
    rng = random.Random(seed)
    config = LogConfig(segment_bytes=rng.choice([600, 1500, 5000]),
                       index_interval_bytes=rng.choice([0, 100, 700]))
    log = PartitionLog.open(log_dir, config, now_ms=clock)
    model: list[tuple[int, int, bytes]] = []  # (base offset, last offset, stored bytes)
    start = 0
    try:
        for _step in range(250):
            op = rng.random()
            if op < 0.55:
                count = rng.randint(1, 8)
                batch = bytearray(make_batch(count, value_size=rng.randint(1, 60),
                                             timestamp=clock.advance(rng.randint(0, 5))))
                info = log.append(batch)
                assert info.first_offset == (model[-1][1] + 1 if model else start)
                model.append((info.first_offset, info.last_offset, bytes(batch)))
            elif op < 0.80 and model:
                offset = rng.randint(start, model[-1][1] + 1)
                max_bytes = rng.randint(0, 3000)
                assert log.read(offset, max_bytes).to_bytes() == expected_read(model, offset, max_bytes)
            elif op < 0.85:
                log.close()
                log = PartitionLog.open(log_dir, config, now_ms=clock)
                assert log.recovery_report.clean
            elif op < 0.90:
                log._close_files()  # crash; everything written is in the page cache
                log = PartitionLog.open(log_dir, config, now_ms=clock)
                assert log.recovery_report.bytes_truncated == 0
            elif op < 0.94 and model:
                target = rng.randint(start, model[-1][1] + 1)
                start = max(start, target)
                assert log.delete_records(target) == start
                assert all(s.next_offset > start or s is log.active_segment
                           for s in log.segments[1:])
            elif op < 0.97 and model:
                target = rng.randint(max(start, model[0][0]) + 1, model[-1][1] + 1)
                end = log.truncate_to(target)
                model = [b for b in model if b[1] < target]
                assert end == (model[-1][1] + 1 if model else max(start, end))
                if not model:
                    start = end
            elif model:
                target = rng.randint(0, clock.now + 10)
                found = log.offset_for_timestamp(target)
                assert found is None or found[1] >= target
            end = model[-1][1] + 1 if model else start
            assert (log.log_start_offset, log.log_end_offset) == (start, end)
            if model and start < end:
                everything = log.read(start, 1 << 30).to_bytes()
                assert everything == expected_read(model, start, 1 << 30)
    finally:
        log.close()
