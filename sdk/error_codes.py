"""Every Kafka protocol error code as data: number, Kafka's name, flags and a short description.

This table is the single source of facts for :mod:`sdk.errors`, which turns each row into an
exception class. Numbers, names and flags follow Apache Kafka's ``Errors`` enum (through the
codes added in Kafka 4.1); the descriptions are our own.

Flags: ``"R"`` retriable (a later attempt of the same request may succeed), ``"M"`` invalid
metadata (retriable *and* the client should refresh its cluster metadata before retrying),
``""`` neither. The retriable set follows the Java client's ``RetriableException`` tree.
"""

from __future__ import annotations

from typing import NamedTuple


class ErrorCode(NamedTuple):
    code: int
    name: str
    retriable: bool
    invalid_metadata: bool
    description: str


# (code, NAME, flags, description). Code 0 (NONE) is success and deliberately absent.
# fmt: off
_ROWS: tuple[tuple[int, str, str, str], ...] = (
    (-1, "UNKNOWN_SERVER_ERROR", "", "The broker failed with an unexpected error while handling the request."),
    (1, "OFFSET_OUT_OF_RANGE", "", "The requested offset lies outside the range the partition's log currently holds."),
    (2, "CORRUPT_MESSAGE", "R", "A record failed its CRC check, has an invalid size or is otherwise corrupt."),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", "M", "This broker does not host the topic or partition."),
    (4, "INVALID_FETCH_SIZE", "", "The requested fetch size is not valid."),
    (5, "LEADER_NOT_AVAILABLE", "M", "The partition has no leader right now, usually because an election is under way."),
    (6, "NOT_LEADER_OR_FOLLOWER", "M", "The broker is not the partition's leader (or not a replica of it), so the request went to the wrong broker."),
    (7, "REQUEST_TIMED_OUT", "R", "The broker did not complete the request within its timeout."),
    (8, "BROKER_NOT_AVAILABLE", "", "The broker is not available."),
    (9, "REPLICA_NOT_AVAILABLE", "M", "A replica of the partition is not available."),
    (10, "MESSAGE_TOO_LARGE", "", "A record or batch is larger than the broker or topic accepts."),
    (11, "STALE_CONTROLLER_EPOCH", "", "The request carried an old controller epoch: the controller has moved."),
    (12, "OFFSET_METADATA_TOO_LARGE", "", "The metadata string of an offset commit is longer than the broker allows."),
    (13, "NETWORK_EXCEPTION", "M", "The connection closed before a response arrived."),
    (14, "COORDINATOR_LOAD_IN_PROGRESS", "R", "The coordinator is still loading its state and cannot serve the request yet."),
    (15, "COORDINATOR_NOT_AVAILABLE", "R", "The group or transaction coordinator is not available."),
    (16, "NOT_COORDINATOR", "R", "This broker is not the coordinator for the group or transactional id."),
    (17, "INVALID_TOPIC_EXCEPTION", "", "The topic name is invalid, or the operation is not allowed on that topic."),
    (18, "RECORD_LIST_TOO_LARGE", "", "A record batch is larger than the topic's segment size."),
    (19, "NOT_ENOUGH_REPLICAS", "R", "Write rejected: fewer replicas are in sync than min.insync.replicas requires."),
    (20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "R", "The records were appended, but fewer in-sync replicas than required acknowledged them."),
    (21, "INVALID_REQUIRED_ACKS", "", "The produce request's acks value is not -1, 0 or 1."),
    (22, "ILLEGAL_GENERATION", "", "The group generation id in the request is not the current one."),
    (23, "INCONSISTENT_GROUP_PROTOCOL", "", "The member's protocol type or protocols do not match those of the group."),
    (24, "INVALID_GROUP_ID", "", "The group id is empty or otherwise invalid."),
    (25, "UNKNOWN_MEMBER_ID", "", "The coordinator does not know this member id."),
    (26, "INVALID_SESSION_TIMEOUT", "", "The session timeout is outside the range the broker allows (group.min/max.session.timeout.ms)."),
    (27, "REBALANCE_IN_PROGRESS", "", "The group is rebalancing, so the member has to rejoin."),
    (28, "INVALID_COMMIT_OFFSET_SIZE", "", "The offset commit is too large to store."),
    (29, "TOPIC_AUTHORIZATION_FAILED", "", "The principal is not authorized to access the topic."),
    (30, "GROUP_AUTHORIZATION_FAILED", "", "The principal is not authorized to access the group."),
    (31, "CLUSTER_AUTHORIZATION_FAILED", "", "The principal is not authorized for this cluster-level operation."),
    (32, "INVALID_TIMESTAMP", "", "A record's timestamp is outside the range the broker accepts."),
    (33, "UNSUPPORTED_SASL_MECHANISM", "", "The broker does not offer the requested SASL mechanism."),
    (34, "ILLEGAL_SASL_STATE", "", "The request is not allowed in the current state of the SASL exchange."),
    (35, "UNSUPPORTED_VERSION", "", "The broker does not support this version of the API."),
    (36, "TOPIC_ALREADY_EXISTS", "", "A topic with this name already exists."),
    (37, "INVALID_PARTITIONS", "", "The partition count is invalid (below 1, or not an increase)."),
    (38, "INVALID_REPLICATION_FACTOR", "", "The replication factor is below 1 or above the number of live brokers."),
    (39, "INVALID_REPLICA_ASSIGNMENT", "", "The manual replica assignment is invalid."),
    (40, "INVALID_CONFIG", "", "A configuration entry is invalid."),
    (41, "NOT_CONTROLLER", "R", "This broker is not the active controller."),
    (42, "INVALID_REQUEST", "", "The broker could not make sense of the request (malformed, or invalid for this broker); see its log."),
    (43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", "", "The topic's message format version is too old for this request."),
    (44, "POLICY_VIOLATION", "", "The request breaks a policy configured on the broker."),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", "", "The broker received an idempotent batch whose sequence number is not the next one expected."),
    (46, "DUPLICATE_SEQUENCE_NUMBER", "", "The broker already holds a batch with this sequence number."),
    (47, "INVALID_PRODUCER_EPOCH", "", "The producer used an epoch older than the one the broker knows."),
    (48, "INVALID_TXN_STATE", "", "The transactional operation is not valid in the transaction's current state."),
    (49, "INVALID_PRODUCER_ID_MAPPING", "", "The producer id is not the one currently assigned to this transactional id."),
    (50, "INVALID_TRANSACTION_TIMEOUT", "", "The transaction timeout exceeds the broker's transaction.max.timeout.ms."),
    (51, "CONCURRENT_TRANSACTIONS", "R", "Another operation on the same transaction (such as the previous commit) is still in progress."),
    (52, "TRANSACTION_COORDINATOR_FENCED", "", "The transaction coordinator that sent this request is no longer the current one."),
    (53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "", "The principal is not authorized for the transactional id."),
    (54, "SECURITY_DISABLED", "", "Security features are disabled on the broker."),
    (55, "OPERATION_NOT_ATTEMPTED", "", "The broker skipped this item because another item of the same request failed."),
    (56, "KAFKA_STORAGE_ERROR", "M", "The broker hit a disk error while accessing the partition's log."),
    (57, "LOG_DIR_NOT_FOUND", "", "The given log directory is not configured on the broker."),
    (58, "SASL_AUTHENTICATION_FAILED", "", "SASL authentication failed."),
    (59, "UNKNOWN_PRODUCER_ID", "", "The broker has no state for this producer id, for example because retention removed its records."),
    (60, "REASSIGNMENT_IN_PROGRESS", "", "A partition reassignment is already in progress."),
    (61, "DELEGATION_TOKEN_AUTH_DISABLED", "", "Delegation tokens are not enabled on the broker."),
    (62, "DELEGATION_TOKEN_NOT_FOUND", "", "The delegation token does not exist."),
    (63, "DELEGATION_TOKEN_OWNER_MISMATCH", "", "The principal is neither the owner nor a renewer of the delegation token."),
    (64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", "", "Delegation token requests are refused on plaintext, one-way TLS and token-authenticated connections."),
    (65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED", "", "The principal is not authorized for the delegation token operation."),
    (66, "DELEGATION_TOKEN_EXPIRED", "", "The delegation token has expired."),
    (67, "INVALID_PRINCIPAL_TYPE", "", "The principal type is not supported."),
    (68, "NON_EMPTY_GROUP", "", "The group still has members, so it cannot be deleted."),
    (69, "GROUP_ID_NOT_FOUND", "", "No group with this id exists."),
    (70, "FETCH_SESSION_ID_NOT_FOUND", "R", "The broker has no fetch session with this id."),
    (71, "INVALID_FETCH_SESSION_EPOCH", "R", "The fetch session epoch is not the one the broker expects."),
    (72, "LISTENER_NOT_FOUND", "M", "The leader has no listener matching the one the metadata request arrived on."),
    (73, "TOPIC_DELETION_DISABLED", "", "Topic deletion is disabled on the broker."),
    (74, "FENCED_LEADER_EPOCH", "M", "The request's leader epoch is older than the broker's."),
    (75, "UNKNOWN_LEADER_EPOCH", "R", "The request's leader epoch is newer than the broker's."),
    (76, "UNSUPPORTED_COMPRESSION_TYPE", "", "The compression codec is not supported by the client or for this request version."),
    (77, "STALE_BROKER_EPOCH", "", "The broker epoch in the request is out of date."),
    (78, "OFFSET_NOT_AVAILABLE", "R", "A new leader's high watermark has not caught up yet, so offsets cannot be served safely."),
    (79, "MEMBER_ID_REQUIRED", "", "The member must rejoin using the member id the coordinator just assigned."),
    (80, "PREFERRED_LEADER_NOT_AVAILABLE", "M", "The preferred leader is not available."),
    (81, "GROUP_MAX_SIZE_REACHED", "", "The group already has group.max.size members."),
    (82, "FENCED_INSTANCE_ID", "", "Another member registered with the same group.instance.id and fenced this one."),
    (83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", "M", "No replica eligible to become leader is available."),
    (84, "ELECTION_NOT_NEEDED", "M", "The partition already has the desired leader."),
    (85, "NO_REASSIGNMENT_IN_PROGRESS", "", "There is no partition reassignment in progress."),
    (86, "GROUP_SUBSCRIBED_TO_TOPIC", "", "The group is still subscribed to the topic, so its offsets for it cannot be deleted."),
    (87, "INVALID_RECORD", "", "The broker's validation rejected the record (for example a null key on a compacted topic)."),
    (88, "UNSTABLE_OFFSET_COMMIT", "R", "Pending transactional offset commits must complete before offsets can be read."),
    (89, "THROTTLING_QUOTA_EXCEEDED", "R", "The request exceeded a throttling quota, such as the topic mutation rate."),
    (90, "PRODUCER_FENCED", "", "A newer producer with the same transactional id has fenced this one."),
    (91, "RESOURCE_NOT_FOUND", "", "The request referred to a resource that does not exist."),
    (92, "DUPLICATE_RESOURCE", "", "The request named the same resource more than once."),
    (93, "UNACCEPTABLE_CREDENTIAL", "", "The credential does not meet the broker's acceptance criteria."),
    (94, "INCONSISTENT_VOTER_SET", "", "The sender or receiver of a voter-only request is not one of the expected voters."),
    (95, "INVALID_UPDATE_VERSION", "", "The feature update version is invalid."),
    (96, "FEATURE_UPDATE_FAILED", "", "Finalized features could not be updated because of an unexpected broker error."),
    (97, "PRINCIPAL_DESERIALIZATION_FAILURE", "", "The principal of a forwarded request could not be deserialized; the cluster's security setup is inconsistent."),
    (98, "SNAPSHOT_NOT_FOUND", "", "The requested metadata snapshot does not exist."),
    (99, "POSITION_OUT_OF_RANGE", "", "The requested snapshot position is negative or past the snapshot's end."),
    (100, "UNKNOWN_TOPIC_ID", "M", "This broker does not host a topic with this id."),
    (101, "DUPLICATE_BROKER_REGISTRATION", "", "Another incarnation of this broker id is already registered."),
    (102, "BROKER_ID_NOT_REGISTERED", "", "The broker id is not registered with the controller."),
    (103, "INCONSISTENT_TOPIC_ID", "M", "The topic id does not match the one the broker has for the partition."),
    (104, "INCONSISTENT_CLUSTER_ID", "", "The cluster id in the request does not match this cluster's."),
    (105, "TRANSACTIONAL_ID_NOT_FOUND", "", "No transaction state exists for this transactional id."),
    (106, "FETCH_SESSION_TOPIC_ID_ERROR", "R", "Topic ids in the fetch session are inconsistent with the request."),
    (107, "INELIGIBLE_REPLICA", "", "The proposed in-sync replica set contains a replica that is not eligible to join it."),
    (108, "NEW_LEADER_ELECTED", "", "The partition change was accepted, but a new leader has been elected since."),
    (109, "OFFSET_MOVED_TO_TIERED_STORAGE", "", "The requested offset now lives in tiered storage."),
    (110, "FENCED_MEMBER_EPOCH", "", "The member epoch is fenced; the member must rejoin the group."),
    (111, "UNRELEASED_INSTANCE_ID", "", "The group.instance.id is still held by a member that has not left the group."),
    (112, "UNSUPPORTED_ASSIGNOR", "", "The group does not support the requested server-side assignor."),
    (113, "STALE_MEMBER_EPOCH", "", "The member epoch is out of date; retry once a heartbeat delivers the current one."),
    (114, "MISMATCHED_ENDPOINT_TYPE", "", "The request reached the wrong kind of endpoint (broker versus controller)."),
    (115, "UNSUPPORTED_ENDPOINT_TYPE", "", "This kind of endpoint does not support the request."),
    (116, "UNKNOWN_CONTROLLER_ID", "", "This node does not know the controller id."),
    (117, "UNKNOWN_SUBSCRIPTION_ID", "", "The client telemetry subscription id is unknown or has expired."),
    (118, "TELEMETRY_TOO_LARGE", "", "The pushed client telemetry is larger than the broker accepts."),
    (119, "INVALID_REGISTRATION", "", "The controller considers the broker's registration invalid."),
    (120, "TRANSACTION_ABORTABLE", "", "The transaction hit an error; abort it to keep using the transactional id."),
    (121, "INVALID_RECORD_STATE", "", "The record's delivery state does not allow this acknowledgement."),
    (122, "SHARE_SESSION_NOT_FOUND", "R", "The broker has no share session with this id."),
    (123, "INVALID_SHARE_SESSION_EPOCH", "R", "The share session epoch is not the one the broker expects."),
    (124, "FENCED_STATE_EPOCH", "", "The share-group state epoch in the request does not match the share coordinator's."),
    (125, "INVALID_VOTER_KEY", "", "The voter key does not match the receiving replica's key."),
    (126, "DUPLICATE_VOTER", "", "The voter is already in the voter set."),
    (127, "VOTER_NOT_FOUND", "", "The voter is not in the voter set."),
    (128, "INVALID_REGULAR_EXPRESSION", "", "The subscription's regular expression is not valid."),
    (129, "REBOOTSTRAP_REQUIRED", "", "The client's metadata is too stale; it must start again from the bootstrap servers."),
    (130, "STREAMS_INVALID_TOPOLOGY", "", "The Streams topology is invalid."),
    (131, "STREAMS_INVALID_TOPOLOGY_EPOCH", "", "The Streams topology epoch is invalid."),
    (132, "STREAMS_TOPOLOGY_FENCED", "", "The Streams topology epoch is out of date."),
    (133, "SHARE_SESSION_LIMIT_REACHED", "R", "The broker has reached its limit of share sessions."),
)
# fmt: on

ERROR_CODES: dict[int, ErrorCode] = {
    code: ErrorCode(code, name, "R" in flags or "M" in flags, "M" in flags, text)
    for code, name, flags, text in _ROWS
}
"""Code -> :class:`ErrorCode` for every error code (0 excluded)."""


def class_name_for(kafka_name: str) -> str:
    """The exception class name for a Kafka error name: CamelCase + ``Error``.

    A trailing ``_ERROR``/``_EXCEPTION`` is dropped first, so ``KAFKA_STORAGE_ERROR`` becomes
    ``KafkaStorageError`` rather than ``KafkaStorageErrorError``.
    """
    for suffix in ("_ERROR", "_EXCEPTION"):
        if kafka_name.endswith(suffix):
            kafka_name = kafka_name[: -len(suffix)]
    return "".join(part.capitalize() for part in kafka_name.split("_")) + "Error"
