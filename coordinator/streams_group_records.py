"""The records of KIP-1071 streams groups in `__consumer_offsets`, in Kafka 4.3.1's
formats (group-coordinator's StreamsGroup*Key/Value).

Keys, as every coordinator key: an int16 record type, then int16-length strings:
   17  StreamsGroupMetadata              group         -> Epoch, MetadataHash,
                                                       LastAssignmentConfigs (tag 1)
   18  StreamsGroupPartitionMetadata     group         (read and ignored: not written)
   19  StreamsGroupMemberMetadata        group, member -> the member's metadata
   20  StreamsGroupTargetAssignmentMetadata  group     -> AssignmentEpoch
   21  StreamsGroupTargetAssignmentMember    group, member -> its target tasks
   22  StreamsGroupCurrentMemberAssignment   group, member -> epochs, state, tasks
   23  StreamsGroupTopology              group         -> the topology
Values are flexible version 0 (compact strings and arrays, a tagged-field section after
every struct); a null value is a tombstone. Tasks are (subtopology id, partitions)
pairs; the other tagged fields Kafka may add (ValidatedTopologyEpoch...) are skipped
when read and not written.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .consumer_group_records import _Reader, _Writer

GROUP_METADATA = 17
PARTITION_METADATA = 18
MEMBER_METADATA = 19
TARGET_ASSIGNMENT_METADATA = 20
TARGET_ASSIGNMENT_MEMBER = 21
CURRENT_MEMBER_ASSIGNMENT = 22
TOPOLOGY = 23
RECORD_TYPES = frozenset(range(GROUP_METADATA, TOPOLOGY + 1))
_PER_MEMBER = frozenset((MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT))

_I16 = struct.Struct(">h")

# subtopology id -> partitions: the tasks of one kind a member holds.
Tasks = dict[str, frozenset[int]]


@dataclass(frozen=True, slots=True)
class StreamsGroupKey:
    type: int
    group: str
    member: str | None = None


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """An internal topic a subtopology declares: partitions 0 lets the broker decide."""

    name: str
    partitions: int = 0
    replication_factor: int = 0
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class CopartitionGroup:
    # Indexes into the subtopology's source topics, regexes and repartition sources.
    source_topics: tuple[int, ...] = ()
    source_topic_regex: tuple[int, ...] = ()
    repartition_source_topics: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    copartition_groups: tuple[CopartitionGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class Topology:
    epoch: int
    subtopologies: tuple[Subtopology, ...]


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = 0
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class TaskAssignment:
    """A member's tasks of the three kinds."""

    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CurrentAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: TaskAssignment
    pending_revocation: TaskAssignment


# --- keys -------------------------------------------------------------------------------


def _string(value: str) -> bytes:
    raw = value.encode()
    return _I16.pack(len(raw)) + raw


def encode_key(key: StreamsGroupKey) -> bytes:
    out = _I16.pack(key.type) + _string(key.group)
    if key.type in _PER_MEMBER:
        out += _string(key.member or "")
    return out


def decode_key(data: bytes) -> StreamsGroupKey | None:
    """The key of a streams-group record, None for another record type."""
    (record_type,) = _I16.unpack_from(data, 0)
    if record_type not in RECORD_TYPES:
        return None
    pos = 2
    fields = []
    for _ in range(2 if record_type in _PER_MEMBER else 1):
        (n,) = _I16.unpack_from(data, pos)
        fields.append(data[pos + 2 : pos + 2 + n].decode())
        pos += 2 + n
    return StreamsGroupKey(record_type, fields[0], fields[1] if len(fields) > 1 else None)


# --- values -----------------------------------------------------------------------------


class _ValueWriter(_Writer):
    def i16(self, v: int) -> _ValueWriter:
        self.out += struct.pack(">h", v)
        return self

    def u16(self, v: int) -> _ValueWriter:
        self.out += struct.pack(">H", v)
        return self

    def i64(self, v: int) -> _ValueWriter:
        self.out += struct.pack(">q", v)
        return self

    def array(self, n: int) -> _ValueWriter:
        self.uvarint(n + 1)
        return self

    def pairs(self, values: tuple[tuple[str, str], ...]) -> _ValueWriter:
        self.array(len(values))
        for k, v in values:
            self.string(k).string(v).tags()
        return self

    def tasks(self, tasks: Tasks) -> _ValueWriter:
        self.array(len(tasks))
        for subtopology in sorted(tasks):
            self.string(subtopology)
            self.array(len(tasks[subtopology]))
            for p in sorted(tasks[subtopology]):
                self.i32(p)
            self.tags()
        return self

    def topic_info(self, t: TopicInfo) -> _ValueWriter:
        self.string(t.name).i32(t.partitions)
        self.i16(t.replication_factor).pairs(t.configs)
        self.tags()
        return self


class _ValueReader(_Reader):
    def _unpack(self, fmt: str, size: int) -> int:
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return v

    def i16(self) -> int:
        return self._unpack(">h", 2)

    def u16(self) -> int:
        return self._unpack(">H", 2)

    def i64(self) -> int:
        return self._unpack(">q", 8)

    def count(self) -> int:
        return max(self.uvarint() - 1, 0)

    def text(self) -> str:
        return self.string() or ""

    def pairs(self) -> tuple[tuple[str, str], ...]:
        out = []
        for _ in range(self.count()):
            out.append((self.text(), self.text()))
            self.skip_tags()
        return tuple(out)

    def tasks(self) -> Tasks:
        tasks: Tasks = {}
        for _ in range(self.count()):
            subtopology = self.text()
            tasks[subtopology] = frozenset(self.i32() for _ in range(self.count()))
            self.skip_tags()
        return tasks

    def topic_info(self) -> TopicInfo:
        info = TopicInfo(self.text(), self.i32(), self.i16(), self.pairs())
        self.skip_tags()
        return info


# StreamsGroupMetadataValue's tag of LastAssignmentConfigs: the assignment configs
# (num.standby.replicas) the target assignment was last computed with.
_LAST_ASSIGNMENT_CONFIGS = 1


def encode_group_metadata(epoch: int, metadata_hash: int, assignment_configs: tuple[tuple[str, str], ...] = ()
                          ) -> bytes:
    w = _ValueWriter()
    w.i32(epoch)
    w.i64(metadata_hash)
    if not assignment_configs:
        return w.done()
    field = _ValueWriter()
    field.out = bytearray()
    field.pairs(assignment_configs)
    w.uvarint(1).uvarint(_LAST_ASSIGNMENT_CONFIGS).uvarint(len(field.out))
    w.out += field.out
    return bytes(w.out)


def decode_group_metadata(data: bytes) -> tuple[int, int, tuple[tuple[str, str], ...]]:
    """Epoch, metadata hash and the last assignment configs (() if none)."""
    r = _ValueReader(data)
    epoch, metadata_hash = r.i32(), r.i64()
    configs: tuple[tuple[str, str], ...] = ()
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        end = r.pos + size
        if tag == _LAST_ASSIGNMENT_CONFIGS:
            configs = r.pairs()
        r.pos = end
    return epoch, metadata_hash, configs


def encode_assignment_epoch(epoch: int) -> bytes:
    return _ValueWriter().i32(epoch).done()


def decode_assignment_epoch(data: bytes) -> int:
    return _ValueReader(data).i32()


def encode_member_metadata(m: MemberMetadata) -> bytes:
    w = _ValueWriter()
    w.string(m.instance_id).string(m.rack_id).string(m.client_id).string(m.client_host)
    w.i32(m.rebalance_timeout_ms).i32(m.topology_epoch).string(m.process_id)
    if m.user_endpoint is None:
        w.i8(-1)  # a nullable struct: a presence byte, then the struct
    else:
        w.i8(1).string(m.user_endpoint[0])
        w.u16(m.user_endpoint[1]).tags()
    return w.pairs(m.client_tags).done()


def decode_member_metadata(data: bytes) -> MemberMetadata:
    r = _ValueReader(data)
    instance_id, rack_id, client_id, client_host = r.string(), r.string(), r.text(), r.text()
    rebalance_timeout_ms, topology_epoch, process_id = r.i32(), r.i32(), r.text()
    endpoint = None
    if r.i8() >= 0:
        endpoint = (r.text(), r.u16())
        r.skip_tags()
    return MemberMetadata(instance_id, rack_id, client_id, client_host, rebalance_timeout_ms, topology_epoch,
                          process_id, endpoint, r.pairs())


def encode_target_assignment(a: TaskAssignment) -> bytes:
    return _ValueWriter().tasks(a.active).tasks(a.standby).tasks(a.warmup).done()


def decode_target_assignment(data: bytes) -> TaskAssignment:
    r = _ValueReader(data)
    return TaskAssignment(r.tasks(), r.tasks(), r.tasks())


def encode_current_assignment(a: CurrentAssignment) -> bytes:
    w = _ValueWriter()
    w.i32(a.member_epoch).i32(a.previous_member_epoch).i8(a.state)
    for tasks in (a.assigned, a.pending_revocation):
        w.tasks(tasks.active).tasks(tasks.standby).tasks(tasks.warmup)
    return w.done()


def decode_current_assignment(data: bytes) -> CurrentAssignment:
    r = _ValueReader(data)
    epoch, previous, state = r.i32(), r.i32(), r.i8()
    assigned = TaskAssignment(r.tasks(), r.tasks(), r.tasks())
    return CurrentAssignment(epoch, previous, state, assigned, TaskAssignment(r.tasks(), r.tasks(), r.tasks()))


def encode_topology(t: Topology) -> bytes:
    w = _ValueWriter()
    w.i32(t.epoch)
    w.array(len(t.subtopologies))
    for s in t.subtopologies:
        w.string(s.subtopology_id).strings(s.source_topics).strings(s.source_topic_regex)
        w.array(len(s.state_changelog_topics))
        for info in s.state_changelog_topics:
            w.topic_info(info)
        w.strings(s.repartition_sink_topics)
        w.array(len(s.repartition_source_topics))
        for info in s.repartition_source_topics:
            w.topic_info(info)
        w.array(len(s.copartition_groups))
        for g in s.copartition_groups:
            for indexes in (g.source_topics, g.source_topic_regex, g.repartition_source_topics):
                w.array(len(indexes))
                for i in indexes:
                    w.i16(i)
            w.tags()
        w.tags()
    return w.done()


def decode_topology(data: bytes) -> Topology:
    r = _ValueReader(data)
    epoch = r.i32()
    subtopologies = []
    for _ in range(r.count()):
        subtopology_id, sources, regexes = r.text(), r.strings(), r.strings()
        changelogs = tuple(r.topic_info() for _ in range(r.count()))
        sinks = r.strings()
        repartitions = tuple(r.topic_info() for _ in range(r.count()))
        groups = []
        for _ in range(r.count()):
            indexes = [tuple(r.i16() for _ in range(r.count())) for _ in range(3)]
            r.skip_tags()
            groups.append(CopartitionGroup(*indexes))
        r.skip_tags()
        subtopologies.append(Subtopology(subtopology_id, sources, regexes, changelogs, sinks, repartitions,
                                         tuple(groups)))
    return Topology(epoch, tuple(subtopologies))
