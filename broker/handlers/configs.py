"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs: topic configs (Kafka's names,
from storage.log_config) and, read-only, the broker's own."""

from __future__ import annotations

from typing import Any

from ottla.coordinator.internal_topics import ClientAction, check_client_action
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.storage.log_config import TOPIC_CONFIGS, LogConfig

from .context import RequestContext

TOPIC, BROKER = 2, 4
# Kafka's ConfigSource ids.
TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
# Kafka's ConfigType ids.
STRING, INT, LONG, DOUBLE, LIST = 2, 3, 5, 6, 7
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

_DEFAULTS = LogConfig()


def _type_of(name: str) -> int:
    value = getattr(_DEFAULTS, TOPIC_CONFIGS[name].attribute)
    if isinstance(value, tuple):
        return LIST
    if isinstance(value, float):
        return DOUBLE
    return LONG if name.endswith(".ms") or name.endswith("bytes") else INT


def _topic_entries(ctx: RequestContext, name: str, keys: Any, synonyms: bool, docs: bool) -> list[dict[str, Any]]:
    services = ctx.services
    topic = services.logs.topic(name)
    if topic is None:
        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist")
    entries = []
    for config_name, definition in TOPIC_CONFIGS.items():
        if keys is not None and config_name not in keys:
            continue
        broker_value = services.config.log.value_text(config_name)
        broker_source = DEFAULT_CONFIG if broker_value == _DEFAULTS.value_text(config_name) else STATIC_BROKER_CONFIG
        overridden = config_name in topic.configs
        chain = []
        if overridden:
            chain.append({"name": config_name, "value": topic.config.value_text(config_name), "source": TOPIC_CONFIG})
        chain.append({"name": definition.broker_property, "value": broker_value, "source": broker_source})
        entries.append({
            "name": config_name,
            "value": topic.config.value_text(config_name),
            "read_only": False,
            "config_source": TOPIC_CONFIG if overridden else broker_source,
            "is_sensitive": False,
            "synonyms": chain if synonyms else [],
            "config_type": _type_of(config_name),
            "documentation": definition.doc if docs else None,
        })
    return entries


def _broker_entries(ctx: RequestContext, keys: Any) -> list[dict[str, Any]]:
    return [
        {"name": name, "value": value, "read_only": True, "config_source": STATIC_BROKER_CONFIG,
         # A secret (admin.token): broker_properties gives no value for it.
         "is_sensitive": value is None, "synonyms": [], "config_type": STRING}
        for name, value in sorted(ctx.services.config.broker_properties().items())
        if keys is None or name in keys
    ]


def handle_describe_configs(ctx: RequestContext, request: Any) -> Any:
    results = []
    for resource in request.resources:
        result: dict[str, Any] = {"resource_type": resource.resource_type, "resource_name": resource.resource_name,
                                  "error_code": ErrorCode.none, "configs": []}
        keys = None if resource.configuration_keys is None else set(resource.configuration_keys)
        try:
            if resource.resource_type == TOPIC:
                result["configs"] = _topic_entries(ctx, resource.resource_name, keys,
                                                   getattr(request, "include_synonyms", False),
                                                   getattr(request, "include_documentation", False))
            elif resource.resource_type == BROKER:
                if resource.resource_name not in ("", str(ctx.services.node_id)):
                    raise KafkaError(ErrorCode.invalid_request, f"no broker {resource.resource_name}")
                result["configs"] = _broker_entries(ctx, keys)
            else:
                raise KafkaError(ErrorCode.invalid_request, f"resource type {resource.resource_type} is not supported")
        except KafkaError as exc:
            result.update(error_code=exc.code, error_message=exc.message)
        results.append(result)
    return ctx.respond(results=results)


def _alter(ctx: RequestContext, resource: Any, new_configs: Any, validate_only: bool) -> dict[str, Any]:
    answer = {"resource_type": resource.resource_type, "resource_name": resource.resource_name,
              "error_code": ErrorCode.none}
    try:
        if resource.resource_type != TOPIC:
            raise KafkaError(ErrorCode.invalid_request, "only topic configs can be changed; broker configs are static")
        check_client_action(resource.resource_name, ClientAction.ALTER_CONFIGS)
        topic = ctx.services.logs.topic(resource.resource_name)
        if topic is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic {resource.resource_name!r} does not exist")
        configs = new_configs(topic)
        if validate_only:
            ctx.services.logs.default_config.with_topic_configs(configs)
        else:
            ctx.services.logs.set_topic_configs(topic.name, configs)
    except KafkaError as exc:
        answer.update(error_code=exc.code, error_message=exc.message)
    return answer


def handle_alter_configs(ctx: RequestContext, request: Any) -> Any:
    """AlterConfigs replaces a topic's whole set of overrides."""
    responses = [
        _alter(ctx, r, lambda topic, r=r: {c.name: c.value for c in r.configs if c.value is not None},
               request.validate_only)
        for r in request.resources
    ]
    return ctx.respond(responses=responses)


def _incremental(topic: Any, changes: Any) -> dict[str, str]:
    configs = dict(topic.configs)
    for change in changes:
        if change.name not in TOPIC_CONFIGS:
            raise KafkaError(ErrorCode.invalid_config, f"unknown topic config {change.name!r}")
        op = change.config_operation
        if op == SET:
            configs[change.name] = change.value
        elif op == DELETE:
            configs.pop(change.name, None)
        elif op in (APPEND, SUBTRACT):
            if _type_of(change.name) != LIST:
                raise KafkaError(ErrorCode.invalid_config, f"{change.name} is not a list")
            current = topic.config.value_text(change.name).split(",")
            items = [v for v in (change.value or "").split(",") if v]
            merged = current + [v for v in items if v not in current] if op == APPEND else \
                [v for v in current if v not in items]
            configs[change.name] = ",".join(merged)
        else:
            raise KafkaError(ErrorCode.invalid_request, f"unknown config operation {op}")
    return configs


def handle_incremental_alter_configs(ctx: RequestContext, request: Any) -> Any:
    responses = [
        _alter(ctx, r, lambda topic, r=r: _incremental(topic, r.configs), request.validate_only)
        for r in request.resources
    ]
    return ctx.respond(responses=responses)
