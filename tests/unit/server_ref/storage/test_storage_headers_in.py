"""``headers_in``: the batch headers of a follower's fetched bytes, as the log gives them back
after the append (``PartitionLog.batch_headers``), without reading the log."""

from __future__ import annotations

from pathlib import Path

from server_ref.storage import LogConfig, PartitionLog
from server_ref.storage.results import headers_in


def test_the_same_headers_as_the_log_gives_after_a_follower_append(make_batch, tmp_path: Path
                                                                   ) -> None:
    leader = PartitionLog.open(tmp_path / "leader-0", LogConfig())
    follower = PartitionLog.open(tmp_path / "follower-0", LogConfig())
    try:
        leader.append(make_batch(3, producer_id=7, producer_epoch=0, base_sequence=0))
        leader.append(make_batch(2))
        leader.append(make_batch(4, producer_id=8, producer_epoch=1, base_sequence=5,
                                 transactional=True))
        fetched = leader.read(0, 1 << 20).to_bytes()
        follower.append(bytearray(fetched), assign_offsets=False)
        assert list(headers_in(fetched)) == list(follower.batch_headers(0))
        assert [h.base_offset for h in headers_in(fetched, 4)] == [3, 5]  # last offset >= 4
    finally:
        leader.close()
        follower.close()


def test_a_partial_last_batch_is_left_out(make_batch) -> None:
    whole, cut = make_batch(3), make_batch(5)
    assert [h.record_count for h in headers_in(whole + cut[:-1])] == [3]
    assert [h.record_count for h in headers_in(whole + cut[:40])] == [3]  # header cut too
    assert list(headers_in(b"")) == []
