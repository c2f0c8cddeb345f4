"""Config administration: describe configs and change them incrementally (KIP-339).

A broker's own configs (resource type BROKER or BROKER_LOGGER with a broker id as the name)
can only be read and changed on that broker, so those requests go to it; everything else
(topics, the cluster-wide broker default) goes to any broker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from sdk.admin.dispatch import Deadline, Dispatcher
from sdk.admin.results import (
    AlterConfigOp,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigResourceResult,
    ConfigResourceType,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    ResourceConfig,
    ResultSet,
)
from sdk.admin.topics import error_from
from sdk.errors import BrokerNotAvailableError, InvalidRequestError, KafkaError
from sdk.net import ANY_NODE, Target
from sdk.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResponse,
)
from sdk.protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

__all__ = ["ConfigChanges", "alter_configs", "describe_configs"]

_DESCRIBE_CONFIGS = DescribeConfigsRequest.API_KEY
_INCREMENTAL_ALTER = IncrementalAlterConfigsRequest.API_KEY
_PER_BROKER = (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER)

ConfigChanges = Mapping[ConfigResource, Sequence[AlterConfigOp] | Mapping[str, str | None]]
"""Per resource: a list of operations, or ``{name: value}`` where None resets to the default."""


def _enum(cls: type, value: int, default: object) -> object:
    try:
        return cls(value)
    except ValueError:
        return default


def _resource(type_code: int, name: str) -> ConfigResource:
    kind = _enum(ConfigResourceType, type_code, ConfigResourceType.UNKNOWN)
    assert isinstance(kind, ConfigResourceType)
    return ConfigResource(kind, name)


def _router(d: Dispatcher) -> Callable[[ConfigResource], Target | KafkaError]:
    def route(resource: ConfigResource) -> Target | KafkaError:
        if resource.type not in _PER_BROKER or not resource.name:
            return ANY_NODE  # topics and the cluster-wide broker default: any broker
        if not resource.name.isdigit():
            return InvalidRequestError(f"broker id {resource.name!r} is not a number")
        node = int(resource.name)
        if node not in d.client.metadata.brokers:
            return BrokerNotAvailableError(f"broker {node} is not in the cluster")
        return node

    return route


def _check_resources(resources: Sequence[ConfigResource], what: str) -> list[ConfigResource]:
    out = list(resources)
    for r in out:
        if not isinstance(r, ConfigResource):
            raise TypeError(f"{what} takes ConfigResource objects, not {r!r}")
    if len(set(out)) != len(out):
        raise ValueError(f"{what}: a resource is given twice")
    return out


# ============================================================================ describe


async def describe_configs(d: Dispatcher, resources: Sequence[ConfigResource], *,
                           names: Sequence[str] | None, include_synonyms: bool,
                           include_documentation: bool,
                           deadline: Deadline) -> ResultSet[ConfigResource, ResourceConfig]:
    items = _check_resources(resources, "describe_configs")
    keys = None if names is None else set(names)

    async def send(node: int, batch: list[ConfigResource]) -> dict[ConfigResource, ResourceConfig]:
        def build(_version: int) -> DescribeConfigsRequest:
            return DescribeConfigsRequest(
                # All keys are asked for and ``names`` filtered here: tansu 0.6 drops the
                # connection when a request names keys, and the answer is the same.
                resources=[DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=int(r.type), resource_name=r.name, configuration_keys=None)
                    for r in batch],
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
            )

        response: DescribeConfigsResponse = await d.request(node, build, _DESCRIBE_CONFIGS,
                                                            deadline)
        out: dict[ConfigResource, ResourceConfig] = {}
        for result in response.results:
            resource = _resource(result.resource_type, result.resource_name)
            error = error_from(result.error_code, result.error_message)
            entries = {} if error else {c.name: _entry(c) for c in result.configs
                                        if keys is None or c.name in keys}
            out[resource] = ResourceConfig(resource, error, entries)
        return out

    results = await d.run_items(
        items, what="describe configs", deadline=deadline, route=_router(d), send=send,
        fail=lambda r, exc: ResourceConfig(r, exc), error_of=lambda r: r.error,
    )
    return ResultSet(results, "describe configs")


def _entry(c: DescribeConfigsResponse.DescribeConfigsResourceResult) -> ConfigEntry:
    if c.config_source >= 0:
        source = _enum(ConfigSource, c.config_source, ConfigSource.UNKNOWN)
    else:  # v0 says only whether the value is the default
        source = ConfigSource.DEFAULT_CONFIG if c.is_default else ConfigSource.UNKNOWN
    assert isinstance(source, ConfigSource)
    config_type = _enum(ConfigType, c.config_type, ConfigType.UNKNOWN)
    assert isinstance(config_type, ConfigType)
    synonyms = []
    for s in c.synonyms:
        syn_source = _enum(ConfigSource, s.source, ConfigSource.UNKNOWN)
        assert isinstance(syn_source, ConfigSource)
        synonyms.append(ConfigSynonym(s.name, s.value, syn_source))
    return ConfigEntry(
        name=c.name,
        value=c.value,
        source=source,
        is_default=c.is_default or source == ConfigSource.DEFAULT_CONFIG,
        read_only=c.read_only,
        is_sensitive=c.is_sensitive,
        type=config_type,
        documentation=c.documentation or None,
        synonyms=tuple(synonyms),
    )


# ============================================================================ alter


def _ops(resource: ConfigResource,
         spec: Sequence[AlterConfigOp] | Mapping[str, str | None]) -> list[AlterConfigOp]:
    if isinstance(spec, Mapping):
        return [AlterConfigOp(name, value,
                              AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET)
                for name, value in spec.items()]
    ops = list(spec)
    for op in ops:
        if not isinstance(op, AlterConfigOp):
            raise TypeError(f"changes of {resource} must be AlterConfigOp objects, not {op!r}")
    if not ops:
        raise ValueError(f"no changes given for {resource}")
    return ops


async def alter_configs(d: Dispatcher, changes: ConfigChanges, *, validate_only: bool,
                        deadline: Deadline) -> ResultSet[ConfigResource, ConfigResourceResult]:
    resources = _check_resources(list(changes), "alter_configs")
    ops = {r: _ops(r, changes[r]) for r in resources}

    async def send(node: int,
                   batch: list[ConfigResource]) -> dict[ConfigResource, ConfigResourceResult]:
        def build(_version: int) -> IncrementalAlterConfigsRequest:
            return IncrementalAlterConfigsRequest(
                resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
                    resource_type=int(r.type), resource_name=r.name,
                    configs=[IncrementalAlterConfigsRequest.AlterableConfig(
                        name=op.name, config_operation=int(op.op), value=op.value)
                        for op in ops[r]])
                    for r in batch],
                validate_only=validate_only,
            )

        response: IncrementalAlterConfigsResponse = await d.request(
            node, build, _INCREMENTAL_ALTER, deadline)
        out: dict[ConfigResource, ConfigResourceResult] = {}
        for r in response.responses:
            resource = _resource(r.resource_type, r.resource_name)
            out[resource] = ConfigResourceResult(resource,
                                                 error_from(r.error_code, r.error_message))
        return out

    results = await d.run_items(
        resources, what="alter configs", deadline=deadline, route=_router(d), send=send,
        fail=lambda r, exc: ConfigResourceResult(r, exc), error_of=lambda r: r.error,
    )
    return ResultSet(results, "alter configs")
