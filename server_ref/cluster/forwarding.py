"""Admin requests a broker in cluster mode forwards to the active controller.

Each returns the controller's answer, after this broker's metadata image shows the change
(a client's next Metadata request here then sees it); when no controller answers in time,
every item gets REQUEST_TIMED_OUT, which clients retry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sdk.errors import RequestTimedOutError
from sdk.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
)
from sdk.protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from sdk.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from sdk.protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from server_ref.cluster.views import forward
from server_ref.controller.image import MetadataImage

if TYPE_CHECKING:
    from server_ref.handlers import RequestContext

__all__ = ["create_partitions", "create_topics", "delete_topics", "elect_leaders"]

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
    return response  # type: ignore[no-any-return]


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
    return response  # type: ignore[no-any-return]


async def create_partitions(ctx: RequestContext, req: CreatePartitionsRequest
                            ) -> CreatePartitionsResponse:
    wanted = {t.name: t.count for t in req.topics}

    def seen(image: MetadataImage, response: CreatePartitionsResponse) -> bool:
        return all(r.name in image.topics and
                   len(image.topics[r.name].partitions) >= wanted[r.name]
                   for r in response.results if r.error_code == 0)

    try:
        return await forward(ctx, req, CreatePartitionsResponse,  # type: ignore[no-any-return]
                             None if req.validate_only else seen)
    except RequestTimedOutError:
        return CreatePartitionsResponse(results=[
            CreatePartitionsResponse.CreatePartitionsTopicResult(name=t.name,
                                                                 error_code=TIMED_OUT)
            for t in req.topics])


async def elect_leaders(ctx: RequestContext, req: ElectLeadersRequest) -> ElectLeadersResponse:
    try:
        return await forward(ctx, req, ElectLeadersResponse)  # type: ignore[no-any-return]
    except RequestTimedOutError:
        return ElectLeadersResponse(error_code=TIMED_OUT)
