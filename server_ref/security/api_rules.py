"""Which ACL operation each API needs, and what a refusal looks like: Kafka's rules
(``KafkaApis`` and ``AuthHelper``), applied before the handler runs.

A rule looks at the request and returns one of:

* ``None``: allowed as is;
* a response: the whole request is refused (a group or cluster permission is missing, or a
  transactional id may not be used); the handler does not run, so nothing is written;
* a *patch*: the items the principal may not touch were taken out of the request, and the
  patch adds their errors to the handler's response (or drops what may not be seen).

So a produce to an unauthorized topic stores nothing, and a partial request serves the
topics that are allowed, as Kafka does. The codes: TOPIC_AUTHORIZATION_FAILED (29),
GROUP_AUTHORIZATION_FAILED (30), CLUSTER_AUTHORIZATION_FAILED (31),
TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53).

Incremental fetch sessions (KIP-227): only the partitions a request names are checked
here; an ACL change drops every session (``server_ref.handlers.acls``), so partitions a
session already holds are checked again when the client starts a new one.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sdk.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    OperationNotAttemptedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from sdk.protocol.message import Message
from sdk.records.header import ATTRIBUTES_OFFSET, MAGIC_OFFSET, TRANSACTIONAL_MASK
from server_ref.handlers.unsupported import error_response
from server_ref.security.acls import (
    ALTER,
    ALTER_CONFIGS,
    CLUSTER,
    CLUSTER_ACTION,
    CLUSTER_NAME,
    CREATE,
    DELETE,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    GROUP,
    IDEMPOTENT_WRITE,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
)

if TYPE_CHECKING:
    from server_ref.handlers import Handler, HandlerResult, RequestContext
    from server_ref.security.authorizer import Authorizer

__all__ = ["authorized"]

TOPIC_DENIED = TopicAuthorizationFailedError.errno
GROUP_DENIED = GroupAuthorizationFailedError.errno
CLUSTER_DENIED = ClusterAuthorizationFailedError.errno
TXN_DENIED = TransactionalIdAuthorizationFailedError.errno

Patch = Callable[[Any], Any]
Outcome = Message | Patch | None


class Check:
    """The authorizer bound to one request's principal and client host."""

    __slots__ = ("az", "ctx", "host", "principal", "req")

    def __init__(self, az: Authorizer, ctx: RequestContext, req: Any) -> None:
        self.az = az
        self.ctx = ctx
        self.req = req
        self.principal = ctx.principal
        self.host = ctx.peer.rpartition(":")[0].strip("[]") or ctx.peer

    def __call__(self, operation: int, resource_type: int, name: str) -> bool:
        return self.az.authorize(self.principal, self.host, operation, resource_type, name)

    def cluster(self, operation: int) -> bool:
        return self(operation, CLUSTER, CLUSTER_NAME)

    def refuse(self, code: int, message: str | None = None) -> Message:
        """The API's response with ``code`` everywhere (the handler does not run)."""
        return error_response(self.ctx.api_key, self.ctx.api_version, self.req, code, message)


def authorized(api_key: int, handler: Handler, ctx: RequestContext, request: Any
               ) -> HandlerResult:
    """Run ``handler`` for ``request`` as far as the principal may (see the module doc)."""
    rule = RULES.get(api_key)
    if rule is None:
        return handler(ctx, request)
    az = ctx.broker.authorizer
    assert az is not None
    outcome = rule(Check(az, ctx, request), request)
    if outcome is None:
        return handler(ctx, request)
    if isinstance(outcome, Message):
        return outcome
    result = handler(ctx, request)
    if isinstance(result, Message) or result is None:
        return outcome(result)
    return _patched(result, outcome)


async def _patched(result: Any, patch: Patch) -> Any:
    return patch(await result)


# ============================================================================ helpers


def _split(chk: Check, req: Any, attr: str, allowed: Callable[[Any], bool]) -> Patch | None:
    """Take the items of ``req.<attr>`` that fail ``allowed`` out of the request; the patch
    adds their error entries (built as the API's error response for just those items) to
    the response list the error response filled."""
    items = getattr(req, attr) or []
    denied = [item for item in items if not allowed(item)]
    if not denied:
        return None
    setattr(req, attr, denied)
    errors = chk.refuse(TOPIC_DENIED)
    setattr(req, attr, [item for item in items if allowed(item)])
    return _appender(errors)


def _appender(errors: Message) -> Patch:
    def patch(response: Any) -> Any:
        if response is None:  # acks=0 produce: nothing to add
            return None
        for field in type(errors).field_names():
            value = getattr(errors, field)
            if isinstance(value, list) and value:
                getattr(response, field).extend(value)
        return response

    return patch


def _topic_name(chk: Check, name: str | None, topic_id: uuid.UUID | None) -> str | None:
    if name:
        return name
    if topic_id is not None and topic_id.int:
        topic = chk.ctx.broker.topics.by_id(topic_id)
        return topic.name if topic is not None else None
    return name


def _per_topic(op: int, attr: str, name_field: str = "name") -> Callable[[Check, Any], Outcome]:
    def rule(chk: Check, req: Any) -> Outcome:
        def allowed(t: Any) -> bool:
            name = _topic_name(chk, getattr(t, name_field), getattr(t, "topic_id", None))
            return name is None or chk(op, TOPIC, name)  # unknown ids: the handler answers

        return _split(chk, req, attr, allowed)

    return rule


def _cluster(op: int) -> Callable[[Check, Any], Outcome]:
    def rule(chk: Check, req: Any) -> Outcome:
        return None if chk.cluster(op) else chk.refuse(CLUSTER_DENIED)

    return rule


def _group(op: int, then: Callable[[Check, Any], Outcome] | None = None
           ) -> Callable[[Check, Any], Outcome]:
    def rule(chk: Check, req: Any) -> Outcome:
        if not chk(op, GROUP, req.group_id):
            return chk.refuse(GROUP_DENIED)
        return then(chk, req) if then is not None else None

    return rule


def _is_replica(req: Any) -> bool:
    state = getattr(req, "replica_state", None)
    replica = state.replica_id if state is not None and state.replica_id >= 0 \
        else getattr(req, "replica_id", -1)
    return replica is not None and replica >= 0


# ============================================================================ rules


def _produce(chk: Check, req: Any) -> Outcome:
    # As Kafka: the transactional id is checked when the records are transactional (and
    # transactional records without an id are refused the same way).
    if _has_transactional_records(req) and (
            req.transactional_id is None
            or not chk(WRITE, TRANSACTIONAL_ID, req.transactional_id)):
        return chk.refuse(TXN_DENIED)
    return _per_topic(WRITE, "topic_data")(chk, req)


def _has_transactional_records(req: Any) -> bool:
    """Whether a partition's first batch is transactional (what Kafka looks at)."""
    for t in req.topic_data:
        for p in t.partition_data:
            r = p.records
            if r and len(r) > ATTRIBUTES_OFFSET + 1 and r[MAGIC_OFFSET] >= 2 \
                    and r[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_MASK:
                return True
    return False


def _fetch(chk: Check, req: Any) -> Outcome:
    if _is_replica(req):  # a follower's fetch: every partition refused, as Kafka
        if chk.cluster(CLUSTER_ACTION):
            return None
        refused = chk.refuse(TOPIC_DENIED)
        refused.error_code = 0  # type: ignore[attr-defined]  # per partition only
        return refused
    return _per_topic(READ, "topics", "topic")(chk, req)


def _offset_for_leader_epoch(chk: Check, req: Any) -> Outcome:
    if chk.cluster(CLUSTER_ACTION):  # a follower (or anyone with it) sees every topic
        return None
    return _per_topic(DESCRIBE, "topics", "topic")(chk, req)


def _metadata(chk: Check, req: Any) -> Outcome:
    broker = chk.ctx.broker
    version = chk.ctx.api_version
    every = req.topics is None or (version == 0 and not req.topics)
    if every:
        return _drop_topics(chk, "topics")
    may_create = bool(broker.config.get("auto.create.topics.enable")) and (
        version < 4 or req.allow_auto_topic_creation)
    create_all = may_create and chk.cluster(CREATE)

    def allowed(t: Any) -> bool:
        name = _topic_name(chk, t.name, getattr(t, "topic_id", None))
        if name is None:
            return True
        if not chk(DESCRIBE, TOPIC, name):
            return False  # its existence is not disclosed
        if may_create and not create_all and name not in broker.topics:
            return chk(CREATE, TOPIC, name)  # auto-creation needs CREATE
        return True

    return _split(chk, req, "topics", allowed)


def _drop_topics(chk: Check, attr: str, op: int = DESCRIBE) -> Patch:
    """A patch dropping the topics the principal may not see from ``response.<attr>``."""
    def patch(response: Any) -> Any:
        setattr(response, attr, [t for t in getattr(response, attr)
                                 if chk(op, TOPIC, t.name)])
        return response

    return patch


def _offset_fetch(chk: Check, req: Any) -> Outcome:
    if chk.ctx.api_version < 8:
        if not chk(DESCRIBE, GROUP, req.group_id):
            return chk.refuse(GROUP_DENIED)
        return _hide_offsets(chk, req.topics is None)
    denied = [g for g in req.groups if not chk(DESCRIBE, GROUP, g.group_id)]
    if len(denied) == len(req.groups):
        return chk.refuse(GROUP_DENIED)
    if denied:
        req.groups = [g for g in req.groups if g not in denied]
    hide = _hide_offsets(chk, all_topics=False)
    hide_all = _hide_offsets(chk, all_topics=True)
    every = {g.group_id for g in req.groups if g.topics is None}

    def patch(response: Any) -> Any:
        for g in response.groups:
            (hide_all if g.group_id in every else hide)(g)
        response.groups.extend(type(response).OffsetFetchResponseGroup(
            group_id=g.group_id, error_code=GROUP_DENIED) for g in denied)
        return response

    return patch


def _hide_offsets(chk: Check, all_topics: bool) -> Patch:
    """Committed offsets of topics the principal may not DESCRIBE: left out of an
    all-topics answer, TOPIC_AUTHORIZATION_FAILED for a topic asked for by name."""
    def patch(response: Any) -> Any:
        kept = []
        for t in response.topics:
            if chk(DESCRIBE, TOPIC, t.name):
                kept.append(t)
            elif not all_topics:
                for p in t.partitions:
                    p.committed_offset, p.metadata, p.error_code = -1, "", TOPIC_DENIED
                kept.append(t)
        response.topics = kept
        return response

    return patch


def _find_coordinator(chk: Check, req: Any) -> Outcome:
    if req.key_type == 2:  # SHARE (KIP-932): brokers only
        return None if chk.cluster(CLUSTER_ACTION) else chk.refuse(CLUSTER_DENIED)
    if req.key_type not in (0, 1):
        return None  # the handler refuses unknown key types
    kind, code = (GROUP, GROUP_DENIED) if req.key_type == 0 else (TRANSACTIONAL_ID, TXN_DENIED)
    if chk.ctx.api_version < 4:
        return None if chk(DESCRIBE, kind, req.key) else chk.refuse(code)
    keys = list(req.coordinator_keys)
    denied = [k for k in keys if not chk(DESCRIBE, kind, k)]
    if not denied:
        return None
    req.coordinator_keys = denied
    errors = chk.refuse(code)
    req.coordinator_keys = [k for k in keys if k not in denied]
    return _appender(errors)


def _describe_groups(chk: Check, req: Any) -> Outcome:
    groups = list(req.groups)
    denied = [g for g in groups if not chk(DESCRIBE, GROUP, g)]
    if not denied:
        return None
    req.groups = denied
    errors = chk.refuse(GROUP_DENIED)
    req.groups = [g for g in groups if g not in denied]
    return _appender(errors)


def _consumer_group_describe(chk: Check, req: Any) -> Outcome:
    """ConsumerGroupDescribe: DESCRIBE on each group; refused ones answer
    GROUP_AUTHORIZATION_FAILED, the others are described."""
    groups = list(req.group_ids)
    denied = [g for g in groups if not chk(DESCRIBE, GROUP, g)]
    if not denied:
        return None
    req.group_ids = denied
    errors = chk.refuse(GROUP_DENIED)
    req.group_ids = [g for g in groups if g not in denied]
    return _appender(errors)


def _delete_groups(chk: Check, req: Any) -> Outcome:
    names = list(req.groups_names)
    denied = [g for g in names if not chk(DELETE, GROUP, g)]
    if not denied:
        return None
    req.groups_names = denied
    errors = chk.refuse(GROUP_DENIED)
    req.groups_names = [g for g in names if g not in denied]
    return _appender(errors)


def _list_groups(chk: Check, req: Any) -> Outcome:
    if chk.cluster(DESCRIBE):
        return None

    def patch(response: Any) -> Any:
        response.groups = [g for g in response.groups if chk(DESCRIBE, GROUP, g.group_id)]
        return response

    return patch


def _create_topics(chk: Check, req: Any) -> Outcome:
    denied = None if chk.cluster(CREATE) else \
        _split(chk, req, "topics", lambda t: chk(CREATE, TOPIC, t.name))

    def patch(response: Any) -> Any:
        if denied is not None:
            response = denied(response)
        # A created topic's configs are shown only with DESCRIBE_CONFIGS on it.
        for t in response.topics:
            if not t.error_code and not chk(DESCRIBE_CONFIGS, TOPIC, t.name):
                t.topic_config_error_code, t.configs = TOPIC_DENIED, []
        return response

    return patch


def _delete_topics(chk: Check, req: Any) -> Outcome:
    if chk.ctx.api_version >= 6:
        return _per_topic(DELETE, "topics")(chk, req)
    return _split(chk, req, "topic_names", lambda name: chk(DELETE, TOPIC, name))


def _init_producer_id(chk: Check, req: Any) -> Outcome:
    if req.transactional_id is not None:
        return None if chk(WRITE, TRANSACTIONAL_ID, req.transactional_id) \
            else chk.refuse(TXN_DENIED)
    # Idempotence: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (KIP-679).
    if chk.cluster(IDEMPOTENT_WRITE) or chk.az.authorize_any(chk.principal, chk.host, WRITE,
                                                             TOPIC):
        return None
    return chk.refuse(CLUSTER_DENIED)


_BROKER_RESOURCES = (4, 8)  # ConfigResource types BROKER, BROKER_LOGGER
_TOPIC_RESOURCE = 2


def _configs(op: int) -> Callable[[Check, Any], Outcome]:
    def rule(chk: Check, req: Any) -> Outcome:
        resources = list(req.resources)

        def allowed(r: Any) -> bool:
            if r.resource_type in _BROKER_RESOURCES:
                return chk.cluster(op)
            if r.resource_type == _TOPIC_RESOURCE:
                return chk(op, TOPIC, r.resource_name)
            return True  # other types: the handler answers

        denied = [r for r in resources if not allowed(r)]
        if not denied:
            return None
        patches = []
        for code, which in ((CLUSTER_DENIED, _BROKER_RESOURCES), (TOPIC_DENIED,
                                                                  (_TOPIC_RESOURCE,))):
            part = [r for r in denied if r.resource_type in which]
            if part:
                req.resources = part
                patches.append(_appender(chk.refuse(code)))
        req.resources = [r for r in resources if r not in denied]

        def patch(response: Any) -> Any:
            for p in patches:
                response = p(response)
            return response

        return patch

    return rule


def _describe_producers(chk: Check, req: Any) -> Outcome:
    def patch(response: Any) -> Any:
        for t in response.topics:
            if not chk(READ, TOPIC, t.name):
                for p in t.partitions:
                    p.error_code, p.error_message, p.active_producers = TOPIC_DENIED, None, []
        return response

    return patch


def _describe_topic_partitions(chk: Check, req: Any) -> Outcome:
    named = bool(req.topics)

    def patch(response: Any) -> Any:
        kept = []
        for t in response.topics:
            if chk(DESCRIBE, TOPIC, t.name):
                kept.append(t)
            elif named:
                t.error_code, t.partitions, t.topic_id = TOPIC_DENIED, [], uuid.UUID(int=0)
                kept.append(t)
        response.topics = kept
        return response

    return patch


def _offset_delete(chk: Check, req: Any) -> Outcome:
    if not chk(DELETE, GROUP, req.group_id):
        return chk.refuse(GROUP_DENIED)
    return _per_topic(READ, "topics")(chk, req)


def _txn_id(attr: str = "transactional_id", then: Rule | None = None) -> Rule:
    """WRITE on the request's transactional id, or the whole request is refused."""
    def rule(chk: Check, req: Any) -> Outcome:
        if not chk(WRITE, TRANSACTIONAL_ID, getattr(req, attr)):
            return chk.refuse(TXN_DENIED)
        return then(chk, req) if then is not None else None

    return rule


def _add_partitions_to_txn(chk: Check, req: Any) -> Outcome:
    if chk.ctx.api_version >= 4:  # the brokers' verify path (KIP-890): CLUSTER_ACTION
        return None if chk.cluster(CLUSTER_ACTION) else chk.refuse(CLUSTER_DENIED)
    if not chk(WRITE, TRANSACTIONAL_ID, req.v3_and_below_transactional_id):
        return chk.refuse(TXN_DENIED)
    denied = {t.name for t in req.v3_and_below_topics if not chk(WRITE, TOPIC, t.name)}
    if not denied:
        return None
    # As Kafka: nothing is added; the refused topics say so, the others were not attempted.
    response = chk.refuse(OperationNotAttemptedError.errno)
    for topic in response.results_by_topic_v3_and_below:  # type: ignore[attr-defined]
        if topic.name in denied:
            for p in topic.results_by_partition:
                p.partition_error_code = TOPIC_DENIED
    return response


def _txn_offset_commit(chk: Check, req: Any) -> Outcome:
    if not chk(WRITE, TRANSACTIONAL_ID, req.transactional_id):
        return chk.refuse(TXN_DENIED)
    if not chk(READ, GROUP, req.group_id):
        return chk.refuse(GROUP_DENIED)
    return _per_topic(READ, "topics")(chk, req)


def _add_offsets_to_txn(chk: Check, req: Any) -> Outcome:
    if not chk(READ, GROUP, req.group_id):
        return chk.refuse(GROUP_DENIED)
    return None


def _describe_transactions(chk: Check, req: Any) -> Outcome:
    def patch(response: Any) -> Any:
        for state in response.transaction_states:
            if not chk(DESCRIBE, TRANSACTIONAL_ID, state.transactional_id):
                state.error_code, state.transaction_state, state.topics = TXN_DENIED, "", []
                state.producer_id, state.producer_epoch = -1, -1
            else:  # partitions of topics the principal may not describe are left out
                state.topics = [t for t in state.topics if chk(DESCRIBE, TOPIC, t.topic)]
        return response

    return patch


def _list_transactions(chk: Check, req: Any) -> Outcome:
    def patch(response: Any) -> Any:
        response.transaction_states = [
            s for s in response.transaction_states
            if chk(DESCRIBE, TRANSACTIONAL_ID, s.transactional_id)]
        return response

    return patch


# ============================================================================ authorized ops

_NOT_REQUESTED = -(1 << 31)  # Kafka's "authorized operations were not asked for"
Rule = Callable[[Check, Any], Outcome]


def _allowed_ops(chk: Check, supported: int, resource_type: int, name: str) -> int:
    """Of the operations set in ``supported`` (the bit field the handler filled in), those
    the principal may perform on the resource."""
    if supported == _NOT_REQUESTED:
        return supported
    return sum(1 << op for op in range(32) if supported >> op & 1
               and chk(op, resource_type, name))


def _cluster_ops(chk: Check, supported: int) -> int:
    if supported == _NOT_REQUESTED:
        return supported
    if not chk.cluster(DESCRIBE):  # Kafka: nothing shown without DESCRIBE on the cluster
        return 0
    return _allowed_ops(chk, supported, CLUSTER, CLUSTER_NAME)


def _then(rule: Rule | None, post: Callable[[Check, Any], None]) -> Rule:
    """``rule``, then ``post`` on the response (the authorized-operations fields)."""
    def combined(chk: Check, req: Any) -> Outcome:
        outcome = rule(chk, req) if rule is not None else None
        if isinstance(outcome, Message):
            return outcome
        first: Patch | None = outcome

        def patch(response: Any) -> Any:
            if first is not None:
                response = first(response)
            if response is not None:
                post(chk, response)
            return response

        return patch

    return combined


def _metadata_ops(chk: Check, response: Any) -> None:
    for t in response.topics:
        if not t.error_code and t.name:
            t.topic_authorized_operations = _allowed_ops(chk, t.topic_authorized_operations,
                                                         TOPIC, t.name)
    response.cluster_authorized_operations = _cluster_ops(
        chk, response.cluster_authorized_operations)


def _group_ops(chk: Check, response: Any) -> None:
    for g in response.groups:
        if not g.error_code:
            g.authorized_operations = _allowed_ops(chk, g.authorized_operations, GROUP,
                                                   g.group_id)


def _describe_cluster_ops(chk: Check, response: Any) -> None:
    response.cluster_authorized_operations = _cluster_ops(
        chk, response.cluster_authorized_operations)


def _topic_partitions_ops(chk: Check, response: Any) -> None:
    for t in response.topics:
        if not t.error_code:
            t.topic_authorized_operations = _allowed_ops(chk, t.topic_authorized_operations,
                                                         TOPIC, t.name)


RULES: dict[int, Callable[[Check, Any], Outcome]] = {
    0: _produce,
    1: _fetch,
    2: _per_topic(DESCRIBE, "topics"),  # ListOffsets
    3: _then(_metadata, _metadata_ops),
    8: _group(READ, _per_topic(READ, "topics")),  # OffsetCommit
    9: _offset_fetch,
    10: _find_coordinator,
    11: _group(READ),  # JoinGroup
    12: _group(READ),  # Heartbeat
    13: _group(READ),  # LeaveGroup
    14: _group(READ),  # SyncGroup
    15: _then(_describe_groups, _group_ops),
    16: _list_groups,
    68: _group(READ),  # ConsumerGroupHeartbeat (KIP-848)
    69: _consumer_group_describe,
    19: _create_topics,
    20: _delete_topics,
    21: _per_topic(DELETE, "topics"),  # DeleteRecords
    22: _init_producer_id,
    23: _offset_for_leader_epoch,
    29: _cluster(DESCRIBE),  # DescribeAcls
    30: _cluster(ALTER),  # CreateAcls
    31: _cluster(ALTER),  # DeleteAcls
    32: _configs(DESCRIBE_CONFIGS),
    33: _configs(ALTER_CONFIGS),  # AlterConfigs
    35: _cluster(DESCRIBE),  # DescribeLogDirs
    37: _per_topic(ALTER, "topics"),  # CreatePartitions
    42: _delete_groups,
    43: _cluster(ALTER),  # ElectLeaders
    44: _configs(ALTER_CONFIGS),  # IncrementalAlterConfigs
    45: _cluster(ALTER),  # AlterPartitionReassignments
    46: _cluster(DESCRIBE),  # ListPartitionReassignments
    47: _offset_delete,
    50: _cluster(DESCRIBE),  # DescribeUserScramCredentials
    51: _cluster(ALTER),  # AlterUserScramCredentials
    60: _then(None, _describe_cluster_ops),  # DescribeCluster: no check, the operations only
    24: _add_partitions_to_txn,
    25: _txn_id(then=_add_offsets_to_txn),  # AddOffsetsToTxn
    26: _txn_id(),  # EndTxn
    27: _cluster(CLUSTER_ACTION),  # WriteTxnMarkers
    28: _txn_offset_commit,
    61: _describe_producers,
    65: _describe_transactions,
    66: _list_transactions,
    75: _then(_describe_topic_partitions, _topic_partitions_ops),
}
"""API key → rule. Not listed, so not checked, as in Kafka: ApiVersions, SaslHandshake,
SaslAuthenticate."""
