"""Metadata, ApiVersions, topic admin, configs, ListOffsets, DeleteRecords, DescribeCluster."""

from __future__ import annotations

import uuid

import pytest
from broker_kit import Served, make_batch

from sdk import errors
from sdk.protocol.messages.api_versions import ApiVersionsRequest
from sdk.protocol.messages.create_partitions import CreatePartitionsRequest
from sdk.protocol.messages.create_topics import CreateTopicsRequest
from sdk.protocol.messages.delete_records import DeleteRecordsRequest
from sdk.protocol.messages.delete_topics import DeleteTopicsRequest
from sdk.protocol.messages.describe_cluster import DescribeClusterRequest
from sdk.protocol.messages.describe_configs import DescribeConfigsRequest
from sdk.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from sdk.protocol.messages.list_offsets import ListOffsetsRequest
from sdk.protocol.messages.metadata import MetadataRequest
from sdk.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from sdk.protocol.messages.produce import ProduceRequest
from server_ref.groups import OffsetToCommit
from server_ref.handlers import REGISTRY

TOPIC, BROKER = 2, 4


def new_topic(name: str, partitions: int = 1, replication: int = 1,
              **configs: str | None) -> CreateTopicsRequest.CreatableTopic:
    return CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication,
        configs=[CreateTopicsRequest.CreatableTopicConfig(name=k.replace("_", "."), value=v)
                 for k, v in configs.items()])


async def produce(served: Served, topic: str, records: bytes, partition: int = 0) -> None:
    client = await served.client()
    response = await client.call(ProduceRequest(acks=1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=partition, records=records)])]))
    assert response.responses[0].partition_responses[0].error_code == 0


# ---------------------------------------------------------------------------- versions


async def test_api_versions_advertise_exactly_the_registered_handlers(served: Served) -> None:
    client = await served.client()
    response = await client.call(ApiVersionsRequest(client_software_name="tests",
                                                    client_software_version="1.0"), 3)
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert advertised == {k: (r.min_version, r.max_version) for k, r in REGISTRY.items()}
    assert 0 in advertised and 48 not in advertised  # Produce yes, DescribeClientQuotas no


async def test_api_versions_unknown_version_answers_v0_with_ranges(served: Served) -> None:
    client = await served.client()
    body = b"\x00\x12\x00\x63\x00\x00\x00\x07\x00\x01x"  # key 18, version 99, cid 7, "x"
    await client.send_raw(len(body).to_bytes(4, "big") + body)
    data = await client.reader.read(1 << 16)
    assert int.from_bytes(data[4:8], "big") == 7
    assert int.from_bytes(data[8:10], "big") == errors.UnsupportedVersionError.errno


async def test_api_versions_v3_checks_client_software_name(served: Served) -> None:
    client = await served.client()
    response = await client.call(ApiVersionsRequest(client_software_name="bad name",
                                                    client_software_version="1"), 3)
    assert response.error_code == errors.InvalidRequestError.errno


# ---------------------------------------------------------------------------- metadata


async def test_metadata_auto_creates_when_enabled(served: Served) -> None:
    client = await served.client()
    response = await client.call(MetadataRequest(topics=[
        MetadataRequest.MetadataRequestTopic(name="auto")], allow_auto_topic_creation=True))
    (topic,) = response.topics
    assert topic.error_code == 0 and len(topic.partitions) == 1
    assert topic.partitions[0].leader_id == served.b.node_id
    assert response.cluster_id == served.b.cluster_id
    assert [(b.host, b.port) for b in response.brokers] == [("127.0.0.1", served.port)]
    not_allowed = await client.call(MetadataRequest(topics=[
        MetadataRequest.MetadataRequestTopic(name="other")], allow_auto_topic_creation=False))
    assert not_allowed.topics[0].error_code == errors.UnknownTopicOrPartitionError.errno
    bad = await client.call(MetadataRequest(topics=[
        MetadataRequest.MetadataRequestTopic(name="no/slash")]))
    assert bad.topics[0].error_code == errors.InvalidTopicError.errno


async def test_metadata_without_auto_creation_and_by_topic_id(make_served: object) -> None:
    served = await make_served(auto_create_topics_enable="false")  # type: ignore[operator]
    client = await served.client()
    response = await client.call(MetadataRequest(topics=[
        MetadataRequest.MetadataRequestTopic(name="auto")]))
    assert response.topics[0].error_code == errors.UnknownTopicOrPartitionError.errno
    created = served.b.topics.create("t", 3)
    by_id = await client.call(MetadataRequest(topics=[
        MetadataRequest.MetadataRequestTopic(name=None, topic_id=created.topic_id)]), 12)
    assert by_id.topics[0].name == "t" and len(by_id.topics[0].partitions) == 3
    every = await client.call(MetadataRequest(topics=None))
    assert [t.name for t in every.topics] == ["t"]


# ---------------------------------------------------------------------------- topics


async def test_create_topics_results_and_errors(served: Served) -> None:
    client = await served.client()
    response = await client.call(CreateTopicsRequest(topics=[
        new_topic("a", 3, retention_ms="1000"),
        new_topic("b", 1, 2),
        new_topic("c", 1, unknown_key="1"),
        new_topic("d", 1, retention_ms="soon"),
        new_topic("bad name"),
        new_topic("e", 0),
        new_topic("dup"), new_topic("dup"),
    ]))
    by_name = {}
    for t in response.topics:
        by_name.setdefault(t.name, []).append(t)
    assert by_name["a"][0].error_code == 0 and by_name["a"][0].num_partitions == 3
    assert by_name["a"][0].topic_id == served.b.topics.get("a").topic_id
    configs = {c.name: c for c in by_name["a"][0].configs}
    assert configs["retention.ms"].value == "1000" and configs["retention.ms"].config_source == 1
    assert by_name["b"][0].error_code == errors.InvalidReplicationFactorError.errno
    assert by_name["c"][0].error_code == errors.InvalidConfigError.errno
    assert by_name["d"][0].error_code == errors.InvalidConfigError.errno
    assert by_name["bad name"][0].error_code == errors.InvalidTopicError.errno
    assert by_name["e"][0].error_code == errors.InvalidPartitionsError.errno
    assert [t.error_code for t in by_name["dup"]] == [errors.InvalidRequestError.errno] * 2
    again = await client.call(CreateTopicsRequest(topics=[new_topic("a")]))
    assert again.topics[0].error_code == errors.TopicAlreadyExistsError.errno
    assert sorted(t.name for t in served.b.topics) == ["a"]


async def test_create_topics_validate_only_and_defaults(served: Served) -> None:
    client = await served.client()
    response = await client.call(CreateTopicsRequest(
        topics=[new_topic("v", -1, -1)], validate_only=True))
    assert response.topics[0].error_code == 0 and response.topics[0].num_partitions == 1
    assert "v" not in served.b.topics


async def test_delete_topics_by_name_and_id(served: Served) -> None:
    served.b.topics.create("a", 1)
    b = served.b.topics.create("b", 1)
    client = await served.client()
    by_name = await client.call(DeleteTopicsRequest(topic_names=["a", "zz"]), 5)
    assert [r.error_code for r in by_name.responses] == [
        0, errors.UnknownTopicOrPartitionError.errno]
    by_id = await client.call(DeleteTopicsRequest(topics=[
        DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=b.topic_id),
        DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=uuid.uuid4())]), 6)
    assert [(r.name, r.error_code) for r in by_id.responses] == [
        ("b", 0), (None, errors.UnknownTopicIdError.errno)]
    assert len(served.b.topics) == 0
    assert not (served.data_dir / "a-0").exists()


async def test_delete_topics_drops_their_committed_offsets(served: Served) -> None:
    served.b.topics.create("gone", 2)
    served.b.topics.create("kept", 1)
    groups = served.b.groups
    assert groups is not None
    committed = {("gone", 0): OffsetToCommit(1), ("gone", 1): OffsetToCommit(2),
                 ("kept", 0): OffsetToCommit(3)}
    assert set(groups.commit_offsets("g", committed).values()) == {0}
    client = await served.client()
    response = await client.call(DeleteTopicsRequest(topic_names=["gone"]), 5)
    assert [r.error_code for r in response.responses] == [0]
    assert list(groups.fetch_offsets("g", None).offsets) == [("kept", 0)]


async def test_create_partitions(served: Served) -> None:
    served.b.topics.create("t", 2)
    client = await served.client()

    def grow(name: str, count: int) -> CreatePartitionsRequest.CreatePartitionsTopic:
        return CreatePartitionsRequest.CreatePartitionsTopic(name=name, count=count,
                                                             assignments=None)

    checked = await client.call(CreatePartitionsRequest(topics=[grow("t", 4)],
                                                        validate_only=True))
    assert checked.results[0].error_code == 0 and len(served.b.topics.get("t").partitions) == 2
    response = await client.call(CreatePartitionsRequest(topics=[
        grow("t", 4), grow("nope", 2)]))
    assert [r.error_code for r in response.results] == [
        0, errors.UnknownTopicOrPartitionError.errno]
    shrink = await client.call(CreatePartitionsRequest(topics=[grow("t", 3)]))
    assert shrink.results[0].error_code == errors.InvalidPartitionsError.errno
    await served.restart()
    assert len(served.b.topics.get("t").partitions) == 4


# ---------------------------------------------------------------------------- configs


async def _describe(served: Served, resource_type: int, name: str,
                    keys: list[str] | None = None) -> dict[str, object]:
    client = await served.client()
    response = await client.call(DescribeConfigsRequest(resources=[
        DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=resource_type, resource_name=name, configuration_keys=keys)],
        include_synonyms=True))
    (result,) = response.results
    assert result.error_code == 0, result.error_message
    return {c.name: c for c in result.configs}


async def _alter(served: Served, resource_type: int, name: str,
                 ops: list[tuple[str, int, str | None]], validate_only: bool = False) -> int:
    client = await served.client()
    response = await client.call(IncrementalAlterConfigsRequest(resources=[
        IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=resource_type, resource_name=name, configs=[
                IncrementalAlterConfigsRequest.AlterableConfig(
                    name=key, config_operation=op, value=value) for key, op, value in ops])],
        validate_only=validate_only))
    return int(response.responses[0].error_code)


async def test_topic_configs_describe_alter_and_persist(served: Served) -> None:
    served.b.topics.create("t", 1)
    before = await _describe(served, TOPIC, "t", ["retention.ms", "cleanup.policy"])
    assert before["retention.ms"].value == str(7 * 24 * 3600 * 1000)
    assert before["retention.ms"].config_source == 5  # DEFAULT_CONFIG
    assert await _alter(served, TOPIC, "t", [("retention.ms", 0, "5000")], True) == 0
    assert (await _describe(served, TOPIC, "t"))["retention.ms"].config_source == 5
    assert await _alter(served, TOPIC, "t", [("retention.ms", 0, "5000"),
                                            ("cleanup.policy", 2, "compact")]) == 0
    assert served.b.topics.get("t").partitions[0].log.config.retention_ms == 5000
    await served.restart()
    after = await _describe(served, TOPIC, "t")
    assert after["retention.ms"].value == "5000" and after["retention.ms"].config_source == 1
    assert after["cleanup.policy"].value == "delete,compact"
    assert await _alter(served, TOPIC, "t", [("retention.ms", 1, None)]) == 0
    assert (await _describe(served, TOPIC, "t"))["retention.ms"].config_source == 5


@pytest.mark.parametrize(("ops", "code"), [
    ([("no.such.config", 0, "1")], errors.InvalidConfigError.errno),
    ([("retention.ms", 0, "-7")], errors.InvalidConfigError.errno),
    ([("cleanup.policy", 0, "shred")], errors.InvalidConfigError.errno),
    ([("retention.ms", 2, "1")], errors.InvalidConfigError.errno),
    ([("retention.ms", 0, "1"), ("retention.ms", 0, "2")], errors.InvalidRequestError.errno),
])
async def test_invalid_topic_config_changes(served: Served, ops: list, code: int) -> None:
    served.b.topics.create("t", 1)
    assert await _alter(served, TOPIC, "t", ops) == code
    assert "t" in served.b.topics and served.b.topics.get("t").overrides == {}


async def test_broker_configs_dynamic_defaults(served: Served) -> None:
    node = str(served.b.node_id)
    served.b.topics.create("t", 1)
    described = await _describe(served, BROKER, node, ["log.retention.ms", "num.partitions"])
    assert described["num.partitions"].read_only
    assert await _alter(served, BROKER, node, [("num.partitions", 0, "3")]) == \
        errors.InvalidRequestError.errno  # Kafka refuses broker updates as INVALID_REQUEST
    assert await _alter(served, BROKER, node, [("log.retention.ms", 0, "60000")]) == 0
    topic_view = await _describe(served, TOPIC, "t", ["retention.ms"])
    assert topic_view["retention.ms"].value == "60000"
    assert topic_view["retention.ms"].config_source == 3  # DYNAMIC_DEFAULT_BROKER_CONFIG
    assert served.b.topics.get("t").partitions[0].log.config.retention_ms == 60000
    await served.restart()
    assert (await _describe(served, BROKER, node))["log.retention.ms"].value == "60000"
    client = await served.client()
    unknown = await client.call(DescribeConfigsRequest(resources=[
        DescribeConfigsRequest.DescribeConfigsResource(resource_type=TOPIC,
                                                       resource_name="missing")]))
    assert unknown.results[0].error_code == errors.UnknownTopicOrPartitionError.errno


# ---------------------------------------------------------------------------- offsets


async def test_list_offsets_by_position_and_time(served: Served) -> None:
    served.b.topics.create("t", 1)
    for ts in (1000, 3000, 2000):
        await produce(served, "t", make_batch([(b"k", b"v")] * 2, timestamp=ts))
    client = await served.client()

    async def lookup(timestamp: int) -> tuple[int, int, int]:
        response = await client.call(ListOffsetsRequest(replica_id=-1, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name="t", partitions=[
                ListOffsetsRequest.ListOffsetsPartition(partition_index=0,
                                                        timestamp=timestamp)])]))
        p = response.topics[0].partitions[0]
        return p.error_code, p.offset, p.timestamp

    assert await lookup(-2) == (0, 0, -1)
    assert await lookup(-1) == (0, 6, -1)
    assert await lookup(-3) == (0, 2, 3000)
    assert await lookup(1500) == (0, 2, 3000)
    assert await lookup(2500) == (0, 2, 3000)
    assert await lookup(9999) == (0, -1, -1)

    response = await client.call(DeleteRecordsRequest(topics=[
        DeleteRecordsRequest.DeleteRecordsTopic(name="t", partitions=[
            DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=4),
            DeleteRecordsRequest.DeleteRecordsPartition(partition_index=7, offset=1)])]))
    results = response.topics[0].partitions
    assert (results[0].error_code, results[0].low_watermark) == (0, 4)
    assert results[1].error_code == errors.UnknownTopicOrPartitionError.errno
    assert await lookup(-2) == (0, 4, -1)
    too_far = await client.call(DeleteRecordsRequest(topics=[
        DeleteRecordsRequest.DeleteRecordsTopic(name="t", partitions=[
            DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=99)])]))
    assert too_far.topics[0].partitions[0].error_code == errors.OffsetOutOfRangeError.errno


async def test_offset_for_leader_epoch(served: Served) -> None:
    served.b.topics.create("t", 1)
    await produce(served, "t", make_batch([(b"k", b"v")] * 3))
    client = await served.client()
    response = await client.call(OffsetForLeaderEpochRequest(replica_id=-1, topics=[
        OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic="t", partitions=[
            OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                partition=0, current_leader_epoch=0, leader_epoch=0),
            OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                partition=0, current_leader_epoch=5, leader_epoch=0)])]))
    first, fenced = response.topics[0].partitions
    assert (first.error_code, first.leader_epoch, first.end_offset) == (0, 0, 3)
    assert fenced.error_code == errors.UnknownLeaderEpochError.errno


async def test_describe_cluster(served: Served) -> None:
    client = await served.client()
    response = await client.call(DescribeClusterRequest(
        include_cluster_authorized_operations=True))
    assert response.cluster_id == served.b.cluster_id and len(response.cluster_id) == 22
    assert [(b.broker_id, b.port) for b in response.brokers] == [(0, served.port)]
    assert response.cluster_authorized_operations > 0


async def test_colliding_and_internal_topic_names(served: Served) -> None:
    client = await served.client()
    response = await client.call(CreateTopicsRequest(topics=[new_topic("a.b")]))
    assert response.topics[0].error_code == 0
    clash = await client.call(CreateTopicsRequest(topics=[new_topic("a_b"),
                                                          new_topic("__consumer_offsets")]))
    assert [t.error_code for t in clash.topics] == [errors.InvalidTopicError.errno] * 2


async def test_metadata_for_the_offsets_topic_creates_it_compacted(served: Served) -> None:
    client = await served.client()
    response = await client.call(MetadataRequest(topics=[
        MetadataRequest.MetadataRequestTopic(name="__consumer_offsets")]))
    (topic,) = response.topics
    assert topic.error_code == 0 and topic.is_internal
    assert len(topic.partitions) == 3  # offsets.topic.num.partitions in these tests
    assert served.b.topics.get("__consumer_offsets").is_compacted(served.b.config)
    deleting = await client.call(DeleteTopicsRequest(topic_names=["__consumer_offsets"]), 5)
    assert deleting.responses[0].error_code == errors.InvalidTopicError.errno


async def test_describe_topic_partitions_pages_with_a_cursor(served: Served) -> None:
    from sdk.protocol.messages.describe_topic_partitions import (
        DescribeTopicPartitionsRequest as Request,
    )

    served.b.topics.create("a", 3)
    served.b.topics.create("b", 2)
    client = await served.client()
    pages = []
    cursor = None
    while True:
        response = await client.call(Request(response_partition_limit=2, cursor=cursor))
        pages.append([(t.name, [p.partition_index for p in t.partitions])
                      for t in response.topics])
        if response.next_cursor is None:
            break
        cursor = Request.Cursor(topic_name=response.next_cursor.topic_name,
                                partition_index=response.next_cursor.partition_index)
    assert pages == [[("a", [0, 1])], [("a", [2]), ("b", [0])], [("b", [1])]]
    missing = await client.call(Request(topics=[Request.TopicRequest(name="zz")]))
    assert missing.topics[0].error_code == errors.UnknownTopicOrPartitionError.errno


async def test_describe_producers(served: Served) -> None:
    from sdk.protocol.messages.describe_producers import DescribeProducersRequest
    from sdk.protocol.messages.init_producer_id import InitProducerIdRequest

    served.b.topics.create("t", 1)
    client = await served.client()
    pid = (await client.call(InitProducerIdRequest(transactional_id=None))).producer_id
    await produce(served, "t", make_batch([(b"k", b"v")] * 3, producer_id=pid,
                                          producer_epoch=0, base_sequence=0))
    response = await client.call(DescribeProducersRequest(topics=[
        DescribeProducersRequest.TopicRequest(name="t", partition_indexes=[0, 4])]))
    found, missing = response.topics[0].partitions
    assert [(p.producer_id, p.producer_epoch, p.last_sequence)
            for p in found.active_producers] == [(pid, 0, 2)]
    assert missing.error_code == errors.UnknownTopicOrPartitionError.errno
