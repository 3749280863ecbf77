"""A KIP-848 consumer group: its members, its epochs, its target assignment, the
reconciliation of each member towards it, and its records in `__consumer_offsets`.

Three epochs, as in Kafka:
- the group epoch, bumped whenever the membership, a subscription or the metadata of a
  subscribed topic changes;
- the assignment epoch, the group epoch the target assignment was computed for;
- each member's epoch: the assignment epoch its current assignment reached.

A member moves towards its target with `reconcile` (Kafka's CurrentAssignmentBuilder):
partitions it must give up are first revoked (UNREVOKED_PARTITIONS: the member keeps its
epoch until its heartbeat no longer lists them), and a partition another member still
owns is handed over only once that member released it (UNRELEASED_PARTITIONS). So no
partition ever has two owners. The heartbeat protocol that drives this is
consumer_protocol.py; this module holds the group at one moment.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from ottla.protocol.errors import ErrorCode, KafkaError

from .assignors import Assignment
from .consumer_group_records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    ConsumerGroupKey,
    CurrentAssignment,
    MemberMetadata,
    decode_current_assignment,
    decode_epoch,
    decode_member_metadata,
    decode_target_assignment,
    encode_current_assignment,
    encode_epoch,
    encode_key,
    encode_member_metadata,
    encode_target_assignment,
)
from .group import Group, GroupType
from .writes import Records

# A static member that left for a while (ConsumerGroupHeartbeat epoch -2): it keeps its
# partitions until it comes back or its session expires. (Epoch -1: a member leaving.)
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.IntEnum):
    """Kafka's MemberState, with its record values."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    last_heartbeat: float = 0.0
    # When a member asked to revoke partitions is fenced if it has not (its rebalance
    # timeout), None when nothing is pending.
    revocation_deadline: float | None = None

    def metadata(self) -> MemberMetadata:
        return MemberMetadata(self.instance_id, self.rack_id, self.client_id, self.client_host,
                              self.subscribed_topic_names, self.subscribed_topic_regex, self.rebalance_timeout_ms,
                              self.server_assignor)

    def current(self) -> CurrentAssignment:
        return CurrentAssignment(self.member_epoch, self.previous_member_epoch, int(self.state), self.assigned,
                                 self.pending_revocation)

    def owned(self) -> list[tuple[uuid.UUID, int]]:
        """Every partition this member holds, pending revocation included."""
        return [(t, p) for a in (self.assigned, self.pending_revocation) for t, ps in a.items() for p in ps]


def _records_key(kind: int, group_id: str, member_id: str | None = None) -> bytes:
    return encode_key(ConsumerGroupKey(kind, group_id, member_id))


@dataclass
class ConsumerGroup(Group):
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Assignment] = field(default_factory=dict)  # member id -> target assignment
    # (topic id, partition) -> epoch of the member holding it (assigned or being revoked).
    owners: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    # What the group epoch was computed from: the subscribed topics' (name, id,
    # partitions). A change bumps the epoch (a new topic matching a regex, new partitions).
    subscribed_metadata: frozenset[tuple[str, uuid.UUID, int]] | None = None
    metadata_refresh_at: float = 0.0  # when a heartbeat next compares them (clock seconds)
    protocol_type: str | None = "consumer"
    # member id -> which topics its regex may match: those its principal may describe, as
    # its last heartbeat said (None: any). Not in the log: a member that has not sent a
    # heartbeat since the group was loaded keeps matching any topic until it does.
    regex_filters: dict[str, Callable[[str], bool] | None] = field(default_factory=dict, repr=False, compare=False)

    @property
    def type(self) -> GroupType:
        return GroupType.CONSUMER

    @property
    def state_name(self) -> str:
        """Kafka's ConsumerGroupState names."""
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE:
                return "Reconciling"
        return "Stable"

    def described_topics(self, names: Mapping[object, str]) -> set[str]:
        """The topics ConsumerGroupDescribe names of the group, by `names` (topic id ->
        name; a topic deleted meanwhile is left out): its members' assignments and target
        assignments. A client must DESCRIBE each for the group to be described at all, as
        Kafka 4.3.1's KafkaApis asks; a name only subscribed to is not asked."""
        return {names[t] for m in self.members.values()
                for assignment in (m.assigned, self.target.get(m.member_id, {})) for t in assignment if t in names}

    # --- a change decided before it is made ----------------------------------------------

    def working_copy(self) -> ConsumerGroup:
        """A copy for an operation to change while it decides what to do: its records
        and its answer come from the copy, and the group itself changes only by the
        replay of those records (members are replaced, never changed in place, so
        shallow copies of the maps do)."""
        return replace(self, members=dict(self.members), static_members=dict(self.static_members),
                       target=dict(self.target), owners=dict(self.owners), regex_filters=dict(self.regex_filters))

    def carry_over(self, working: ConsumerGroup) -> None:
        """Take from the working copy an operation ran on what its records do not hold,
        once they are replayed: when members were last heard from and must let go of
        their partitions, their regexes' filters, the topic metadata the epoch saw."""
        self.subscribed_metadata = working.subscribed_metadata
        self.metadata_refresh_at = working.metadata_refresh_at
        for member_id, member in self.members.items():
            seen = working.members.get(member_id)
            if seen is not None:
                member.last_heartbeat = seen.last_heartbeat
                member.revocation_deadline = seen.revocation_deadline
                self.regex_filters[member_id] = working.regex_filters.get(member_id)

    # --- members -------------------------------------------------------------------------

    def member(self, member_id: str) -> ConsumerMember:
        member = self.members.get(member_id)
        if member is None:
            raise KafkaError(ErrorCode.unknown_member_id,
                             f"Member {member_id} is not a member of group {self.group_id}.")
        return member

    def put_member(self, member: ConsumerMember) -> None:
        """Add or replace a member, keeping the owners and static ids in step."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        for tp in member.owned():
            self.owners[tp] = member.member_epoch

    def remove_member(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        self.regex_filters.pop(member_id, None)
        if member is not None:
            self._release(member)
            if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
                del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        return member

    def _release(self, member: ConsumerMember) -> None:
        for tp in member.owned():
            self.owners.pop(tp, None)

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The epoch of the member holding a partition, -1 if none does."""
        return self.owners.get((topic_id, partition), -1)

    def preferred_assignor(self, default: str) -> str:
        """The server assignor most members asked for, else the broker's default."""
        votes: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        return max(sorted(votes), key=lambda name: votes[name]) if votes else default

    # --- the checks commits and deletions ask for ------------------------------------------

    def _validate_member_epoch(self, member_id: str, epoch: int) -> None:
        member = self.member(member_id)
        if epoch != member.member_epoch:
            raise KafkaError(ErrorCode.stale_member_epoch,
                             f"The member epoch {epoch} is not the member's current epoch {member.member_epoch}.")

    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation: int,
                               api_version: int | None = None) -> None:
        # Epoch -1: the admin client or a consumer outside the group management; allowed
        # while the group has no members.
        if generation < 0 and not self.members:
            return
        self.member(member_id)
        if api_version is not None and api_version < 9:
            raise KafkaError(ErrorCode.unsupported_version,
                             "OffsetCommit version 9 or above must be used by members using "
                             "the consumer group protocol")
        self._validate_member_epoch(member_id, generation)

    def validate_txn_offset_commit(self, member_id: str, instance_id: str | None, generation: int) -> None:
        if generation < 0 and not self.members:
            return
        self._validate_member_epoch(member_id, generation)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        """OffsetFetch v9 names the member asking: its epoch must be current."""
        if member_epoch < 0 and not member_id:
            return
        self._validate_member_epoch(member_id or "", member_epoch)

    def validate_delete(self) -> None:
        if self.members:
            raise KafkaError(ErrorCode.non_empty_group, f"group {self.group_id!r} has members")

    def topics_in_use(self) -> set[str]:
        """The topics the members subscribe to, by name or by regex (as last resolved)."""
        if not self.members:
            return set()
        topics = {name for name, _, _ in self.subscribed_metadata or ()}
        for m in self.members.values():
            topics |= set(m.subscribed_topic_names)
        return topics

    # --- records -------------------------------------------------------------------------

    def epoch_record(self) -> tuple[bytes, bytes]:
        return _records_key(GROUP_METADATA, self.group_id), encode_epoch(self.group_epoch)

    def member_record(self, member: ConsumerMember) -> tuple[bytes, bytes]:
        return _records_key(MEMBER_METADATA, self.group_id, member.member_id), encode_member_metadata(member.metadata())

    def target_member_record(self, member_id: str) -> tuple[bytes, bytes]:
        return (_records_key(TARGET_ASSIGNMENT_MEMBER, self.group_id, member_id),
                encode_target_assignment(self.target.get(member_id, {})))

    def target_epoch_record(self) -> tuple[bytes, bytes]:
        return _records_key(TARGET_ASSIGNMENT_METADATA, self.group_id), encode_epoch(self.assignment_epoch)

    def current_assignment_record(self, member: ConsumerMember) -> tuple[bytes, bytes]:
        return (_records_key(CURRENT_MEMBER_ASSIGNMENT, self.group_id, member.member_id),
                encode_current_assignment(member.current()))

    def member_tombstones(self, member_id: str) -> Records:
        """What removes a member, in Kafka's order: its current assignment, its target,
        its subscription."""
        return [(_records_key(kind, self.group_id, member_id), None)
                for kind in (CURRENT_MEMBER_ASSIGNMENT, TARGET_ASSIGNMENT_MEMBER, MEMBER_METADATA)]

    def tombstones(self) -> Records:
        """Everything of the group, the group's epoch last (a replay meets it last)."""
        records: Records = []
        for member_id in list(self.members):
            records += self.member_tombstones(member_id)
        records += [(_records_key(kind, self.group_id), None)
                    for kind in (TARGET_ASSIGNMENT_METADATA, PARTITION_METADATA, GROUP_METADATA)]
        return records

    def replay(self, key: ConsumerGroupKey, value: bytes | None) -> None:
        """Apply one of the group's records (Kafka's GroupMetadataManager.replay): the one
        way its members, epochs and assignments change, at start-up and after every
        append."""
        kind, member_id = key.type, key.member or ""
        if kind == GROUP_METADATA and value is not None:
            self.group_epoch = decode_epoch(value)
        elif kind == TARGET_ASSIGNMENT_METADATA and value is not None:
            self.assignment_epoch = decode_epoch(value)
        elif kind == TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                self.target.pop(member_id, None)
            else:
                self.target[member_id] = decode_target_assignment(value)
        elif kind == MEMBER_METADATA:
            if value is None:
                self.remove_member(member_id)
            else:
                m = decode_member_metadata(value)
                member = self.members.get(member_id) or ConsumerMember(member_id)
                member = replace(member, instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
                                 client_host=m.client_host, subscribed_topic_names=m.subscribed_topic_names,
                                 subscribed_topic_regex=m.subscribed_topic_regex,
                                 rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor)
                self.put_member(member)
        elif kind == CURRENT_MEMBER_ASSIGNMENT:
            member = self.members.get(member_id) or ConsumerMember(member_id)
            if value is None:
                member = replace(member, member_epoch=0, previous_member_epoch=0, state=MemberState.STABLE,
                                 assigned={}, pending_revocation={})
            else:
                a = decode_current_assignment(value)
                state = MemberState(a.state) if a.state in MemberState._value2member_map_ else MemberState.UNKNOWN
                member = replace(member, member_epoch=a.member_epoch, previous_member_epoch=a.previous_member_epoch,
                                 state=state, assigned=a.assigned, pending_revocation=a.pending_revocation)
            self.put_member(member)
        # PARTITION_METADATA and REGULAR_EXPRESSION records (older brokers, Kafka 4.0):
        # this broker recomputes both from the topics it has, so they are skipped.


# --- reconciliation (Kafka's CurrentAssignmentBuilder) ----------------------------------


def owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    """Whether the partitions a member reported (None: not reported) include any of
    `partitions`; not reporting counts as still owning them."""
    if owned is None:
        return True
    return any(owned.get(topic, frozenset()) & ps for topic, ps in partitions.items())


def reconcile(member: ConsumerMember, target_epoch: int, target: Assignment, owned: Assignment | None,
              partition_epoch: Callable[[uuid.UUID, int], int]) -> ConsumerMember:
    """The member's next current assignment on its way to `target` (a copy; the member
    given is left as it was). `owned` is what its heartbeat reported, None if it did not."""
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next_assignment(member, member.member_epoch, target_epoch, target, owned, partition_epoch)
    if state is MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, member.pending_revocation):
            return member  # still waiting for the member to let go
        return _next_assignment(member, member.member_epoch + 1, target_epoch, target, owned, partition_epoch)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next_assignment(member, member.member_epoch, target_epoch, target, owned, partition_epoch)
    # UNKNOWN: a state a newer broker wrote. The member starts over without partitions.
    if owned is None or any(owned.values()):
        raise KafkaError(ErrorCode.fenced_member_epoch,
                         "The consumer group member is in a unknown state. The member must abandon all its "
                         "partitions and rejoin.")
    return _next_assignment(member, target_epoch, target_epoch, target, owned, partition_epoch)


def _next_assignment(member: ConsumerMember, member_epoch: int, target_epoch: int, target: Assignment,
                     owned: Assignment | None, partition_epoch: Callable[[uuid.UUID, int], int]) -> ConsumerMember:
    assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    pending_assignment: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    for topic in set(target) | set(member.assigned):
        wanted = target.get(topic, frozenset())
        current = member.assigned.get(topic, frozenset())
        kept = current & wanted
        if kept:
            assigned[topic] = kept
        if current - kept:
            revoking[topic] = current - kept
        # Partitions another member still holds wait until it has released them.
        missing = wanted - kept
        free = frozenset(p for p in missing if partition_epoch(topic, p) == -1)
        unreleased = unreleased or free != missing
        if free:
            pending_assignment[topic] = free

    def moved(state: MemberState, epoch: int, now_assigned: Assignment, pending: Assignment) -> ConsumerMember:
        # As Kafka's updateMemberEpoch: the epoch it had becomes the previous one, which a
        # member whose last answer was lost may still send.
        return replace(member, state=state, member_epoch=epoch, previous_member_epoch=member.member_epoch,
                       assigned=now_assigned, pending_revocation=pending)

    if revoking and owns_any(owned, revoking):
        # Revoke first: the member keeps its epoch until it no longer reports them.
        return moved(MemberState.UNREVOKED_PARTITIONS, member_epoch, assigned, revoking)
    for topic, ps in pending_assignment.items():
        assigned[topic] = assigned.get(topic, frozenset()) | ps
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return moved(state, target_epoch, assigned, {})
