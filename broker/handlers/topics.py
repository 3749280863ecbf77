"""CreateTopics, DeleteTopics and DeleteRecords."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import TYPE_CHECKING

from ottla.coordinator.internal_topics import ClientAction, check_client_action
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.views import ZERO_UUID
from ottla.storage.log_config import TOPIC_CONFIGS, LogConfig

from ..config_entries import ConfigSource
from ..logging import get_logger
from ..security.authorizer import Operation, ResourceType
from ..services import MAX_PARTITIONS_PER_REQUEST, Services
from .context import RequestContext

if TYPE_CHECKING:
    from ottla.protocol.views.create_partitions import (
        CreatePartitionsRequest,
        CreatePartitionsResponse,
        CreatePartitionsTopicResult,
    )
    from ottla.protocol.views.create_topics import (
        CreatableTopicConfigs,
        CreatableTopicResult,
        CreateTopicsRequest,
        CreateTopicsResponse,
    )
    from ottla.protocol.views.delete_records import (
        DeleteRecordsPartitionResult,
        DeleteRecordsRequest,
        DeleteRecordsResponse,
        DeleteRecordsTopicResult,
    )
    from ottla.protocol.views.delete_topics import DeletableTopicResult, DeleteTopicsRequest, DeleteTopicsResponse

log = get_logger("ottla.topics")

DEFAULT = -1  # num_partitions / replication_factor: "use the broker's default"


def handle_create(ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    services = ctx.services
    requested = sum(len(t.assignments) if t.assignments else
                    services.config.num_partitions if t.num_partitions == DEFAULT else max(t.num_partitions, 0)
                    for t in request.topics)
    if requested > MAX_PARTITIONS_PER_REQUEST:
        log.warning("create topics refused", partitions=requested, limit=MAX_PARTITIONS_PER_REQUEST,
                    client_id=ctx.header.client_id, peer=ctx.peer)
        return {"topics": [
            {"name": t.name, "num_partitions": -1, "replication_factor": -1, "configs": [],
             "error_code": ErrorCode.policy_violation,
             "error_message": "Excessively large number of partitions per request."}
            for t in request.topics]}
    results: list[CreatableTopicResult] = []
    # A name given twice is refused once, and neither is created (Kafka's controller).
    counts = Counter(t.name for t in request.topics)
    for name in sorted(n for n, count in counts.items() if count > 1):
        results.append({"name": name, "num_partitions": -1, "replication_factor": -1, "configs": [],
                        "error_code": ErrorCode.invalid_request, "error_message": "Duplicate topic name."})
    for t in request.topics:
        if counts[t.name] > 1:
            continue
        # Kafka's error answers carry the schema's defaults: an empty config list.
        result: CreatableTopicResult = {"name": t.name, "num_partitions": -1, "replication_factor": -1, "configs": []}
        try:
            if not (ctx.allowed_on_cluster(Operation.CREATE) or ctx.allowed(Operation.CREATE, ResourceType.TOPIC,
                                                                            t.name)):
                raise KafkaError(ErrorCode.topic_authorization_failed, "Authorization failed.")
            check_client_action(t.name, ClientAction.CREATE_TOPIC, ctx.services.logs.internal_topics)
            partitions = services.config.num_partitions if t.num_partitions == DEFAULT else t.num_partitions
            if t.assignments:
                partitions = len(t.assignments)
                if any(list(a.broker_ids) != [services.node_id] for a in t.assignments):
                    raise KafkaError(ErrorCode.invalid_replica_assignment,
                                     f"this cluster has only broker {services.node_id}")
            if t.replication_factor not in (DEFAULT, 1):
                raise KafkaError(
                    ErrorCode.invalid_replication_factor,
                    f"replication factor {t.replication_factor} is larger than the number of brokers (1)",
                )
            configs: dict[str, str] = {}
            for c in t.configs:
                if c.value is None:  # as LogConfig.with_topic_configs refuses it
                    raise KafkaError(ErrorCode.invalid_config, f"{c.name} needs a value")
                configs[c.name] = c.value
            topic = services.create_topic(t.name, partitions, configs, validate_only=request.validate_only)
            # validate_only: Kafka's controller answers the id it would have given the topic.
            topic_id = topic.topic_id if topic is not None else uuid.uuid4()
            # v5+: the topic's whole config, with sources, as DescribeConfigs would give it.
            result.update({"error_code": ErrorCode.none, "topic_id": topic_id, "num_partitions": partitions,
                           "replication_factor": 1, "configs": _created_configs(services, configs)})
        except KafkaError as exc:
            result.update({"error_code": exc.code, "error_message": exc.message})
        results.append(result)
    return {"topics": results}


def _created_configs(services: Services, configs: dict[str, str]) -> list[CreatableTopicConfigs]:
    defaults = services.config.log
    config = services.logs.default_config.with_topic_configs(configs)
    entries: list[CreatableTopicConfigs] = []
    for name, definition in TOPIC_CONFIGS.items():
        if name in configs:
            source = ConfigSource.DYNAMIC_TOPIC_CONFIG
        elif definition.broker_property is not None and defaults.value_text(name) != LogConfig().value_text(name):
            source = ConfigSource.STATIC_BROKER_CONFIG
        else:
            source = ConfigSource.DEFAULT_CONFIG
        entries.append({"name": name, "value": config.value_text(name), "read_only": False,
                        "config_source": source, "is_sensitive": False})
    return entries


def handle_delete(ctx: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    services = ctx.services
    results: list[DeletableTopicResult] = []
    entries: list[tuple[str | None, uuid.UUID | None]]
    if ctx.version <= 5:  # topics by name only
        entries = [(name, None) for name in request.topic_names]
    else:
        entries = [(t.name, t.topic_id) for t in request.topics]
    for name, topic_id in entries:
        both = name is not None and topic_id not in (None, ZERO_UUID)
        if name is None and topic_id is not None:
            topic = services.logs.topic_by_id(topic_id)
            name = topic.name if topic is not None else None
        try:
            if both:
                raise KafkaError(ErrorCode.invalid_request, "You may not specify both topic name and topic id.")
            if name is None:
                raise KafkaError(ErrorCode.unknown_topic_id, f"no topic has id {topic_id}")
            if not ctx.allowed(Operation.DELETE, ResourceType.TOPIC, name):
                # As Kafka's ControllerApis: a topic named by id keeps its name from a
                # principal that may not describe it, so its id tells nothing; one named
                # by a principal that may describe it is said not to exist if it does not.
                describable = ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name)
                if topic_id is None and describable and services.logs.topic(name) is None:
                    raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist")
                if topic_id is not None and not describable:
                    name = None
                raise KafkaError(ErrorCode.topic_authorization_failed, "Authorization failed.")
            check_client_action(name, ClientAction.DELETE_TOPIC, ctx.services.logs.internal_topics)
            deleted = services.delete_topic(name)
            results.append({"name": name, "topic_id": deleted.topic_id, "error_code": ErrorCode.none})
        except KafkaError as exc:
            log.warning("topic not deleted", topic=name, error=exc.code.name, reason=exc.message,
                        client_id=ctx.header.client_id)
            results.append({"name": name, "topic_id": topic_id, "error_code": exc.code,
                            "error_message": exc.message})
    return {"responses": results}


def handle_delete_records(ctx: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    logs = ctx.services.logs
    topics: list[DeleteRecordsTopicResult] = []
    changed = []  # the partitions whose log start offset moved (or may have)
    for t in request.topics:
        partitions: list[DeleteRecordsPartitionResult] = []
        for p in t.partitions:
            partition_log = logs.partition(t.name, p.partition_index)
            try:
                if not ctx.allowed(Operation.DELETE, ResourceType.TOPIC, t.name):
                    raise KafkaError(ErrorCode.topic_authorization_failed, "Authorization failed.")
                check_client_action(t.name, ClientAction.DELETE_RECORDS, logs.internal_topics)
                if partition_log is None:
                    raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{t.name}-{p.partition_index}")
                low = partition_log.delete_records_before(p.offset)
                changed.append(partition_log)
                partitions.append({"partition_index": p.partition_index, "low_watermark": low,
                                   "error_code": ErrorCode.none})
            except KafkaError as exc:
                log.warning("records not deleted", topic=t.name, partition=p.partition_index,
                            error=exc.code.name, reason=exc.message, client_id=ctx.header.client_id)
                partitions.append({"partition_index": p.partition_index, "low_watermark": -1,
                                   "error_code": exc.code})
        topics.append({"name": t.name, "partitions": partitions})
    # The new log start offsets must survive a crash.
    logs.checkpoint(changed)
    return {"topics": topics}


def handle_create_partitions(ctx: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    """CreatePartitions: more partitions for existing topics, as Kafka's controller
    checks it (a one-broker cluster: assignments may name only this broker)."""
    services = ctx.services
    counts = Counter(t.name for t in request.topics)
    # A name given twice is answered once, refused (Kafka's controller).
    results: list[CreatePartitionsTopicResult] = [{"name": name, "error_code": ErrorCode.invalid_request,
                                                   "error_message": "Duplicate topic name."}
                                                  for name in sorted(n for n, count in counts.items() if count > 1)]
    for t in request.topics:
        if counts[t.name] > 1:
            continue
        try:
            if not ctx.allowed(Operation.ALTER, ResourceType.TOPIC, t.name):
                raise KafkaError(ErrorCode.topic_authorization_failed, "Authorization failed.")
            check_client_action(t.name, ClientAction.CREATE_PARTITIONS, services.logs.internal_topics)
            topic = services.logs.validate_partition_count(t.name, t.count)
            added = t.count - len(topic.partitions)
            if added > MAX_PARTITIONS_PER_REQUEST:
                raise KafkaError(ErrorCode.policy_violation, "Excessively large number of partitions per request.")
            if t.assignments is not None:
                if len(t.assignments) != added:
                    raise KafkaError(ErrorCode.invalid_replica_assignment,
                                     f"Attempted to add {added} additional partition(s), but only "
                                     f"{len(t.assignments)} assignment(s) were specified.")
                if any(list(a.broker_ids) != [services.node_id] for a in t.assignments):
                    raise KafkaError(ErrorCode.invalid_replica_assignment,
                                     f"this cluster has only broker {services.node_id}")
            if not request.validate_only:
                services.logs.add_partitions(t.name, t.count)
                log.info("partitions added", topic=t.name, partitions=t.count, client_id=ctx.header.client_id)
            results.append({"name": t.name, "error_code": ErrorCode.none, "error_message": None})
        except KafkaError as exc:
            results.append({"name": t.name, "error_code": exc.code, "error_message": exc.message})
    return {"results": results}
