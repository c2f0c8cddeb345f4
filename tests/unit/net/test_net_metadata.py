"""ClusterMetadata: applying Metadata responses and the lookups."""

from __future__ import annotations

import uuid

from sdk.net.metadata import ClusterMetadata
from sdk.protocol.messages.metadata import MetadataResponse

R = MetadataResponse


def _response(leaders: dict[int, tuple[int, int]], *, topic: str = "t", error: int = 0,
              brokers: tuple[int, ...] = (1, 2)) -> MetadataResponse:
    return R(
        brokers=[R.MetadataResponseBroker(node_id=n, host=f"h{n}", port=9000 + n) for n in brokers],
        cluster_id="c1",
        controller_id=brokers[0] if brokers else -1,
        topics=[R.MetadataResponseTopic(
            error_code=error, name=topic, topic_id=uuid.uuid4(),
            partitions=[R.MetadataResponsePartition(partition_index=p, leader_id=leader,
                                                    leader_epoch=epoch, replica_nodes=[leader],
                                                    isr_nodes=[leader])
                        for p, (leader, epoch) in leaders.items()],
        )],
    )


def test_apply_and_lookups() -> None:
    md = ClusterMetadata()
    assert md.age_s() == float("inf")
    md.apply(_response({0: (1, 0), 1: (2, 0), 2: (-1, 0)}))
    assert md.cluster_id == "c1" and md.controller_id == 1
    assert md.broker(2).address == "h2:9002"  # type: ignore[union-attr]
    assert md.partitions_for("t") == (0, 1, 2)
    assert md.topic("t").available_ids == (0, 1)  # type: ignore[union-attr]
    assert md.leader_for("t", 1) == 2
    assert md.leader_for("t", 2) is None  # no leader
    assert md.leader_for("t", 9) is None and md.leader_for("x", 0) is None
    assert md.partitions_led_by(1) == [("t", 0)]
    assert md.version == 1 and md.age_s() < 5


def test_partition_tuples_keep_identity_when_nothing_changed() -> None:
    md = ClusterMetadata()
    md.apply(_response({0: (1, 0), 1: (2, 0)}))
    ids, avail = md.topic("t").partition_ids, md.topic("t").available_ids  # type: ignore[union-attr]
    md.apply(_response({0: (2, 1), 1: (2, 0)}))  # leader moved, same partitions
    assert md.topic("t").partition_ids is ids  # type: ignore[union-attr]
    assert md.topic("t").available_ids is avail  # type: ignore[union-attr]
    md.apply(_response({0: (-1, 2), 1: (2, 0)}))
    assert md.topic("t").available_ids == (1,)  # type: ignore[union-attr]


def test_stale_leader_epoch_does_not_undo_newer_knowledge() -> None:
    md = ClusterMetadata()
    md.apply(_response({0: (2, 5)}))
    md.apply(_response({0: (1, 4)}))  # an older view from a lagging broker
    assert md.leader_for("t", 0) == 2
    md.apply(_response({0: (1, 6)}))
    assert md.leader_for("t", 0) == 1


def test_topic_errors_and_forgetting_topics() -> None:
    md = ClusterMetadata()
    md.apply(_response({}, error=3))  # UNKNOWN_TOPIC_OR_PARTITION
    assert md.partitions_for("t") is None
    assert md.topic("t").error_code == 3  # type: ignore[union-attr]
    md.apply(_response({0: (1, 0)}, topic="other"), requested=["t", "other"])
    assert md.topic("t") is None and md.partitions_for("other") == (0,)
    md.apply(_response({0: (1, 0)}, topic="x"), all_topics=True)
    assert set(md.topics) == {"x"}


def test_mark_leader_unknown() -> None:
    md = ClusterMetadata()
    md.apply(_response({0: (1, 0), 1: (1, 0)}))
    md.mark_leader_unknown("t", 0)
    assert md.leader_for("t", 0) is None
    assert md.topic("t").available_ids == (1,)  # type: ignore[union-attr]
    md.mark_leader_unknown("nope", 0)  # unknown topics are ignored
