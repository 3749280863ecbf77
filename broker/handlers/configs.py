"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs: topic configs (Kafka's names,
from storage.log_config) and, read-only, the broker's own."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, cast

from ottla.coordinator.group import GroupConfig
from ottla.coordinator.group_resource_configs import GroupConfigDefinition
from ottla.coordinator.group_resource_configs import check as check_group_configs
from ottla.coordinator.group_resource_configs import definitions as group_config_definitions
from ottla.coordinator.internal_topics import ClientAction, check_client_action
from ottla.coordinator.share_config import ShareConfig
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.loggers import logger_levels, set_logger_level
from ottla.storage.log_config import TOPIC_CONFIGS, LogConfig

from ..config_entries import DYNAMIC_BROKER_CONFIGS as _DYNAMIC
from ..config_entries import ConfigSource, ConfigType, broker_config_entries
from ..dynamic_config import CLUSTER_DEFAULT, THIS_BROKER
from ..security.authorizer import Operation, ResourceType
from .context import RequestContext

if TYPE_CHECKING:
    from ottla.protocol.views import alter_configs, incremental_alter_configs
    from ottla.protocol.views.alter_configs import (
        AlterConfigsRequest,
        AlterConfigsResourceResponse,
        AlterConfigsResponse,
    )
    from ottla.protocol.views.describe_configs import (
        DescribeConfigsRequest,
        DescribeConfigsResourceResult,
        DescribeConfigsResponse,
        DescribeConfigsResult,
        DescribeConfigsSynonym,
    )
    from ottla.protocol.views.incremental_alter_configs import (
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
    )

    # A config change of either API: AlterConfigs' (a SET, implicitly) or IncrementalAlterConfigs'.
    Change = alter_configs.AlterableConfig | incremental_alter_configs.AlterableConfig
    AlterResource = alter_configs.AlterConfigsResource | incremental_alter_configs.AlterConfigsResource
    # What a change makes of a topic's (or a broker's) configs; None values are refused later.
    NewConfigs = Callable[..., dict[str, str | None]]


class _Resource(Protocol):
    """What every configs API names a resource by."""

    resource_type: int
    resource_name: str

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
# The resource types Kafka 4 knows; any other is refused before anything is looked at.
_KNOWN_TYPES = frozenset({TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP})
_LIST_CONFIGS = frozenset({"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"})
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

_DEFAULTS = LogConfig()


def _type_of(name: str) -> int:
    value = getattr(_DEFAULTS, TOPIC_CONFIGS[name].attribute)
    if isinstance(value, tuple) or name in _LIST_CONFIGS:
        return ConfigType.LIST
    if isinstance(value, bool):
        return ConfigType.BOOLEAN
    if isinstance(value, float):
        return ConfigType.DOUBLE
    if isinstance(value, str):
        return ConfigType.STRING
    if name in ("segment.bytes", "max.message.bytes", "index.interval.bytes", "segment.index.bytes",
                "min.insync.replicas") or name.startswith("compression."):
        return ConfigType.INT
    return ConfigType.LONG


# Broker properties whose Kafka default is null (the value comes from another property,
# log.retention.hours or log.roll.hours, or is unset): Kafka lists them as a topic
# config's synonym only when they are set.
_NULL_BY_DEFAULT = frozenset({"log.retention.ms", "log.roll.ms", "log.roll.jitter.ms", "log.flush.interval.ms"})


def _topic_entries(ctx: RequestContext, name: str, keys: set[str] | None, synonyms: bool, docs: bool
                   ) -> list[DescribeConfigsResourceResult]:
    services = ctx.services
    topic = services.logs.topic(name)
    if topic is None:
        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist")
    entries: list[DescribeConfigsResourceResult] = []
    for config_name, definition in TOPIC_CONFIGS.items():
        if keys is not None and config_name not in keys:
            continue
        broker_value = services.config.log.value_text(config_name)
        default_value = _DEFAULTS.value_text(config_name)
        # The broker's values this topic falls back on, the one in force first (Kafka's order).
        below: list[DescribeConfigsSynonym] = []
        if definition.broker_property is not None:
            broker_property = definition.broker_property
            scope = services.dynamic_configs.source_of(broker_property)
            if scope is not None:
                dynamic = ConfigSource.DYNAMIC_BROKER_CONFIG if scope == THIS_BROKER \
                    else ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
                below.append({"name": broker_property, "value": broker_value, "source": dynamic})
            static_value = services.static_config.log.value_text(config_name)
            if static_value != default_value:
                below.append({"name": broker_property, "value": static_value,
                              "source": ConfigSource.STATIC_BROKER_CONFIG})
            if broker_property not in _NULL_BY_DEFAULT:
                below.append({"name": broker_property, "value": default_value, "source": ConfigSource.DEFAULT_CONFIG})
        broker_source = below[0]["source"] if below else ConfigSource.DEFAULT_CONFIG
        overridden = config_name in topic.configs
        chain: list[DescribeConfigsSynonym] = []
        if overridden:
            chain.append({"name": config_name, "value": topic.config.value_text(config_name),
                          "source": ConfigSource.DYNAMIC_TOPIC_CONFIG})
        chain += below
        entries.append({
            "name": config_name,
            "value": topic.config.value_text(config_name),
            "read_only": False,
            "config_source": ConfigSource.DYNAMIC_TOPIC_CONFIG if overridden else broker_source,
            "is_sensitive": False,
            "synonyms": chain if synonyms else [],
            "config_type": _type_of(config_name),
            "documentation": definition.doc if docs else None,
        })
    return entries


def _broker_entries(ctx: RequestContext, keys: set[str] | None, synonyms: bool) -> list[DescribeConfigsResourceResult]:
    # config_entries.py builds DescribeConfigs' entries for the web console too, as plain dicts.
    return cast("list[DescribeConfigsResourceResult]", broker_config_entries(ctx.services, keys, synonyms))


def _logger_entries(keys: set[str] | None) -> list[DescribeConfigsResourceResult]:
    return [{"name": name, "value": level, "read_only": False,
             "config_source": ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
             "is_sensitive": False, "synonyms": [], "config_type": ConfigType.STRING}
            for name, level in logger_levels().items() if keys is None or name in keys]


def _check_broker(ctx: RequestContext, resource: _Resource) -> None:
    if resource.resource_name not in ("", str(ctx.services.node_id)):
        raise KafkaError(ErrorCode.invalid_request, f"Unexpected broker id, expected {ctx.services.node_id} "
                                                    f"or empty string, but received {resource.resource_name}")


def _check_allowed(ctx: RequestContext, resource: _Resource, operation: Operation) -> None:
    """Kafka's checks (ConfigHelper, ConfigAdminManager): a topic's configs need the
    operation on the topic, a group's on the group, and the broker's, its loggers' and
    the client metrics' on the cluster."""
    kind = resource.resource_type
    if kind == TOPIC and not ctx.allowed(operation, ResourceType.TOPIC, resource.resource_name):
        raise KafkaError(ErrorCode.topic_authorization_failed, "Authorization failed.")
    if kind == GROUP and not ctx.allowed(operation, ResourceType.GROUP, resource.resource_name):
        raise KafkaError(ErrorCode.group_authorization_failed, "Authorization failed.")
    if kind in (BROKER, BROKER_LOGGER, CLIENT_METRICS) and not ctx.allowed_on_cluster(operation):
        raise KafkaError(ErrorCode.cluster_authorization_failed, "Authorization failed.")
    if kind not in _KNOWN_TYPES:
        raise KafkaError(ErrorCode.invalid_request, f"Unknown resource type {kind}")


def handle_describe_configs(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    unknown = next((r for r in request.resources if r.resource_type not in _KNOWN_TYPES), None)
    if unknown is not None:
        # Kafka fails the whole request (ConfigHelper throws before authorizing any of it).
        message = f"Unexpected resource type UNKNOWN for resource {unknown.resource_name}"
        return {"results": [{"resource_type": r.resource_type, "resource_name": r.resource_name,
                             "error_code": ErrorCode.invalid_request, "error_message": message,
                             "configs": []} for r in request.resources]}
    results: list[DescribeConfigsResult] = []
    for resource in request.resources:
        result: DescribeConfigsResult = {"resource_type": resource.resource_type,
                                         "resource_name": resource.resource_name, "error_code": ErrorCode.none,
                                         "configs": []}
        keys = None if resource.configuration_keys is None else set(resource.configuration_keys)
        try:
            _check_allowed(ctx, resource, Operation.DESCRIBE_CONFIGS)
            if resource.resource_type == TOPIC:
                result["configs"] = _topic_entries(ctx, resource.resource_name, keys, request.include_synonyms,
                                                   request.include_documentation)
            elif resource.resource_type == BROKER:
                _check_broker(ctx, resource)
                result["configs"] = _broker_entries(ctx, keys, request.include_synonyms)
            elif resource.resource_type == BROKER_LOGGER:
                _check_broker(ctx, resource)
                result["configs"] = _logger_entries(keys)
            elif resource.resource_type == GROUP:
                result["configs"] = _group_entries(ctx, resource.resource_name, keys,
                                                   getattr(request, "include_synonyms", False))
            else:
                raise KafkaError(ErrorCode.invalid_request, f"resource type {resource.resource_type} is not supported")
        except KafkaError as exc:
            result.update({"error_code": exc.code, "error_message": exc.message})
        results.append(result)
    return {"results": results}


def _alter(ctx: RequestContext, resource: AlterResource, new_configs: NewConfigs, validate_only: bool,
           legacy: bool = False) -> AlterConfigsResourceResponse:
    answer: AlterConfigsResourceResponse = {"resource_type": resource.resource_type,
                                            "resource_name": resource.resource_name, "error_code": ErrorCode.none}
    try:
        if legacy and resource.resource_type == BROKER_LOGGER:
            # Kafka's AlterConfigs (the deprecated one) does not know loggers at all.
            raise KafkaError(ErrorCode.invalid_request, f"Unknown resource type {BROKER_LOGGER}")
        _check_allowed(ctx, resource, Operation.ALTER_CONFIGS)
        if resource.resource_type in (BROKER, BROKER_LOGGER):
            _check_broker(ctx, resource)
            if resource.resource_type == BROKER:
                _alter_broker(ctx, resource, new_configs, validate_only)
            else:
                _alter_loggers(resource, validate_only)
            return answer
        if resource.resource_type == GROUP and not legacy:
            _alter_group(ctx, resource, validate_only)
            return answer
        if resource.resource_type != TOPIC:
            raise KafkaError(ErrorCode.invalid_request, f"resource type {resource.resource_type} is not supported")
        check_client_action(resource.resource_name, ClientAction.ALTER_CONFIGS, ctx.services.logs.internal_topics)
        topic = ctx.services.logs.topic(resource.resource_name)
        if topic is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic {resource.resource_name!r} does not exist")
        configs = _with_values(new_configs(topic))
        if validate_only:
            ctx.services.logs.default_config.with_topic_configs(configs)
        else:
            ctx.services.logs.set_topic_configs(topic.name, configs)
    except KafkaError as exc:
        answer.update({"error_code": exc.code, "error_message": exc.message})
    return answer


def _with_values(configs: dict[str, str | None]) -> dict[str, str]:
    """The configs a change leaves, each with its value: IncrementalAlterConfigs' SET with
    a null value is refused, as LogConfig refuses it (INVALID_CONFIG)."""
    for name, value in configs.items():
        if value is None:
            raise KafkaError(ErrorCode.invalid_config, f"{name} needs a value")
    return {name: value for name, value in configs.items() if value is not None}


class _Current:
    """What the config-change functions see of a broker's dynamic configs."""

    def __init__(self, configs: dict[str, str]) -> None:
        self.configs = configs
        self.config = LogConfig()

    def value_text(self, name: str) -> str:
        return self.configs.get(name, "")


def _alter_broker(ctx: RequestContext, resource: AlterResource, new_configs: NewConfigs, validate_only: bool) -> None:
    services = ctx.services
    scope = THIS_BROKER if resource.resource_name else CLUSTER_DEFAULT
    current = dict(services.dynamic_configs.scopes[scope])
    changed = new_configs(_Current(current), broker=True)
    refused = sorted(k for k in changed if k not in _DYNAMIC)
    if refused:
        raise KafkaError(ErrorCode.invalid_request, f"Cannot update these configs dynamically: {set(refused)}")
    values = _with_values(changed)
    for key, text in values.items():
        try:
            _DYNAMIC[key].parse_checked(text)
        except KafkaError as exc:
            raise KafkaError(exc.code, (exc.message or "").replace(_DYNAMIC[key].name, key)) from None
    if not validate_only:
        services.set_dynamic_broker_configs(scope, values)


# Kafka's DescribeConfigsResponse ConfigSource of a group's own config.
DYNAMIC_GROUP_CONFIG = 8


def _group_definitions(ctx: RequestContext) -> dict[str, GroupConfigDefinition]:
    return group_config_definitions(ctx.services.groups.settings.config, ctx.services.shares.config)


# The GROUP configs with Kafka's built-in defaults: a broker setting other than its
# default is a STATIC_BROKER_CONFIG, as broker_config_entries reports it.
_KAFKA_GROUP_DEFAULTS = group_config_definitions(GroupConfig(), ShareConfig())


def _group_entries(ctx: RequestContext, group_id: str, keys: set[str] | None,
                   synonyms: bool) -> list[DescribeConfigsResourceResult]:
    """A group's consumer.*, share.* and streams.* configs, as Kafka 4.3.1 lists them:
    its own values (DYNAMIC_GROUP_CONFIG), else the broker's settings (DEFAULT_CONFIG, or
    STATIC_BROKER_CONFIG for one set to other than Kafka's default), each with the
    broker setting it stands for as its synonym, down to Kafka's default."""
    if not group_id:
        raise KafkaError(ErrorCode.invalid_request, "Group name must not be empty")
    own = ctx.services.group_configs.of(group_id)
    entries: list[DescribeConfigsResourceResult] = []
    for name, definition in _group_definitions(ctx).items():
        if keys is not None and name not in keys:
            continue
        setting, kafka_default = definition.broker_synonym or name, _KAFKA_GROUP_DEFAULTS[name].default
        broker_source = (ConfigSource.DEFAULT_CONFIG if definition.default == kafka_default
                         else ConfigSource.STATIC_BROKER_CONFIG)
        source = DYNAMIC_GROUP_CONFIG if name in own else broker_source
        listed: list[DescribeConfigsSynonym] = (
            [{"name": name, "value": own[name], "source": DYNAMIC_GROUP_CONFIG}] if name in own else [])
        listed.append({"name": setting, "value": definition.default, "source": broker_source})
        if broker_source == ConfigSource.STATIC_BROKER_CONFIG:
            listed.append({"name": setting, "value": kafka_default, "source": ConfigSource.DEFAULT_CONFIG})
        entries.append({"name": name, "value": own.get(name, definition.default), "read_only": False,
                        "config_source": source, "is_sensitive": False, "synonyms": listed if synonyms else [],
                        "config_type": definition.type})
    return entries


def _alter_group(ctx: RequestContext, resource: Any, validate_only: bool) -> None:
    """IncrementalAlterConfigs of a GROUP: SET and DELETE of its configs, the group's
    configs as they would be checked as Kafka's GroupConfig.validate checks them
    (coordinator/group_resource_configs.py: INVALID_CONFIG with Kafka's messages)."""
    if not resource.resource_name:
        raise KafkaError(ErrorCode.invalid_request, "Default group resources are not allowed.")
    defined = _group_definitions(ctx)
    values = dict(ctx.services.group_configs.of(resource.resource_name))
    change: Change
    for change in resource.configs:
        op = getattr(change, "config_operation", SET)
        if op == SET and change.value is None:
            raise KafkaError(ErrorCode.invalid_request, f"Null value not supported for : {change.name}")
        if change.name not in defined:
            raise KafkaError(ErrorCode.invalid_config, f"Unknown group config name: {change.name}")
        if op == DELETE:
            values.pop(change.name, None)
        elif op == SET and change.value is not None:  # (a null SET was refused above)
            values[change.name] = change.value
        elif op in (APPEND, SUBTRACT):
            raise KafkaError(ErrorCode.invalid_config, f"Can't {'APPEND' if op == APPEND else 'SUBTRACT'} to key "
                                                       f"{change.name} because its type is not LIST.")
        else:
            raise KafkaError(ErrorCode.invalid_request, f"unknown config operation {op}")
    check_group_configs(defined, values)
    if not validate_only:
        ctx.services.group_configs.replace(resource.resource_name, values)


def _alter_loggers(resource: AlterResource, validate_only: bool) -> None:
    change: Change
    for change in resource.configs:
        op = getattr(change, "config_operation", SET)
        if op not in (SET, DELETE):
            raise KafkaError(ErrorCode.invalid_request, "APPEND and SUBTRACT do not apply to broker loggers")
        try:
            if validate_only:
                if op == SET and (change.value or "").upper() not in ("TRACE", "DEBUG", "INFO", "WARN", "ERROR",
                                                                      "FATAL", "OFF"):
                    raise ValueError(f"{change.value} is not a supported log level")
                continue
            set_logger_level(change.name, change.value if op == SET else None)
        except ValueError as exc:
            raise KafkaError(ErrorCode.invalid_config, str(exc)) from None


def handle_alter_configs(ctx: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
    """AlterConfigs replaces a topic's whole set of overrides."""
    responses = [
        _alter(ctx, r, lambda topic, r=r, broker=False: {c.name: c.value for c in r.configs if c.value is not None},
               request.validate_only, legacy=True)
        for r in request.resources
    ]
    return {"responses": responses}


def _incremental(topic: Any, changes: Iterable[incremental_alter_configs.AlterableConfig], broker: bool = False
                 ) -> dict[str, str | None]:
    names = [change.name for change in changes]
    if len(set(names)) != len(names):
        raise KafkaError(ErrorCode.invalid_request, "Error due to duplicate config keys")
    configs: dict[str, str | None] = dict(topic.configs)
    for change in changes:
        if not broker and change.name not in TOPIC_CONFIGS:
            raise KafkaError(ErrorCode.invalid_config, f"Unknown topic config name: {change.name}")
        op = change.config_operation
        if op == SET:
            configs[change.name] = change.value
        elif op == DELETE:
            configs.pop(change.name, None)
        elif op in (APPEND, SUBTRACT):
            name = _DYNAMIC[change.name].name if broker and change.name in _DYNAMIC else change.name
            if name not in TOPIC_CONFIGS or _type_of(name) != ConfigType.LIST:
                raise KafkaError(ErrorCode.invalid_config, f"{change.name} is not a list")
            current = (topic.value_text(change.name) if broker else topic.config.value_text(name)).split(",")
            items = [v for v in (change.value or "").split(",") if v]
            merged = current + [v for v in items if v not in current] if op == APPEND else \
                [v for v in current if v not in items]
            configs[change.name] = ",".join(merged)
        else:
            raise KafkaError(ErrorCode.invalid_request, f"unknown config operation {op}")
    return configs


def handle_incremental_alter_configs(ctx: RequestContext, request: IncrementalAlterConfigsRequest
                                     ) -> IncrementalAlterConfigsResponse:
    responses = [
        _alter(ctx, r, lambda topic, r=r, broker=False: _incremental(topic, r.configs, broker),
               request.validate_only)
        for r in request.resources
    ]
    return {"responses": responses}
