"""ListOffsets on a new leader whose high watermark has not reached the start of its epoch.

Kafka's Partition.fetchOffsetForTimestamp answers a consumer OFFSET_NOT_AVAILABLE (v5+;
LEADER_NOT_AVAILABLE before) for the latest offset, and for a timestamp lookup landing at
or past the high watermark, until the followers' fetches move the high watermark to the
epoch start. A clean-clone CI run of our cluster answered the lagging high watermark
instead (2976 where 3005 records were acknowledged). The window after an election is a
few milliseconds on a real cluster, so the state is built here directly: a real log, a
real ReplicaState, the real handler.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from sdk.errors import LeaderNotAvailableError, OffsetNotAvailableError
from sdk.protocol.messages.list_offsets import ListOffsetsRequest
from sdk.records.builder import RecordBatchBuilder
from server_ref.handlers import RequestContext
from server_ref.handlers.list_offsets import _answer
from server_ref.replication.state import LEADER, ReplicaState
from server_ref.storage import LogConfig, PartitionLog
from server_ref.topics import Partition

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
NOT_AVAILABLE = OffsetNotAvailableError.errno


def _batch(first_timestamp: int, count: int) -> bytes:
    builder = RecordBatchBuilder()
    for i in range(count):
        builder.append(None, first_timestamp + i, None, b"v%d" % i)
    return builder.build()


@pytest.fixture
def new_leader(tmp_path: Path) -> Iterator[Partition]:
    """Ten records written under epoch 0 (timestamps 1000..1009), then this broker became
    leader at epoch 1 with its epoch starting at 10 and its high watermark still at 7."""
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig())
    plog.append(_batch(1000, 10), leader_epoch=0)
    plog.leader_epoch_cache.assign(1, plog.log_end_offset)
    state = ReplicaState(LEADER, 2, 1, 3, [1, 2, 3], [2, 3], high_watermark=7)
    yield Partition(topic=None, index=0, log=plog, replica=state)  # type: ignore[arg-type]
    plog.close()


def _ask(partition: Partition, timestamp: int, *, version: int = 9,
         replica_id: int = -1) -> tuple[int, int]:
    broker = SimpleNamespace(topics=SimpleNamespace(partition=lambda _t, _i: partition),
                             cluster=object(),  # cluster mode; untiered: one log start
                             remote=SimpleNamespace(log_start_offset=lambda p: 0))
    ctx = RequestContext(broker=broker, api_key=2, api_version=version,  # type: ignore[arg-type]
                         correlation_id=1, client_id="test", peer="test")
    request = ListOffsetsRequest(replica_id=replica_id, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name="t", partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])])
    result = _answer(ctx, request).topics[0].partitions[0]
    return result.error_code, result.offset


def test_latest_is_not_available_until_the_high_watermark_reaches_the_epoch_start(
        new_leader: Partition) -> None:
    assert _ask(new_leader, LATEST)[0] == NOT_AVAILABLE
    assert _ask(new_leader, LATEST, version=4)[0] == LeaderNotAvailableError.errno
    new_leader.replica.high_watermark = 10
    assert _ask(new_leader, LATEST) == (0, 10)


def test_lookups_below_the_high_watermark_are_answered(new_leader: Partition) -> None:
    assert _ask(new_leader, EARLIEST) == (0, 0)
    assert _ask(new_leader, 1003) == (0, 3)  # offset 3 < high watermark 7
    assert _ask(new_leader, 1008)[0] == NOT_AVAILABLE  # offset 8 >= 7
    assert _ask(new_leader, 5000)[0] == NOT_AVAILABLE  # none found
    assert _ask(new_leader, MAX_TIMESTAMP)[0] == NOT_AVAILABLE  # offset 9


def test_only_consumers_get_the_error(new_leader: Partition) -> None:
    """A debugging tool (replica id -2) has no isolation level in Kafka's check."""
    assert _ask(new_leader, LATEST, replica_id=-2) == (0, 7)
