"""ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments, answered as
a one-broker cluster answers them: the one broker leads every partition already, and a
replica can only move to where it is."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ottla.protocol.errors import ErrorCode

from ..security.authorizer import Operation
from .context import RequestContext

if TYPE_CHECKING:
    from ottla.protocol.views.alter_partition_reassignments import (
        AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse,
        ReassignablePartitionResponse,
        ReassignableTopicResponse,
    )
    from ottla.protocol.views.elect_leaders import (
        ElectLeadersRequest,
        ElectLeadersResponse,
        PartitionResult,
        ReplicaElectionResult,
    )
    from ottla.protocol.views.list_partition_reassignments import (
        ListPartitionReassignmentsRequest,
        ListPartitionReassignmentsResponse,
    )


def handle_elect_leaders(ctx: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    if not ctx.allowed_on_cluster(Operation.ALTER):
        return {"error_code": ErrorCode.cluster_authorization_failed, "replica_election_results": []}
    logs = ctx.services.logs
    results: list[ReplicaElectionResult] = []
    # Null asks for every partition whose preferred leader does not lead: there is none.
    for t in request.topic_partitions or ():
        partitions: list[PartitionResult] = []
        for p in t.partitions:
            if logs.partition(t.topic, p) is None:
                partitions.append({"partition_id": p, "error_code": ErrorCode.unknown_topic_or_partition,
                                   "error_message": f"The partition {t.topic}-{p} does not exist."})
            else:
                partitions.append({"partition_id": p, "error_code": ErrorCode.election_not_needed,
                                   "error_message": "Leader election not needed for topic partition."})
        results.append({"topic": t.topic, "partition_result": partitions})
    return {"error_code": ErrorCode.none, "replica_election_results": results}


def handle_alter_partition_reassignments(ctx: RequestContext, request: AlterPartitionReassignmentsRequest
                                         ) -> AlterPartitionReassignmentsResponse:
    if not ctx.allowed_on_cluster(Operation.ALTER):
        return {"error_code": ErrorCode.cluster_authorization_failed, "error_message": None, "responses": []}
    services = ctx.services
    node = services.node_id
    responses: list[ReassignableTopicResponse] = []
    for t in request.topics:
        partitions: list[ReassignablePartitionResponse] = []
        for p in t.partitions:
            code, message = ErrorCode.none, None
            if services.logs.partition(t.name, p.partition_index) is None:
                code = ErrorCode.unknown_topic_or_partition
                message = f"Unable to find partition {t.name}-{p.partition_index}."
            elif p.replicas is None:
                code, message = ErrorCode.no_reassignment_in_progress, "No ongoing reassignment for this partition."
            elif len(set(p.replicas)) != len(p.replicas) or not p.replicas:
                code = ErrorCode.invalid_replica_assignment
                message = "The replica assignment is empty or has duplicates."
            elif any(r != node for r in p.replicas):
                other = next(r for r in p.replicas if r != node)
                code, message = (ErrorCode.invalid_replica_assignment,
                                 f"The manual partition assignment includes broker {other}, but no such broker is "
                                 "registered.")
            partitions.append({"partition_index": p.partition_index, "error_code": code, "error_message": message})
        responses.append({"name": t.name, "partitions": partitions})
    return {"error_code": ErrorCode.none, "error_message": None, "responses": responses}


def handle_list_partition_reassignments(ctx: RequestContext, request: ListPartitionReassignmentsRequest
                                        ) -> ListPartitionReassignmentsResponse:
    if not ctx.allowed_on_cluster(Operation.DESCRIBE):
        return {"error_code": ErrorCode.cluster_authorization_failed, "error_message": None, "topics": []}
    return {"error_code": ErrorCode.none, "error_message": None, "topics": []}  # none ever in progress
