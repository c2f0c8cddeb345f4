"""What a transactions-v2 commit leaves in a partition's producer state survives the
partition leader's SIGKILL, on our 3-broker cluster and on Apache Kafka 4.3.1's, with the
same raw requests and the same answers: the COMMIT marker was written under epoch + 1, so
the new leader refuses a batch of the old epoch (INVALID_PRODUCER_EPOCH) and a marker from
an older coordinator epoch than the last one (TRANSACTION_COORDINATOR_FENCED), writing
nothing. Our new leader rebuilds its producer state from the replicated log, markers
included; Kafka's followers keep it while they replicate."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from apache_support import apache_cluster
from cluster.conftest import create_topic, leader_of, wait_for

from sdk.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidProducerEpochError,
    NotCoordinatorError,
    RetriableError,
    TransactionCoordinatorFencedError,
    for_code,
)
from sdk.net.client import NetClient
from sdk.net.config import CommonConfig
from sdk.net.targets import Coordinator, CoordinatorType, LeaderOf
from sdk.protocol.messages.describe_producers import DescribeProducersRequest
from sdk.protocol.messages.describe_transactions import DescribeTransactionsRequest
from sdk.protocol.messages.end_txn import EndTxnRequest
from sdk.protocol.messages.init_producer_id import InitProducerIdRequest
from sdk.protocol.messages.list_offsets import ListOffsetsRequest
from sdk.protocol.messages.produce import ProduceRequest
from sdk.protocol.messages.write_txn_markers import WriteTxnMarkersRequest as W
from sdk.records.builder import RecordBatchBuilder
from server_ref.cluster import EmbeddedCluster
from tools.apache_kafka import ApacheKafkaCluster

COMMITTED_END = 2  # the transaction's one record and its COMMIT marker
_NOT_READY = {CoordinatorLoadInProgressError.errno, CoordinatorNotAvailableError.errno,
              NotCoordinatorError.errno}


class _Raw:
    """Raw requests about one producer and partition 0 of one topic."""

    def __init__(self, bootstrap: str, topic: str, txn_id: str) -> None:
        self.client = NetClient(CommonConfig.build(bootstrap_servers=bootstrap))
        self.topic = topic
        self.txn_id = txn_id
        self.pid = self.epoch = -1

    async def coordinator(self, request: Any, version: int) -> Any:
        deadline = time.monotonic() + 60
        while True:
            response = await self.client.call(
                request, Coordinator(self.txn_id, CoordinatorType.TRANSACTION),
                max_version=version, timeout_s=30)
            if response.error_code not in _NOT_READY or time.monotonic() > deadline:
                return response
            await asyncio.sleep(0.2)

    async def leader(self, request: Any, version: int | None = None) -> Any:
        return await self.client.call(request, LeaderOf(self.topic, 0), max_version=version,
                                      timeout_s=60)

    async def at_leader(self, request: Any, version: int, code_of: Any) -> int:
        """The partition's answer, asked again (metadata refreshed) while it is a retriable
        one: a new leader may not serve yet, and metadata may still name the old one."""
        deadline = time.monotonic() + 60
        while True:
            code = int(code_of(await self.leader(request, version)))
            if not (code and issubclass(for_code(code), RetriableError)) \
                    or time.monotonic() > deadline:
                return code
            await asyncio.sleep(0.2)
            await self.client.refresh_metadata_anew(timeout_s=30)

    async def produce(self, seq: int, epoch: int, transactional: bool) -> int:
        builder = RecordBatchBuilder(producer_id=self.pid, producer_epoch=epoch,
                                     base_sequence=seq, is_transactional=transactional)
        builder.append(None, None, None, b"v")
        return await self.at_leader(ProduceRequest(
            transactional_id=self.txn_id if transactional else None, acks=-1,
            timeout_ms=10000, topic_data=[ProduceRequest.TopicProduceData(
                name=self.topic, partition_data=[ProduceRequest.PartitionProduceData(
                    index=0, records=builder.build())])]), 12,
            lambda r: r.responses[0].partition_responses[0].error_code)

    async def producer_state(self) -> tuple[int, int]:
        """(epoch - the first epoch, coordinator epoch) the leader holds for the producer."""
        response = await self.leader(DescribeProducersRequest(topics=[
            DescribeProducersRequest.TopicRequest(name=self.topic, partition_indexes=[0])]))
        states = [s for s in response.topics[0].partitions[0].active_producers
                  if s.producer_id == self.pid]
        assert len(states) == 1, response
        return states[0].producer_epoch - self.epoch, states[0].coordinator_epoch

    async def transaction_state(self) -> str:
        """The coordinator's state of the transaction; "" while it cannot say."""
        response = await self.client.call(
            DescribeTransactionsRequest(transactional_ids=[self.txn_id]),
            Coordinator(self.txn_id, CoordinatorType.TRANSACTION), timeout_s=30)
        state = response.transaction_states[0]
        return "" if state.error_code in _NOT_READY else str(state.transaction_state)

    async def log_end(self) -> int:
        response = await self.leader(ListOffsetsRequest(replica_id=-1, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=self.topic, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])]))
        return int(response.topics[0].partitions[0].offset)

    async def marker(self, epoch: int, coordinator_epoch: int) -> int:
        return await self.at_leader(W(markers=[W.WritableTxnMarker(
            producer_id=self.pid, producer_epoch=epoch, transaction_result=False,
            coordinator_epoch=coordinator_epoch,
            topics=[W.WritableTxnMarkerTopic(name=self.topic, partition_indexes=[0])])]), 1,
            lambda r: r.markers[0].topics[0].partitions[0].error_code)


async def _commit(raw: _Raw) -> tuple[int, int]:
    await raw.client.start()
    first = await raw.coordinator(InitProducerIdRequest(
        transactional_id=raw.txn_id, transaction_timeout_ms=60000), 5)
    assert first.error_code == 0, first
    raw.pid, raw.epoch = first.producer_id, first.producer_epoch
    assert await raw.produce(0, raw.epoch, transactional=True) == 0
    ended = await raw.coordinator(EndTxnRequest(
        transactional_id=raw.txn_id, producer_id=raw.pid, producer_epoch=raw.epoch,
        committed=True), 5)
    assert (ended.error_code, ended.producer_epoch) == (0, raw.epoch + 1)
    deadline = time.monotonic() + 60  # Kafka writes the markers after its answer
    while (state := await raw.producer_state())[0] != 1:
        assert time.monotonic() < deadline, f"no COMMIT marker under epoch + 1: {state}"
        await asyncio.sleep(0.1)
    # The marker is in the partition before the coordinator logs CompleteCommit. Killed in
    # between (it may lead both), a new coordinator, one coordinator epoch up, would send
    # the markers again and the partition would hold that epoch: wait for the end.
    while (txn_state := await raw.transaction_state()) != "CompleteCommit":
        assert time.monotonic() < deadline, f"the transaction stays {txn_state}"
        await asyncio.sleep(0.1)
    return state


async def _stale_writes(raw: _Raw, coordinator_epoch: int) -> dict[str, object]:
    await raw.client.refresh_metadata_anew(timeout_s=30)
    refused = await raw.produce(1, raw.epoch, transactional=False)  # once the leader serves
    # A new leader's high watermark catches up with its log as the followers fetch again
    # (on Apache Kafka it lagged by 3 here once): wait for the committed record and marker.
    deadline = time.monotonic() + 60
    while (end := await raw.log_end()) < COMMITTED_END:
        assert time.monotonic() < deadline, f"high watermark stuck at {end}"
        await asyncio.sleep(0.1)
    return {
        "producer state": await raw.producer_state(),
        "idempotent batch, old epoch": refused,
        "marker, older coordinator epoch": await raw.marker(raw.epoch + 1,
                                                            coordinator_epoch - 1),
        "written": await raw.log_end() - end,
    }


def _scenario(cluster: EmbeddedCluster | ApacheKafkaCluster) -> None:
    topic = create_topic(cluster, "txn-fence", 1)  # type: ignore[arg-type]
    raw = _Raw(cluster.bootstrap_servers, topic, f"fence-{uuid.uuid4().hex[:8]}")
    loop = asyncio.new_event_loop()
    try:
        state = loop.run_until_complete(_commit(raw))
        leader = leader_of(cluster, topic, 0)  # type: ignore[arg-type]
        cluster.kill(leader)
        wait_for(lambda: leader_of(cluster, topic, 0) != leader, 60,  # type: ignore[arg-type]
                 f"a new leader of {topic}-0")
        answers = loop.run_until_complete(_stale_writes(raw, state[1]))
    finally:
        loop.run_until_complete(raw.client.close())
        loop.close()
    assert answers == {
        "producer state": state,  # epoch + 1 and the marker's coordinator epoch
        "idempotent batch, old epoch": InvalidProducerEpochError.errno,
        "marker, older coordinator epoch": TransactionCoordinatorFencedError.errno,
        "written": 0,
    }


def test_v2_commit_fences_the_old_epoch_on_a_new_leader(kafka_cluster: EmbeddedCluster
                                                         ) -> None:
    _scenario(kafka_cluster)


def test_v2_commit_fences_the_old_epoch_on_a_new_leader_apache() -> None:
    with apache_cluster(brokers=3, controllers=1) as cluster:
        _scenario(cluster)
