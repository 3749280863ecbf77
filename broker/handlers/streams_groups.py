"""KIP-1071's streams group APIs: StreamsGroupHeartbeat and StreamsGroupDescribe, thin
translations to the group coordinator (coordinator/streams_protocol.py), and the
internal topics the broker creates on the members' behalf.

As Kafka's KafkaApis: a heartbeat needs READ on the group; the topics of the topology
a joining member declares need DESCRIBE (else TOPIC_AUTHORIZATION_FAILED); the
repartition and changelog topics the coordinator finds missing are created here when
the member may CREATE them all (on the cluster, or on each topic), and named in the
MISSING_INTERNAL_TOPICS status's detail otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ottla.coordinator.streams_group import StreamsGroup
from ottla.coordinator.streams_group_records import (
    CopartitionGroup,
    Subtopology,
    TaskAssignment,
    Tasks,
    TopicInfo,
    Topology,
)
from ottla.coordinator.streams_protocol import StreamsHeartbeatRequest, StreamsHeartbeatResult
from ottla.coordinator.streams_topology import STATUS_MISSING_INTERNAL_TOPICS
from ottla.protocol.errors import ErrorCode, KafkaError

from ..logging import get_logger
from ..security.authorizer import Operation, ResourceType
from ..services import MAX_PARTITIONS_PER_REQUEST
from .authorized_operations import authorized_operations
from .context import RequestContext
from .groups import AUTHORIZED_OPERATIONS_OMITTED

if TYPE_CHECKING:
    from ottla.protocol.views import streams_group_describe as describe
    from ottla.protocol.views import streams_group_heartbeat as heartbeat

log = get_logger("ottla.streams_groups")


def _tasks(tasks: Iterable[heartbeat.TaskIds] | None) -> Tasks | None:
    if tasks is None:
        return None
    out: dict[str, frozenset[int]] = {}
    for t in tasks:
        out[t.subtopology_id] = out.get(t.subtopology_id, frozenset()) | frozenset(t.partitions)
    return out


def _topic_info(t: heartbeat.TopicInfo) -> TopicInfo:
    return TopicInfo(t.name, t.partitions, t.replication_factor, tuple((c.key, c.value) for c in t.topic_configs))


def _topology(topology: heartbeat.Topology | None) -> Topology | None:
    if topology is None:
        return None
    return Topology(topology.epoch, tuple(
        Subtopology(s.subtopology_id, tuple(s.source_topics), tuple(s.source_topic_regex),
                    tuple(_topic_info(t) for t in s.state_changelog_topics), tuple(s.repartition_sink_topics),
                    tuple(_topic_info(t) for t in s.repartition_source_topics),
                    tuple(CopartitionGroup(tuple(g.source_topics), tuple(g.source_topic_regex),
                                           tuple(g.repartition_source_topics)) for g in s.copartition_groups))
        for s in topology.subtopologies))


def _task_ids(tasks: Tasks) -> list[heartbeat.TaskIdsResponse]:
    return [{"subtopology_id": s, "partitions": sorted(ps)} for s, ps in sorted(tasks.items()) if ps]


def _create_internal_topics(ctx: RequestContext, result: StreamsHeartbeatResult) -> None:
    """Create what the topology lacks, as Kafka's KafkaApis does: CREATE on the cluster,
    else on every one of the topics, or none is created and the MISSING_INTERNAL_TOPICS
    status says which were refused; a creation that fails is said there too."""
    names = sorted(result.to_create)
    refused = [] if ctx.allowed_on_cluster(Operation.CREATE) else [
        name for name in names if not ctx.allowed(Operation.CREATE, ResourceType.TOPIC, name)]
    failed = []
    if refused:
        detail = f"Unauthorized to CREATE on topics {', '.join(refused)}."
    elif sum(partitions for partitions, _ in result.to_create.values()) > MAX_PARTITIONS_PER_REQUEST:
        # CreateTopics' bound on one request, for the topics made on a member's behalf.
        detail = "Creation failed: Excessively large number of partitions per request."
    else:
        for name in names:
            partitions, configs = result.to_create[name]
            try:
                ctx.services.create_topic(name, partitions, dict(configs))
                log.info("internal topic created for a streams group", topic=name, partitions=partitions)
            except KafkaError as exc:
                if exc.code is not ErrorCode.topic_already_exists:
                    log.warning("internal topic not created", topic=name, error=exc.code.name, reason=exc.message)
                    failed.append(f"{name} ({exc.message or exc.code.name})")
        if not failed:
            return
        detail = f"Creation failed: {', '.join(failed)}."
    result.statuses = [(code, f"{text}; {detail}" if code == STATUS_MISSING_INTERNAL_TOPICS else text)
                       for code, text in result.statuses]


def handle_heartbeat(ctx: RequestContext, request: heartbeat.StreamsGroupHeartbeatRequest
                     ) -> heartbeat.StreamsGroupHeartbeatResponse:
    def refused(code: ErrorCode) -> heartbeat.StreamsGroupHeartbeatResponse:
        return {"error_code": code, "member_id": "", "member_epoch": 0, "heartbeat_interval": 0,
                "acceptable_recovery_lag": 0, "task_offset_interval": 0, "status": [], "active_tasks": None,
                "standby_tasks": None, "warmup_tasks": None, "endpoint_information_epoch": 0,
                "partitions_by_user_endpoint": None}

    if not ctx.allowed(Operation.READ, ResourceType.GROUP, request.group_id):
        return refused(ErrorCode.group_authorization_failed)
    topology = request.topology
    if topology is not None:
        names = {t for s in topology.subtopologies
                 for t in (*s.source_topics, *s.repartition_sink_topics,
                           *(i.name for i in (*s.state_changelog_topics, *s.repartition_source_topics)))}
        if not all(ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, n) for n in names):
            return refused(ErrorCode.topic_authorization_failed)
    endpoint = request.user_endpoint
    try:
        result = ctx.services.groups.streams_heartbeat(StreamsHeartbeatRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            rebalance_timeout_ms=int(request.rebalance_timeout.total_seconds() * 1000),
            topology=_topology(topology),
            active_tasks=_tasks(request.active_tasks),
            standby_tasks=_tasks(request.standby_tasks),
            warmup_tasks=_tasks(request.warmup_tasks),
            process_id=request.process_id,
            user_endpoint=None if endpoint is None else (endpoint.host, endpoint.port),
            client_tags=None if request.client_tags is None else tuple((t.key, t.value) for t in request.client_tags),
            shutdown_application=request.shutdown_application,
            task_offsets=request.task_offsets is not None,
            task_end_offsets=request.task_end_offsets is not None,
            client_id=ctx.header.client_id or "",
            client_host="/" + ctx.host,  # Java's InetAddress.toString(), as Kafka reports it
        ))
        if result.to_create:
            _create_internal_topics(ctx, result)
    except KafkaError as exc:
        # Kafka's error answer: no member id, no statuses.
        result = StreamsHeartbeatResult(exc.code, exc.message, member_id="")
    assignment = result.assignment
    # Kafka 4.3.1 never sets the acceptable recovery lag or the task offset interval
    # (its coordinator leaves both 0; the Streams client keeps its own configs).
    return {
        "error_code": result.error, "error_message": result.message, "member_id": result.member_id,
        "member_epoch": result.member_epoch, "heartbeat_interval": result.heartbeat_interval_ms,
        "acceptable_recovery_lag": 0, "task_offset_interval": 0,
        "status": [] if result.error is not ErrorCode.none else [
            {"status_code": code, "status_detail": detail} for code, detail in result.statuses],
        "active_tasks": None if assignment is None else _task_ids(assignment.active),
        "standby_tasks": None if assignment is None else _task_ids(assignment.standby),
        "warmup_tasks": None if assignment is None else _task_ids(assignment.warmup),
        "endpoint_information_epoch": 0, "partitions_by_user_endpoint": None}


def _described_tasks(a: TaskAssignment) -> describe.Assignment:
    return {"active_tasks": _task_ids(a.active), "standby_tasks": _task_ids(a.standby),
            "warmup_tasks": _task_ids(a.warmup)}


def _described_topic(t: TopicInfo) -> describe.TopicInfo:
    return {"name": t.name, "partitions": t.partitions, "replication_factor": t.replication_factor,
            "topic_configs": [{"key": k, "value": v} for k, v in t.configs]}


def _described(group: StreamsGroup) -> describe.DescribedGroup:
    topology: describe.Topology | None = None
    if group.topology is not None:
        topology = {"epoch": group.topology.epoch, "subtopologies": [{
            "subtopology_id": s.subtopology_id,
            "source_topics": list(s.source_topics),
            "repartition_sink_topics": list(s.repartition_sink_topics),
            "state_changelog_topics": [_described_topic(t) for t in s.state_changelog_topics],
            "repartition_source_topics": [_described_topic(t) for t in s.repartition_source_topics],
        } for s in group.topology.subtopologies]}
    members: list[describe.Member] = []
    for m in group.members.values():
        meta = m.metadata
        members.append({
            "member_id": m.member_id, "member_epoch": m.member_epoch, "instance_id": meta.instance_id,
            "rack_id": meta.rack_id, "client_id": meta.client_id, "client_host": meta.client_host,
            "topology_epoch": meta.topology_epoch, "process_id": meta.process_id,
            "user_endpoint": None if meta.user_endpoint is None else {"host": meta.user_endpoint[0],
                                                                      "port": meta.user_endpoint[1]},
            "client_tags": [{"key": k, "value": v} for k, v in meta.client_tags],
            "task_offsets": [], "task_end_offsets": [],
            "assignment": _described_tasks(m.assigned),
            "target_assignment": _described_tasks(group.target.get(m.member_id, TaskAssignment())),
            "is_classic": False,
        })
    return {"error_code": ErrorCode.none, "group_id": group.group_id, "group_state": group.state_name,
            "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch, "topology": topology,
            "members": members, "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}


def handle_describe(ctx: RequestContext, request: describe.StreamsGroupDescribeRequest
                    ) -> describe.StreamsGroupDescribeResponse:
    coordinator = ctx.services.groups
    described: list[describe.DescribedGroup] = []
    for group_id in request.group_ids:
        if not ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, group_id):
            code, message = ErrorCode.group_authorization_failed, None
        else:
            try:
                group = _described(coordinator.describe_streams_group(group_id))
                group["authorized_operations"] = authorized_operations(
                    ctx, ResourceType.GROUP, group_id, request.include_authorized_operations)
                described.append(group)
                continue
            except KafkaError as exc:
                code, message = exc.code, exc.message
        described.append({"error_code": code, "error_message": message, "group_id": group_id, "group_state": "",
                          "group_epoch": 0, "assignment_epoch": 0, "topology": None, "members": [],
                          "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
    return {"groups": described}
