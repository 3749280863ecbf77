"""A KIP-1071 streams group: its topology, its members, its epochs, its target
assignment of tasks, each member's reconciliation towards it, and its records in
`__consumer_offsets` (streams_group_records.py).

The epochs are the consumer protocol's (consumer_group.py): the group epoch moves when
the membership, a member's metadata, the topology or the topics it reads change; the
assignment epoch is the group epoch the target assignment was computed for; a member's
epoch is the assignment epoch its tasks reached. A member moves towards its target with
`reconcile` (Kafka's streams CurrentAssignmentBuilder): active tasks it must give up are
first revoked (UNREVOKED_TASKS, its epoch kept until its heartbeat no longer lists
them), and an active task another member still holds is handed over only once that
member let it go (UNRELEASED_TASKS). So no task is ever active on two members. Standby
and warm-up tasks, which process nothing, follow the target at once.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from ottla.protocol.errors import ErrorCode, KafkaError

from .group import Group, GroupType
from .streams_group_records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    TOPOLOGY,
    CurrentAssignment,
    MemberMetadata,
    StreamsGroupKey,
    TaskAssignment,
    Tasks,
    Topology,
    decode_assignment_epoch,
    decode_current_assignment,
    decode_group_metadata,
    decode_member_metadata,
    decode_target_assignment,
    decode_topology,
    encode_assignment_epoch,
    encode_current_assignment,
    encode_group_metadata,
    encode_key,
    encode_member_metadata,
    encode_target_assignment,
    encode_topology,
)
from .writes import Records

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

EMPTY = TaskAssignment()


class MemberState(enum.IntEnum):
    """Kafka's streams MemberState, with its record values."""

    STABLE = 0
    UNREVOKED_TASKS = 1
    UNRELEASED_TASKS = 2
    UNKNOWN = 127


@dataclass
class StreamsMember:
    member_id: str
    metadata: MemberMetadata = field(default_factory=MemberMetadata)
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: TaskAssignment = EMPTY
    pending_revocation: TaskAssignment = EMPTY
    # Not in the log: when it was last heard from, and when it is fenced if it has not
    # revoked what it was asked to (its rebalance timeout).
    last_heartbeat: float = 0.0
    revocation_deadline: float | None = None

    def current(self) -> CurrentAssignment:
        return CurrentAssignment(self.member_epoch, self.previous_member_epoch, int(self.state), self.assigned,
                                 self.pending_revocation)

    def owned_active(self) -> set[tuple[str, int]]:
        return {(s, p) for tasks in (self.assigned.active, self.pending_revocation.active)
                for s, ps in tasks.items() for p in ps}


def _key(kind: int, group_id: str, member_id: str | None = None) -> bytes:
    return encode_key(StreamsGroupKey(kind, group_id, member_id))


def _minus(a: Tasks, b: Tasks) -> Tasks:
    out = {s: ps - b.get(s, frozenset()) for s, ps in a.items()}
    return {s: ps for s, ps in out.items() if ps}


def _union(a: Tasks, b: Tasks) -> Tasks:
    return {s: a.get(s, frozenset()) | b.get(s, frozenset()) for s in set(a) | set(b)}


def _intersect(a: Tasks, b: Tasks) -> Tasks:
    out = {s: ps & b.get(s, frozenset()) for s, ps in a.items()}
    return {s: ps for s, ps in out.items() if ps}


def reconcile(member: StreamsMember, assignment_epoch: int, target: TaskAssignment, owned_active: Tasks | None,
              owned_elsewhere: set[tuple[str, int]]) -> StreamsMember:
    """One step of the member towards its target (the same member if nothing moves).
    `owned_active`: the active tasks its heartbeat lists (None: unchanged);
    `owned_elsewhere`: the active tasks other members still hold."""
    if member.state is MemberState.UNREVOKED_TASKS:
        pending = member.pending_revocation.active
        if owned_active is None or _intersect(owned_active, pending):
            return member  # still revoking
    elif member.member_epoch == assignment_epoch and member.state is MemberState.STABLE:
        if member.assigned == target:
            return member
    revoke = _minus(member.assigned.active, target.active)
    if revoke and member.state is not MemberState.UNREVOKED_TASKS:
        return replace(member, state=MemberState.UNREVOKED_TASKS,
                       assigned=TaskAssignment(_intersect(member.assigned.active, target.active),
                                               _intersect(member.assigned.standby, target.standby),
                                               _intersect(member.assigned.warmup, target.warmup)),
                       pending_revocation=TaskAssignment(revoke, {}, {}))
    kept = _intersect(member.assigned.active, target.active)
    wanted = _minus(target.active, kept)
    free = {s: frozenset(p for p in ps if (s, p) not in owned_elsewhere) for s, ps in wanted.items()}
    active = _union(kept, {s: ps for s, ps in free.items() if ps})
    unreleased = _minus(wanted, free)
    return replace(member, state=MemberState.UNRELEASED_TASKS if unreleased else MemberState.STABLE,
                   member_epoch=assignment_epoch,
                   previous_member_epoch=(member.member_epoch if member.member_epoch != assignment_epoch
                                          else member.previous_member_epoch),
                   assigned=TaskAssignment(active, target.standby, target.warmup), pending_revocation=EMPTY,
                   revocation_deadline=None)


@dataclass
class StreamsGroup(Group):
    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0
    # The assignment configs (Kafka's: num.standby.replicas) of the last group epoch: a
    # change of them is a new group epoch, so a new target (StreamsGroupMetadata's
    # LastAssignmentConfigs).
    assignment_configs: tuple[tuple[str, str], ...] = ()
    assignment_epoch: int = 0
    topology: Topology | None = None
    members: dict[str, StreamsMember] = field(default_factory=dict)
    target: dict[str, TaskAssignment] = field(default_factory=dict)
    protocol_type: str | None = "streams"
    # Not in the log: whether the topology was configured (its topics all there) when
    # the group was last looked at; NotReady while it is not.
    configured: bool = False
    # Not in the log, as in Kafka: a member asked the whole application to shut down
    # (its uncaught-exception handler's SHUTDOWN_APPLICATION); every member is told so
    # until the group is empty.
    shutdown_requested: bool = False
    # Not in the log, as Kafka's timer: when the initial rebalance delay a member joining
    # the empty group started is over (None: none running).
    assignment_delayed_until: float | None = None

    @property
    def type(self) -> GroupType:
        return GroupType.STREAMS

    @property
    def state_name(self) -> str:
        """Kafka's StreamsGroupState names."""
        if not self.members:
            return "Empty"
        if self.topology is None or not self.configured:
            return "NotReady"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE:
                return "Reconciling"
        return "Stable"

    def working_copy(self) -> StreamsGroup:
        """A copy an operation changes while it decides (members are replaced, never
        changed in place, so shallow copies of the maps do)."""
        return replace(self, members=dict(self.members), target=dict(self.target))

    def carry_over(self, working: StreamsGroup) -> None:
        """What the records do not hold, from the copy an operation ran on."""
        self.configured = working.configured
        self.shutdown_requested = working.shutdown_requested and bool(self.members)
        self.assignment_delayed_until = working.assignment_delayed_until
        for member_id, member in self.members.items():
            seen = working.members.get(member_id)
            if seen is not None:
                member.last_heartbeat = seen.last_heartbeat
                member.revocation_deadline = seen.revocation_deadline

    def member(self, member_id: str) -> StreamsMember:
        member = self.members.get(member_id)
        if member is None:
            raise KafkaError(ErrorCode.unknown_member_id,
                             f"Member {member_id} is not a member of group {self.group_id}.")
        return member

    def owned_elsewhere(self, member_id: str) -> set[tuple[str, int]]:
        return {t for m in self.members.values() if m.member_id != member_id for t in m.owned_active()}

    # --- the checks commits and deletions ask for ------------------------------------------

    def _validate_member_epoch(self, member_id: str, epoch: int) -> None:
        """Kafka's StreamsGroup: any other epoch than the member's is STALE_MEMBER_EPOCH
        (never FENCED_MEMBER_EPOCH, which the Java client's OffsetFetch takes as fatal:
        a member's epoch can be ahead of the coordinator's for a moment)."""
        member = self.member(member_id)
        if epoch != member.member_epoch:
            raise KafkaError(ErrorCode.stale_member_epoch,
                             f"The received member epoch {epoch} does not match the expected member epoch "
                             f"{member.member_epoch}.")

    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation: int,
                               api_version: int | None = None) -> None:
        if generation < 0 and not self.members:
            return  # the admin client, outside the membership
        self.member(member_id)
        if api_version is not None and api_version < 9:
            raise KafkaError(ErrorCode.unsupported_version,
                             "OffsetCommit version 9 or above must be used by members using "
                             "the streams group protocol")
        self._validate_member_epoch(member_id, generation)

    def validate_txn_offset_commit(self, member_id: str, instance_id: str | None, generation: int) -> None:
        if generation < 0 and not self.members:
            return
        if generation == -1 and not member_id and instance_id is None:
            return  # TxnOffsetCommit need not name the member: checked only when it does
        try:
            self._validate_member_epoch(member_id, generation)
        except KafkaError as exc:
            # TxnOffsetCommit has no STALE_MEMBER_EPOCH: Kafka answers ILLEGAL_GENERATION,
            # which the producer aborts on and Streams recovers from (a task migrated);
            # the stale code would be fatal to the application.
            if exc.code is not ErrorCode.stale_member_epoch:
                raise
            raise KafkaError(ErrorCode.illegal_generation, exc.message) from None

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        if member_epoch < 0 and not member_id:
            return
        self._validate_member_epoch(member_id or "", member_epoch)

    def validate_delete(self) -> None:
        if self.members:
            raise KafkaError(ErrorCode.non_empty_group, f"group {self.group_id!r} has members")

    def topics_in_use(self) -> set[str]:
        """As Kafka's StreamsGroup.isSubscribedToTopic: the source and repartition source
        topics of a configured topology, while the group has members (an empty group's
        offsets can be deleted, as Kafka 4.3.1 lets kafka-streams-groups --delete-offsets do)."""
        if self.topology is None or not self.configured or not self.members:
            return set()
        return {t for s in self.topology.subtopologies
                for t in (*s.source_topics, *(i.name for i in s.repartition_source_topics))}

    # --- records -------------------------------------------------------------------------

    def epoch_record(self) -> tuple[bytes, bytes]:
        return _key(GROUP_METADATA, self.group_id), encode_group_metadata(self.group_epoch, self.metadata_hash,
                                                                          self.assignment_configs)

    def topology_record(self) -> tuple[bytes, bytes | None]:
        value = None if self.topology is None else encode_topology(self.topology)
        return _key(TOPOLOGY, self.group_id), value

    def member_record(self, member: StreamsMember) -> tuple[bytes, bytes]:
        return _key(MEMBER_METADATA, self.group_id, member.member_id), encode_member_metadata(member.metadata)

    def target_member_record(self, member_id: str) -> tuple[bytes, bytes]:
        return (_key(TARGET_ASSIGNMENT_MEMBER, self.group_id, member_id),
                encode_target_assignment(self.target.get(member_id, EMPTY)))

    def target_epoch_record(self) -> tuple[bytes, bytes]:
        return _key(TARGET_ASSIGNMENT_METADATA, self.group_id), encode_assignment_epoch(self.assignment_epoch)

    def current_assignment_record(self, member: StreamsMember) -> tuple[bytes, bytes]:
        return (_key(CURRENT_MEMBER_ASSIGNMENT, self.group_id, member.member_id),
                encode_current_assignment(member.current()))

    def member_tombstones(self, member_id: str) -> Records:
        return [(_key(kind, self.group_id, member_id), None)
                for kind in (CURRENT_MEMBER_ASSIGNMENT, TARGET_ASSIGNMENT_MEMBER, MEMBER_METADATA)]

    def tombstones(self) -> Records:
        """Everything of the group, its epoch record last (a replay meets it last)."""
        records: Records = []
        for member_id in list(self.members):
            records += self.member_tombstones(member_id)
        records += [(_key(kind, self.group_id), None)
                    for kind in (TARGET_ASSIGNMENT_METADATA, PARTITION_METADATA, TOPOLOGY, GROUP_METADATA)]
        return records

    def replay(self, key: StreamsGroupKey, value: bytes | None) -> None:
        """Apply one of the group's records: the one way it changes, at start-up and
        after every append."""
        kind, member_id = key.type, key.member or ""
        if kind == GROUP_METADATA and value is not None:
            self.group_epoch, self.metadata_hash, self.assignment_configs = decode_group_metadata(value)
        elif kind == TOPOLOGY:
            self.topology = None if value is None else decode_topology(value)
        elif kind == TARGET_ASSIGNMENT_METADATA and value is not None:
            self.assignment_epoch = decode_assignment_epoch(value)
        elif kind == TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                self.target.pop(member_id, None)
            else:
                self.target[member_id] = decode_target_assignment(value)
        elif kind == MEMBER_METADATA:
            if value is None:
                self.members.pop(member_id, None)
            else:
                member = self.members.get(member_id) or StreamsMember(member_id)
                self.members[member_id] = replace(member, metadata=decode_member_metadata(value))
        elif kind == CURRENT_MEMBER_ASSIGNMENT and value is not None:
            a = decode_current_assignment(value)
            member = self.members.get(member_id) or StreamsMember(member_id)
            state = MemberState(a.state) if a.state in MemberState._value2member_map_ else MemberState.UNKNOWN
            self.members[member_id] = replace(member, member_epoch=a.member_epoch,
                                              previous_member_epoch=a.previous_member_epoch, state=state,
                                              assigned=a.assigned, pending_revocation=a.pending_revocation)
