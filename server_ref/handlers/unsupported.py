"""Error responses for any API: what the broker sends for a request it will not serve.

``error_response`` builds the API's own response with an error code in every place the
client looks for one (each partition of each topic, each resource, or the top-level code),
the way Kafka's ``AbstractRequest.getErrorResponse`` does. The server uses it for APIs or
versions the broker does not implement (UNSUPPORTED_VERSION) and the control surface for
``fail_next``. APIs whose response has no place for an error cannot be answered this way;
``error_response`` raises ``LookupError`` for them and the server closes the connection, as
Kafka does for a request it cannot parse.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sdk.protocol.api import response_class
from sdk.protocol.message import Message

__all__ = ["error_response", "can_build_error_response"]

Builder = Callable[[Any, int, Any, int, "str | None"], Message]
_BUILDERS: dict[int, Builder] = {}


def _builder(api_key: int) -> Callable[[Builder], Builder]:
    def register(fn: Builder) -> Builder:
        _BUILDERS[api_key] = fn
        return fn

    return register


def can_build_error_response(api_key: int) -> bool:
    if api_key in _BUILDERS:
        return True
    try:
        cls = response_class(api_key)
    except Exception:
        return False
    return "error_code" in cls.field_names()


def error_response(api_key: int, version: int, request: Any, code: int,
                   message: str | None = None) -> Message:
    """The response to ``request`` with ``code`` everywhere an error can be reported."""
    cls = response_class(api_key)
    builder = _BUILDERS.get(api_key)
    if builder is not None:
        return builder(cls, version, request, code, message)
    fields = cls.field_names()
    if "error_code" not in fields:
        raise LookupError(f"API {api_key} has no error field to answer with")
    response = cls()
    response.error_code = code  # type: ignore[attr-defined]
    if message is not None and "error_message" in fields:
        response.error_message = message  # type: ignore[attr-defined]
    return response


def _topics_partitions(topics: Any, topic_cls: type, part_cls: type[Any], *, topic_name: str,
                       parts_field: str, index_of: Callable[[Any], int], code: int,
                       req_parts: str = "partitions", req_name: str = "name",
                       code_field: str = "error_code", extra: dict[str, Any] | None = None
                       ) -> list[Any]:
    """Mirror a request's topics/partitions into response structs carrying ``code``."""
    out = []
    for topic in topics or []:
        parts = []
        for p in getattr(topic, req_parts) or []:
            result = part_cls(**{"partition_index" if "partition_index" in
                                 part_cls.field_names() else "partition": index_of(p)})
            setattr(result, code_field, code)
            for key, value in (extra or {}).items():
                setattr(result, key, value)
            parts.append(result)
        item = topic_cls(**{topic_name: getattr(topic, req_name)})
        setattr(item, parts_field, parts)
        out.append(item)
    return out


def _per_partition(topic_struct: str, partition_struct: str, *, topic_name: str = "name",
                   req_name: str = "name",
                   index_of: Callable[[Any], int] = lambda p: p.partition_index,
                   extra: dict[str, Any] | None = None) -> Builder:
    """A builder for a response whose ``topics`` mirror the request's, with the error in
    each partition (the structs are named as the response class nests them)."""
    def build(cls: Any, version: int, req: Any, code: int, message: str | None) -> Message:
        return cls(topics=_topics_partitions(
            req.topics, getattr(cls, topic_struct), getattr(cls, partition_struct),
            topic_name=topic_name, req_name=req_name, parts_field="partitions",
            index_of=index_of, code=code, extra=extra))

    return build


def _per_resource(field: str, result_struct: str) -> Builder:
    """A builder for a response with one result per config resource of the request."""
    def build(cls: Any, version: int, req: Any, code: int, message: str | None) -> Message:
        result_cls = getattr(cls, result_struct)
        return cls(**{field: [
            result_cls(error_code=code, error_message=message, resource_type=r.resource_type,
                       resource_name=r.resource_name)
            for r in req.resources]})

    return build


@_builder(0)
def _produce(cls: Any, version: int, req: Any, code: int, message: str | None) -> Message:
    responses = []
    for topic in req.topic_data:
        parts = [cls.PartitionProduceResponse(index=p.index, error_code=code, base_offset=-1,
                                              error_message=message)
                 for p in topic.partition_data]
        responses.append(cls.TopicProduceResponse(name=topic.name, partition_responses=parts))
    return cls(responses=responses)


@_builder(1)
def _fetch(cls: Any, version: int, req: Any, code: int, message: str | None) -> Message:
    responses = []
    for topic in req.topics:
        parts = [cls.PartitionData(partition_index=p.partition, error_code=code,
                                   high_watermark=-1, records=b"")
                 for p in topic.partitions]
        responses.append(cls.FetchableTopicResponse(topic=topic.topic, topic_id=topic.topic_id,
                                                    partitions=parts))
    return cls(error_code=code, responses=responses)


@_builder(3)
def _metadata(cls: Any, version: int, req: Any, code: int, message: str | None) -> Message:
    topics = [cls.MetadataResponseTopic(error_code=code, name=t.name, topic_id=t.topic_id)
              for t in (req.topics or [])]
    return cls(topics=topics)


@_builder(9)
def _offset_fetch(cls: Any, version: int, req: Any, code: int, message: str | None) -> Message:
    groups = [cls.OffsetFetchResponseGroup(group_id=g.group_id, error_code=code)
              for g in req.groups]
    return cls(error_code=code, groups=groups)


@_builder(10)
def _find_coordinator(cls: Any, version: int, req: Any, code: int,
                      message: str | None) -> Message:
    coordinators = [cls.Coordinator(key=k, node_id=-1, error_code=code, error_message=message)
                    for k in req.coordinator_keys]
    return cls(error_code=code, error_message=message, node_id=-1, coordinators=coordinators)


@_builder(15)
def _describe_groups(cls: Any, version: int, req: Any, code: int,
                     message: str | None) -> Message:
    return cls(groups=[cls.DescribedGroup(error_code=code, group_id=g) for g in req.groups])


@_builder(19)
def _create_topics(cls: Any, version: int, req: Any, code: int, message: str | None) -> Message:
    return cls(topics=[cls.CreatableTopicResult(name=t.name, error_code=code,
                                                error_message=message)
                       for t in req.topics])


@_builder(20)
def _delete_topics(cls: Any, version: int, req: Any, code: int, message: str | None) -> Message:
    if version >= 6:
        results = [cls.DeletableTopicResult(name=t.name, topic_id=t.topic_id, error_code=code,
                                            error_message=message) for t in req.topics]
    else:
        results = [cls.DeletableTopicResult(name=n, error_code=code) for n in req.topic_names]
    return cls(responses=results)


@_builder(24)
def _add_partitions_to_txn(cls: Any, version: int, req: Any, code: int,
                           message: str | None) -> Message:
    def topic_results(topics: Any) -> list[Any]:
        return [cls.AddPartitionsToTxnTopicResult(
            name=t.name,
            results_by_partition=[cls.AddPartitionsToTxnPartitionResult(
                partition_index=p, partition_error_code=code) for p in t.partitions])
            for t in topics]

    if version <= 3:
        return cls(results_by_topic_v3_and_below=topic_results(req.v3_and_below_topics))
    return cls(error_code=code, results_by_transaction=[
        cls.AddPartitionsToTxnResult(transactional_id=t.transactional_id,
                                     topic_results=topic_results(t.topics))
        for t in req.transactions])


@_builder(27)
def _write_txn_markers(cls: Any, version: int, req: Any, code: int,
                       message: str | None) -> Message:
    return cls(markers=[cls.WritableTxnMarkerResult(
        producer_id=m.producer_id,
        topics=_topics_partitions(m.topics, cls.WritableTxnMarkerTopicResult,
                                  cls.WritableTxnMarkerPartitionResult, topic_name="name",
                                  parts_field="partitions", req_parts="partition_indexes",
                                  index_of=lambda p: p, code=code))
        for m in req.markers])


@_builder(30)
def _create_acls(cls: Any, version: int, req: Any, code: int, message: str | None) -> Message:
    return cls(results=[cls.AclCreationResult(error_code=code, error_message=message)
                        for _ in req.creations])


@_builder(31)
def _delete_acls(cls: Any, version: int, req: Any, code: int, message: str | None) -> Message:
    return cls(filter_results=[cls.DeleteAclsFilterResult(error_code=code,
                                                          error_message=message)
                               for _ in req.filters])


@_builder(37)
def _create_partitions(cls: Any, version: int, req: Any, code: int,
                       message: str | None) -> Message:
    return cls(results=[cls.CreatePartitionsTopicResult(name=t.name, error_code=code,
                                                        error_message=message)
                        for t in req.topics])


@_builder(42)
def _delete_groups(cls: Any, version: int, req: Any, code: int, message: str | None) -> Message:
    return cls(results=[cls.DeletableGroupResult(group_id=g, error_code=code)
                        for g in req.groups_names])


@_builder(43)
def _elect_leaders(cls: Any, version: int, req: Any, code: int, message: str | None) -> Message:
    return cls(error_code=code, replica_election_results=[cls.ReplicaElectionResult(
        topic=t.topic, partition_result=[cls.PartitionResult(partition_id=p, error_code=code,
                                                             error_message=message)
                                         for p in t.partitions])
        for t in req.topic_partitions or ()])


@_builder(45)
def _alter_partition_reassignments(cls: Any, version: int, req: Any, code: int,
                                   message: str | None) -> Message:
    return cls(error_code=code, error_message=message, responses=[
        cls.ReassignableTopicResponse(name=t.name, partitions=[
            cls.ReassignablePartitionResponse(partition_index=p.partition_index,
                                              error_code=code, error_message=message)
            for p in t.partitions])
        for t in req.topics])


@_builder(47)
def _offset_delete(cls: Any, version: int, req: Any, code: int, message: str | None) -> Message:
    return cls(error_code=code)


@_builder(65)
def _describe_transactions(cls: Any, version: int, req: Any, code: int,
                           message: str | None) -> Message:
    return cls(transaction_states=[cls.TransactionState(error_code=code, transactional_id=t)
                                   for t in req.transactional_ids])


@_builder(34)
def _alter_replica_log_dirs(cls: Any, version: int, req: Any, code: int,
                            message: str | None) -> Message:
    results = []
    for directory in req.dirs:
        for topic in directory.topics:
            results.append(cls.AlterReplicaLogDirTopicResult(
                topic_name=topic.name,
                partitions=[cls.AlterReplicaLogDirPartitionResult(partition_index=p,
                                                                  error_code=code)
                            for p in topic.partitions]))
    return cls(results=results)


@_builder(49)
def _alter_client_quotas(cls: Any, version: int, req: Any, code: int,
                         message: str | None) -> Message:
    return cls(entries=[cls.EntryData(
        error_code=code, error_message=message,
        entity=[cls.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                for e in entry.entity]) for entry in req.entries])


@_builder(51)
def _alter_user_scram_credentials(cls: Any, version: int, req: Any, code: int,
                                  message: str | None) -> Message:
    users = [d.name for d in req.deletions] + [u.name for u in req.upsertions]
    return cls(results=[cls.AlterUserScramCredentialsResult(user=u, error_code=code,
                                                            error_message=message)
                        for u in dict.fromkeys(users)])


def _described_groups(cls: Any, version: int, req: Any, code: int,
                      message: str | None) -> Message:
    return cls(groups=[cls.DescribedGroup(error_code=code, error_message=message, group_id=g)
                       for g in req.group_ids])


_BUILDERS[69] = _described_groups  # ConsumerGroupDescribe (KIP-848)
_BUILDERS[77] = _described_groups  # ShareGroupDescribe (KIP-932)
_BUILDERS[89] = _described_groups  # StreamsGroupDescribe (KIP-1071)


def _share_group_offsets(cls: Any, version: int, req: Any, code: int,
                         message: str | None) -> Message:
    return cls(groups=[cls.DescribeShareGroupOffsetsResponseGroup(
        group_id=g.group_id, error_code=code, error_message=message) for g in req.groups])


_BUILDERS[90] = _share_group_offsets  # DescribeShareGroupOffsets: errors per group


# Responses that mirror the request's topics and partitions, one error per partition.
_BUILDERS[2] = _per_partition("ListOffsetsTopicResponse", "ListOffsetsPartitionResponse")
_BUILDERS[8] = _per_partition("OffsetCommitResponseTopic", "OffsetCommitResponsePartition")
_BUILDERS[21] = _per_partition("DeleteRecordsTopicResult", "DeleteRecordsPartitionResult",
                               extra={"low_watermark": -1})
_BUILDERS[23] = _per_partition("OffsetForLeaderTopicResult", "EpochEndOffset",
                               topic_name="topic", req_name="topic",
                               index_of=lambda p: p.partition)
_BUILDERS[28] = _per_partition("TxnOffsetCommitResponseTopic",
                               "TxnOffsetCommitResponsePartition")

# Responses with one result per config resource of the request.
_BUILDERS[32] = _per_resource("results", "DescribeConfigsResult")
_BUILDERS[33] = _per_resource("responses", "AlterConfigsResourceResponse")  # AlterConfigs
_BUILDERS[44] = _per_resource("responses", "AlterConfigsResourceResponse")  # Incremental
