"""Which closed segments of a partition have outlived their retention.

Kafka's rules (cleanup.policy containing `delete`):
- by time: a segment whose newest record is older than `retention.ms`;
- by size: the oldest segments, while the partition without them still holds at least
  `retention.bytes`;
- below the log start offset (moved by DeleteRecords): segments that hold nothing at or
  after it, whatever the policy.
Deletion takes a prefix of the log: the first segment that must stay stops the scan.
The active segment goes too once all its records are past retention: a new empty one
is rolled first, so a partition always has a segment.
"""

from __future__ import annotations

from .log import PartitionLog
from .segment import LogSegment


def expired_segments(log: PartitionLog, now_ms: int) -> list[LogSegment]:
    """The prefix of segments to delete. The active segment is among them once every
    record in it is past retention by time or size, as in Kafka (UnifiedLog's
    deletableSegments): the caller rolls a new empty segment first, so a partition
    always keeps one. An empty active segment never goes, and the log start offset alone
    never takes the active segment (Kafka's predicate needs a next segment)."""
    config = log.config
    segments = log.segments
    total = sum(s.size for s in segments)
    doomed: list[LogSegment] = []
    for i, segment in enumerate(segments):
        active = i == len(segments) - 1
        if active and segment.size == 0:
            break
        below_start = not active and segments[i + 1].base_offset <= log.log_start_offset
        too_old = (config.delete and config.retention_ms >= 0
                   and 0 <= segment.max_timestamp < now_ms - config.retention_ms)
        too_big = config.delete and config.retention_bytes >= 0 and total - segment.size >= config.retention_bytes
        if not (below_start or too_old or too_big):
            break
        doomed.append(segment)
        total -= segment.size
    return doomed
