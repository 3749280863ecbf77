"""The `__consumer_offsets` records of KIP-848 consumer groups, in Kafka's formats
(group-coordinator/src/main/resources/common/message/ConsumerGroup*.json).

A key starts with an int16 naming the record type, then the group id (and the member id
for per-member records), as int16-length strings:
    3  ConsumerGroupMetadata              group         -> Epoch
    4  ConsumerGroupPartitionMetadata     group         (read and ignored: Kafka 4.1
                                                         no longer writes it)
    5  ConsumerGroupMemberMetadata        group, member -> the member's subscription
    6  ConsumerGroupTargetAssignmentMetadata  group     -> AssignmentEpoch
    7  ConsumerGroupTargetAssignmentMember    group, member -> its target partitions
    8  ConsumerGroupCurrentMemberAssignment   group, member -> epochs, state, partitions
   16  ConsumerGroupRegularExpression     group, regex  (read and ignored)
Values are flexible version 0: int16 version, compact strings and arrays (unsigned
varint length + 1, 0 for null), a 16-byte uuid, and an empty tagged-field section
after every struct. A null value is a tombstone.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from .assignors import Assignment

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
REGULAR_EXPRESSION = 16
RECORD_TYPES = frozenset((GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA, TARGET_ASSIGNMENT_METADATA,
                          TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT, REGULAR_EXPRESSION))
_PER_MEMBER = frozenset((MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT, REGULAR_EXPRESSION))

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    type: int
    group: str
    member: str | None = None  # the member id (the regex, for type 16)


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


@dataclass(frozen=True, slots=True)
class CurrentAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Assignment
    pending_revocation: Assignment


# --- keys -------------------------------------------------------------------------------


def _string(value: str) -> bytes:
    raw = value.encode()
    return _I16.pack(len(raw)) + raw


def encode_key(key: ConsumerGroupKey) -> bytes:
    out = _I16.pack(key.type) + _string(key.group)
    if key.type in _PER_MEMBER:
        out += _string(key.member or "")
    return out


def decode_key(data: bytes) -> ConsumerGroupKey | None:
    """The key of a consumer-group record, None for another record type."""
    (record_type,) = _I16.unpack_from(data, 0)
    if record_type not in RECORD_TYPES:
        return None
    pos = 2
    fields = []
    for _ in range(2 if record_type in _PER_MEMBER else 1):
        (n,) = _I16.unpack_from(data, pos)
        fields.append(data[pos + 2 : pos + 2 + n].decode())
        pos += 2 + n
    return ConsumerGroupKey(record_type, fields[0], fields[1] if len(fields) > 1 else None)


# --- values -----------------------------------------------------------------------------


class _Writer:
    def __init__(self) -> None:
        self.out = bytearray(_I16.pack(0))  # value version 0

    def uvarint(self, v: int) -> _Writer:
        while v >= 0x80:
            self.out.append((v & 0x7F) | 0x80)
            v >>= 7
        self.out.append(v)
        return self

    def i8(self, v: int) -> _Writer:
        self.out += struct.pack(">b", v)
        return self

    def i32(self, v: int) -> _Writer:
        self.out += _I32.pack(v)
        return self

    def string(self, v: str | None) -> _Writer:
        if v is None:
            return self.uvarint(0)
        raw = v.encode()
        self.uvarint(len(raw) + 1)
        self.out += raw
        return self

    def strings(self, values: tuple[str, ...]) -> _Writer:
        self.uvarint(len(values) + 1)
        for v in values:
            self.string(v)
        return self

    def partitions(self, assignment: Assignment) -> _Writer:
        """[TopicId uuid, Partitions []int32, tags]"""
        self.uvarint(len(assignment) + 1)
        for topic_id in sorted(assignment):
            self.out += topic_id.bytes
            ps = sorted(assignment[topic_id])
            self.uvarint(len(ps) + 1)
            for p in ps:
                self.i32(p)
            self.tags()
        return self

    def tags(self) -> _Writer:
        return self.uvarint(0)

    def done(self) -> bytes:
        return bytes(self.tags().out)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 2  # past the value version

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result
            shift += 7

    def i8(self) -> int:
        (v,) = struct.unpack_from(">b", self.data, self.pos)
        self.pos += 1
        return v

    def i32(self) -> int:
        (v,) = _I32.unpack_from(self.data, self.pos)
        self.pos += 4
        return v

    def string(self) -> str | None:
        n = self.uvarint()
        if n == 0:
            return None
        v = self.data[self.pos : self.pos + n - 1].decode()
        self.pos += n - 1
        return v

    def strings(self) -> tuple[str, ...]:
        return tuple(self.string() or "" for _ in range(max(self.uvarint() - 1, 0)))

    def partitions(self) -> Assignment:
        assignment: Assignment = {}
        for _ in range(max(self.uvarint() - 1, 0)):
            topic_id = uuid.UUID(bytes=bytes(self.data[self.pos : self.pos + 16]))
            self.pos += 16
            assignment[topic_id] = frozenset(self.i32() for _ in range(max(self.uvarint() - 1, 0)))
            self.skip_tags()
        return assignment

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.pos += self.uvarint()  # size, then the field


def encode_epoch(epoch: int) -> bytes:
    """ConsumerGroupMetadataValue (Epoch) and ConsumerGroupTargetAssignmentMetadataValue
    (AssignmentEpoch) hold one int32."""
    return _Writer().i32(epoch).done()


def decode_epoch(data: bytes) -> int:
    return _Reader(data).i32()


def encode_member_metadata(m: MemberMetadata) -> bytes:
    w = _Writer().string(m.instance_id).string(m.rack_id).string(m.client_id).string(m.client_host)
    w.strings(m.subscribed_topic_names).string(m.subscribed_topic_regex).i32(m.rebalance_timeout_ms)
    return w.string(m.server_assignor).done()


def decode_member_metadata(data: bytes) -> MemberMetadata:
    r = _Reader(data)
    return MemberMetadata(r.string(), r.string(), r.string() or "", r.string() or "", r.strings(), r.string(),
                          r.i32(), r.string())


def encode_target_assignment(assignment: Assignment) -> bytes:
    return _Writer().partitions(assignment).done()


def decode_target_assignment(data: bytes) -> Assignment:
    return _Reader(data).partitions()


def encode_current_assignment(a: CurrentAssignment) -> bytes:
    w = _Writer().i32(a.member_epoch).i32(a.previous_member_epoch).i8(a.state)
    return w.partitions(a.assigned).partitions(a.pending_revocation).done()


def decode_current_assignment(data: bytes) -> CurrentAssignment:
    r = _Reader(data)
    return CurrentAssignment(r.i32(), r.i32(), r.i8(), r.partitions(), r.partitions())
