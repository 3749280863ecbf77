"""ListOffsets: earliest, latest (the LSO for read_committed), the max-timestamp record,
or the first record at or after a timestamp (through the time index); the tiered-storage
specs (latest tiered, earliest pending upload) answer -1, as Kafka without tiered storage."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ottla.protocol.errors import ErrorCode

from ..security.authorizer import Operation, ResourceType
from .context import RequestContext

if TYPE_CHECKING:
    from ottla.protocol.views.list_offsets import (
        ListOffsetsPartitionResponse,
        ListOffsetsRequest,
        ListOffsetsResponse,
        ListOffsetsTopicResponse,
    )

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6
READ_COMMITTED = 1
# The request version each special timestamp came with; below it (and for any other
# negative timestamp) Kafka answers UNSUPPORTED_VERSION for the partition.
SPEC_SINCE = {LATEST: 0, EARLIEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9,
              EARLIEST_PENDING_UPLOAD: 11}


def handle(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    logs = ctx.services.logs
    read_committed = request.isolation_level == READ_COMMITTED
    topics: list[ListOffsetsTopicResponse] = []
    for t in request.topics:
        partitions: list[ListOffsetsPartitionResponse] = []
        describable = ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, t.name)
        for p in t.partitions:
            log = logs.partition(t.name, p.partition_index)
            if log is None or not describable:
                partitions.append({"partition_index": p.partition_index,
                                   "error_code": ErrorCode.unknown_topic_or_partition if describable
                                   else ErrorCode.topic_authorization_failed,
                                   "timestamp": -1, "offset": -1, "leader_epoch": -1})
                continue
            if p.timestamp < 0 and ctx.version < SPEC_SINCE.get(p.timestamp, ctx.version + 1):
                partitions.append({"partition_index": p.partition_index, "error_code": ErrorCode.unsupported_version,
                                   "timestamp": -1, "offset": -1, "leader_epoch": -1})
                continue
            timestamp, offset = -1, -1
            if p.timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
                # No tiered storage: nothing is tiered or waiting to be (Kafka: offset -1, epoch -1).
                partitions.append({"partition_index": p.partition_index, "error_code": ErrorCode.none,
                                   "timestamp": -1, "offset": -1, "leader_epoch": -1})
                continue
            if p.timestamp == LATEST:
                offset = log.last_stable_offset if read_committed else log.high_watermark
            elif p.timestamp in (EARLIEST, EARLIEST_LOCAL):
                offset = log.log_start_offset
            elif p.timestamp == MAX_TIMESTAMP:
                found = log.max_timestamp_offset()
                if found is not None:
                    offset, timestamp = found
            else:
                found = log.offset_for_timestamp(p.timestamp)
                if found is not None:
                    offset, timestamp = found
            partitions.append({"partition_index": p.partition_index, "error_code": ErrorCode.none,
                               "timestamp": timestamp, "offset": offset, "leader_epoch": log.leader_epoch})
        topics.append({"name": t.name, "partitions": partitions})
    return {"topics": topics}
