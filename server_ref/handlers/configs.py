"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics and the broker.

Every change is validated as a whole before anything is applied (unknown keys and bad
values are INVALID_CONFIG, with Kafka's wording), and ``validate_only`` stops right there.
Topic overrides persist in ``topics.json``; dynamic broker configs in
``broker_configs.json``. A broker resource is named by the node id, or "" for the
cluster-wide default (the same thing on a single broker).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sdk.errors import (
    InvalidConfigError,
    InvalidRequestError,
    KafkaError,
    UnknownTopicOrPartitionError,
)
from sdk.protocol.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from sdk.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResponse,
)
from sdk.protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from server_ref.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigDef,
    ConfigSource,
    ConfigType,
    parse_config_value,
)
from server_ref.handlers import RequestContext, handles
from server_ref.topics import Topic, parse_topic_configs

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
BROKER_LOGGER_RESOURCE = 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

ResourceResult = DescribeConfigsResponse.DescribeConfigsResourceResult
Synonym = DescribeConfigsResponse.DescribeConfigsSynonym


# ---------------------------------------------------------------------------- describing


def topic_config_entries(broker: BrokerConfig, overrides: Mapping[str, Any],
                         keys: list[str] | None = None, *, synonyms: bool = False,
                         documentation: bool = False) -> list[ResourceResult]:
    """Every config of a topic (or the requested ``keys``), with value and source."""
    topic = Topic("", None, dict(overrides))  # type: ignore[arg-type]
    out = []
    for name in (keys if keys is not None else sorted(TOPIC_CONFIGS)):
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            continue
        value = topic.config_value(name, broker)
        source = topic.config_source(name, broker)
        entry = _entry(definition, value, source, documentation)
        if synonyms:
            entry.synonyms = _topic_synonyms(definition, broker, overrides)
        out.append(entry)
    return out


def _entry(definition: ConfigDef, value: Any, source: ConfigSource, documentation: bool,
           read_only: bool = False) -> ResourceResult:
    return ResourceResult(
        name=definition.name, value=definition.render(value), read_only=read_only,
        is_default=source is ConfigSource.DEFAULT_CONFIG, config_source=int(source),
        is_sensitive=False, config_type=int(definition.type),
        documentation=definition.doc if documentation else None)


def _topic_synonyms(definition: ConfigDef, broker: BrokerConfig,
                    overrides: Mapping[str, Any]) -> list[Synonym]:
    out = []
    if definition.name in overrides:
        out.append(Synonym(name=definition.name,
                           value=definition.render(overrides[definition.name]),
                           source=int(ConfigSource.DYNAMIC_TOPIC_CONFIG)))
    broker_key = definition.broker_default
    if broker_key is not None:
        bdef = BROKER_CONFIGS[broker_key]
        source = broker.source_of(broker_key)
        if source is not ConfigSource.DEFAULT_CONFIG:
            if source is ConfigSource.DYNAMIC_BROKER_CONFIG:
                source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            out.append(Synonym(name=broker_key, value=bdef.render(broker.get(broker_key)),
                               source=int(source)))
        out.append(Synonym(name=broker_key, value=bdef.render(bdef.default),
                           source=int(ConfigSource.DEFAULT_CONFIG)))
    return out


def _broker_entries(broker: BrokerConfig, keys: list[str] | None, documentation: bool
                    ) -> list[ResourceResult]:
    out = []
    for name in (keys if keys is not None else sorted(BROKER_CONFIGS)):
        definition = BROKER_CONFIGS.get(name)
        if definition is None:
            continue
        out.append(_entry(definition, broker.get(name), broker.source_of(name), documentation,
                          read_only=not definition.dynamic))
    return out


def _check_broker_name(ctx: RequestContext, name: str) -> None:
    if name not in ("", str(ctx.broker.node_id)):
        raise InvalidRequestError(f"Unexpected broker id, expected {ctx.broker.node_id} "
                                  f"or empty string, but received {name}")


@handles(32, 0, 4)
def describe_configs(ctx: RequestContext, req: DescribeConfigsRequest
                     ) -> DescribeConfigsResponse:
    results = []
    for res in req.resources:
        result = DescribeConfigsResponse.DescribeConfigsResult(
            resource_type=res.resource_type, resource_name=res.resource_name, error_message=None)
        keys = list(res.configuration_keys) if res.configuration_keys is not None else None
        try:
            if res.resource_type == TOPIC_RESOURCE:
                topic = ctx.broker.topics.get(res.resource_name)
                if topic is None:
                    raise UnknownTopicOrPartitionError(
                        f"Topic {res.resource_name} does not exist")
                result.configs = topic_config_entries(
                    ctx.broker.config, topic.overrides, keys,
                    synonyms=req.include_synonyms, documentation=req.include_documentation)
            elif res.resource_type == BROKER_RESOURCE:
                _check_broker_name(ctx, res.resource_name)
                result.configs = _broker_entries(ctx.broker.config, keys,
                                                 req.include_documentation)
            else:
                raise InvalidRequestError(
                    f"Unsupported resource type {res.resource_type} for DescribeConfigs")
        except KafkaError as exc:
            result.error_code = exc.errno  # type: ignore[attr-defined]
            result.error_message = exc.message
        results.append(result)
    return DescribeConfigsResponse(results=results)


# ---------------------------------------------------------------------------- altering


def _apply_topic(ctx: RequestContext, name: str, overrides: dict[str, Any],
                 validate_only: bool) -> None:
    if not validate_only:
        ctx.broker.topics.replace_overrides(name, overrides)


def _apply_broker(ctx: RequestContext, values: dict[str, str | None],
                  validate_only: bool) -> None:
    config = ctx.broker.config
    for key, value in values.items():
        definition = BROKER_CONFIGS.get(key)
        if definition is None:
            raise InvalidConfigError(f"Unknown broker config {key}")
        if not definition.dynamic:
            raise InvalidConfigError(f"Cannot update these configs dynamically: {{{key}}}")
        if value is not None:
            parse_config_value(definition, value)
    if validate_only:
        return
    for key, value in values.items():
        config.alter(key, value)
    ctx.broker.save_dynamic_configs()
    ctx.broker.topics.apply_broker_defaults()


def _response_entry(cls: Any, res: Any, exc: KafkaError | None) -> Any:
    entry = cls(resource_type=res.resource_type, resource_name=res.resource_name,
                error_message=None)
    if exc is not None:
        entry.error_code = getattr(exc, "errno", InvalidRequestError.errno)
        entry.error_message = exc.message
    return entry


@handles(33, 0, 2)
def alter_configs(ctx: RequestContext, req: AlterConfigsRequest) -> AlterConfigsResponse:
    """The legacy, whole-set variant: the given configs replace every override."""
    responses = []
    for res in req.resources:
        error: KafkaError | None = None
        try:
            given = {c.name: c.value for c in res.configs}
            if res.resource_type == TOPIC_RESOURCE:
                ctx.broker.topics.require(res.resource_name)
                _apply_topic(ctx, res.resource_name, parse_topic_configs(given),
                             req.validate_only)
            elif res.resource_type == BROKER_RESOURCE:
                _check_broker_name(ctx, res.resource_name)
                reset = {k: None for k in ctx.broker.config.dynamic_keys if k not in given}
                _apply_broker(ctx, {**reset, **given}, req.validate_only)
            else:
                raise InvalidRequestError(f"Unsupported resource type {res.resource_type}")
        except KafkaError as exc:
            error = exc
        responses.append(_response_entry(AlterConfigsResponse.AlterConfigsResourceResponse,
                                          res, error))
    return AlterConfigsResponse(responses=responses)


def _incremental_topic(current: dict[str, Any],
                       ops: list[IncrementalAlterConfigsRequest.AlterableConfig]
                       ) -> dict[str, Any]:
    result = dict(current)
    for op in ops:
        definition = TOPIC_CONFIGS.get(op.name)
        if definition is None:
            raise InvalidConfigError(f"Unknown topic config name: {op.name}")
        if op.config_operation == SET:
            result[op.name] = parse_config_value(definition, op.value)
        elif op.config_operation == DELETE:
            result.pop(op.name, None)
        elif op.config_operation in (APPEND, SUBTRACT):
            if definition.type is not ConfigType.LIST:
                raise InvalidConfigError(
                    f"Config value append is not allowed for config key: {op.name}")
            existing = list(result.get(op.name, definition.default))
            items = parse_config_value(definition, op.value)
            if op.config_operation == APPEND:
                existing += [i for i in items if i not in existing]
            else:
                existing = [i for i in existing if i not in items]
            if not existing:
                result.pop(op.name, None)
            else:
                result[op.name] = tuple(existing)
        else:
            raise InvalidRequestError(f"Unknown config operation {op.config_operation}")
    return result


@handles(44, 0, 1)
def incremental_alter_configs(ctx: RequestContext, req: IncrementalAlterConfigsRequest
                              ) -> IncrementalAlterConfigsResponse:
    responses = []
    for res in req.resources:
        error: KafkaError | None = None
        try:
            names = [c.name for c in res.configs]
            if len(names) != len(set(names)):
                raise InvalidRequestError("Error due to duplicate config keys")
            if res.resource_type == TOPIC_RESOURCE:
                topic = ctx.broker.topics.require(res.resource_name)
                _apply_topic(ctx, topic.name, _incremental_topic(topic.overrides, res.configs),
                             req.validate_only)
            elif res.resource_type == BROKER_RESOURCE:
                _check_broker_name(ctx, res.resource_name)
                values: dict[str, str | None] = {}
                for op in res.configs:
                    if op.config_operation == SET:
                        values[op.name] = op.value
                    elif op.config_operation == DELETE:
                        values[op.name] = None
                    else:
                        raise InvalidRequestError(
                            f"Config value append/subtract is not supported for broker "
                            f"config {op.name}")
                _apply_broker(ctx, values, req.validate_only)
            else:
                raise InvalidRequestError(f"Unsupported resource type {res.resource_type}")
        except KafkaError as exc:
            error = exc
        responses.append(_response_entry(
            IncrementalAlterConfigsResponse.AlterConfigsResourceResponse, res, error))
    return IncrementalAlterConfigsResponse(responses=responses)
