"""Metadata: the broker (just us), the cluster id, the controller (us) and the topics.

A topic a client asks for that does not exist is created on the spot when
`auto.create.topics.enable` is on and the request allows it, as Kafka does, and is
answered at once with its partitions (Kafka answers LEADER_NOT_AVAILABLE first and
makes the client ask again; a single node has nothing to wait for).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ottla.coordinator.internal_topics import is_internal
from ottla.protocol.codec import Encoded
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.storage.log_manager import Topic, validate_topic_name

from ..security.authorizer import Operation, ResourceType
from .authorized_operations import OMITTED as AUTHORIZED_OPERATIONS_OMITTED
from .authorized_operations import authorized_operations
from .context import Built, RequestContext

if TYPE_CHECKING:
    from ottla.protocol.views.describe_cluster import DescribeClusterRequest, DescribeClusterResponse
    from ottla.protocol.views.describe_topic_partitions import (
        CursorResponse,
        DescribeTopicPartitionsRequest,
        DescribeTopicPartitionsResponse,
        DescribeTopicPartitionsResponsePartition,
        DescribeTopicPartitionsResponseTopic,
    )
    from ottla.protocol.views.metadata import MetadataRequest, MetadataResponse, MetadataResponseTopic


# Answers kept (Services.metadata_answers): at most this many, each of a request naming
# at most KEPT_TOPICS topics and answering at most KEPT_PARTITIONS partitions, so that
# what a client can make the broker hold stays small.
KEPT_ANSWERS = 32
KEPT_TOPICS = 64
KEPT_PARTITIONS = 1000
NO_ERROR = ErrorCode.none  # read once: an enum member read off its class costs ~860 instructions


def handle(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse | Built[MetadataResponse] | Encoded:
    """The answer, built; the same answer again, kept, while nothing it was made from
    has changed. An answer is made from the request (its version, topics and flags), the
    listener's advertised address, the topics and their partitions (LogManager's
    topics_changed counts their changes) and, with an authorizer, the principal, its
    host and the ACLs (Authorizer.changes): a kept answer is looked up by the first
    ones and good while the counters are where they were when it was made. Only an
    answer without an error is kept (a created topic, a refused or unknown one: made
    again every time), and never across principals or hosts, whatever their ACLs."""
    services = ctx.services
    authorizer = services.authorizer
    requested = request.topics
    version = ctx.header.api_version
    key = None
    if requested is None or len(requested) <= KEPT_TOPICS:
        named: tuple[tuple[str | None, object], ...] | None = None
        if requested is not None:
            # Added to a tuple, not a list made one by tuple(): a builtin call costs about
            # 750 instructions, more than the copies of at most KEPT_TOPICS names.
            named = ()
            for wanted in requested:
                named += ((wanted.name, wanted.topic_id),)
        key = (version, ctx.advertised_address, named,
               request.allow_auto_topic_creation, request.include_topic_authorized_operations,
               version <= 10 and request.include_cluster_authorized_operations,
               None if authorizer is None else (ctx.session.principal, ctx.host))
    # The counters compared one by one, not as a tuple made for it at every request.
    topics_changed = services.logs.topics_changed
    acls_changed = 0 if authorizer is None else authorizer.changes
    kept = services.metadata_answers
    if key is not None:
        found = kept.get(key)
        if found is not None and found[0] == topics_changed and found[1] == acls_changed:
            encoded: Encoded = found[2]
            return encoded
    answer, keep = _answer(ctx, request)
    built = ctx.entity(answer)
    if key is not None and keep:
        if len(kept) >= KEPT_ANSWERS and key not in kept:
            del kept[next(iter(kept))]  # the oldest
        # Kept encoded: each answer again is its header before these bytes, not the
        # entity encoded again.
        kept[key] = (topics_changed, acls_changed, Encoded(built))
    return built


def _answer(ctx: RequestContext, request: MetadataRequest) -> tuple[MetadataResponse, bool]:
    """The answer, and whether it may be kept: no topic created, none refused or
    unknown, at most KEPT_PARTITIONS partitions."""
    services = ctx.services
    logs = services.logs
    requested = request.topics
    topic_ops = request.include_topic_authorized_operations
    keep = True
    partitions = 0  # in the answer
    if requested is None or (ctx.version == 0 and not requested):
        # Every topic the client may describe; the others are left out, as Kafka does.
        described = [t for t in logs.topics.values() if ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, t.name)]
        topics = [_describe(t, services.node_id, authorized_operations(ctx, ResourceType.TOPIC, t.name, topic_ops))
                  for t in described]
        partitions = sum(len(t.partitions) for t in described)
    else:
        allow_create = request.allow_auto_topic_creation and services.config.auto_create_topics_enable
        topics = []
        for wanted in requested:
            name = wanted.name
            topic = logs.topic(name) if name is not None else None
            topic_id = wanted.topic_id
            if topic is None and name is None and topic_id is not None:
                topic = logs.topic_by_id(topic_id)
            if name is not None and not ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name):
                topics.append({"error_code": ErrorCode.topic_authorization_failed, "name": name,
                               "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
                keep = False
                continue
            if topic is not None and name is None and not ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC,
                                                                      topic.name):
                topics.append({"error_code": ErrorCode.topic_authorization_failed, "name": None,
                               "topic_id": topic_id, "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
                keep = False
                continue
            # An internal topic is created by its coordinator (with its own partition count
            # and settings), never by auto-creation: `__consumer_offsets` on first group use.
            # Auto-creation needs CREATE on the cluster or the topic.
            if (topic is None and name is not None and allow_create and not is_internal(name)
                    and (ctx.allowed_on_cluster(Operation.CREATE)
                         or ctx.allowed(Operation.CREATE, ResourceType.TOPIC, name))):
                keep = False
                try:
                    topic = services.create_topic(name, services.config.num_partitions)
                except KafkaError as exc:
                    topics.append({"error_code": exc.code, "name": name})
                    continue
            if topic is None:
                code = ErrorCode.unknown_topic_id if name is None else _unknown_name_error(name)
                topics.append({"error_code": code, "name": name,
                               "topic_id": topic_id, "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
                keep = False
                continue
            topics.append(_describe(topic, services.node_id,
                                    authorized_operations(ctx, ResourceType.TOPIC, topic.name, topic_ops)))
            partitions += len(topic.partitions)
    keep = keep and partitions <= KEPT_PARTITIONS
    host, port = ctx.advertised_address
    answer: MetadataResponse = {
        "brokers": [{"node_id": services.node_id, "host": host, "port": port, "rack": None}],
        "cluster_id": logs.cluster_id,
        "controller_id": services.node_id,
        "topics": topics,
    }
    if ctx.version <= 10:
        # Versions 8 to 10 only (KIP-700 moved it to DescribeCluster). Named only where
        # it exists: a name the version lacks sends the response's builder through a
        # check of every version's names (protocol/entities.py) at every request.
        answer["cluster_authorized_operations"] = authorized_operations(
            ctx, ResourceType.CLUSTER, "kafka-cluster", request.include_cluster_authorized_operations)
    return answer, keep


def _unknown_name_error(name: str) -> ErrorCode:
    """Kafka tells a name no topic could have (INVALID_TOPIC_EXCEPTION) from one no topic has."""
    try:
        validate_topic_name(name)
    except KafkaError as exc:
        return exc.code
    return ErrorCode.unknown_topic_or_partition


def _describe(topic: Topic, node_id: int, operations: int) -> MetadataResponseTopic:
    return {
        "error_code": NO_ERROR,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.internal,
        "partitions": [
            {
                "error_code": NO_ERROR,
                "partition_index": log.partition,
                "leader_id": node_id,
                "leader_epoch": log.leader_epoch,
                "replica_nodes": [node_id],
                "isr_nodes": [node_id],
                "offline_replicas": [],
            }
            for log in topic.partitions
        ],
        "topic_authorized_operations": operations,
    }


# Kafka's max.request.partition.size.limit: most partitions one answer holds.
PARTITION_LIMIT = 2000


def handle_describe_topic_partitions(ctx: RequestContext, request: DescribeTopicPartitionsRequest
                                     ) -> DescribeTopicPartitionsResponse:
    """DescribeTopicPartitions (KIP-966; the Java AdminClient's describeTopics since 3.7):
    topics in name order, at most response_partition_limit partitions in all, and a
    cursor to go on from when they do not all fit."""
    services = ctx.services
    logs = services.logs
    if request.topics:
        names = sorted({t.name for t in request.topics})
    else:
        names = sorted(name for name in logs.topics if ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name))
    cursor = request.cursor
    start_partition = 0
    if cursor is not None:
        if cursor.topic_name not in names or cursor.partition_index < 0:
            return {"topics": [{"error_code": ErrorCode.invalid_request, "name": cursor.topic_name,
                                "topic_id": None, "partitions": []}], "next_cursor": None}
        names = names[names.index(cursor.topic_name):]
        start_partition = cursor.partition_index
    budget = max(1, min(request.response_partition_limit, PARTITION_LIMIT))
    topics: list[DescribeTopicPartitionsResponseTopic] = []
    next_cursor: CursorResponse | None = None
    node = services.node_id
    for i, name in enumerate(names):
        if not ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name):
            topics.append({"error_code": ErrorCode.topic_authorization_failed, "name": name, "topic_id": None,
                           "partitions": []})
            continue
        topic = logs.topic(name)
        if topic is None:
            topics.append({"error_code": ErrorCode.unknown_topic_or_partition, "name": name, "topic_id": None,
                           "partitions": []})
            continue
        first = start_partition if i == 0 else 0
        logs_here = topic.partitions[first:first + budget]
        partitions: list[DescribeTopicPartitionsResponsePartition] = [
            {"error_code": ErrorCode.none, "partition_index": log.partition, "leader_id": node,
             "leader_epoch": log.leader_epoch, "replica_nodes": [node], "isr_nodes": [node],
             "eligible_leader_replicas": [], "last_known_elr": [], "offline_replicas": []}
            for log in logs_here]
        budget -= len(partitions)
        topics.append({"error_code": ErrorCode.none, "name": name, "topic_id": topic.topic_id,
                       "is_internal": topic.internal, "partitions": partitions,
                       "topic_authorized_operations": authorized_operations(ctx, ResourceType.TOPIC, name)})
        if first + len(partitions) < len(topic.partitions):
            next_cursor = {"topic_name": name, "partition_index": first + len(partitions)}
            break
        if budget == 0 and i + 1 < len(names):
            next_cursor = {"topic_name": names[i + 1], "partition_index": 0}
            break
    return {"topics": topics, "next_cursor": next_cursor}


def handle_describe_cluster(ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    """DescribeCluster (the admin clients' describe_cluster): this broker, the cluster id
    and the controller, which is this broker too."""
    services = ctx.services
    endpoint_type = request.endpoint_type
    if endpoint_type != 1:
        # 2 asks a controller's listener for the controllers (KRaft tools): a broker's
        # listener is the wrong type. Kafka answers either error with an empty cluster id.
        code = ErrorCode.mismatched_endpoint_type if endpoint_type == 2 else ErrorCode.unsupported_endpoint_type
        return {"error_code": code, "error_message": "Unsupported endpoint type", "cluster_id": "", "brokers": []}
    host, port = ctx.advertised_address
    return {"error_code": ErrorCode.none, "error_message": None, "cluster_id": services.logs.cluster_id,
            "controller_id": services.node_id,
            "brokers": [{"broker_id": services.node_id, "host": host, "port": port, "rack": None}],
            "cluster_authorized_operations": authorized_operations(
                ctx, ResourceType.CLUSTER, "kafka-cluster", request.include_cluster_authorized_operations)}
