"""DescribeLogDirs and OffsetForLeaderEpoch: the data directory's partitions and sizes,
and the end offset of a leader epoch (clients ask it to detect log truncation after a
leader change; a single broker has one leader epoch, 0, that never ends)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ottla.protocol.errors import ErrorCode

from ..security.authorizer import Operation, ResourceType
from .context import RequestContext

if TYPE_CHECKING:
    from ottla.protocol.views.describe_log_dirs import (
        DescribeLogDirsPartition,
        DescribeLogDirsRequest,
        DescribeLogDirsResponse,
        DescribeLogDirsTopic,
    )
    from ottla.protocol.views.offset_for_leader_epoch import (
        EpochEndOffset,
        OffsetForLeaderEpochRequest,
        OffsetForLeaderEpochResponse,
        OffsetForLeaderTopicResult,
    )

UNDEFINED_EPOCH, UNDEFINED_OFFSET = -1, -1


def handle_describe_log_dirs(ctx: RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    """The one log directory, with every partition's size on disk (Kafka: needs DESCRIBE
    on the cluster; else an empty answer with CLUSTER_AUTHORIZATION_FAILED)."""
    services = ctx.services
    if not ctx.allowed_on_cluster(Operation.DESCRIBE):
        return {"error_code": ErrorCode.cluster_authorization_failed, "results": []}
    logs = services.logs
    if request.topics is None:
        wanted = [(name, [log.partition for log in topic.partitions]) for name, topic in sorted(logs.topics.items())]
    else:
        wanted = [(t.topic, list(t.partitions)) for t in request.topics]
    topics: list[DescribeLogDirsTopic] = []
    for name, partitions in wanted:
        found = [logs.partition(name, p) for p in partitions]
        entries: list[DescribeLogDirsPartition] = [
            {"partition_index": log.partition, "partition_size": sum(s.size for s in log.segments), "offset_lag": 0,
             "is_future_key": False} for log in found if log is not None]
        if entries:
            topics.append({"name": name, "partitions": entries})
    usage = os.statvfs(logs.data_dir)
    return {"error_code": ErrorCode.none, "results": [{
        "error_code": ErrorCode.none, "log_dir": logs.data_dir, "topics": topics,
        "total_bytes": usage.f_blocks * usage.f_frsize, "usable_bytes": usage.f_bavail * usage.f_frsize,
    }]}


def handle_offset_for_leader_epoch(ctx: RequestContext, request: OffsetForLeaderEpochRequest
                                   ) -> OffsetForLeaderEpochResponse:
    logs = ctx.services.logs
    topics: list[OffsetForLeaderTopicResult] = []
    for t in request.topics:
        described = ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, t.topic)
        results: list[EpochEndOffset] = []
        for p in t.partitions:
            log = logs.partition(t.topic, p.partition)
            if not described:
                results.append({"error_code": ErrorCode.topic_authorization_failed, "partition": p.partition})
            elif log is None:
                results.append({"error_code": ErrorCode.unknown_topic_or_partition, "partition": p.partition})
            elif p.current_leader_epoch != -1 and p.current_leader_epoch != log.leader_epoch:
                # Only -1 means "no epoch to check" (Kafka's Optional.empty()).
                # The client's view of the leader is older or newer than ours.
                code = ErrorCode.fenced_leader_epoch if p.current_leader_epoch < log.leader_epoch \
                    else ErrorCode.unknown_leader_epoch
                results.append({"error_code": code, "partition": p.partition})
            elif p.leader_epoch > log.leader_epoch:
                results.append({"error_code": ErrorCode.none, "partition": p.partition,
                                "leader_epoch": UNDEFINED_EPOCH, "end_offset": UNDEFINED_OFFSET})
            else:
                # Every epoch up to ours ends where the log ends: there was only ever ours.
                results.append({"error_code": ErrorCode.none, "partition": p.partition,
                                "leader_epoch": log.leader_epoch, "end_offset": log.log_end_offset})
        topics.append({"topic": t.topic, "partitions": results})
    return {"topics": topics}
