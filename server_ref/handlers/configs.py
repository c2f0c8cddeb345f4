"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics and the broker.

Every change is validated as a whole before anything is applied, and ``validate_only``
stops right there. Topics: unknown keys and bad values are INVALID_CONFIG, with Kafka's
wording. Broker resources follow Kafka's rules and table (``server_ref.broker_configs``):
refusals are INVALID_REQUEST; a resource names this broker (its node id: per-broker
configs) or "" (the cluster-wide defaults, which a per-broker value overrides); describing
"" lists only what was set there. Topic overrides persist in ``topics.json``; dynamic
broker configs in ``broker_configs.json``. In cluster mode both are changed through the
controller (any broker id may be named) and replayed from the metadata log.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
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
from server_ref.broker_configs import (
    SYNONYMS,
    catalogue,
    listener_base,
    validate_broker_update,
)
from server_ref.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigDef,
    ConfigSource,
    ConfigType,
    group_config_problem,
    parse_config_value,
)
from server_ref.handlers import RequestContext, handles
from server_ref.tiered.settings import validate_topic
from server_ref.topics import Topic, parse_topic_configs

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
BROKER_LOGGER_RESOURCE = 8
GROUP_RESOURCE = 32  # group configs (KIP-848, KIP-932): server_ref.share.group_configs
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
# Cluster mode: topic and broker configs live in the metadata log (the controller's).
FORWARDED = (TOPIC_RESOURCE, BROKER_RESOURCE)

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
        cat = catalogue()  # Kafka's default, under the synonym that carries it (none
        # when the broker key is unset and its own default null, as Kafka lists it)
        unset_null = (source is ConfigSource.DEFAULT_CONFIG and broker_key in cat
                      and cat[broker_key].default is None)
        defaults = [] if unset_null else [
            (n, cat[n].default) for n in SYNONYMS.get(broker_key, (broker_key,))
            if n in cat and cat[n].default is not None]
        fallback = [] if unset_null else [(broker_key, bdef.render(bdef.default))]
        for name, value in defaults[:1] or fallback:
            out.append(Synonym(name=name, value=value,
                               source=int(ConfigSource.DEFAULT_CONFIG)))
    return out


def _broker_entry(broker: BrokerConfig, name: str, per_broker: bool, synonyms: bool,
                  documentation: bool) -> ResourceResult | None:
    """One broker config as Kafka describes it on a broker ("" : the cluster default)."""
    known = catalogue().get(name)
    ours = BROKER_CONFIGS.get(name)
    levels = [(broker.dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG)] if per_broker else []
    levels.append((broker.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
    found: list[tuple[str | None, ConfigSource]] = [
        (_as_kafka_shows(known, level[name]), source) for level, source in levels
        if name in level]
    if per_broker and name in broker.static_keys and ours is not None:
        found.append((ours.render(broker.get(name)), ConfigSource.STATIC_BROKER_CONFIG))
    if per_broker and name in broker.security:  # listener, TLS and SASL settings as given
        found.append((broker.security[name], ConfigSource.STATIC_BROKER_CONFIG))
    if not found and (not per_broker or (known is None and ours is None)):
        return None
    defaults: list[tuple[str, str | None]] = []
    if per_broker and known is not None:
        # (Kafka lists an unset config whose own default is null with no synonyms.)
        cat = catalogue()
        defaults = [(n, cat[n].default) for n in SYNONYMS.get(name, (name,))
                    if n in cat and cat[n].default is not None
                    and (found or known.default is not None)]
    elif per_broker and ours is not None:
        defaults = [(name, ours.render(ours.default))]
    value, source = found[0] if found else (
        defaults[0][1] if defaults and defaults[0][0] == name else None,
        ConfigSource.DEFAULT_CONFIG)
    sensitive = known.sensitive if known is not None else ours is None
    read_only = not known.dynamic if known is not None else (ours is None or not ours.dynamic)
    kind = known.config_type if known is not None else (int(ours.type) if ours else 0)
    base = catalogue().get(listener_base(name) or "")
    if known is None and base is not None:
        # A listener's own setting: typed and defaulted as the config it overrides.
        sensitive, read_only, kind = base.sensitive, True, base.config_type
        defaults = [(base.name, base.default)] if base.default is not None else []
    entry = ResourceResult(
        name=name, value=None if sensitive else value, read_only=read_only,
        is_default=source is ConfigSource.DEFAULT_CONFIG, config_source=int(source),
        is_sensitive=sensitive, config_type=kind,
        documentation=(ours.doc if ours is not None else None) if documentation else None)
    if synonyms:
        entry.synonyms = [Synonym(name=name, value=None if sensitive else v, source=int(src))
                          for v, src in found]
        entry.synonyms += [Synonym(name=n, value=None if sensitive else v,
                                   source=int(ConfigSource.DEFAULT_CONFIG))
                           for n, v in defaults]
    return entry


def _as_kafka_shows(known: Any, text: str) -> str:
    """A dynamic value as Kafka describes it: parsed by its type, then printed (a DOUBLE
    set as "1000000" reads "1000000.0", a BOOLEAN "TRUE" reads "true")."""
    kind = known.type if known is not None else None
    try:
        if kind in ("INT", "LONG", "SHORT"):
            return str(int(text.strip()))
        if kind == "DOUBLE":
            return _java_double(float(text.strip()))
    except ValueError:
        return text
    if kind == "BOOLEAN" and text.strip().lower() in ("true", "false"):
        return text.strip().lower()
    return text


def _java_double(x: float) -> str:
    """Java's Double.toString: plain between 1e-3 and 1e7, else "1.5E7"."""
    if x == 0 or 1e-3 <= abs(x) < 1e7 or x != x or abs(x) == float("inf"):
        return repr(x).replace("inf", "Infinity").replace("nan", "NaN")
    d = Decimal(repr(x)).normalize()
    digits = "".join(map(str, d.as_tuple().digits))
    sign = "-" if x < 0 else ""
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{d.adjusted()}"


def _broker_entries(broker: BrokerConfig, per_broker: bool, keys: list[str] | None,
                    synonyms: bool, documentation: bool) -> list[ResourceResult]:
    if keys is None:
        names = set(broker.dynamic_default)
        if per_broker:
            names |= set(catalogue()) | set(BROKER_CONFIGS) | set(broker.dynamic_broker)
            names |= set(broker.security)
            # Kafka reads these as its authorizer's properties, not as broker configs:
            # DescribeConfigs does not list them.
            names -= {"super.users", "allow.everyone.if.no.acl.found"}
        keys = sorted(names)
    out = []
    for name in keys:
        entry = _broker_entry(broker, name, per_broker, synonyms, documentation)
        if entry is not None:
            out.append(entry)
    return out


def _check_broker_name(ctx: RequestContext, name: str) -> bool:
    """Whether ``name`` names this broker (True) or the cluster default "" (False)."""
    if name == "":
        return False
    try:
        node = int(name)
    except ValueError:
        raise InvalidRequestError(f"Node id must be an integer, but it is: {name}") from None
    if node != ctx.broker.node_id:
        raise InvalidRequestError(f"Unexpected broker id, expected {ctx.broker.node_id}, but "
                                  f"received {name}")
    return True


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
                per_broker = _check_broker_name(ctx, res.resource_name)
                result.configs = _broker_entries(ctx.broker.config, per_broker, keys,
                                                 req.include_synonyms,
                                                 req.include_documentation)
            elif res.resource_type == GROUP_RESOURCE:
                from server_ref.share import ShareCoordinator, group_configs

                result.configs = group_configs.describe_entries(
                    ShareCoordinator.of(ctx.broker).configs, res.resource_name, keys,
                    DescribeConfigsResponse.DescribeConfigsResourceResult, Synonym,
                    req.include_synonyms)
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
    topic = ctx.broker.topics.require(name)
    validate_topic(topic.overrides, overrides, ctx.broker.config)  # tiered storage's rules
    if not validate_only:
        ctx.broker.topics.replace_overrides(name, overrides)
        ctx.broker.remote.wake()  # turned on: copies start; off: remote data goes


def check_broker_update(config: BrokerConfig, values: dict[str, str | None],
                        per_broker: bool) -> None:
    """Kafka's checks, then this broker's own parse of the configs it acts on (its limits
    may be narrower); InvalidRequestError when the change is refused. The controller runs
    the same checks in cluster mode (``server_ref.controller.config_records``)."""
    current = {}
    for name in values:
        entry = _broker_entry(config, name, per_broker, False, False)
        current[name] = entry.value if entry is not None else None
    validate_broker_update(values, per_broker, current)
    after = dict(config.properties)  # the values the broker would act on afterwards
    for key, value in values.items():
        definition = BROKER_CONFIGS.get(key)
        if definition is not None and value is not None:
            try:
                parsed = parse_config_value(definition, value)
            except InvalidConfigError as exc:
                raise InvalidRequestError(exc.message) from None
            if per_broker or key not in config.dynamic_broker:
                after[key] = parsed
    if (problem := group_config_problem(after)) is not None:
        raise InvalidRequestError(problem)


def _apply_broker(ctx: RequestContext, values: dict[str, str | None], per_broker: bool,
                  validate_only: bool) -> None:
    """The checks, then the change at the resource's level."""
    check_broker_update(ctx.broker.config, values, per_broker)
    if validate_only:
        return
    config = ctx.broker.config
    for key, value in values.items():
        config.alter(key, value, cluster_default=not per_broker)
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
def alter_configs(ctx: RequestContext, req: AlterConfigsRequest) -> Any:
    """The legacy, whole-set variant: the given configs replace every override."""
    if ctx.broker.cluster is not None and any(
            r.resource_type in FORWARDED for r in req.resources):
        from server_ref.cluster import forwarding  # through the controller

        return forwarding.alter_configs(ctx, req, alter_configs)
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
                per_broker = _check_broker_name(ctx, res.resource_name)
                config = ctx.broker.config
                level = config.dynamic_broker if per_broker else config.dynamic_default
                for name, value in given.items():
                    if value is None:
                        raise InvalidRequestError(f"Null value not supported for : {name}")
                reset = {k: None for k in level if k not in given}  # the whole set is replaced
                _apply_broker(ctx, {**reset, **given}, per_broker, req.validate_only)
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
        if definition is None and op.config_operation == DELETE:
            continue  # as Kafka: removing what is not there succeeds
        if definition is None:
            raise InvalidConfigError(f"Unknown topic config name: {op.name}")
        if op.config_operation == SET:
            if op.value is None:
                raise InvalidRequestError(f"Null value not supported for : {op.name}")
            result[op.name] = parse_config_value(definition, op.value)
        elif op.config_operation == DELETE:
            result.pop(op.name, None)
        elif op.config_operation in (APPEND, SUBTRACT):
            if definition.type is not ConfigType.LIST:
                verb = "APPEND" if op.config_operation == APPEND else "SUBTRACT"
                raise InvalidConfigError(
                    f"Can't {verb} to key {op.name} because its type is not LIST.")
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


def _incremental_broker(config: BrokerConfig, per_broker: bool,
                        ops: list[IncrementalAlterConfigsRequest.AlterableConfig]
                        ) -> dict[str, str | None]:
    """The operations as values to set (None: delete); APPEND and SUBTRACT work on the
    list the broker shows now, for LIST configs only (INVALID_CONFIG otherwise)."""
    values: dict[str, str | None] = {}
    for op in ops:
        if op.config_operation == SET:
            if op.value is None:
                raise InvalidRequestError(f"Null value not supported for : {op.name}")
            values[op.name] = op.value
        elif op.config_operation == DELETE:
            values[op.name] = None
        elif op.config_operation in (APPEND, SUBTRACT):
            verb = "append" if op.config_operation == APPEND else "subtract"
            known = catalogue().get(op.name)
            if known is None:
                raise InvalidConfigError(f"Unknown config name: {op.name}")
            if known.type != "LIST":
                raise InvalidConfigError(
                    f"Config value {verb} is not allowed for config key: {op.name}")
            entry = _broker_entry(config, op.name, per_broker, False, False)
            current = [i.strip() for i in ((entry.value if entry else None) or "").split(",")
                       if i.strip()]
            items = [i.strip() for i in (op.value or "").split(",") if i.strip()]
            if op.config_operation == APPEND:
                current += [i for i in items if i not in current]
            else:
                current = [i for i in current if i not in items]
            values[op.name] = ",".join(current)
        else:
            raise InvalidRequestError(f"Unknown config operation {op.config_operation}")
    return values


@handles(44, 0, 1)
def incremental_alter_configs(ctx: RequestContext, req: IncrementalAlterConfigsRequest
                              ) -> Any:
    if ctx.broker.cluster is not None and any(
            r.resource_type in (*FORWARDED, GROUP_RESOURCE) for r in req.resources):
        from server_ref.cluster import forwarding  # through the controller (group configs too)

        return forwarding.incremental_alter_configs(ctx, req, incremental_alter_configs)
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
                per_broker = _check_broker_name(ctx, res.resource_name)
                _apply_broker(ctx, _incremental_broker(ctx.broker.config, per_broker,
                                                       res.configs),
                              per_broker, req.validate_only)
            elif res.resource_type == GROUP_RESOURCE:
                from server_ref.share import ShareCoordinator, group_configs

                group_configs.alter_incrementally(ShareCoordinator.of(ctx.broker).configs,
                                                  res.resource_name, res.configs,
                                                  req.validate_only)
            else:
                raise InvalidRequestError(f"Unsupported resource type {res.resource_type}")
        except KafkaError as exc:
            error = exc
        responses.append(_response_entry(
            IncrementalAlterConfigsResponse.AlterConfigsResourceResponse, res, error))
    return IncrementalAlterConfigsResponse(responses=responses)
