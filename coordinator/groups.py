"""The group coordinator: Kafka's classic group protocol and committed offsets.

A group moves through

    Empty ──join──▶ PreparingRebalance ──all joined / rebalance timeout──▶ CompletingRebalance
      ▲                  ▲        │                                        │ leader's SyncGroup
      │                  └────────┴──── join, leave, session expiry ◀── Stable ◀──┘
      └── last member gone ──┘                                         Dead (deleted)

The broker does not compute assignments: it picks the protocol every member supports
(by the members' votes), hands the leader the member list in the JoinGroup answer, and
passes the leader's assignment to each member in SyncGroup.

Offsets and group metadata live in `__consumer_offsets` (see offsets_log), in the
partition abs(hashCode(group id)) % partitions, and are rebuilt from it at start-up.
Transactional offset commits (TxnOffsetCommit) are written as transactional records
and stay pending until the COMMIT or ABORT marker reaches that partition.

JoinGroup and SyncGroup wait (asyncio futures) for the rest of the group; everything
else answers at once. Time-driven changes (session expiry, the end of a rebalance
window) happen in `tick`, which the broker calls periodically.
"""

from __future__ import annotations

import asyncio
import enum
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable

from ottla.protocol.batch import TRANSACTIONAL_FLAG, BatchHeader, build_batch, encode_record, iter_records
from ottla.protocol.control import ControlType, parse_marker
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.storage.log_manager import LogManager

from .offsets_log import (
    TOPIC,
    CommittedOffset,
    GroupKey,
    GroupRecord,
    MemberRecord,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    subscribed_topics,
)
from .transaction_log import partition_for

TopicPartition = tuple[str, int]


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


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
class PendingOffset:
    offset: CommittedOffset
    record_offset: int  # where the commit record sits in __consumer_offsets


@dataclass
class Group:
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
    offsets: dict[TopicPartition, PendingOffset] = field(default_factory=dict)
    # producer id -> offsets committed in its open transaction.
    pending_txn_offsets: dict[int, dict[TopicPartition, PendingOffset]] = field(default_factory=dict)

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

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


@dataclass(frozen=True)
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_metadata_bytes: int = 4096
    num_partitions: int = 50


class GroupCoordinator:
    def __init__(self, logs: LogManager, create_offsets_topic: Callable[[], None], config: GroupConfig,
                 clock: Callable[[], float] = time.monotonic, wall_clock: Callable[[], float] = time.time) -> None:
        self.logs = logs
        self.create_offsets_topic = create_offsets_topic
        self.config = config
        self.clock = clock
        self.wall_clock = wall_clock
        self.groups: dict[str, Group] = {}

    # --- __consumer_offsets --------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        topic = self.logs.topic(TOPIC)
        partitions = len(topic.partitions) if topic is not None else self.config.num_partitions
        return partition_for(group_id, partitions)

    def _log(self, group_id: str):
        if self.logs.topic(TOPIC) is None:
            self.create_offsets_topic()
        log = self.logs.partition(TOPIC, self.partition_for(group_id))
        assert log is not None
        return log

    def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]], producer_id: int = -1,
                producer_epoch: int = -1) -> int:
        """Append records to the group's partition; returns the first record's offset.
        With a producer id they form a transactional batch, checked against the
        producer's epoch in that partition (stale epochs are refused)."""
        now = int(self.wall_clock() * 1000)
        batch = build_batch(
            [encode_record(k, v, offset_delta=i) for i, (k, v) in enumerate(records)],
            timestamp=now, producer_id=producer_id, producer_epoch=producer_epoch,
            attributes=TRANSACTIONAL_FLAG if producer_id >= 0 else 0,
        )
        result = self._log(group_id).append_batch(batch, BatchHeader.parse(batch), from_coordinator=True)
        return result.base_offset

    def load(self) -> int:
        """Rebuild groups and offsets from `__consumer_offsets`."""
        topic = self.logs.topic(TOPIC)
        if topic is None:
            return 0
        now = self.clock()
        for log in topic.partitions:
            # producer id -> (group, tp, pending) written in its open transaction here.
            pending: dict[int, list[tuple[str, TopicPartition, PendingOffset]]] = {}
            for header, batch in log.batches(log.log_start_offset):
                if header.is_control:
                    marker = parse_marker(batch)
                    for group_id, tp, offset in pending.pop(header.producer_id, []):
                        if marker.type is ControlType.COMMIT:
                            self._group(group_id).offsets[tp] = offset
                    continue
                for record in iter_records(batch):
                    if record.key is None:
                        continue
                    key = decode_key(record.key)
                    if isinstance(key, OffsetKey):
                        tp = (key.topic, key.partition)
                        if header.is_transactional:
                            assert record.value is not None
                            value = PendingOffset(decode_offset_value(record.value), record.offset)
                            pending.setdefault(header.producer_id, []).append((key.group, tp, value))
                        elif record.value is None:
                            self._group(key.group).offsets.pop(tp, None)
                        else:
                            self._group(key.group).offsets[tp] = PendingOffset(
                                decode_offset_value(record.value), record.offset)
                    elif isinstance(key, GroupKey):
                        if record.value is None:
                            self.groups.pop(key.group, None)
                        else:
                            self._restore(key.group, decode_group_value(record.value), now)
            for producer_id, entries in pending.items():
                for group_id, tp, offset in entries:
                    self._group(group_id).pending_txn_offsets.setdefault(producer_id, {})[tp] = offset
        return len(self.groups)

    def _group(self, group_id: str) -> Group:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id)
        return group

    def _restore(self, group_id: str, record: GroupRecord, now: float) -> None:
        group = self._group(group_id)
        group.generation = record.generation
        group.protocol_type = record.protocol_type or None
        group.protocol_name = record.protocol
        group.leader_id = record.leader
        group.members = {}
        group.static_members = {}
        for m in record.members:
            member = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.session_timeout_ms,
                            m.rebalance_timeout_ms, record.protocol_type, [(record.protocol or "", m.subscription)],
                            assignment=m.assignment, last_heartbeat=now)
            group.members[m.member_id] = member
            if m.group_instance_id:
                group.static_members[m.group_instance_id] = m.member_id
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY

    def _store_group(self, group: Group) -> None:
        members = tuple(
            MemberRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                         m.session_timeout_ms, m.metadata(group.protocol_name), m.assignment)
            for m in group.members.values()
        )
        record = GroupRecord(group.protocol_type or "", group.generation, group.protocol_name, group.leader_id,
                             int(self.wall_clock() * 1000), members)
        self._append(group.group_id, [(encode_group_key(GroupKey(group.group_id)), encode_group_value(record))])

    # --- joining -------------------------------------------------------------------------

    async def join(self, group_id: str, member_id: str, group_instance_id: str | None, client_id: str,
                   client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]], require_known_member_id: bool) -> JoinResult:
        if not group_id:
            return JoinResult(ErrorCode.invalid_group_id, member_id)
        if not self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms:
            return JoinResult(ErrorCode.invalid_session_timeout, member_id)
        group = self.groups.get(group_id)
        if group is None:
            if member_id and group_instance_id is None:
                return JoinResult(ErrorCode.unknown_member_id, member_id)
            group = self._group(group_id)
        if group.is_(GroupState.DEAD):
            return JoinResult(ErrorCode.coordinator_not_available, member_id)
        if not group.supports(protocol_type, protocols):
            return JoinResult(ErrorCode.inconsistent_group_protocol, member_id)
        now = self.clock()

        if group_instance_id is not None:
            known = group.static_members.get(group_instance_id)
            if member_id and known is not None and member_id != known:
                return JoinResult(ErrorCode.fenced_instance_id, member_id)
            if not member_id:
                # A static member (re)joining: it takes a new member id; the old one, if
                # any, is replaced.
                member_id = f"{group_instance_id}-{uuid.uuid4()}"
                if known is not None:
                    self._remove_member(group, known, ErrorCode.fenced_instance_id)
                group.static_members[group_instance_id] = member_id
        elif not member_id:
            member_id = f"{client_id}-{uuid.uuid4()}"
            if require_known_member_id:
                # KIP-394: the client must come back with this id, so a member that never
                # returns does not hold up the rebalance.
                group.pending_members[member_id] = now + session_timeout_ms / 1000
                return JoinResult(ErrorCode.member_id_required, member_id)
        elif member_id in group.pending_members:
            del group.pending_members[member_id]
        elif member_id not in group.members:
            return JoinResult(ErrorCode.unknown_member_id, member_id)

        member = group.members.get(member_id)
        if member is None:
            member = Member(member_id, group_instance_id, client_id, client_host, session_timeout_ms,
                            rebalance_timeout_ms, protocol_type, list(protocols), last_heartbeat=now)
            group.members[member_id] = member
            if group.is_(GroupState.EMPTY):
                group.protocol_type = protocol_type
            self._prepare_rebalance(group, f"member {member_id} joined")
        else:
            changed = member.protocols != list(protocols)
            member.protocols = list(protocols)
            member.session_timeout_ms = session_timeout_ms
            member.rebalance_timeout_ms = rebalance_timeout_ms
            member.last_heartbeat = now
            if group.is_(GroupState.STABLE) and not changed and member_id != group.leader_id:
                # A follower rejoining with what it had: answer with the current generation.
                return self._join_result(group, member)
            self._prepare_rebalance(group, f"member {member_id} rejoined")
        waiter: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join_waiter = waiter
        self._maybe_complete_join(group)
        return await waiter

    def _join_result(self, group: Group, member: Member) -> JoinResult:
        members = []
        if member.member_id == group.leader_id:
            members = [(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                       for m in group.members.values()]
        return JoinResult(ErrorCode.none, member.member_id, group.generation, group.protocol_type,
                          group.protocol_name, group.leader_id or "", members)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(GroupState.PREPARING_REBALANCE):
            return  # already collecting members; the window stays as it was
        now = self.clock()
        if group.is_(GroupState.COMPLETING_REBALANCE):
            # Members waiting for their assignment must rejoin instead.
            for m in group.members.values():
                self._resolve_sync(m, SyncResult(ErrorCode.rebalance_in_progress))
        was_empty = group.is_(GroupState.EMPTY)
        group.state = GroupState.PREPARING_REBALANCE
        timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0) / 1000
        group.rebalance_deadline = now + timeout
        if was_empty:
            # Kafka waits a little for more members of a new group before the first
            # rebalance (group.initial.rebalance.delay.ms).
            delay = self.config.initial_rebalance_delay_ms / 1000
            group.initial_delay_until = now + delay
            group.rebalance_deadline = max(now + min(delay, timeout), now)

    def _maybe_complete_join(self, group: Group, deadline_passed: bool = False) -> None:
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        now = self.clock()
        if now < group.initial_delay_until and not deadline_passed:
            return
        everyone_joined = all(m.join_waiter is not None and not m.join_waiter.done() for m in group.members.values())
        if not (everyone_joined and not group.pending_members) and not deadline_passed:
            return
        for member_id, member in list(group.members.items()):
            if member.join_waiter is None or member.join_waiter.done():
                self._remove_member(group, member_id, ErrorCode.unknown_member_id)
        group.pending_members.clear()
        group.generation += 1
        if not group.members:
            group.state = GroupState.EMPTY
            group.protocol_name = None
            group.leader_id = None
            self._store_group(group)
            return
        group.state = GroupState.COMPLETING_REBALANCE
        group.protocol_name = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        for member in group.members.values():
            member.assignment = b""
            member.last_heartbeat = now
            waiter = member.join_waiter
            member.join_waiter = None
            if waiter is not None and not waiter.done():
                waiter.set_result(self._join_result(group, member))

    def _remove_member(self, group: Group, member_id: str, error: ErrorCode) -> None:
        member = group.members.pop(member_id, None)
        if member is None:
            return
        if member.group_instance_id and group.static_members.get(member.group_instance_id) == member_id:
            del group.static_members[member.group_instance_id]
        if member.join_waiter is not None and not member.join_waiter.done():
            member.join_waiter.set_result(JoinResult(error, member_id))
        self._resolve_sync(member, SyncResult(error))
        if group.leader_id == member_id:
            group.leader_id = next(iter(group.members), None)

    @staticmethod
    def _resolve_sync(member: Member, result: SyncResult) -> None:
        if member.sync_waiter is not None and not member.sync_waiter.done():
            member.sync_waiter.set_result(result)
        member.sync_waiter = None

    # --- syncing, heartbeats, leaving -------------------------------------------------------

    def _check_member(self, group: Group | None, member_id: str, group_instance_id: str | None,
                      generation: int) -> tuple[Group, Member]:
        if group is None or group.is_(GroupState.DEAD):
            raise KafkaError(ErrorCode.unknown_member_id, "no such group")
        if group_instance_id is not None:
            known = group.static_members.get(group_instance_id)
            if known is not None and known != member_id:
                raise KafkaError(ErrorCode.fenced_instance_id, f"{group_instance_id} now belongs to {known}")
        member = group.members.get(member_id)
        if member is None:
            raise KafkaError(ErrorCode.unknown_member_id, f"{member_id!r} is not a member of {group.group_id!r}")
        if generation != group.generation:
            raise KafkaError(ErrorCode.illegal_generation,
                             f"generation {generation} is not the group's {group.generation}")
        return group, member

    async def sync(self, group_id: str, member_id: str, group_instance_id: str | None, generation: int,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes]) -> SyncResult:
        try:
            group, member = self._check_member(self.groups.get(group_id), member_id, group_instance_id, generation)
        except KafkaError as exc:
            return SyncResult(exc.code)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol_name):
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        member.last_heartbeat = self.clock()
        if group.is_(GroupState.PREPARING_REBALANCE):
            return SyncResult(ErrorCode.rebalance_in_progress)
        if group.is_(GroupState.STABLE):
            return SyncResult(ErrorCode.none, member.assignment, group.protocol_type, group.protocol_name)
        waiter: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        member.sync_waiter = waiter
        if member_id == group.leader_id:
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            self._store_group(group)
            group.state = GroupState.STABLE
            for m in group.members.values():
                self._resolve_sync(m, SyncResult(ErrorCode.none, m.assignment, group.protocol_type,
                                                 group.protocol_name))
        return await waiter

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation: int) -> ErrorCode:
        group = self.groups.get(group_id)
        try:
            group, member = self._check_member(group, member_id, group_instance_id, generation)
        except KafkaError as exc:
            return exc.code
        member.last_heartbeat = self.clock()
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> list[ErrorCode]:
        group = self.groups.get(group_id)
        if group is None:
            return [ErrorCode.unknown_member_id for _ in members]
        codes = []
        for member_id, instance_id in members:
            if instance_id is not None:
                known = group.static_members.get(instance_id)
                if known is None:
                    codes.append(ErrorCode.unknown_member_id)
                    continue
                if member_id and member_id != known:
                    codes.append(ErrorCode.fenced_instance_id)
                    continue
                member_id = known
            if member_id in group.pending_members:
                del group.pending_members[member_id]
                codes.append(ErrorCode.none)
                continue
            if member_id not in group.members:
                codes.append(ErrorCode.unknown_member_id)
                continue
            self._remove_member(group, member_id, ErrorCode.unknown_member_id)
            codes.append(ErrorCode.none)
            self._after_departure(group, f"member {member_id} left")
        return codes

    def _after_departure(self, group: Group, reason: str) -> None:
        if group.is_(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
        self._maybe_complete_join(group, deadline_passed=not group.members)

    def tick(self) -> list[tuple[str, str]]:
        """Expire members whose session ran out and finish rebalances whose window
        closed. Returns the (group, member) pairs expired."""
        now = self.clock()
        expired = []
        for group in list(self.groups.values()):
            for member_id, deadline in list(group.pending_members.items()):
                if deadline < now:
                    del group.pending_members[member_id]
            for member_id, member in list(group.members.items()):
                if not member.awaiting and member.last_heartbeat + member.session_timeout_ms / 1000 < now:
                    self._remove_member(group, member_id, ErrorCode.unknown_member_id)
                    expired.append((group.group_id, member_id))
                    self._after_departure(group, f"member {member_id} session expired")
            if group.is_(GroupState.PREPARING_REBALANCE):
                self._maybe_complete_join(group, deadline_passed=now >= group.rebalance_deadline)
        return expired

    # --- offsets -------------------------------------------------------------------------

    def _check_commit(self, group: Group, member_id: str, instance_id: str | None, generation: int) -> None:
        if generation < 0 and not member_id and group.is_(GroupState.EMPTY):
            return  # a consumer outside any group membership commits for the group
        _, _member = self._check_member(group, member_id, instance_id, generation)
        if group.is_(GroupState.COMPLETING_REBALANCE):
            raise KafkaError(ErrorCode.rebalance_in_progress, "the group is completing a rebalance")

    def commit_offsets(self, group_id: str, member_id: str, instance_id: str | None, generation: int,
                       offsets: dict[TopicPartition, CommittedOffset]) -> dict[TopicPartition, ErrorCode]:
        if not group_id:
            raise KafkaError(ErrorCode.invalid_group_id, "empty group id")
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                raise KafkaError(ErrorCode.illegal_generation, f"group {group_id!r} has no generation {generation}")
            group = self._group(group_id)
        self._check_commit(group, member_id, instance_id, generation)
        codes, accepted = self._accept(offsets)
        if accepted:
            first = self._append(group_id, [(encode_offset_key(OffsetKey(group_id, t, p)), encode_offset_value(o))
                                            for (t, p), o in accepted.items()])
            for i, (tp, o) in enumerate(accepted.items()):
                group.offsets[tp] = PendingOffset(o, first + i)
        return codes

    def _accept(self, offsets: dict[TopicPartition, CommittedOffset]) -> tuple[dict, dict]:
        codes: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, CommittedOffset] = {}
        for tp, o in offsets.items():
            if len(o.metadata.encode()) > self.config.max_metadata_bytes:
                codes[tp] = ErrorCode.offset_metadata_too_large
            else:
                codes[tp] = ErrorCode.none
                accepted[tp] = o
        return codes, accepted

    def commit_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                           instance_id: str | None, generation: int,
                           offsets: dict[TopicPartition, CommittedOffset]) -> dict[TopicPartition, ErrorCode]:
        """Offsets that take effect when the producer's transaction commits."""
        group = self._group(group_id)
        if member_id or generation >= 0:
            self._check_member(group, member_id, instance_id, generation)
        codes, accepted = self._accept(offsets)
        if accepted:
            try:
                first = self._append(
                    group_id,
                    [(encode_offset_key(OffsetKey(group_id, t, p)), encode_offset_value(o))
                     for (t, p), o in accepted.items()],
                    producer_id, producer_epoch,
                )
            except KafkaError as exc:
                if exc.code == ErrorCode.invalid_producer_epoch:
                    raise KafkaError(ErrorCode.producer_fenced, exc.message) from exc
                raise
            pending = group.pending_txn_offsets.setdefault(producer_id, {})
            for i, (tp, o) in enumerate(accepted.items()):
                pending[tp] = PendingOffset(o, first + i)
        return codes

    def on_marker(self, topic: str, partition: int, producer_id: int, committed: bool) -> None:
        """A transaction ended in a `__consumer_offsets` partition: its offsets take
        effect (commit) or vanish (abort)."""
        if topic != TOPIC:
            return
        for group in self.groups.values():
            pending = group.pending_txn_offsets.get(producer_id)
            if pending is None or self.partition_for(group.group_id) != partition:
                continue
            del group.pending_txn_offsets[producer_id]
            if committed:
                for tp, offset in pending.items():
                    current = group.offsets.get(tp)
                    # A plain commit written after the transactional one wins.
                    if current is None or current.record_offset < offset.record_offset:
                        group.offsets[tp] = offset

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None,
                      require_stable: bool) -> dict[TopicPartition, tuple[CommittedOffset | None, ErrorCode]]:
        group = self.groups.get(group_id)
        if group is None:
            return {tp: (None, ErrorCode.none) for tp in partitions or []}
        unstable = set()
        for pending in group.pending_txn_offsets.values():
            unstable |= set(pending)
        wanted = partitions if partitions is not None else sorted(group.offsets)
        result = {}
        for tp in wanted:
            if require_stable and tp in unstable:
                result[tp] = (None, ErrorCode.unstable_offset_commit)
                continue
            committed = group.offsets.get(tp)
            result[tp] = (committed.offset if committed else None, ErrorCode.none)
        return result

    def has_pending_offsets(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return bool(group and group.pending_txn_offsets)

    # --- admin ---------------------------------------------------------------------------

    def list_groups(self, states: set[str]) -> list[Group]:
        wanted = {s.lower() for s in states}
        return [g for g in self.groups.values()
                if not g.is_(GroupState.DEAD) and (not wanted or g.state.value.lower() in wanted)]

    def describe(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def delete_group(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.group_id_not_found
        if group.members or group.pending_members:
            return ErrorCode.non_empty_group
        tombstones: list[tuple[bytes, bytes | None]] = [
            (encode_offset_key(OffsetKey(group_id, t, p)), None) for t, p in group.offsets
        ]
        tombstones.append((encode_group_key(GroupKey(group_id)), None))
        self._append(group_id, tombstones)
        group.state = GroupState.DEAD
        del self.groups[group_id]
        return ErrorCode.none

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        group = self.groups.get(group_id)
        if group is None:
            raise KafkaError(ErrorCode.group_id_not_found, f"no group {group_id!r}")
        # Offsets of topics the live members consume cannot be deleted under them.
        subscribed = set() if group.is_(GroupState.EMPTY) else (group.subscribed_topics() or set())
        codes = {}
        doomed = []
        for tp in partitions:
            if tp[0] in subscribed:
                codes[tp] = ErrorCode.group_subscribed_to_topic
            else:
                codes[tp] = ErrorCode.none
                if tp in group.offsets:
                    doomed.append(tp)
        if doomed:
            self._append(group_id, [(encode_offset_key(OffsetKey(group_id, t, p)), None) for t, p in doomed])
            for tp in doomed:
                del group.offsets[tp]
        return codes
