"""Which closed segments of a partition have outlived their retention.

Kafka's rules (cleanup.policy containing `delete`):
- by time: a segment whose newest record is older than `retention.ms`;
- by size: the oldest segments, while the partition without them still holds at least
  `retention.bytes`;
- below the log start offset (moved by DeleteRecords): segments that hold nothing at or
  after it, whatever the policy.
Deletion takes a prefix of the log: the first segment that must stay stops the scan.
The active segment is never deleted.
"""

from __future__ import annotations

from .log import PartitionLog
from .segment import LogSegment


def expired_segments(log: PartitionLog, now_ms: int) -> list[LogSegment]:
    config = log.config
    closed = log.segments[:-1]
    total = sum(s.size for s in log.segments)
    doomed: list[LogSegment] = []
    for i, segment in enumerate(closed):
        next_base = log.segments[i + 1].base_offset
        below_start = next_base <= log.log_start_offset
        too_old = config.delete and config.retention_ms >= 0 and 0 <= segment.max_timestamp < now_ms - config.retention_ms
        too_big = config.delete and config.retention_bytes >= 0 and total - segment.size >= config.retention_bytes
        if not (below_start or too_old or too_big):
            break
        doomed.append(segment)
        total -= segment.size
    return doomed
