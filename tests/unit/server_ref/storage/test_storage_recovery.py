"""Crash recovery: torn writes, CRC damage, lost index files, interrupted compaction swaps."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sdk.errors import KafkaStorageError
from server_ref.storage import PartitionLog
from server_ref.storage.checkpoint import CHECKPOINT_NAME

REPO = Path(__file__).resolve().parents[4]


def crash(log: PartitionLog) -> None:
    """Drop the log as a killed process would: file handles gone, nothing flushed or noted."""
    log._close_files()


def write_log_and_crash(directory: Path, batches: int, segment_bytes: int = 1 << 30) -> None:
    """Append in a child process that then dies without closing anything (os._exit)."""
    script = textwrap.dedent(f"""
        from sdk.records.builder import RecordBatchBuilder
        from server_ref.storage import LogConfig, PartitionLog
        import os
        log = PartitionLog.open({str(directory)!r}, LogConfig(segment_bytes={segment_bytes},
                                index_interval_bytes=300))
        for i in range({batches}):
            b = RecordBatchBuilder()
            for j in range(3):
                b.append(None, 1000 + i, b"key%d" % j, b"value-%d-%d" % (i, j))
            log.append(b.build())
        os._exit(0)
    """)
    subprocess.run([sys.executable, "-c", script], cwd=REPO, check=True, timeout=120)


def test_process_crash_recovers_everything_and_rebuilds_the_same_indexes(
    log_dir: Path, tmp_path: Path, open_log, make_batch, read_all
) -> None:
    write_log_and_crash(log_dir, 60, segment_bytes=2500)
    log = open_log(segment_bytes=2500, index_interval_bytes=300)
    assert not log.recovery_report.clean
    assert log.recovery_report.segments_recovered >= 1
    assert log.recovery_report.bytes_truncated == 0
    assert log.log_end_offset == 180
    records = read_all(log)
    assert [r.offset for r in records] == list(range(180))
    assert records[-1].value == b"value-59-2"
    # A log written the same way and closed cleanly has the same offset index entries.
    reference = PartitionLog.open(tmp_path / "reference-0", log.config)
    for i in range(60):
        reference.append(make_batch([(b"key%d" % j, b"value-%d-%d" % (i, j)) for j in range(3)],
                                    timestamp=1000 + i))
    assert [s.offset_index.entries() for s in log.segments] == [
        s.offset_index.entries() for s in reference.segments
    ]
    assert [s.time_index.entries() for s in log.segments] == [
        s.time_index.entries() for s in reference.segments
    ]
    reference.close()


def test_torn_tail_write_is_cut_at_the_last_whole_batch(open_log, make_batch, log_dir: Path) -> None:
    log = open_log()
    for _ in range(10):
        log.append(make_batch(4))
    batch_size = len(make_batch(4))
    crash(log)
    active = log_dir / "00000000000000000000.log"
    with open(active, "r+b") as f:
        f.truncate(10 * batch_size - 7)  # the last batch was only partly written
    log = open_log()
    assert log.recovery_report.bytes_truncated == batch_size - 7
    assert log.log_end_offset == 36
    assert active.stat().st_size == 9 * batch_size
    assert log.append(make_batch(1)).first_offset == 36


def test_garbage_after_the_last_batch_is_cut(open_log, make_batch, log_dir: Path) -> None:
    log = open_log()
    for _ in range(5):
        log.append(make_batch(2))
    size = log.active_segment.size
    crash(log)
    with open(log_dir / "00000000000000000000.log", "ab") as f:
        f.write(b"\x00" * 100)  # preallocated-looking zeros
    log = open_log()
    assert (log.log_end_offset, log.active_segment.size) == (10, size)


def test_crc_damage_mid_segment_truncates_at_that_batch(
    open_log, make_batch, log_dir: Path, read_all
) -> None:
    log = open_log(index_interval_bytes=100)
    for i in range(20):
        log.append(make_batch(5, timestamp=100 + i))
    batch_size = len(make_batch(5))
    entries_before = [e for e in log.active_segment.offset_index.entries() if e[0] < 60]
    crash(log)
    with open(log_dir / "00000000000000000000.log", "r+b") as f:
        f.seek(12 * batch_size + 70)  # inside the records of the 13th batch (offsets 60..64)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    log = open_log(index_interval_bytes=100)
    assert log.log_end_offset == 60
    assert log.recovery_report.bytes_truncated == 8 * batch_size
    assert [r.offset for r in read_all(log)] == list(range(60))
    assert log.active_segment.offset_index.entries() == entries_before
    assert log.max_timestamp() == (55, 111)
    assert log.offset_for_timestamp(112) is None


def test_damage_in_an_earlier_segment_drops_the_segments_after_it(
    open_log, make_batch, log_dir: Path
) -> None:
    log = open_log(segment_bytes=1500)
    for _ in range(40):
        log.append(make_batch(3, value_size=30))
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 4
    crash(log)
    (log_dir / CHECKPOINT_NAME).unlink()  # no recovery point: every segment is checked
    victim = log_dir / f"{bases[1]:020d}.log"
    with open(victim, "r+b") as f:
        f.seek(40)  # inside maxTimestamp of its first batch: CRC-covered bytes
        f.write(b"\xde\xad")
    log = open_log(segment_bytes=1500)
    assert [s.base_offset for s in log.segments] == bases[:2]
    assert log.log_end_offset == bases[1]
    assert log.recovery_report.segments_deleted == len(bases) - 2
    assert not any((log_dir / f"{b:020d}.log").exists() for b in bases[2:])


def test_lost_or_damaged_index_files_are_rebuilt(
    open_log, make_batch, log_dir: Path, read_all
) -> None:
    log = open_log(segment_bytes=2000, index_interval_bytes=200)
    for i in range(50):
        log.append(make_batch(3, timestamp=10 * i))
    expected = read_all(log)
    indexes = [s.offset_index.entries() for s in log.segments]
    first_base = log.segments[0].base_offset
    log.close()
    (log_dir / f"{first_base:020d}.index").unlink()
    second = log_dir / f"{log.segments[1].base_offset:020d}.index"
    second.write_bytes(second.read_bytes()[:-3])  # not a whole number of entries
    log = open_log(segment_bytes=2000, index_interval_bytes=200)
    assert read_all(log) == expected
    assert [s.offset_index.entries() for s in log.segments] == indexes
    assert log.offset_for_timestamp(255) == (78, 260)
    log.close()
    assert (log_dir / f"{first_base:020d}.index").exists()


def test_stale_clean_shutdown_note_does_not_skip_recovery(open_log, make_batch, log_dir: Path) -> None:
    log = open_log()
    for _ in range(3):
        log.append(make_batch(2))
    log.close()
    with open(log_dir / "00000000000000000000.log", "ab") as f:
        f.write(b"\x01" * 30)  # the file no longer matches what close() noted
    log = open_log()
    assert not log.recovery_report.clean
    assert log.log_end_offset == 6 and log.recovery_report.bytes_truncated == 30


def test_interrupted_compaction_files_are_resolved_at_open(open_log, make_batch, log_dir: Path) -> None:
    log = open_log(segment_bytes=1000)
    for _ in range(12):
        log.append(make_batch(2, value_size=50))
    seg = log.segments[0]
    stem = f"{seg.base_offset:020d}"
    log.close()
    original = (log_dir / f"{stem}.log").read_bytes()
    first_batch = original[: len(make_batch(2, value_size=50))]
    # Uncommitted: .cleaned files (and index swaps without a log swap) are thrown away.
    (log_dir / f"{stem}.log.cleaned").write_bytes(b"partial")
    (log_dir / f"{stem}.index.swap").write_bytes(b"")
    log = open_log(segment_bytes=1000)
    assert (log_dir / f"{stem}.log").read_bytes() == original
    assert not list(log_dir.glob("*.cleaned")) and not list(log_dir.glob("*.swap"))
    log.close()
    # Committed: a .log.swap replaces the segment.
    (log_dir / f"{stem}.log.swap").write_bytes(first_batch)
    log = open_log(segment_bytes=1000)
    assert (log_dir / f"{stem}.log").read_bytes() == first_batch
    assert [b.offset for b in log.segments[0].read_batch(0, log.segments[0].read_header(0))] == [0, 1]
    assert log.segments[0].offset_index.entries() == []
    assert not list(log_dir.glob("*.swap"))


def test_a_damaged_sealed_segment_is_reported_not_cut_by_a_read(
    open_log, make_batch, log_dir: Path
) -> None:
    log = open_log(segment_bytes=1000)
    for _ in range(20):
        log.append(make_batch(3, value_size=30))
    first = log_dir / "00000000000000000000.log"
    log.close()
    data = bytearray(first.read_bytes())
    data[-5] ^= 0xFF  # damage the last batch of the first (sealed) segment
    first.write_bytes(bytes(data))
    (log_dir / "00000000000000000000.index").unlink()  # forces a rebuild on first use
    log = open_log(segment_bytes=1000)
    assert log.recovery_report.clean  # the active segment matched: nothing was scanned
    with pytest.raises(KafkaStorageError, match="unreadable"):
        log.read(0, 100)
    assert first.read_bytes() == bytes(data)
