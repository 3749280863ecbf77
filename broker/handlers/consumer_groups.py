"""KIP-848's consumer group APIs: ConsumerGroupHeartbeat and ConsumerGroupDescribe, thin
translations to the group coordinator (coordinator/consumer_protocol.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ottla.coordinator.assignors import Assignment
from ottla.coordinator.consumer_group import ConsumerGroup
from ottla.coordinator.consumer_protocol import HeartbeatRequest, HeartbeatResult
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.views import ZERO_UUID

from ..security.authorizer import Operation, ResourceType
from .authorized_operations import authorized_operations
from .context import RequestContext
from .groups import AUTHORIZED_OPERATIONS_OMITTED

if TYPE_CHECKING:
    from ottla.protocol.views import consumer_group_describe as describe
    from ottla.protocol.views import consumer_group_heartbeat as heartbeat

# ConsumerGroupDescribe v1's member_type: a member of the consumer protocol.
CONSUMER_MEMBER = 1


def _assignment(topics: Iterable[heartbeat.TopicPartitions] | None) -> Assignment | None:
    if topics is None:
        return None
    # kio reads the all-zero id as None; the coordinator keys topics by their UUID.
    return {t.topic_id or ZERO_UUID: frozenset(t.partitions) for t in topics}


def handle_heartbeat(ctx: RequestContext, request: heartbeat.ConsumerGroupHeartbeatRequest
                     ) -> heartbeat.ConsumerGroupHeartbeatResponse:
    names = request.subscribed_topic_names
    refused = ctx.membership_refused(request.group_id, names)
    if refused is not None:
        return {"error_code": refused, "member_epoch": 0, "heartbeat_interval": 0}
    authorizer = ctx.services.authorizer
    principal, host = ctx.session.principal, ctx.host
    topic_filter = None if authorizer is None else (
        lambda name: authorizer.authorize(principal, host, Operation.DESCRIBE, ResourceType.TOPIC, name))
    try:
        result = ctx.services.groups.consumer_heartbeat(HeartbeatRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            rebalance_timeout_ms=int(request.rebalance_timeout.total_seconds() * 1000),
            subscribed_topic_names=None if names is None else tuple(names),
            subscribed_topic_regex=request.subscribed_topic_regex,
            server_assignor=request.server_assignor,
            owned=_assignment(request.topic_partitions),
            client_id=ctx.header.client_id or "",
            client_host="/" + ctx.host,  # Java's InetAddress.toString(), as Kafka reports it
            member_id_required=ctx.version >= 1,
            topic_filter=topic_filter,
        ))
    except KafkaError as exc:
        result = HeartbeatResult(exc.code, exc.message)
    assignment: heartbeat.Assignment | None = None
    if result.assignment is not None:
        assignment = {"topic_partitions": [{"topic_id": t, "partitions": sorted(ps)}
                                           for t, ps in sorted(result.assignment.items())]}
    return {"error_code": result.error, "error_message": result.message, "member_id": result.member_id,
            "member_epoch": result.member_epoch, "heartbeat_interval": result.heartbeat_interval_ms,
            "assignment": assignment}


def _described_assignment(assignment: Assignment, names: dict) -> describe.Assignment:
    # Partitions of a topic deleted meanwhile are left out, as Kafka leaves them out.
    return {"topic_partitions": [{"topic_id": t, "topic_name": names[t], "partitions": sorted(ps)}
                                 for t, ps in sorted(assignment.items()) if t in names]}


def _described(group: ConsumerGroup, names: dict, default_assignor: str) -> describe.DescribedGroup:
    return {
        "error_code": ErrorCode.none,
        "group_id": group.group_id,
        "group_state": group.state_name,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor_name": group.preferred_assignor(default_assignor),
        "members": [{
            "member_id": m.member_id,
            "instance_id": m.instance_id,
            "rack_id": m.rack_id,
            "member_epoch": m.member_epoch,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "subscribed_topic_names": list(m.subscribed_topic_names),
            "subscribed_topic_regex": m.subscribed_topic_regex or "",  # Kafka: "" when none
            "assignment": _described_assignment(m.assigned, names),
            "target_assignment": _described_assignment(group.target.get(m.member_id, {}), names),
            "member_type": CONSUMER_MEMBER,
        } for m in group.members.values()],
        "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }


# Kafka 4.3.1's words for a group refused for its topics.
TOPICS_REFUSED = "The group has described topic(s) that the client is not authorized to describe."


def handle_describe(ctx: RequestContext, request: describe.ConsumerGroupDescribeRequest
                    ) -> describe.ConsumerGroupDescribeResponse:
    coordinator = ctx.services.groups
    names = coordinator.topic_names()
    default_assignor = coordinator.consumer.assignors[0]
    described: list[describe.DescribedGroup] = []
    for group_id in request.group_ids:
        if not ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, group_id):
            code, message = ErrorCode.group_authorization_failed, None
        else:
            try:
                consumer_group = coordinator.describe_consumer_group(group_id)
                group = _described(consumer_group, names, default_assignor)
                if all(ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, topic)
                       for topic in consumer_group.described_topics(names)):
                    group["authorized_operations"] = authorized_operations(
                        ctx, ResourceType.GROUP, group_id, request.include_authorized_operations)
                    described.append(group)
                    continue
                # As Kafka: a group whose members use a topic the client may not describe
                # is not described at all.
                code = ErrorCode.topic_authorization_failed
                message = TOPICS_REFUSED
            except KafkaError as exc:
                code, message = exc.code, exc.message
        described.append({"error_code": code, "error_message": message, "group_id": group_id, "group_state": "",
                          "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
                          "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
    return {"groups": described}
