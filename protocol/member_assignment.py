"""What a classic consumer group's members carry inside JoinGroup and SyncGroup: the
consumer protocol's assignment (ConsumerProtocolAssignment), read for the tools and the
web console; the broker itself never looks inside it."""

from __future__ import annotations

import struct


def consumer_assignment(data: bytes) -> list[tuple[str, list[int]]]:
    """The partitions of a consumer protocol assignment (ConsumerProtocolAssignment:
    version int16, [topic string, [partition int32]], user data bytes)."""
    if not data:
        return []
    pos = 2
    (count,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out = []
    for _ in range(max(count, 0)):
        (size,) = struct.unpack_from(">h", data, pos)
        topic = data[pos + 2 : pos + 2 + size].decode()
        pos += 2 + size
        (n,) = struct.unpack_from(">i", data, pos)
        partitions = list(struct.unpack_from(f">{max(n, 0)}i", data, pos + 4))
        pos += 4 + 4 * max(n, 0)
        out.append((topic, partitions))
    return out
