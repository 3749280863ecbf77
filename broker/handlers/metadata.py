"""Metadata: the broker (just us), the cluster id, the controller (us) and the topics.

A topic a client asks for that does not exist is created on the spot when
`auto.create.topics.enable` is on and the request allows it, as Kafka does, and is
answered at once with its partitions (Kafka answers LEADER_NOT_AVAILABLE first and
makes the client ask again; a single node has nothing to wait for).
"""

from __future__ import annotations

from typing import Any

from ottla.coordinator.internal_topics import is_internal
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.storage.log_manager import Topic

from .context import RequestContext

# Kafka's value for "authorized operations not requested".
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    logs = services.logs
    requested = request.topics
    if requested is None or (ctx.version == 0 and not requested):
        topics = [_describe(t, services.node_id) for t in logs.topics.values()]
    else:
        allow_create = getattr(request, "allow_auto_topic_creation", True) and services.config.auto_create_topics_enable
        topics = []
        for wanted in requested:
            name = wanted.name
            topic = logs.topic(name) if name is not None else None
            topic_id = getattr(wanted, "topic_id", None)
            if topic is None and name is None and topic_id is not None:
                topic = logs.topic_by_id(topic_id)
            # An internal topic is created by its coordinator (with its own partition count
            # and settings), never by auto-creation: `__consumer_offsets` on first group use.
            if topic is None and name is not None and allow_create and not is_internal(name):
                try:
                    topic = services.create_topic(name, services.config.num_partitions)
                except KafkaError as exc:
                    topics.append({"error_code": exc.code, "name": name})
                    continue
            if topic is None:
                topics.append({"error_code": ErrorCode.unknown_topic_or_partition, "name": name,
                               "topic_id": topic_id, "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
                continue
            topics.append(_describe(topic, services.node_id))
    host, port = ctx.advertised_address
    return ctx.respond(
        brokers=[{"node_id": services.node_id, "host": host, "port": port, "rack": None}],
        cluster_id=logs.cluster_id,
        controller_id=services.node_id,
        topics=topics,
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def _describe(topic: Topic, node_id: int) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.none,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.internal,
        "partitions": [
            {
                "error_code": ErrorCode.none,
                "partition_index": log.partition,
                "leader_id": node_id,
                "leader_epoch": log.leader_epoch,
                "replica_nodes": [node_id],
                "isr_nodes": [node_id],
                "offline_replicas": [],
            }
            for log in topic.partitions
        ],
        "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }
