"""A group that speaks Kafka's classic protocol: its members, its state, what its
requests and answers carry, and how it is recorded in `__consumer_offsets`.

A classic group moves through

    Empty ──join──▶ PreparingRebalance ──all joined / rebalance timeout──▶ CompletingRebalance
      ▲                  ▲        │                                        │ leader's SyncGroup
      │                  └────────┴──── join, leave, session expiry ◀── Stable ◀──┘
      └── last member gone ──┘

(Dead is the state Kafka reports for a group that does not exist.) The transitions are
made by classic_protocol.py; this module holds the group at one moment and the checks
that only read it: is this member who it says it is, may it commit offsets, may the
group be deleted.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field

from ottla.protocol.errors import ErrorCode, KafkaError

from .group import Group, GroupType
from .offsets_log import (
    GroupKey,
    GroupRecord,
    MemberRecord,
    encode_group_key,
    encode_group_value,
    subscribed_topics,
)
from .writes import Records


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# Read once (validate_offset_commit, at every commit).
_EMPTY, _COMPLETING_REBALANCE = GroupState.EMPTY, GroupState.COMPLETING_REBALANCE


@dataclass(frozen=True)
class JoinRequest:
    """What a JoinGroup asks, whatever its version."""

    group_id: str
    member_id: str  # "" for a member joining for the first time
    group_instance_id: str | None  # set for a static member (KIP-345)
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata), in the member's preference order
    # JoinGroup v4+ (KIP-394): a new member is first handed its id and must join again.
    require_known_member_id: bool


@dataclass
class JoinResult:
    error: ErrorCode
    member_id: str
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    # Only the leader gets the members: (member id, group instance id, metadata).
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    last_heartbeat: float = 0.0
    join_waiter: asyncio.Future[JoinResult] | None = None
    sync_waiter: asyncio.Future[SyncResult] | None = None

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    @property
    def awaiting(self) -> bool:
        return (self.join_waiter is not None and not self.join_waiter.done()) or (
            self.sync_waiter is not None and not self.sync_waiter.done())


@dataclass
class ClassicGroup(Group):
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    # Member ids handed out with MEMBER_ID_REQUIRED, waiting for the second JoinGroup.
    pending_members: dict[str, float] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    rebalance_deadline: float = 0.0
    initial_delay_until: float = 0.0

    @property
    def type(self) -> GroupType:
        return GroupType.CLASSIC

    @property
    def state_name(self) -> str:
        return self.state.value

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    # --- protocols -----------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        names: set[str] | None = None
        for member in self.members.values():
            mine = {name for name, _ in member.protocols}
            names = mine if names is None else names & mine
        return names or set()

    def select_protocol(self) -> str | None:
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            for name, _ in member.protocols:
                if name in candidates:
                    votes[name] = votes.get(name, 0) + 1
                    break
        return max(votes, key=lambda name: votes[name]) if votes else None

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        names = {name for name, _ in protocols}
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to, or None if the group is not a consumer group
        (its subscriptions cannot be read)."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            topics |= subscribed_topics(member.metadata(self.protocol_name))
        return topics

    # --- checks --------------------------------------------------------------------------

    def check_member(self, member_id: str, group_instance_id: str | None, generation: int) -> Member:
        """The member a request speaks for, if it is one of this generation's."""
        if group_instance_id is not None:
            known = self.static_members.get(group_instance_id)
            if known is not None and known != member_id:
                raise KafkaError(ErrorCode.fenced_instance_id, f"{group_instance_id} now belongs to {known}")
        member = self.members.get(member_id)
        if member is None:
            raise KafkaError(ErrorCode.unknown_member_id, f"{member_id!r} is not a member of {self.group_id!r}")
        if generation != self.generation:
            raise KafkaError(ErrorCode.illegal_generation,
                             f"generation {generation} is not the group's {self.generation}")
        return member

    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation: int,
                               api_version: int | None = None) -> None:
        # As Kafka's ClassicGroup.validateOffsetCommit. The states compared as is_ would,
        # without its call and the members' reads off their enum class (a slot call each
        # on Python 3.11): at every commit.
        state = self.state
        if generation < 0 and state is _EMPTY:
            return  # a commit outside any generation, to a group with no members, is taken as is
        # A commit outside any generation to a group with members names none of them:
        # check_member refuses it as an unknown member, as Kafka does.
        self.check_member(member_id, instance_id, generation)
        if state is _COMPLETING_REBALANCE:
            raise KafkaError(ErrorCode.rebalance_in_progress, "the group is completing a rebalance")

    def validate_txn_offset_commit(self, member_id: str, instance_id: str | None, generation: int) -> None:
        # As Kafka's ClassicGroup.validateOffsetCommit for a transaction: a commit outside
        # any generation to an empty group is taken as is, one naming no membership
        # (TxnOffsetCommit before v3 carries none) whatever the group's state; any other
        # must be of a member of the group's generation.
        if generation < 0 and (self.state is _EMPTY or (not member_id and instance_id is None)):
            return
        self.check_member(member_id, instance_id, generation)

    def validate_delete(self) -> None:
        if self.members or self.pending_members:
            raise KafkaError(ErrorCode.non_empty_group, f"group {self.group_id!r} has members")

    def topics_in_use(self) -> set[str]:
        if self.is_(GroupState.EMPTY):
            return set()
        return self.subscribed_topics() or set()

    # --- records -------------------------------------------------------------------------

    def record(self, timestamp_ms: int, assignments: dict[str, bytes] | None = None) -> tuple[bytes, bytes]:
        """The GroupMetadata record (key, value) of the group as it is now, or with the
        members' `assignments` (member id -> assignment) when given."""
        members = tuple(
            MemberRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                         m.session_timeout_ms, m.metadata(self.protocol_name),
                         m.assignment if assignments is None else assignments[m.member_id])
            for m in self.members.values()
        )
        record = GroupRecord(self.protocol_type or "", self.generation, self.protocol_name, self.leader_id,
                             timestamp_ms, members)
        return encode_group_key(GroupKey(self.group_id)), encode_group_value(record)

    def empty_record(self, timestamp_ms: int) -> tuple[bytes, bytes]:
        """The GroupMetadata record of the group's next generation, with no member."""
        record = GroupRecord(self.protocol_type or "", self.generation + 1, None, None, timestamp_ms, ())
        return encode_group_key(GroupKey(self.group_id)), encode_group_value(record)

    def tombstones(self) -> Records:
        return [(encode_group_key(GroupKey(self.group_id)), None)]

    def replay(self, record: GroupRecord, now: float) -> None:
        """Apply the group's GroupMetadata record (Kafka's GroupMetadataManager.replay):
        a generation that got its assignment (the group is Stable with those members)
        or one that ended empty. The one way the recorded group changes, at start-up
        and after every append; a member the record brings is taken as having just sent
        a heartbeat, one it does not have is gone (whoever removed it answers whatever
        it waits for)."""
        self.generation = record.generation
        self.protocol_type = record.protocol_type or None
        self.protocol_name = record.protocol
        self.leader_id = record.leader
        recorded = {m.member_id for m in record.members}
        for member_id in [m for m in self.members if m not in recorded]:
            gone = self.members.pop(member_id)
            if gone.group_instance_id and self.static_members.get(gone.group_instance_id) == member_id:
                del self.static_members[gone.group_instance_id]
        for m in record.members:
            member = self.members.get(m.member_id)
            if member is None:
                member = self.members[m.member_id] = Member(
                    m.member_id, m.group_instance_id, m.client_id, m.client_host, m.session_timeout_ms,
                    m.rebalance_timeout_ms, record.protocol_type, [(record.protocol or "", m.subscription)],
                    last_heartbeat=now)
            member.assignment = m.assignment
            if m.group_instance_id:
                self.static_members[m.group_instance_id] = m.member_id
        self.state = GroupState.STABLE if self.members else GroupState.EMPTY

    @classmethod
    def restore(cls, group_id: str, record: GroupRecord, now: float) -> ClassicGroup:
        """The group a GroupMetadata record describes, where there was none."""
        group = cls(group_id)
        group.replay(record, now)
        return group
