"""The records of `__share_group_state`, in Kafka 4.3's formats
(share-coordinator/src/main/resources/common/message/Share{Snapshot,Update}{Key,Value}.json,
as the 4.3.1 jars encode them).

A key starts with an int16 naming the record type, then the share-partition it is about:
    0  ShareSnapshot   group id (int16 string), topic id (uuid), partition (int32)
    1  ShareUpdate     the same
A value starts with its int16 version (0) and is flexible (compact arrays, tagged fields):
    ShareSnapshotValue  SnapshotEpoch int32, StateEpoch int32, LeaderEpoch int32,
                        StartOffset int64, CreateTimestamp int64, WriteTimestamp int64,
                        StateBatches [FirstOffset int64, LastOffset int64,
                                      DeliveryState int8, DeliveryCount int16],
                        tag 0: DeliveryCompleteCount int32 (written only when not -1)
    ShareUpdateValue    SnapshotEpoch int32, LeaderEpoch int32, StartOffset int64 (-1:
                        unchanged), StateBatches as above, tag 0 as above
A snapshot is the whole state of a share-partition; an update changes the state of the
offsets its batches cover (and the start offset, if not -1). Delivery states are 0
AVAILABLE, 2 ACKNOWLEDGED and 4 ARCHIVED: ACQUIRED is never written, an acquisition
is written as AVAILABLE with the delivery count it reached (so a restart delivers the
record again, counted).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from ottla.protocol.varint import read_uvarint, write_uvarint

SNAPSHOT = 0
UPDATE = 1
TOPIC = "__share_group_state"

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_BATCH = struct.Struct(">qqbh")


@dataclass(frozen=True, slots=True)
class ShareStateKey:
    type: int  # SNAPSHOT or UPDATE
    group: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True)
class StateBatch:
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareStateValue:
    """A snapshot's or an update's value (an update has no state epoch or timestamps)."""

    snapshot_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]
    state_epoch: int = 0
    leader_epoch: int = 0
    create_timestamp: int = -1
    write_timestamp: int = -1
    delivery_complete_count: int = -1


def encode_key(key: ShareStateKey) -> bytes:
    group = key.group.encode()
    return _I16.pack(key.type) + _I16.pack(len(group)) + group + key.topic_id.bytes + _I32.pack(key.partition)


def decode_key(data: bytes) -> ShareStateKey | None:
    """The key of a share-state record, None for a type this broker does not know."""
    (kind,) = _I16.unpack_from(data, 0)
    if kind not in (SNAPSHOT, UPDATE):
        return None
    (n,) = _I16.unpack_from(data, 2)
    group = data[4:4 + n].decode()
    topic_id = uuid.UUID(bytes=bytes(data[4 + n:20 + n]))
    (partition,) = _I32.unpack_from(data, 20 + n)
    return ShareStateKey(kind, group, topic_id, partition)


def encode_value(kind: int, value: ShareStateValue) -> bytes:
    out = bytearray(_I16.pack(0))
    out += _I32.pack(value.snapshot_epoch)
    if kind == SNAPSHOT:
        out += _I32.pack(value.state_epoch)
    out += _I32.pack(value.leader_epoch) + _I64.pack(value.start_offset)
    if kind == SNAPSHOT:
        out += _I64.pack(value.create_timestamp) + _I64.pack(value.write_timestamp)
    out += write_uvarint(len(value.batches) + 1)
    for b in value.batches:
        out += _BATCH.pack(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) + b"\x00"
    if value.delivery_complete_count == -1:
        out += b"\x00"
    else:
        out += b"\x01\x00\x04" + _I32.pack(value.delivery_complete_count)
    return bytes(out)


def decode_value(kind: int, data: bytes) -> ShareStateValue:
    pos = 2  # past the value version
    (snapshot_epoch,) = _I32.unpack_from(data, pos)
    pos += 4
    state_epoch = 0
    if kind == SNAPSHOT:
        (state_epoch,) = _I32.unpack_from(data, pos)
        pos += 4
    leader_epoch, start_offset = _I32.unpack_from(data, pos)[0], _I64.unpack_from(data, pos + 4)[0]
    pos += 12
    create = write = -1
    if kind == SNAPSHOT:
        create, write = _I64.unpack_from(data, pos)[0], _I64.unpack_from(data, pos + 8)[0]
        pos += 16
    n, pos = read_uvarint(data, pos)
    batches = []
    for _ in range(max(n - 1, 0)):
        batches.append(StateBatch(*_BATCH.unpack_from(data, pos)))
        pos += _BATCH.size
        pos = _skip_tags(data, pos)
    complete = -1
    tags, pos = read_uvarint(data, pos)
    for _ in range(tags):
        tag, pos = read_uvarint(data, pos)
        size, pos = read_uvarint(data, pos)
        if tag == 0 and size == 4:
            (complete,) = _I32.unpack_from(data, pos)
        pos += size
    return ShareStateValue(snapshot_epoch, start_offset, tuple(batches), state_epoch, leader_epoch, create, write,
                           complete)


def _skip_tags(data: bytes, pos: int) -> int:
    tags, pos = read_uvarint(data, pos)
    for _ in range(tags):
        _, pos = read_uvarint(data, pos)
        size, pos = read_uvarint(data, pos)
        pos += size
    return pos
