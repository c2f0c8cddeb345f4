"""ACL checks of the transaction APIs on the wire, on our broker and on Apache Kafka (one
KRaft node) with the same expected answers (the setup of test_authorizer_wire.py: User:alice
may WRITE the transactional id ``tx-allowed``, use the ``open`` topic and READ ``group``).
As Kafka's KafkaApis: WRITE on the transactional id for AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn and TxnOffsetCommit (53); WRITE per topic for AddPartitionsToTxn (29, the allowed
ones OPERATION_NOT_ATTEMPTED); READ on the group for AddOffsetsToTxn and TxnOffsetCommit
(30); CLUSTER_ACTION for WriteTxnMarkers (31); DESCRIBE on the id to be listed or described.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # importlib mode: the helpers beside us
from test_authorizer_wire import (  # noqa: F401 - setup is the shared module fixture
    GROUP_DENIED,
    TOPIC_DENIED,
    TXN_DENIED,
    Setup,
    setup,
    until_ready,
)

from sdk.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from sdk.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest as APT
from sdk.protocol.messages.describe_transactions import DescribeTransactionsRequest
from sdk.protocol.messages.end_txn import EndTxnRequest
from sdk.protocol.messages.find_coordinator import FindCoordinatorRequest
from sdk.protocol.messages.init_producer_id import InitProducerIdRequest
from sdk.protocol.messages.list_transactions import ListTransactionsRequest
from sdk.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from sdk.protocol.messages.write_txn_markers import WriteTxnMarkersRequest

CLUSTER_DENIED, NOT_ATTEMPTED = 31, 55
TOC = TxnOffsetCommitRequest


def _add(txn_id: str, pid: int, topics: list[str]) -> APT:
    return APT(v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
               v3_and_below_producer_epoch=0, v3_and_below_topics=[
                   APT.AddPartitionsToTxnTopic(name=t, partitions=[0]) for t in topics])


def _offsets(txn_id: str, group: str, pid: int, topics: list[str]) -> TOC:
    return TOC(transactional_id=txn_id, group_id=group, producer_id=pid, producer_epoch=0,
               topics=[TOC.TxnOffsetCommitRequestTopic(name=t, partitions=[
                   TOC.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=0)])
                   for t in topics])


def test_transaction_apis_per_acl(setup: Setup) -> None:  # noqa: F811 - the fixture
    with setup.wire() as w:
        # Apache Kafka makes __transaction_state at the first transactional FindCoordinator.
        until_ready(lambda: w.call(FindCoordinatorRequest(key="tx-allowed", key_type=1), 3),
                    lambda r: [r.error_code])
        init = until_ready(lambda: w.call(InitProducerIdRequest(
            transactional_id="tx-allowed", transaction_timeout_ms=60000), 4),
            lambda r: [r.error_code])
        assert init.error_code == 0
        pid = init.producer_id
        # A topic it may not write: that one refused, the other not attempted, none added.
        mixed = w.call(_add("tx-allowed", pid, [setup.open, setup.closed]), 3)
        codes = {t.name: t.results_by_partition[0].partition_error_code
                 for t in mixed.results_by_topic_v3_and_below}
        assert codes == {setup.open: NOT_ATTEMPTED, setup.closed: TOPIC_DENIED}
        denied = w.call(_add("tx-denied", pid, [setup.open]), 3)
        assert [p.partition_error_code for t in denied.results_by_topic_v3_and_below
                for p in t.results_by_partition] == [TXN_DENIED]
        added = w.call(_add("tx-allowed", pid, [setup.open]), 3)
        assert [p.partition_error_code for t in added.results_by_topic_v3_and_below
                for p in t.results_by_partition] == [0]
        # The brokers' verify-only form (v4+) needs CLUSTER_ACTION: a top-level refusal.
        verify = w.call(APT(transactions=[APT.AddPartitionsToTxnTransaction(
            transactional_id="tx-allowed", producer_id=pid, producer_epoch=0,
            verify_only=True, topics=[APT.AddPartitionsToTxnTopic(name=setup.open,
                                                                 partitions=[0])])]), 4)
        assert verify.error_code == CLUSTER_DENIED
        # AddOffsetsToTxn: the group needs READ; the id WRITE.
        assert w.call(AddOffsetsToTxnRequest(
            transactional_id="tx-allowed", producer_id=pid, producer_epoch=0,
            group_id=setup.other_group), 3).error_code == GROUP_DENIED
        assert w.call(AddOffsetsToTxnRequest(
            transactional_id="tx-denied", producer_id=pid, producer_epoch=0,
            group_id=setup.group), 3).error_code == TXN_DENIED
        # TxnOffsetCommit: the id, then the group, then READ per topic.
        refused = w.call(_offsets("tx-denied", setup.group, pid, [setup.open]), 3)
        assert refused.topics[0].partitions[0].error_code == TXN_DENIED
        refused = w.call(_offsets("tx-allowed", setup.other_group, pid, [setup.open]), 3)
        assert refused.topics[0].partitions[0].error_code == GROUP_DENIED
        per_topic = w.call(_offsets("tx-allowed", setup.group, pid, [setup.closed]), 3)
        assert per_topic.topics[0].partitions[0].error_code == TOPIC_DENIED
        # EndTxn needs WRITE on the id; WriteTxnMarkers is for brokers (CLUSTER_ACTION).
        assert w.call(EndTxnRequest(transactional_id="tx-denied", producer_id=pid,
                                    producer_epoch=0, committed=False), 3).error_code == \
            TXN_DENIED
        W = WriteTxnMarkersRequest
        markers = w.call(W(markers=[W.WritableTxnMarker(
            producer_id=pid, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
            topics=[W.WritableTxnMarkerTopic(name=setup.open, partition_indexes=[0])])]), 1)
        assert [p.error_code for m in markers.markers for t in m.topics
                for p in t.partitions] == [CLUSTER_DENIED]
        # Describe and list show only what alice may DESCRIBE (WRITE implies it).
        described = w.call(DescribeTransactionsRequest(
            transactional_ids=["tx-allowed", "tx-denied"]), 0)
        states = {s.transactional_id: (s.error_code, s.transaction_state)
                  for s in described.transaction_states}
        assert states["tx-allowed"] == (0, "Ongoing")
        assert states["tx-denied"][0] == TXN_DENIED
        listed = w.call(ListTransactionsRequest(), 1)
        assert [s.transactional_id for s in listed.transaction_states] == ["tx-allowed"]
        assert w.call(EndTxnRequest(transactional_id="tx-allowed", producer_id=pid,
                                    producer_epoch=0, committed=False), 3).error_code == 0
