"""Records of the `__consumer_offsets` topic, in Kafka's formats.

Keys start with an int16 that says what the record is:
    1  OffsetCommitKey:   group string, topic string, partition int32
    2  GroupMetadataKey:  group string
(0 is the older offset key layout, read like 1.)

Values start with their own int16 version. Ottla writes
    OffsetCommitValue v3:   offset int64, leaderEpoch int32, metadata string,
                            commitTimestamp int64
    GroupMetadataValue v3:  protocolType string, generation int32, protocol string?,
                            leader string?, currentStateTimestamp int64,
                            members [memberId string, groupInstanceId string?,
                                     clientId string, clientHost string,
                                     rebalanceTimeout int32, sessionTimeout int32,
                                     subscription bytes, assignment bytes]
and reads v0-v3 of both (the flexible v4 layouts are not written by Kafka's classic
coordinator either). A null value is a tombstone. Strings are int16-length
(-1 for null), bytes int32-length.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import NamedTuple

TOPIC = "__consumer_offsets"
OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16_I16 = struct.Struct(">hh")
# OffsetCommitValue v3 up to its metadata: version, offset, leader epoch, metadata's length.
_OFFSET_VALUE_HEAD = struct.Struct(">hqih")
# The whole value when its metadata is empty (the common case): one pack, at every commit.
_OFFSET_VALUE_NO_METADATA = struct.Struct(">hqihq")
# The same of versions 0 to 2, which have no leader epoch.
_OLD_OFFSET_VALUE_HEAD = struct.Struct(">hqh")


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


class CommittedOffset(NamedTuple):
    """A committed offset. A named tuple: an OffsetCommit makes one a partition, and
    an OffsetFetch decodes one, with no Python call of their own (a frozen dataclass
    sets each field with object.__setattr__)."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupRecord:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    state_timestamp: int = -1
    members: tuple[MemberRecord, ...] = field(default=())


# --- writing ----------------------------------------------------------------------------


class _Writer:
    def __init__(self) -> None:
        self.out = bytearray()

    def i16(self, v: int) -> _Writer:
        self.out += _I16.pack(v)
        return self

    def i32(self, v: int) -> _Writer:
        self.out += _I32.pack(v)
        return self

    def i64(self, v: int) -> _Writer:
        self.out += _I64.pack(v)
        return self

    def string(self, v: str | None) -> _Writer:
        if v is None:
            return self.i16(-1)
        raw = v.encode()
        self.i16(len(raw))
        self.out += raw
        return self

    def data(self, v: bytes) -> _Writer:
        self.i32(len(v))
        self.out += v
        return self


def encode_offset_key(key: OffsetKey) -> bytes:
    return offset_key_bytes(key.group, key.topic, key.partition)


def offset_key_bytes(group: str, topic: str, partition: int) -> bytes:
    """`encode_offset_key` of OffsetKey(group, topic, partition), in a few packs (one is
    written at every commit of every partition)."""
    raw_group, raw_topic = group.encode(), topic.encode()
    return b"".join((_I16_I16.pack(OFFSET_KEY_VERSION, len(raw_group)), raw_group, _I16.pack(len(raw_topic)),
                     raw_topic, _I32.pack(partition)))


def encode_group_key(key: GroupKey) -> bytes:
    return bytes(_Writer().i16(GROUP_KEY_VERSION).string(key.group).out)


def encode_offset_value(value: CommittedOffset) -> bytes:
    # In a few packs rather than through _Writer: one is written at every commit.
    # The fields in one unpacking: each read of a named tuple's field by name is a
    # descriptor call of its own.
    offset, leader_epoch, metadata, commit_timestamp = value
    if metadata is None:
        return _OFFSET_VALUE_NO_METADATA.pack(OFFSET_VALUE_VERSION, offset, leader_epoch, -1, commit_timestamp)
    if not metadata:
        return _OFFSET_VALUE_NO_METADATA.pack(OFFSET_VALUE_VERSION, offset, leader_epoch, 0, commit_timestamp)
    raw = metadata.encode()
    return b"".join((_OFFSET_VALUE_HEAD.pack(OFFSET_VALUE_VERSION, offset, leader_epoch, len(raw)), raw,
                     _I64.pack(commit_timestamp)))


def encode_group_value(value: GroupRecord) -> bytes:
    w = _Writer().i16(GROUP_VALUE_VERSION).string(value.protocol_type).i32(value.generation)
    w.string(value.protocol).string(value.leader).i64(value.state_timestamp).i32(len(value.members))
    for m in value.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
        w.i32(m.rebalance_timeout_ms).i32(m.session_timeout_ms).data(m.subscription).data(m.assignment)
    return bytes(w.out)


# --- reading ----------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _unpack(self, s: struct.Struct) -> int:
        (v,) = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return v

    def i16(self) -> int:
        return self._unpack(_I16)

    def i32(self) -> int:
        return self._unpack(_I32)

    def i64(self) -> int:
        return self._unpack(_I64)

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        v = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return v

    def data_(self) -> bytes:
        n = self.i32()
        v = self.data[self.pos : self.pos + max(n, 0)]
        self.pos += max(n, 0)
        return bytes(v)


def decode_key(data: bytes) -> OffsetKey | GroupKey | None:
    """The key of a record; None for record types this broker does not use (the new
    consumer protocol's records, share groups...)."""
    r = _Reader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.string() or "", r.string() or "", r.i32())
    if version == GROUP_KEY_VERSION:
        return GroupKey(r.string() or "")
    return None


def decode_offset_value(data: bytes) -> CommittedOffset:
    # In two unpacks rather than through _Reader (eleven Python calls): a commit's value
    # is decoded at the first OffsetFetch that reads it. Versions before 3 have no
    # leader epoch; a null metadata reads as "".
    (version,) = _I16.unpack_from(data)
    if version >= 3:
        _, offset, leader_epoch, length = _OFFSET_VALUE_HEAD.unpack_from(data)
        pos = _OFFSET_VALUE_HEAD.size
    else:
        _, offset, length = _OLD_OFFSET_VALUE_HEAD.unpack_from(data)
        leader_epoch, pos = -1, _OLD_OFFSET_VALUE_HEAD.size
    metadata = ""
    if length > 0:
        metadata = data[pos : pos + length].decode()
        pos += length
    (timestamp,) = _I64.unpack_from(data, pos)
    return CommittedOffset(offset, leader_epoch, metadata, timestamp)


def decode_group_value(data: bytes) -> GroupRecord:
    r = _Reader(data)
    version = r.i16()
    protocol_type = r.string() or ""
    generation = r.i32()
    protocol = r.string()
    leader = r.string()
    state_timestamp = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.i32()):
        member_id = r.string() or ""
        instance_id = r.string() if version >= 3 else None
        client_id = r.string() or ""
        client_host = r.string() or ""
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        members.append(MemberRecord(member_id, instance_id, client_id, client_host, rebalance_timeout,
                                    session_timeout, r.data_(), r.data_()))
    return GroupRecord(protocol_type, generation, protocol, leader, state_timestamp, tuple(members))


def subscribed_topics(subscription: bytes) -> set[str]:
    """The topics of a consumer-protocol subscription (version int16, then an array of
    topic strings; what follows does not matter here). Empty if it cannot be read."""
    try:
        r = _Reader(subscription)
        r.i16()
        return {r.string() or "" for _ in range(r.i32())}
    except (struct.error, UnicodeDecodeError):
        return set()
