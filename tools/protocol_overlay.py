"""Protocol versions Apache Kafka 4.3 serves beyond the schemas in ``../shared``.

``../shared/kafka-protocol/messages/`` stops at an older Kafka (Produce 0-11, EndTxn v5 still
unstable, the share-group APIs at an early-access v0, ...). This module is our own table of
what changed since, written in our terms: which message gains which versions, which field
appears (or stops) at which version, with what type, default and tag. ``apply`` edits the
parsed schemas before ``tools/generate_protocol.py`` reads them, so every later step (layout
grouping, code emission, ``--check``) is unchanged.

The facts come from Apache Kafka 4.3.1's own message definitions. ``python
tools/protocol_overlay.py --verify`` checks every version of every API, field by field,
against the wire layouts compiled into Kafka's client jar (it needs Java and the jars
``tools/apache_kafka.py fetch`` caches); field names are not compared, only layouts.

Table entries:

- ``Message(name, versions, stable=..., edits=...)`` for a message we already have:
  ``versions`` is the new valid range; ``stable=True`` drops the "top version is unstable"
  mark the old schema carried.
- ``until(path, versions)`` narrows an existing field's versions (a field retired at v13);
  ``nullable(path, versions)`` sets the versions in which it may be null.
- ``add(path, after, field)`` inserts a new field into the struct at ``path`` (dot-separated
  field names from the top, ``""`` for the message itself) after the field named ``after``
  (``None``: first).
- ``NewApi(...)`` is a whole API the old schemas lack.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from typing import Any

Spec = dict[str, Any]  # one field in the generator's parsed-schema form


def fld(name: str, type_: str, versions: str, *, nullable: str | None = None,
        default: object = None, tagged: str | None = None, tag: int | None = None,
        ignorable: bool = False, fields: tuple[Spec, ...] = ()) -> Spec:
    """A field in the form ``generate_protocol.parse_schema`` reads."""
    spec: Spec = {"name": name, "type": type_, "versions": versions}
    if nullable is not None:
        spec["nullableVersions"] = nullable
    if default is not None:
        spec["default"] = default
    if tagged is not None:
        spec["taggedVersions"] = tagged
        spec["tag"] = tag
    if ignorable:
        spec["ignorable"] = True
    if fields:
        spec["fields"] = [dict(f) for f in fields]
    return spec


@dataclass(frozen=True)
class Until:
    path: str
    versions: str


@dataclass(frozen=True)
class Nullable:
    path: str
    versions: str


@dataclass(frozen=True)
class Add:
    path: str
    after: str | None
    spec: Spec


def until(path: str, versions: str) -> Until:
    return Until(path, versions)


def add(path: str, after: str | None, spec: Spec) -> Add:
    return Add(path, after, spec)


def nullable(path: str, versions: str) -> Nullable:
    return Nullable(path, versions)


@dataclass(frozen=True)
class Message:
    name: str
    versions: str
    stable: bool = True
    edits: tuple[Until | Nullable | Add, ...] = ()


@dataclass(frozen=True)
class NewApi:
    name: str  # without the Request/Response suffix
    api_key: int
    versions: str
    flexible: str
    request: tuple[Spec, ...]
    response: tuple[Spec, ...]
    listeners: tuple[str, ...] = ("broker",)
    extra: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------- the table

_NODE_ID = fld("NodeId", "int32", "0+")

MESSAGES: tuple[Message, ...] = (
    # Produce v12: same layout; a transactional producer may rely on the broker adding the
    # partition to its transaction (KIP-890 part 2). v13 names topics by id only.
    Message("ProduceRequest", "0-13", edits=(
        until("TopicData.Name", "0-12"),
        add("TopicData", "Name", fld("TopicId", "uuid", "13+")),
    )),
    Message("ProduceResponse", "0-13", edits=(
        until("Responses.Name", "0-12"),
        add("Responses", "Name", fld("TopicId", "uuid", "13+")),
    )),
    # Fetch v18: a follower may report its high watermark (tagged, KIP-1166).
    Message("FetchRequest", "0-18", edits=(
        add("Topics.Partitions", "ReplicaDirectoryId",
            fld("HighWatermark", "int64", "18+", default="9223372036854775807",
                tagged="18+", tag=1, ignorable=True)),
    )),
    Message("FetchResponse", "0-18"),
    # ListOffsets v11: same layout (earliest pending upload offset, KIP-1023).
    Message("ListOffsetsRequest", "0-11"),
    Message("ListOffsetsResponse", "0-11"),
    # Metadata v13: a top-level error code (e.g. REBOOTSTRAP_REQUIRED, KIP-1102).
    Message("MetadataRequest", "0-13"),
    Message("MetadataResponse", "0-13", edits=(
        add("", "ClusterAuthorizedOperations", fld("ErrorCode", "int16", "13+", default=0,
                                                   ignorable=True)),
    )),
    # OffsetCommit / OffsetFetch v10: topics by id (KIP-848 follow-up).
    Message("OffsetCommitRequest", "0-10", edits=(
        until("Topics.Name", "0-9"),
        add("Topics", "Name", fld("TopicId", "uuid", "10+")),
    )),
    Message("OffsetCommitResponse", "0-10", edits=(
        until("Topics.Name", "0-9"),
        add("Topics", "Name", fld("TopicId", "uuid", "10+")),
    )),
    Message("OffsetFetchRequest", "0-10", edits=(
        until("Groups.Topics.Name", "8-9"),
        add("Groups.Topics", "Name", fld("TopicId", "uuid", "10+")),
    )),
    Message("OffsetFetchResponse", "0-10", edits=(
        until("Groups.Topics.Name", "8-9"),
        add("Groups.Topics", "Name", fld("TopicId", "uuid", "10+")),
    )),
    # DescribeGroups v6: a per-group error message.
    Message("DescribeGroupsRequest", "0-6"),
    Message("DescribeGroupsResponse", "0-6", edits=(
        add("Groups", "ErrorCode", fld("ErrorMessage", "string", "6+", nullable="6+",
                                       default="null", ignorable=True)),
    )),
    # EndTxn v5 is stable in 4.x: its response carries the producer id and epoch to use for
    # the next transaction (transactions v2 bump the epoch at every commit or abort).
    Message("EndTxnRequest", "0-5"),
    Message("EndTxnResponse", "0-5"),
    # InitProducerId v6 (two-phase commit, KIP-939): still unstable in Kafka 4.3.
    Message("InitProducerIdRequest", "0-6", stable=False, edits=(
        add("", "ProducerEpoch", fld("Enable2Pc", "bool", "6+", default="false",
                                     ignorable=True)),
        add("", "Enable2Pc", fld("KeepPreparedTxn", "bool", "6+", default="false",
                                 ignorable=True)),
    )),
    Message("InitProducerIdResponse", "0-6", stable=False, edits=(
        add("", "ProducerEpoch", fld("OngoingTxnProducerId", "int64", "6+", default=-1,
                                     ignorable=True)),
        add("", "OngoingTxnProducerId", fld("OngoingTxnProducerEpoch", "int16", "6+",
                                            default=-1, ignorable=True)),
    )),
    # WriteTxnMarkers v2: each marker says which transaction version wrote it.
    Message("WriteTxnMarkersRequest", "0-2", edits=(
        add("Markers", "CoordinatorEpoch", fld("TransactionVersion", "int8", "2+", default=0,
                                               ignorable=True)),
    )),
    Message("WriteTxnMarkersResponse", "0-2"),
    # TxnOffsetCommit v5: same layout; the group is added to the transaction implicitly.
    Message("TxnOffsetCommitRequest", "0-5"),
    Message("TxnOffsetCommitResponse", "0-5"),
    # DescribeLogDirs v5: whether a log dir is cordoned.
    Message("DescribeLogDirsRequest", "0-5"),
    Message("DescribeLogDirsResponse", "0-5", edits=(
        add("Results", "UsableBytes", fld("IsCordoned", "bool", "5+", default="false",
                                          ignorable=True)),
    )),
    # AlterPartitionReassignments v1: may refuse a change of replication factor.
    Message("AlterPartitionReassignmentsRequest", "0-1", edits=(
        add("", "TimeoutMs", fld("AllowReplicationFactorChange", "bool", "1+",
                                 default="true", ignorable=True)),
    )),
    Message("AlterPartitionReassignmentsResponse", "0-1", edits=(
        add("", "ThrottleTimeMs", fld("AllowReplicationFactorChange", "bool", "1+",
                                      default="true", ignorable=True)),
    )),
    # DescribeCluster v2: fenced brokers on request.
    Message("DescribeClusterRequest", "0-2", edits=(
        add("", "EndpointType", fld("IncludeFencedBrokers", "bool", "2+", default="false",
                                    ignorable=True)),
    )),
    Message("DescribeClusterResponse", "0-2", edits=(
        add("Brokers", "Rack", fld("IsFenced", "bool", "2+", default="false",
                                   ignorable=True)),
    )),
    # ListTransactions v2: a regular-expression filter on transactional ids.
    Message("ListTransactionsRequest", "0-2", edits=(
        add("", "DurationFilter", fld("TransactionalIdPattern", "string", "2+",
                                      nullable="2+", default="null", ignorable=True)),
    )),
    Message("ListTransactionsResponse", "0-2"),
    # KIP-848: ConsumerGroupHeartbeat v1 (regex subscriptions) is stable; ConsumerGroupDescribe
    # v1 tells classic members from consumer-protocol ones.
    Message("ConsumerGroupHeartbeatRequest", "0-1"),
    Message("ConsumerGroupHeartbeatResponse", "0-1"),
    Message("ConsumerGroupDescribeRequest", "0-1"),
    Message("ConsumerGroupDescribeResponse", "0-1", edits=(
        add("Groups.Members", "TargetAssignment", fld("MemberType", "int8", "1+", default=-1,
                                                      ignorable=True)),
    )),
    # API key 74 (ListConfigResources in 4.x; the name here stays ours): v1 filters by type.
    Message("ListClientMetricsResourcesRequest", "0-1", edits=(
        add("", None, fld("ResourceTypes", "[]int8", "1+", ignorable=True)),
    )),
    Message("ListClientMetricsResourcesResponse", "0-1", edits=(
        add("ClientMetricsResources", "Name", fld("ResourceType", "int8", "1+", default=16,
                                                  ignorable=True)),
    )),
    # Controller APIs. Vote v2: pre-votes (KIP-996); BrokerHeartbeat v2: cordoned log
    # directories (tagged).
    Message("VoteRequest", "0-2", edits=(
        add("Topics.Partitions", "LastOffset", fld("PreVote", "bool", "2+", default="false")),
    )),
    Message("VoteResponse", "0-2"),
    Message("BrokerHeartbeatRequest", "0-2", edits=(
        add("", "OfflineLogDirs", fld("CordonedLogDirs", "[]uuid", "2+", nullable="2+",
                                      default="null", tagged="2+", tag=1, ignorable=True)),
    )),
    Message("BrokerHeartbeatResponse", "0-2"),
    # AddRaftVoter v1: answer once the new voter set is committed, or at once.
    Message("AddRaftVoterRequest", "0-1", edits=(
        add("", "Listeners", fld("AckWhenCommitted", "bool", "1+", default="true",
                                 ignorable=True)),
    )),
    Message("AddRaftVoterResponse", "0-1"),
)

# Share groups (KIP-932) went from early access (v0, unstable) to v1 in Kafka 4.1; our v0
# layouts stay as they were, v1 is what 4.x brokers serve.
SHARE_MESSAGES: tuple[Message, ...] = (
    Message("ShareGroupHeartbeatRequest", "0-1"),
    Message("ShareGroupHeartbeatResponse", "0-1"),
    Message("ShareGroupDescribeRequest", "0-1"),
    Message("ShareGroupDescribeResponse", "0-1"),
    # ShareFetch v1: a record limit and batch size per request instead of per-partition byte
    # limits, and the acquisition lock timeout in the response; v2: acquire mode and
    # renew acknowledgements (KIP-1206 / KIP-1222).
    Message("ShareFetchRequest", "0-2", edits=(
        add("", "MaxBytes", fld("MaxRecords", "int32", "1+")),
        add("", "MaxRecords", fld("BatchSize", "int32", "1+")),
        add("", "BatchSize", fld("ShareAcquireMode", "int8", "2+", default=0, ignorable=True)),
        add("", "ShareAcquireMode", fld("IsRenewAck", "bool", "2+", default="false",
                                        ignorable=True)),
        until("Topics.Partitions.PartitionMaxBytes", "0"),
    )),
    Message("ShareFetchResponse", "0-2", edits=(
        add("", "ErrorMessage", fld("AcquisitionLockTimeoutMs", "int32", "1+", default=0,
                                    ignorable=True)),
        nullable("Responses.Partitions.Records", "0"),  # never null from v1
    )),
    Message("ShareAcknowledgeRequest", "0-2", edits=(
        add("", "ShareSessionEpoch", fld("IsRenewAck", "bool", "2+", default="false",
                                         ignorable=True)),
    )),
    Message("ShareAcknowledgeResponse", "0-2", edits=(
        add("", "ErrorMessage", fld("AcquisitionLockTimeoutMs", "int32", "2+", default=0,
                                    ignorable=True)),
    )),
    # Share-group state (broker to share coordinator): stable; v1 counts completed deliveries.
    Message("InitializeShareGroupStateRequest", "0"),
    Message("InitializeShareGroupStateResponse", "0"),
    Message("ReadShareGroupStateRequest", "0"),
    Message("ReadShareGroupStateResponse", "0"),
    Message("DeleteShareGroupStateRequest", "0"),
    Message("DeleteShareGroupStateResponse", "0"),
    Message("WriteShareGroupStateRequest", "0-1", edits=(
        add("Topics.Partitions", "StartOffset", fld("DeliveryCompleteCount", "int32", "1+",
                                                    default=-1, ignorable=True)),
    )),
    Message("WriteShareGroupStateResponse", "0-1"),
    Message("ReadShareGroupStateSummaryRequest", "0-1"),
    Message("ReadShareGroupStateSummaryResponse", "0-1", edits=(
        # v0 was still changing when the old schemas were taken; 4.x's v0 has the epoch.
        add("Results.Partitions", "StateEpoch", fld("LeaderEpoch", "int32", "0+")),
        add("Results.Partitions", "StartOffset", fld("DeliveryCompleteCount", "int32", "1+",
                                                     default=-1, ignorable=True)),
    )),
)



def _message_field(name: str = "ErrorMessage") -> Spec:
    """A nullable string that defaults to null (the error messages)."""
    return fld(name, "string", "0+", nullable="0+", default="null", ignorable=True)


def _task_ids(name: str, versions: str = "0+", **extra: Any) -> Spec:
    return fld(name, "[]TaskIds", versions, **extra, fields=(
        fld("SubtopologyId", "string", "0+"), fld("Partitions", "[]int32", "0+")))


def _key_values(name: str, **extra: Any) -> Spec:
    return fld(name, "[]KeyValue", "0+", **extra, fields=(
        fld("Key", "string", "0+"), fld("Value", "string", "0+")))


def _topic_infos(name: str) -> Spec:
    return fld(name, "[]TopicInfo", "0+", fields=(
        fld("Name", "string", "0+"), fld("Partitions", "int32", "0+"),
        fld("ReplicationFactor", "int16", "0+"), _key_values("TopicConfigs")))


def _task_offsets(name: str, **extra: Any) -> Spec:
    return fld(name, "[]TaskOffset", "0+", **extra, fields=(
        fld("SubtopologyId", "string", "0+"), fld("Partition", "int32", "0+"),
        fld("Offset", "int64", "0+")))


def _endpoint(name: str, **extra: Any) -> Spec:
    return fld(name, "Endpoint", "0+", **extra, fields=(
        fld("Host", "string", "0+"), fld("Port", "uint16", "0+")))


_NULL = {"nullable": "0+", "default": "null"}

# KIP-1071 (Kafka Streams groups), v0 as Kafka 4.3 serves it. A struct type used twice is
# defined once (as Kafka's common structs); the generator resolves the others by name.
_STREAMS_APIS: tuple[NewApi, ...] = (
    NewApi("StreamsGroupHeartbeat", 88, "0", "0+", request=(
        fld("GroupId", "string", "0+"),
        fld("MemberId", "string", "0+"),
        fld("MemberEpoch", "int32", "0+"),
        fld("EndpointInformationEpoch", "int32", "0+"),
        fld("InstanceId", "string", "0+", **_NULL),
        fld("RackId", "string", "0+", **_NULL),
        fld("RebalanceTimeoutMs", "int32", "0+", default=-1),
        fld("Topology", "Topology", "0+", **_NULL, fields=(
            fld("Epoch", "int32", "0+"),
            fld("Subtopologies", "[]Subtopology", "0+", fields=(
                fld("SubtopologyId", "string", "0+"),
                fld("SourceTopics", "[]string", "0+"),
                fld("SourceTopicRegex", "[]string", "0+"),
                _topic_infos("StateChangelogTopics"),
                fld("RepartitionSinkTopics", "[]string", "0+"),
                fld("RepartitionSourceTopics", "[]TopicInfo", "0+"),
                fld("CopartitionGroups", "[]CopartitionGroup", "0+", fields=(
                    fld("SourceTopics", "[]int16", "0+"),
                    fld("SourceTopicRegex", "[]int16", "0+"),
                    fld("RepartitionSourceTopics", "[]int16", "0+"))),
            )),
        )),
        _task_ids("ActiveTasks", **_NULL),
        fld("StandbyTasks", "[]TaskIds", "0+", **_NULL),
        fld("WarmupTasks", "[]TaskIds", "0+", **_NULL),
        fld("ProcessId", "string", "0+", **_NULL),
        _endpoint("UserEndpoint", **_NULL),
        _key_values("ClientTags", **_NULL),
        _task_offsets("TaskOffsets", **_NULL),
        fld("TaskEndOffsets", "[]TaskOffset", "0+", **_NULL),
        fld("ShutdownApplication", "bool", "0+", default="false"),
    ), response=(
        fld("ThrottleTimeMs", "int32", "0+"),
        fld("ErrorCode", "int16", "0+"),
        _message_field(),
        fld("MemberId", "string", "0+"),
        fld("MemberEpoch", "int32", "0+"),
        fld("HeartbeatIntervalMs", "int32", "0+"),
        fld("AcceptableRecoveryLag", "int32", "0+"),
        fld("TaskOffsetIntervalMs", "int32", "0+"),
        fld("Status", "[]Status", "0+", nullable="0+", fields=(
            fld("StatusCode", "int8", "0+"), fld("StatusDetail", "string", "0+"))),
        _task_ids("ActiveTasks", **_NULL),
        fld("StandbyTasks", "[]TaskIds", "0+", **_NULL),
        fld("WarmupTasks", "[]TaskIds", "0+", **_NULL),
        fld("EndpointInformationEpoch", "int32", "0+"),
        fld("PartitionsByUserEndpoint", "[]EndpointToPartitions", "0+", **_NULL, fields=(
            _endpoint("UserEndpoint"),
            fld("ActivePartitions", "[]TopicPartition", "0+", fields=(
                fld("Topic", "string", "0+"), fld("Partitions", "[]int32", "0+"))),
            fld("StandbyPartitions", "[]TopicPartition", "0+"),
        )),
    )),
    NewApi("StreamsGroupDescribe", 89, "0", "0+", request=(
        fld("GroupIds", "[]string", "0+"),
        fld("IncludeAuthorizedOperations", "bool", "0+", default="false"),
    ), response=(
        fld("ThrottleTimeMs", "int32", "0+"),
        fld("Groups", "[]DescribedGroup", "0+", fields=(
            fld("ErrorCode", "int16", "0+"),
            _message_field(),
            fld("GroupId", "string", "0+"),
            fld("GroupState", "string", "0+"),
            fld("GroupEpoch", "int32", "0+"),
            fld("AssignmentEpoch", "int32", "0+"),
            fld("Topology", "Topology", "0+", **_NULL, fields=(
                fld("Epoch", "int32", "0+"),
                fld("Subtopologies", "[]Subtopology", "0+", **_NULL, fields=(
                    fld("SubtopologyId", "string", "0+"),
                    fld("SourceTopics", "[]string", "0+"),
                    fld("RepartitionSinkTopics", "[]string", "0+"),
                    _topic_infos("StateChangelogTopics"),
                    fld("RepartitionSourceTopics", "[]TopicInfo", "0+"),
                )),
            )),
            fld("Members", "[]Member", "0+", fields=(
                fld("MemberId", "string", "0+"),
                fld("MemberEpoch", "int32", "0+"),
                fld("InstanceId", "string", "0+", **_NULL),
                fld("RackId", "string", "0+", **_NULL),
                fld("ClientId", "string", "0+"),
                fld("ClientHost", "string", "0+"),
                fld("TopologyEpoch", "int32", "0+"),
                fld("ProcessId", "string", "0+"),
                _endpoint("UserEndpoint", **_NULL),
                _key_values("ClientTags"),
                _task_offsets("TaskOffsets"),
                fld("TaskEndOffsets", "[]TaskOffset", "0+"),
                fld("Assignment", "Assignment", "0+", fields=(
                    _task_ids("ActiveTasks"), fld("StandbyTasks", "[]TaskIds", "0+"),
                    fld("WarmupTasks", "[]TaskIds", "0+"))),
                fld("TargetAssignment", "Assignment", "0+"),
                fld("IsClassic", "bool", "0+", default="false"),
            )),
            fld("AuthorizedOperations", "int32", "0+", default=-2147483648),
        )),
    )),
)

_SHARE_ADMIN_APIS: tuple[NewApi, ...] = (
    # KIP-932 admin: share-group start offsets, by group and topic name.
    NewApi("DescribeShareGroupOffsets", 90, "0-1", "0+", request=(
        fld("Groups", "[]DescribeShareGroupOffsetsRequestGroup", "0+", fields=(
            fld("GroupId", "string", "0+"),
            fld("Topics", "[]DescribeShareGroupOffsetsRequestTopic", "0+", nullable="0+",
                fields=(fld("TopicName", "string", "0+"),
                        fld("Partitions", "[]int32", "0+"))),
        )),
    ), response=(
        fld("ThrottleTimeMs", "int32", "0+"),
        fld("Groups", "[]DescribeShareGroupOffsetsResponseGroup", "0+", fields=(
            fld("GroupId", "string", "0+"),
            fld("Topics", "[]DescribeShareGroupOffsetsResponseTopic", "0+", fields=(
                fld("TopicName", "string", "0+"),
                fld("TopicId", "uuid", "0+"),
                fld("Partitions", "[]DescribeShareGroupOffsetsResponsePartition", "0+", fields=(
                    fld("PartitionIndex", "int32", "0+"),
                    fld("StartOffset", "int64", "0+"),
                    fld("LeaderEpoch", "int32", "0+"),
                    fld("Lag", "int64", "1+", default=-1, ignorable=True),
                    fld("ErrorCode", "int16", "0+"),
                    _message_field(),
                )),
            )),
            fld("ErrorCode", "int16", "0+"),
            _message_field(),
        )),
    )),
    NewApi("AlterShareGroupOffsets", 91, "0", "0+", request=(
        fld("GroupId", "string", "0+"),
        fld("Topics", "[]AlterShareGroupOffsetsRequestTopic", "0+", fields=(
            fld("TopicName", "string", "0+"),
            fld("Partitions", "[]AlterShareGroupOffsetsRequestPartition", "0+", fields=(
                fld("PartitionIndex", "int32", "0+"),
                fld("StartOffset", "int64", "0+"),
            )),
        )),
    ), response=(
        fld("ThrottleTimeMs", "int32", "0+"),
        fld("ErrorCode", "int16", "0+"),
        _message_field(),
        fld("Responses", "[]AlterShareGroupOffsetsResponseTopic", "0+", fields=(
            fld("TopicName", "string", "0+"),
            fld("TopicId", "uuid", "0+"),
            fld("Partitions", "[]AlterShareGroupOffsetsResponsePartition", "0+", fields=(
                fld("PartitionIndex", "int32", "0+"),
                fld("ErrorCode", "int16", "0+"),
                _message_field(),
            )),
        )),
    )),
    NewApi("DeleteShareGroupOffsets", 92, "0", "0+", request=(
        fld("GroupId", "string", "0+"),
        fld("Topics", "[]DeleteShareGroupOffsetsRequestTopic", "0+", fields=(
            fld("TopicName", "string", "0+"),
        )),
    ), response=(
        fld("ThrottleTimeMs", "int32", "0+"),
        fld("ErrorCode", "int16", "0+"),
        _message_field(),
        fld("Responses", "[]DeleteShareGroupOffsetsResponseTopic", "0+", fields=(
            fld("TopicName", "string", "0+"),
            fld("TopicId", "uuid", "0+"),
            fld("ErrorCode", "int16", "0+"),
            _message_field(),
        )),
    )),
)


NEW_APIS = (*_STREAMS_APIS, *_SHARE_ADMIN_APIS)

# ----------------------------------------------------------------------------- applying


def _struct_fields(raw: Spec, path: str, message: str) -> list[Spec]:
    fields: list[Spec] = raw["fields"]
    for part in filter(None, path.split(".")):
        match = [f for f in fields if f["name"] == part]
        if not match or "fields" not in match[0]:
            raise KeyError(f"overlay: {message} has no struct field {path!r}")
        fields = match[0]["fields"]
    return fields


def _apply_message(raw: Spec, msg: Message) -> None:
    raw["validVersions"] = msg.versions
    if msg.stable:
        raw.pop("latestVersionUnstable", None)
    else:
        raw["latestVersionUnstable"] = True
    for edit in msg.edits:
        if isinstance(edit, Until | Nullable):
            parent, _, name = edit.path.rpartition(".")
            fields = _struct_fields(raw, parent, msg.name)
            target = [f for f in fields if f["name"] == name]
            if not target:
                raise KeyError(f"overlay: {msg.name} has no field {edit.path!r}")
            key = "versions" if isinstance(edit, Until) else "nullableVersions"
            target[0][key] = edit.versions
            continue
        fields = _struct_fields(raw, edit.path, msg.name)
        if any(f["name"] == edit.spec["name"] for f in fields):
            raise KeyError(f"overlay: {msg.name}.{edit.path} already has {edit.spec['name']}")
        at = 0
        if edit.after is not None:
            names = [f["name"] for f in fields]
            if edit.after not in names:
                raise KeyError(f"overlay: {msg.name}.{edit.path} has no field {edit.after!r}")
            at = names.index(edit.after) + 1
        fields.insert(at, dict(edit.spec))


def apply(raws: dict[str, Spec]) -> None:
    """Bring the parsed schemas (file stem -> JSON object) up to Kafka 4.3's versions."""
    for msg in MESSAGES + SHARE_MESSAGES:
        if msg.name not in raws:
            raise KeyError(f"overlay: no schema {msg.name} to extend")
        _apply_message(raws[msg.name], msg)
    for api in NEW_APIS:
        for kind, fields in (("request", api.request), ("response", api.response)):
            name = f"{api.name}{kind.capitalize()}"
            if name in raws:
                raise KeyError(f"overlay: {name} exists already; move it to MESSAGES")
            raws[name] = {"apiKey": api.api_key, "type": kind, "name": name,
                          "validVersions": api.versions, "flexibleVersions": api.flexible,
                          "fields": [dict(f) for f in fields]}
            if kind == "request":
                raws[name]["listeners"] = list(api.listeners)


# ----------------------------------------------------------------------------- verifying

# Prints every API's wire layout per version as Kafka's client jar compiles it: one line
# "<key> <REQ|RSP> <version> <layout>" (plus "<key> RANGE <lo> <hi> <stable> <listeners>").
_LAYOUT_DUMPER = r"""
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.common.message.ApiMessageType;
import org.apache.kafka.common.protocol.types.*;

public class LayoutDump {
    static String type(Type t) throws Exception {
        if (t instanceof Schema) return (t.isNullable() ? "N" : "") + struct((Schema) t);
        if (t instanceof TaggedFields) {
            java.lang.reflect.Field f = TaggedFields.class.getDeclaredField("fields");
            f.setAccessible(true);
            StringBuilder b = new StringBuilder("TAGS<");
            for (Map.Entry<?, ?> e : new TreeMap<>((Map<?, ?>) f.get(t)).entrySet())
                b.append(e.getKey()).append('=').append(type(((Field) e.getValue()).type))
                 .append(';');
            return b.append('>').toString();
        }
        if (t.isArray()) {
            String kind = t.getClass().getSimpleName().startsWith("Compact") ? "CARRAY" : "ARRAY";
            return (t.isNullable() ? "N" : "") + kind + "[" + type(t.arrayElementType().get()) + "]";
        }
        return t.toString();
    }
    static String struct(Schema s) throws Exception {
        StringBuilder b = new StringBuilder("{");
        for (BoundField f : s.fields()) b.append(type(f.def.type)).append(',');
        return b.append('}').toString();
    }
    public static void main(String[] args) throws Exception {
        for (ApiMessageType m : ApiMessageType.values()) {
            short hi = m.highestSupportedVersion(true);
            if (hi < 0) continue;
            System.out.println(m.apiKey() + " RANGE " + m.lowestSupportedVersion() + " " + hi + " "
                + m.highestSupportedVersion(false) + " " + m.listeners());
            for (short v = m.lowestSupportedVersion(); v <= hi; v++) {
                System.out.println(m.apiKey() + " REQ " + v + " " + struct(m.requestSchemas()[v]));
                System.out.println(m.apiKey() + " RSP " + v + " " + struct(m.responseSchemas()[v]));
            }
        }
    }
}
"""

_JAVA_TYPES = {"int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64",
               "uint16": "UINT16", "uint32": "UNSIGNED_INT32", "float64": "FLOAT64",
               "bool": "BOOLEAN", "uuid": "UUID", "string": "STRING", "bytes": "BYTES",
               "records": "RECORDS"}


def _layout(gen: Any, struct: Any, schema: Any, version: int) -> str:
    """Our wire layout of ``struct`` at ``version``, written as the dumper writes Kafka's."""
    flexible = version in schema.flexible
    out, tags = [], []
    for f in struct.fields:
        if version not in f.versions:
            continue
        flex = flexible if f.flexible_override is None else version in f.flexible_override
        nullable = version in f.nullable
        if f.is_array:
            elem = (_layout(gen, f.struct, schema, version) if f.struct is not None
                    else _scalar(f.type, False, flex))
            text = ("N" if nullable else "") + ("CARRAY" if flex else "ARRAY") + f"[{elem}]"
        elif f.struct is not None:
            text = ("N" if nullable else "") + _layout(gen, f.struct, schema, version)
        else:
            text = _scalar(f.type, nullable, flex)
        if flexible and version in f.tagged:
            tags.append((f.tag, f"{f.tag}={text};"))
        else:
            out.append(text + ",")
    if flexible:
        out.append("TAGS<" + "".join(t for _, t in sorted(tags)) + ">,")
    return "{" + "".join(out) + "}"


def _scalar(t: str, nullable: bool, flex: bool) -> str:
    base = _JAVA_TYPES[t]
    if t in ("string", "bytes", "records"):
        return ("COMPACT_" if flex else "") + ("NULLABLE_" if nullable else "") + base
    return base


def verify(version: str | None = None) -> int:
    """Compare every version our generator knows with the layouts compiled into Apache
    Kafka's client jar (needs Java and ``tools/apache_kafka.py fetch``). Prints the APIs the
    brokers serve beyond ours and every layout that differs; 0 when there is neither."""
    import subprocess
    import tempfile
    from pathlib import Path

    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here))
    sys.path.insert(0, str(here.parent))
    import generate_protocol as gen  # type: ignore[import-not-found]
    from apache_kafka import DEFAULT_VERSION, classpath  # type: ignore[import-not-found]

    cp = classpath(version or DEFAULT_VERSION)
    with tempfile.TemporaryDirectory(prefix="layout-dump-") as tmp:
        (Path(tmp) / "LayoutDump.java").write_text(_LAYOUT_DUMPER)
        subprocess.run(["javac", "-cp", cp, "-d", tmp, str(Path(tmp) / "LayoutDump.java")],
                       check=True)
        dump = subprocess.run(["java", "-cp", f"{cp}:{tmp}", "LayoutDump"], check=True,
                              capture_output=True, text=True).stdout
    kafka: dict[int, dict[Any, Any]] = {}
    for line in dump.splitlines():
        api, kind, rest = line.split(" ", 2)
        entry = kafka.setdefault(int(api), {})
        if kind == "RANGE":
            low, high, top, where = rest.split(" ", 3)
            entry["range"] = (int(low), int(high), int(top), where)
        else:
            number, layout = rest.split(" ", 1)
            entry[(kind, int(number))] = layout
    raws = {p.stem: gen.load_json(p) for p in sorted(gen.DEFAULT_SCHEMAS.glob("*.json"))}
    apply(raws)
    ours = {raw["apiKey"]: stem[: -len("Request")] for stem, raw in raws.items()
            if raw.get("type") == "request"}
    problems = 0
    for key, entry in sorted(kafka.items()):
        lo, hi, stable, listeners = entry["range"]
        if key not in ours:
            print(f"API {key}: Kafka serves v{lo}-{hi} {listeners}; we have none")
            problems += "BROKER" in listeners
            continue
        req = gen.parse_schema(raws[ours[key] + "Request"])
        resp = gen.parse_schema(raws[ours[key] + "Response"])
        our_stable = req.versions.hi - (1 if req.unstable_top else 0)
        if req.versions.hi < hi or our_stable < stable:
            print(f"{ours[key]}: ours v{req.versions.lo}-{req.versions.hi} (stable "
                  f"{our_stable}), Kafka v{lo}-{hi} (stable {stable}) {listeners}")
            problems += "BROKER" in listeners
        for v in range(lo, min(hi, req.versions.hi) + 1):
            for kind, schema in (("REQ", req), ("RSP", resp)):
                mine = _layout(gen, schema.root, schema, v)
                if mine != entry[(kind, v)]:
                    print(f"{ours[key]} {kind} v{v} differs:\n  ours  {mine}\n"
                          f"  kafka {entry[(kind, v)]}")
                    problems += 1
    print(f"{problems} difference(s) for the APIs brokers serve")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="print what the overlay adds")
    ap.add_argument("--verify", action="store_true",
                    help="compare every layout with Apache Kafka's client jar (needs Java)")
    args = ap.parse_args(argv)
    if args.verify:
        return verify()
    if args.list:
        for msg in MESSAGES + SHARE_MESSAGES:
            if msg.name.endswith("Request"):
                print(f"{msg.name[:-len('Request')]}: versions {msg.versions}")
        for api in NEW_APIS:
            print(f"{api.name} (new, key {api.api_key}): versions {api.versions}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
