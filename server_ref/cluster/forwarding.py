"""Admin requests a broker in cluster mode forwards to the active controller.

Each returns the controller's answer, after this broker's metadata image shows the change
(a client's next Metadata request here then sees it); when no controller answers in time,
every item gets REQUEST_TIMED_OUT, which clients retry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sdk.errors import RequestTimedOutError
from sdk.protocol.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from sdk.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
)
from sdk.protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from sdk.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from sdk.protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from sdk.protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from server_ref.cluster.views import forward
from server_ref.controller.image import MetadataImage

if TYPE_CHECKING:
    from server_ref.handlers import RequestContext

__all__ = ["create_partitions", "create_topics", "delete_topics", "elect_leaders",
           "incremental_alter_configs", "alter_configs", "alter_partition_reassignments",
           "list_partition_reassignments"]

TIMED_OUT = RequestTimedOutError.errno


async def create_topics(ctx: RequestContext, req: CreateTopicsRequest) -> CreateTopicsResponse:
    def seen(image: MetadataImage, response: CreateTopicsResponse) -> bool:
        return all(t.name in image.topics for t in response.topics if t.error_code == 0)

    try:
        response = await forward(ctx, req, CreateTopicsResponse,
                                 None if req.validate_only else seen)
    except RequestTimedOutError as exc:
        return CreateTopicsResponse(topics=[CreateTopicsResponse.CreatableTopicResult(
            name=t.name, error_code=TIMED_OUT, error_message=exc.message) for t in req.topics])
    if ctx.api_version >= 5:  # the controller lists no configs: the broker's view
        _fill_configs(ctx, response)
    return response


def _fill_configs(ctx: RequestContext, response: CreateTopicsResponse) -> None:
    from server_ref.handlers.configs import topic_config_entries
    from server_ref.topics import parse_topic_configs

    image = ctx.broker.cluster.image
    for result in response.topics:
        topic = image.topics.get(result.name)
        if result.error_code or topic is None:
            continue
        overrides = parse_topic_configs(topic.configs)
        result.configs = [CreateTopicsResponse.CreatableTopicConfigs(
            name=e.name, value=e.value, read_only=e.read_only, config_source=e.config_source,
            is_sensitive=e.is_sensitive)
            for e in topic_config_entries(ctx.broker.config, overrides)]


async def delete_topics(ctx: RequestContext, req: DeleteTopicsRequest) -> DeleteTopicsResponse:
    def seen(image: MetadataImage, response: DeleteTopicsResponse) -> bool:
        return all(r.name not in image.topics for r in response.responses
                   if r.error_code == 0)

    try:
        response = await forward(ctx, req, DeleteTopicsResponse, seen)
    except RequestTimedOutError:
        names = [t.name for t in req.topics] if ctx.api_version >= 6 else req.topic_names
        return DeleteTopicsResponse(responses=[DeleteTopicsResponse.DeletableTopicResult(
            name=n, error_code=TIMED_OUT) for n in names])
    deleted = [r.name for r in response.responses if r.error_code == 0 and r.name]
    if deleted and ctx.broker.groups is not None:
        ctx.broker.groups.on_topics_deleted(deleted)  # their committed offsets go too
    return response


async def create_partitions(ctx: RequestContext, req: CreatePartitionsRequest
                            ) -> CreatePartitionsResponse:
    wanted = {t.name: t.count for t in req.topics}

    def seen(image: MetadataImage, response: CreatePartitionsResponse) -> bool:
        return all(r.name in image.topics and
                   len(image.topics[r.name].partitions) >= wanted[r.name]
                   for r in response.results if r.error_code == 0)

    try:
        return await forward(ctx, req, CreatePartitionsResponse,
                             None if req.validate_only else seen)
    except RequestTimedOutError:
        return CreatePartitionsResponse(results=[
            CreatePartitionsResponse.CreatePartitionsTopicResult(name=t.name,
                                                                 error_code=TIMED_OUT)
            for t in req.topics])


async def elect_leaders(ctx: RequestContext, req: ElectLeadersRequest) -> ElectLeadersResponse:
    try:
        return await forward(ctx, req, ElectLeadersResponse)
    except RequestTimedOutError:
        return ElectLeadersResponse(error_code=TIMED_OUT)


TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
GROUP_RESOURCE = 32
IN_LOG = (TOPIC_RESOURCE, BROKER_RESOURCE, GROUP_RESOURCE)


async def incremental_alter_configs(ctx: RequestContext, req: IncrementalAlterConfigsRequest,
                                    local: Any, version: int | None = None,
                                    in_log: tuple[int, ...] = IN_LOG
                                    ) -> IncrementalAlterConfigsResponse:
    """Topic, broker and group configs live in the metadata log: those resources go to the
    controller; any others are answered by ``local``. The answer keeps the request's order
    and waits until this broker's image shows the new topic configs and it has replayed
    the broker and group configs."""
    topics = [r for r in req.resources if r.resource_type in in_log]
    others = [r for r in req.resources if r.resource_type not in in_log]
    agent = ctx.broker.cluster
    configs_before = agent.image.configs_version
    answered: dict[tuple[int, str], Any] = {}
    if others:
        sub = IncrementalAlterConfigsRequest(resources=others, validate_only=req.validate_only)
        for entry in local(ctx, sub).responses:
            answered[(entry.resource_type, entry.resource_name)] = entry
    if topics:
        forwarded = IncrementalAlterConfigsRequest(resources=topics,
                                                   validate_only=req.validate_only)
        wanted = {r.resource_name: r for r in topics if r.resource_type == TOPIC_RESOURCE}

        def seen(image: MetadataImage, response: IncrementalAlterConfigsResponse) -> bool:
            for entry in response.responses:
                if entry.resource_type in (BROKER_RESOURCE, GROUP_RESOURCE):
                    if entry.error_code == 0 and not agent.replayed(-1, configs_before):
                        return False
                    continue
                topic = image.topics.get(entry.resource_name)
                if entry.error_code or topic is None:
                    continue
                for c in wanted[entry.resource_name].configs:
                    if c.config_operation == 0 and topic.configs.get(c.name) != c.value:
                        return False
                    if c.config_operation == 1 and c.name in topic.configs:
                        return False
            return True

        try:
            response = await forward(ctx, forwarded, IncrementalAlterConfigsResponse,
                                     None if req.validate_only else seen, version)
            entries = response.responses
        except RequestTimedOutError as exc:
            entries = [IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
                resource_type=r.resource_type, resource_name=r.resource_name,
                error_code=TIMED_OUT, error_message=exc.message) for r in topics]
        for entry in entries:
            answered[(entry.resource_type, entry.resource_name)] = entry
    return IncrementalAlterConfigsResponse(responses=[
        answered[(r.resource_type, r.resource_name)] for r in req.resources
        if (r.resource_type, r.resource_name) in answered])


async def alter_configs(ctx: RequestContext, req: AlterConfigsRequest, local: Any
                        ) -> AlterConfigsResponse:
    """The legacy whole-set AlterConfigs: for a topic or a broker resource, the given
    configs replace its overrides or dynamic level, sent to the controller as
    IncrementalAlterConfigs (SET the given ones, DELETE the others the metadata log holds);
    other resources are answered by ``local``."""
    image = ctx.broker.cluster.image
    resources = []
    for r in req.resources:
        ops = []
        if r.resource_type == BROKER_RESOURCE:
            given = {c.name: c.value for c in r.configs}
            ops = [IncrementalAlterConfigsRequest.AlterableConfig(  # SET of None: refused
                name=k, config_operation=0, value=v) for k, v in given.items()]
            ops += [IncrementalAlterConfigsRequest.AlterableConfig(
                name=k, config_operation=1, value=None)
                for k in image.broker_configs.get(r.resource_name, {}) if k not in given]
        elif r.resource_type == TOPIC_RESOURCE:
            given = {c.name: c.value for c in r.configs}
            ops = [IncrementalAlterConfigsRequest.AlterableConfig(
                name=k, config_operation=0, value=v) for k, v in given.items()]
            current = image.topics.get(r.resource_name)
            for name in (current.configs if current is not None else {}):
                if name not in given:
                    ops.append(IncrementalAlterConfigsRequest.AlterableConfig(
                        name=name, config_operation=1, value=None))
        resources.append(IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=r.resource_type, resource_name=r.resource_name, configs=ops))

    def local_incremental(ctx: RequestContext, sub: IncrementalAlterConfigsRequest) -> Any:
        names = {(r.resource_type, r.resource_name) for r in sub.resources}
        legacy = AlterConfigsRequest(resources=[
            r for r in req.resources if (r.resource_type, r.resource_name) in names],
            validate_only=req.validate_only)
        return local(ctx, legacy)

    converted = IncrementalAlterConfigsRequest(resources=resources,
                                               validate_only=req.validate_only)
    # group configs have no whole-set form: those resources get the single broker's answer
    answer = await incremental_alter_configs(ctx, converted, local_incremental, 1,
                                             (TOPIC_RESOURCE, BROKER_RESOURCE))
    return AlterConfigsResponse(responses=[
        AlterConfigsResponse.AlterConfigsResourceResponse(
            error_code=e.error_code, error_message=e.error_message,
            resource_type=e.resource_type, resource_name=e.resource_name)
        for e in answer.responses])


async def alter_partition_reassignments(ctx: RequestContext, req: Any) -> Any:
    from sdk.protocol.messages.alter_partition_reassignments import (
        AlterPartitionReassignmentsResponse as Response,
    )

    try:
        return await forward(ctx, req, Response)
    except RequestTimedOutError as exc:
        return Response(error_code=TIMED_OUT, error_message=exc.message)


async def list_partition_reassignments(ctx: RequestContext, req: Any) -> Any:
    from sdk.protocol.messages.list_partition_reassignments import (
        ListPartitionReassignmentsResponse as Response,
    )

    try:
        return await forward(ctx, req, Response)
    except RequestTimedOutError as exc:
        return Response(error_code=TIMED_OUT, error_message=exc.message)


# ---------------------------------------------------------------------------- security
# ACLs and SCRAM credentials live in the metadata log (server_ref.controller.acl_records):
# the answer waits until this broker's stores hold the change, so the client's next
# DescribeAcls here, or its next authentication, sees it.


async def create_acls(ctx: RequestContext, req: Any) -> Any:
    from sdk.protocol.messages.create_acls import CreateAclsResponse
    from server_ref.security.acls import AclEntry

    wanted = [AclEntry(c.resource_type, c.resource_name, c.resource_pattern_type,
                       c.principal, c.host, c.operation, c.permission_type)
              for c in req.creations]

    def seen(image: MetadataImage, response: Any) -> bool:
        held = set(ctx.broker.acls)
        return all(e in held for e, r in zip(wanted, response.results, strict=False)
                   if r.error_code == 0)

    try:
        return await forward(ctx, req, CreateAclsResponse, seen)
    except RequestTimedOutError as exc:
        return CreateAclsResponse(results=[CreateAclsResponse.AclCreationResult(
            error_code=TIMED_OUT, error_message=exc.message) for _ in req.creations])


async def delete_acls(ctx: RequestContext, req: Any) -> Any:
    from sdk.protocol.messages.delete_acls import DeleteAclsResponse
    from server_ref.security.acls import AclEntry

    def seen(image: MetadataImage, response: Any) -> bool:
        held = set(ctx.broker.acls)
        return not any(AclEntry(m.resource_type, m.resource_name, m.pattern_type, m.principal,
                                m.host, m.operation, m.permission_type) in held
                       for r in response.filter_results for m in r.matching_acls)

    try:
        return await forward(ctx, req, DeleteAclsResponse, seen)
    except RequestTimedOutError as exc:
        return DeleteAclsResponse(filter_results=[DeleteAclsResponse.DeleteAclsFilterResult(
            error_code=TIMED_OUT, error_message=exc.message) for _ in req.filters])


async def alter_user_scram_credentials(ctx: RequestContext, req: Any) -> Any:
    from sdk.protocol.messages.alter_user_scram_credentials import (
        AlterUserScramCredentialsResponse as Response,
    )
    from server_ref.security.scram import MECHANISMS

    names = {number: name for name, (number, _) in MECHANISMS.items()}
    store = ctx.broker.credentials

    def seen(image: MetadataImage, response: Any) -> bool:
        ok = {r.user for r in response.results if r.error_code == 0}
        for d in req.deletions:
            if d.name in ok and store.get(d.name, names.get(d.mechanism, "")) is not None:
                return False
        for u in req.upsertions:
            held = store.get(u.name, names.get(u.mechanism, ""))
            if u.name in ok and (held is None or held.salt != bytes(u.salt)):
                return False
        return True

    try:
        return await forward(ctx, req, Response, seen)
    except RequestTimedOutError as exc:
        users = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
        return Response(results=[Response.AlterUserScramCredentialsResult(
            user=name, error_code=TIMED_OUT, error_message=exc.message) for name in users])
