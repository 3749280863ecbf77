"""The `__consumer_offsets` records of KIP-932 share groups, in Kafka 4.3.1's formats
(group-coordinator's ShareGroup*Key/Value).

Keys, as every coordinator key: an int16 record type, then int16-length strings:
    9  ShareGroupPartitionMetadata        group         (read and ignored: not written)
   10  ShareGroupMemberMetadata           group, member -> rack, client id and host, topics
   11  ShareGroupMetadata                 group         -> Epoch, MetadataHash
   12  ShareGroupTargetAssignmentMetadata group         -> AssignmentEpoch
   13  ShareGroupTargetAssignmentMember   group, member -> its target partitions
   14  ShareGroupCurrentMemberAssignment  group, member -> epochs, state, partitions
   15  ShareGroupStatePartitionMetadata   group         (read and ignored: not written;
                                                         Ottla starts a share-partition
                                                         in the same heartbeat)
Values are flexible version 0 (compact strings and arrays, a tagged-field section after
every struct); a null value is a tombstone.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .assignors import Assignment
from .consumer_group_records import _Reader, _Writer

PARTITION_METADATA = 9
MEMBER_METADATA = 10
GROUP_METADATA = 11
TARGET_ASSIGNMENT_METADATA = 12
TARGET_ASSIGNMENT_MEMBER = 13
CURRENT_MEMBER_ASSIGNMENT = 14
STATE_PARTITION_METADATA = 15
RECORD_TYPES = frozenset(range(PARTITION_METADATA, STATE_PARTITION_METADATA + 1))
_PER_MEMBER = frozenset((MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT))
STABLE = 0  # Kafka's MemberState.STABLE: a share member is never anything else

_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class ShareGroupKey:
    type: int
    group: str
    member: str | None = None


@dataclass(frozen=True, slots=True)
class ShareMemberMetadata:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ShareCurrentAssignment:
    member_epoch: int
    previous_member_epoch: int
    assigned: Assignment


def _string(value: str) -> bytes:
    raw = value.encode()
    return _I16.pack(len(raw)) + raw


def encode_key(key: ShareGroupKey) -> bytes:
    out = _I16.pack(key.type) + _string(key.group)
    if key.type in _PER_MEMBER:
        out += _string(key.member or "")
    return out


def decode_key(data: bytes) -> ShareGroupKey | None:
    """The key of a share-group record, None for another record type."""
    (record_type,) = _I16.unpack_from(data, 0)
    if record_type not in RECORD_TYPES:
        return None
    pos, fields = 2, []
    for _ in range(2 if record_type in _PER_MEMBER else 1):
        (n,) = _I16.unpack_from(data, pos)
        fields.append(bytes(data[pos + 2:pos + 2 + n]).decode())
        pos += 2 + n
    return ShareGroupKey(record_type, fields[0], fields[1] if len(fields) > 1 else None)


def encode_group_metadata(epoch: int, metadata_hash: int) -> bytes:
    w = _Writer().i32(epoch)
    w.out += _I64.pack(metadata_hash)
    return w.done()


def decode_group_metadata(data: bytes) -> tuple[int, int]:
    r = _Reader(data)
    epoch = r.i32()
    (metadata_hash,) = _I64.unpack_from(r.data, r.pos)
    return epoch, metadata_hash


def encode_member_metadata(m: ShareMemberMetadata) -> bytes:
    return _Writer().string(m.rack_id).string(m.client_id).string(m.client_host).strings(
        m.subscribed_topic_names).done()


def decode_member_metadata(data: bytes) -> ShareMemberMetadata:
    r = _Reader(data)
    return ShareMemberMetadata(r.string(), r.string() or "", r.string() or "", r.strings())


def encode_assignment_epoch(epoch: int) -> bytes:
    return _Writer().i32(epoch).done()


def decode_assignment_epoch(data: bytes) -> int:
    return _Reader(data).i32()


def encode_target_assignment(assignment: Assignment) -> bytes:
    return _Writer().partitions(assignment).done()


def decode_target_assignment(data: bytes) -> Assignment:
    return _Reader(data).partitions()


def encode_current_assignment(a: ShareCurrentAssignment) -> bytes:
    return _Writer().i32(a.member_epoch).i32(a.previous_member_epoch).i8(STABLE).partitions(a.assigned).done()


def decode_current_assignment(data: bytes) -> ShareCurrentAssignment:
    r = _Reader(data)
    member_epoch, previous = r.i32(), r.i32()
    r.i8()  # the state: always STABLE for a share member
    return ShareCurrentAssignment(member_epoch, previous, r.partitions())
